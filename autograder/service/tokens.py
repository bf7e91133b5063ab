"""Verifying the OIDC token a learner's workflow submits: is it GitHub's, for this service, now?

`verify(token, keys, issuer=..., audience=...)` returns the token's claims once every check
has passed, in this order (each refusal is a ServiceRefusal "service.token.<reason>", 401, whose
catalog text tells the learner reading the job's log what was wrong and what to do):

1. the shape: three base64url parts, at most MAX_TOKEN_CHARS (`malformed`);
2. the unverified header: `alg` exactly RS256 (`algorithm`: none, HS256 -- also HS256 "signed"
   with the issuer's public key as the secret --, RS512, ES256, ... are refused before any key is
   touched) and a `kid` (`no_key_id`);
3. the signature, with the issuer's key for that kid (jwks.KeySet: `unknown_key`,
   `issuer_unavailable` 503; `signature`); PyJWT does the cryptography, told RS256 only;
4. the claims these checks need, present: iss, aud, exp, iat (`missing_claim`);
5. `iss` exactly the configured issuer (`issuer`);
6. `aud` exactly the service's URL (`audience`): a string equal to it, or a list of that one
   string (RFC 7519 allows a list; GitHub sends a string; a list naming other audiences too is
   a token meant for someone else as well, and is refused). GitHub's default audience,
   https://github.com/<owner>, gets its own message (`default_audience`): the workflow forgot
   `audience:`. The audience is compared only after the signature, so what a message shows of
   it was signed by the issuer;
7. the times, numbers (`malformed_claim`), with `leeway_s` of clock skew either way: `exp`
   passed (`expired`: GitHub's tokens live about five minutes, run the workflow again), `nbf` or
   `iat` in the future (`not_yet_valid`).

The token itself is never put in a message or an exception.
"""

from __future__ import annotations

import re
import time
from typing import Any

import jwt

from autograder.service.errors import ServiceRefusal
from autograder.service.jwks import KeySet

__all__ = ["ALGORITHM", "MAX_TOKEN_CHARS", "shown", "verify"]

ALGORITHM = "RS256"
MAX_TOKEN_CHARS = 16_384  # GitHub's tokens are ~1.5 KB; a larger one is not GitHub's
_DEFAULT_AUDIENCE = re.compile(r"https://github\.com/[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/?")
_SHAPE = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")


def _refuse(reason: str, **params: Any) -> ServiceRefusal:
    return ServiceRefusal(f"service.token.{reason}", 401, **params)


def shown(value: Any, limit: int = 80) -> str:
    """A value from a token, made safe to put in a message: printable, one line, short."""
    text = value if isinstance(value, str) else repr(value)
    text = "".join(ch if ch.isprintable() else "?" for ch in text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def verify(
    token: str,
    keys: KeySet,
    *,
    issuer: str,
    audience: str,
    leeway_s: float = 60.0,
    now: float | None = None,
) -> dict[str, Any]:
    """The claims of `token` once it is proven to be the issuer's, for `audience`, valid now
    (`now`: Unix seconds, default the clock); ServiceRefusal otherwise (see the module docstring)."""
    if not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS or not _SHAPE.fullmatch(token):
        raise _refuse("malformed")
    try:
        header = jwt.get_unverified_header(token)
    except jwt.InvalidTokenError:
        raise _refuse("malformed") from None
    alg = header.get("alg")
    if alg != ALGORITHM:
        raise _refuse("algorithm", alg=shown(alg), expected=ALGORITHM)
    kid = header.get("kid")
    if not isinstance(kid, str) or not kid:
        raise _refuse("no_key_id")

    key = keys.key(kid)
    try:
        claims = jwt.decode(
            token,
            key,
            algorithms=[ALGORITHM],
            # Signature only: the claims are checked below, each with its own message, and the
            # times against `now`, which PyJWT cannot be given.
            options={
                "verify_signature": True,
                "verify_exp": False,
                "verify_nbf": False,
                "verify_iat": False,
                "verify_aud": False,
                "verify_iss": False,
                "verify_sub": False,
                "verify_jti": False,
                "require": [],
            },
        )
    except jwt.InvalidSignatureError:
        raise _refuse("signature") from None
    except jwt.InvalidTokenError:
        raise _refuse("malformed") from None

    for claim in ("iss", "aud", "exp", "iat"):
        if claim not in claims:
            raise _refuse("missing_claim", claim=claim)
    if claims["iss"] != issuer:
        raise _refuse("issuer", issuer=shown(claims["iss"]), expected=issuer)
    _check_audience(claims["aud"], audience)
    _check_times(claims, time.time() if now is None else now, leeway_s)
    return claims


def _check_audience(aud: Any, audience: str) -> None:
    if aud == audience or aud == [audience]:
        return
    single = aud[0] if isinstance(aud, list) and len(aud) == 1 else aud
    if isinstance(single, str) and _DEFAULT_AUDIENCE.fullmatch(single):
        raise _refuse("default_audience", audience=shown(single), expected=audience)
    raise _refuse("audience", audience=shown(aud), expected=audience)


def _number(claims: dict[str, Any], claim: str) -> float:
    value = claims[claim]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _refuse("malformed_claim", claim=claim)
    return float(value)


def _check_times(claims: dict[str, Any], now: float, leeway_s: float) -> None:
    exp, iat = _number(claims, "exp"), _number(claims, "iat")
    nbf = _number(claims, "nbf") if "nbf" in claims else None
    if now > exp + leeway_s:
        raise _refuse("expired", ago=int(now - exp))
    for start in (nbf, iat):
        if start is not None and start > now + leeway_s:
            raise _refuse("not_yet_valid", ahead=int(start - now))
