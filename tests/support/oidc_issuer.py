"""A real OIDC issuer on 127.0.0.1 that mints tokens shaped like GitHub Actions' (tests only).

    from support.oidc_issuer import LocalIssuer

    with LocalIssuer(audience="http://127.0.0.1:8000") as issuer:
        issuer.url                      # "http://127.0.0.1:PORT": the tokens' `iss`
        token = issuer.mint()           # RS256, every claim GitHub sends, realistic values
        token = issuer.mint(repository="curso/tdc-ana", repository_id="42", ref="refs/heads/x")
        token = issuer.mint(aud="https://github.com/curso", issued_at=time.time() - 3600)
        token = issuer.mint(drop=("jti",))          # without a claim
        issuer.claims(**overrides)      # the claims mint() would sign, as a dict
        issuer.forge("hs256_public_key")            # see FORGERIES
        kid = issuer.rotate()           # a new key, published in the JWKS; mint() signs with it
        issuer.withdraw(kid)            # the key leaves the JWKS (mint() keeps signing with it)
        issuer.available = False        # discovery and JWKS answer 503 until set back to True
        issuer.jwks_fetches             # requests for the JWKS, answered or not (discovery_fetches too)

It serves `/.well-known/openid-configuration` and `/.well-known/jwks` over real HTTP
(http.server in a thread) with its own RSA keys (cryptography), as
https://token.actions.githubusercontent.com does. Claim overrides replace GitHub's values;
`repository`, `ref` and `sha` overrides also flow into the claims derived from them (`sub`,
`repository_owner`, `workflow_ref`, ...). Times: `issued_at` (Unix seconds, default now) gives
iat, nbf = iat - 600 and exp = iat + 300, as GitHub's tokens have them; explicit `iat`/`nbf`/`exp`
overrides win.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
import uuid
from http.server import ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from support.local_http import JSONHandler, serve, stop

__all__ = ["FORGERIES", "LocalIssuer"]

# forge(kind): what each forgery is.
FORGERIES = {
    "none": "alg none, no signature",
    "hs256_public_key": "HS256 with the issuer's public key (PEM) as the HMAC secret",
    "foreign_key": "RS256 signed by another RSA key under the issuer's current kid",
    "unknown_kid": "RS256 signed by another RSA key under a kid the JWKS does not have",
    "no_kid": "RS256 signed by the issuer's key, without a kid in the header",
    "rs512": "RS512 signed by the issuer's key",
    "es256": "ES256 signed by an EC key under the issuer's current kid",
}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64json(value: dict[str, Any]) -> str:
    return _b64(json.dumps(value, separators=(",", ":")).encode())


def _public_der(key: rsa.RSAPrivateKey) -> bytes:
    return key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _kid(key: rsa.RSAPrivateKey) -> str:
    # GitHub's kids are upper-case hex SHA-1 thumbprints, and x5t the same bytes in base64url.
    return hashlib.sha1(_public_der(key)).hexdigest().upper()


def _new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


class LocalIssuer:
    """See the module docstring."""

    def __init__(self, audience: str = "https://autograder.example.org") -> None:
        self.audience = audience
        self.available = True
        self.jwks_fetches = 0
        self.discovery_fetches = 0
        self._lock = threading.Lock()
        self._signing = _new_key()
        self._published: dict[str, rsa.RSAPrivateKey] = {_kid(self._signing): self._signing}
        self._server: ThreadingHTTPServer | None = None
        self.url = ""

    # ------------------------------------------------------------------ the server

    def __enter__(self) -> LocalIssuer:
        issuer = self

        class Handler(JSONHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                documents = {
                    "/.well-known/openid-configuration": ("discovery_fetches", issuer.discovery),
                    "/.well-known/jwks": ("jwks_fetches", issuer.jwks),
                }
                if self.path not in documents:
                    return self._send(404, {"message": "Not Found"})
                counter, document = documents[self.path]
                with issuer._lock:  # counted whether or not it is answered: requests are the cost
                    setattr(issuer, counter, getattr(issuer, counter) + 1)
                if not issuer.available:
                    return self._send(503, {"message": "unavailable"})
                return self._send(200, document())

        self._server, self.url = serve(Handler)
        return self

    def __exit__(self, *exc: Any) -> None:
        stop(self._server)
        self._server = None

    # ------------------------------------------------------------------ the documents

    def discovery(self) -> dict[str, Any]:
        return {
            "issuer": self.url,
            "jwks_uri": self.url + "/.well-known/jwks",
            "subject_types_supported": ["public", "pairwise"],
            "response_types_supported": ["id_token"],
            "claims_supported": sorted({*self.claims(), "enterprise", "environment"}),
            "id_token_signing_alg_values_supported": ["RS256"],
            "scopes_supported": ["openid"],
        }

    def jwks(self) -> dict[str, Any]:
        with self._lock:
            published = dict(self._published)
        keys = []
        for kid, key in published.items():
            numbers = key.public_key().public_numbers()
            keys.append(
                {
                    "kty": "RSA",
                    "alg": "RS256",
                    "use": "sig",
                    "kid": kid,
                    "n": _b64(numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big")),
                    "e": _b64(numbers.e.to_bytes(3, "big")),
                    "x5t": _b64(bytes.fromhex(kid)),
                }
            )
        return {"keys": keys}

    # ------------------------------------------------------------------ keys

    @property
    def kid(self) -> str:
        """The kid mint() signs with."""
        return _kid(self._signing)

    def rotate(self) -> str:
        """A new signing key, published in the JWKS beside the old ones; returns its kid."""
        key = _new_key()
        with self._lock:
            self._published[_kid(key)] = key
            self._signing = key
        return _kid(key)

    def withdraw(self, kid: str) -> None:
        """Take a key out of the JWKS (a key the issuer no longer vouches for)."""
        with self._lock:
            self._published.pop(kid, None)

    # ------------------------------------------------------------------ tokens

    def claims(self, *, issued_at: float | None = None, drop: tuple[str, ...] = (), **overrides: Any) -> dict:
        """The claims of a GitHub Actions token for a push to the default branch, with `overrides`."""
        iat = int(time.time() if issued_at is None else issued_at)
        repository = overrides.get("repository", "curso-tdc/tdc-ana-garcia")
        ref = overrides.get("ref", "refs/heads/main")
        sha = overrides.get("sha", secrets.token_hex(20))
        owner = repository.split("/")[0]
        workflow_ref = f"{repository}/.github/workflows/grade.yml@{ref}"
        claims: dict[str, Any] = {
            "jti": str(uuid.uuid4()),
            "sub": f"repo:{repository}:ref:{ref}",
            "aud": self.audience,
            "ref": ref,
            "sha": sha,
            "repository": repository,
            "repository_owner": owner,
            "repository_owner_id": "190283746",
            "repository_visibility": "private",
            "repository_id": "812345678",
            "actor_id": "98765432",
            "actor": "ana-garcia",
            "workflow": "autograder",
            "head_ref": "",
            "base_ref": "",
            "event_name": "push",
            "ref_protected": "false",
            "ref_type": "branch",
            "workflow_ref": workflow_ref,
            "workflow_sha": sha,
            "job_workflow_ref": workflow_ref,
            "job_workflow_sha": sha,
            "runner_environment": "github-hosted",
            "run_id": "11223344556",
            "run_number": "7",
            "run_attempt": "1",
            "check_run_id": "31415926535",
            "iss": self.url,
            "nbf": iat - 600,
            "exp": iat + 300,
            "iat": iat,
        }
        claims.update(overrides)
        for name in drop:
            claims.pop(name, None)
        return claims

    def mint(self, *, issued_at: float | None = None, drop: tuple[str, ...] = (), **overrides: Any) -> str:
        """A token signed by the issuer's current key, as GitHub would send it (see claims())."""
        payload = self.claims(issued_at=issued_at, drop=drop, **overrides)
        return self._rs(payload, self._signing, "RS256", kid=self.kid)

    def forge(self, kind: str, **overrides: Any) -> str:
        """A forged token of `kind` (one of FORGERIES) with otherwise valid claims."""
        payload = self.claims(**overrides)
        header = {"typ": "JWT", "kid": self.kid}
        if kind == "none":
            return f"{_b64json({**header, 'alg': 'none'})}.{_b64json(payload)}."
        if kind == "hs256_public_key":
            # What a verifier that lets the token choose its algorithm would accept: PyJWT itself
            # refuses a PEM as an HMAC secret, so the signature is made here by hand.
            secret = self._signing.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
            signing_input = f"{_b64json({**header, 'alg': 'HS256'})}.{_b64json(payload)}"
            signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
            return f"{signing_input}.{_b64(signature)}"
        if kind == "foreign_key":
            return self._rs(payload, _new_key(), "RS256", kid=self.kid)
        if kind == "unknown_kid":
            stranger = _new_key()
            return self._rs(payload, stranger, "RS256", kid=_kid(stranger))
        if kind == "no_kid":
            return jwt.encode(payload, self._signing, algorithm="RS256", headers={"typ": "JWT"})
        if kind == "rs512":
            return self._rs(payload, self._signing, "RS512", kid=self.kid)
        if kind == "es256":
            return jwt.encode(
                payload, ec.generate_private_key(ec.SECP256R1()), algorithm="ES256", headers=header
            )
        raise ValueError(f"unknown forgery {kind!r}; one of {', '.join(FORGERIES)}")

    @staticmethod
    def _rs(payload: dict[str, Any], key: rsa.RSAPrivateKey, alg: str, *, kid: str) -> str:
        headers = {"typ": "JWT", "kid": kid, "x5t": _b64(bytes.fromhex(kid))}
        return jwt.encode(payload, key, algorithm=alg, headers=headers)
