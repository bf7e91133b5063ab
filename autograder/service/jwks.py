"""The OIDC issuer's signing keys: discovery, the JWKS fetch, its cache and its refetch rule.

`KeySet(issuer).key(kid)` answers the RSA public key that signs tokens with header `kid`. The
first call reads `{issuer}/.well-known/openid-configuration`, follows its `jwks_uri` and keeps
every RSA signing key of that document. An unknown `kid` (the issuer rotated its keys) refetches
the JWKS, but at most once per `min_refetch_s`: a flood of tokens with forged kids costs the
issuer one request a minute, not one each. A failed fetch is retried after `retry_s` (a
shorter wait: an outage of the issuer should not outlast itself here by a minute). Keys older
than `max_age_s` are refreshed on the next call, so a key the issuer withdrew stops being
accepted; a refresh that fails keeps the keys already known (GitHub down is no reason to
refuse tokens it signed).

The issuer, and the `jwks_uri` it names, must be HTTPS; plain HTTP is allowed on loopback only
(127.0.0.1, ::1, localhost: the tests' own issuer). The discovery document's `issuer` must be
the configured one (OpenID Connect Discovery 1.0, section 4.3). Redirects are followed only to
URLs that pass the same rule, and no document over `MAX_DOCUMENT_BYTES` is read.

Safe to share between threads: known keys are read without a lock; fetches are serialised, so
concurrent unknown kids cause one fetch, not one per thread.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey

from autograder.service.errors import ServiceRefusal

__all__ = ["GITHUB_ISSUER", "MAX_DOCUMENT_BYTES", "KeySet", "allowed_url"]

GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
MAX_DOCUMENT_BYTES = 1 << 20  # GitHub's JWKS is ~3 KB; a megabyte is a broken or hostile answer
MIN_RSA_BITS = 2048
_LOOPBACK_NAMES = ("localhost",)

Opener = Callable[..., Any]  # urlopen-like: opener(url, timeout=...) -> a response with .read()


def allowed_url(url: str) -> bool:
    """Whether the service may fetch keys from `url`: HTTPS, or HTTP on a loopback host."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname
    except ValueError:
        return False
    if not host or parts.username or parts.password:
        return False
    if parts.scheme == "https":
        return True
    if parts.scheme != "http":
        return False
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _SameRuleRedirects(urllib.request.HTTPRedirectHandler):
    # An https issuer must not be able to send the service to plain http through a redirect.
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if not allowed_url(newurl):
            raise urllib.error.HTTPError(newurl, code, "redirect to a URL that is not allowed", headers, fp)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _default_opener(issuer: str) -> Opener:
    handlers: list[Any] = [_SameRuleRedirects()]
    if urllib.parse.urlsplit(issuer).scheme == "http":
        handlers.append(urllib.request.ProxyHandler({}))  # a loopback issuer is never behind a proxy
    return urllib.request.build_opener(*handlers).open


class FetchFailed(Exception):
    pass


class KeySet:
    """The signing keys of one OIDC issuer, fetched on demand and cached (see the module docstring).

    `opener` replaces urllib's (urlopen-like: `opener(url, timeout=...)`); `clock` replaces
    time.monotonic, so tests can walk through refetch windows without sleeping.
    """

    def __init__(
        self,
        issuer: str,
        *,
        min_refetch_s: float = 60.0,
        timeout_s: float = 5.0,
        opener: Opener | None = None,
        retry_s: float = 10.0,
        max_age_s: float = 3600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not allowed_url(issuer):
            # A configuration error, reported at start-up in the catalogs' words (serve catches it).
            raise ServiceRefusal("service.token.issuer_not_https", 500, issuer=issuer)
        self.issuer = issuer.rstrip("/")
        self.min_refetch_s, self.timeout_s = min_refetch_s, timeout_s
        self.retry_s, self.max_age_s = min(retry_s, min_refetch_s), max_age_s
        self._open = opener or _default_opener(issuer)
        self._clock = clock
        self._keys: dict[str, RSAPublicKey] = {}  # replaced whole, never mutated: read without the lock
        self._jwks_uri: str | None = None
        self._fetched_at: float | None = None  # last successful fetch
        self._attempted_at: float | None = None  # last attempt, successful or not
        self._failed = False  # whether the last attempt failed
        self._failure = ""  # why, for the instructor's log
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ the one question

    def key(self, kid: str) -> RSAPublicKey:
        """The public key for `kid`; ServiceRefusal "service.token.unknown_key" (401) when the
        issuer does not have it, "service.token.issuer_unavailable" (503) when the keys could
        not be fetched at all."""
        found = self._keys.get(kid)
        if found is not None and not self._stale():
            return found
        with self._lock:
            found = self._keys.get(kid)
            if found is not None and not self._stale():
                return found  # another thread refreshed while this one waited
            if self._may_fetch():
                try:
                    self._fetch()
                except FetchFailed as failure:
                    self._failure = str(failure)  # the keys known so far stay
                else:
                    found = self._keys.get(kid)
            failed, failure = self._failed, self._failure
        if found is not None:
            return found  # a withdrawn key is gone after a successful refresh, not after a failed one
        if failed:
            # The kid may be a new key the issuer rotated in: say the keys could not be read, not
            # that the token is forged.
            raise ServiceRefusal("service.token.issuer_unavailable", 503, issuer=self.issuer, detail=failure)
        raise ServiceRefusal("service.token.unknown_key", 401, issuer=self.issuer)

    # ------------------------------------------------------------------ when to fetch

    def _stale(self) -> bool:
        return self._fetched_at is not None and self._clock() - self._fetched_at >= self.max_age_s

    def _may_fetch(self) -> bool:
        if self._attempted_at is None:
            return True
        wait = self.retry_s if self._failed else self.min_refetch_s
        return self._clock() - self._attempted_at >= wait

    def _fetch(self) -> None:
        self._attempted_at = self._clock()
        self._failed = True
        if self._jwks_uri is None:
            self._jwks_uri = self._discover()
        try:
            document = self._get_json(self._jwks_uri)
        except FetchFailed:
            self._jwks_uri = None  # the issuer may have moved it: discover again next time
            raise
        self._keys = rsa_signing_keys(document)
        self._fetched_at = self._clock()
        self._failed = False

    # ------------------------------------------------------------------ the documents

    def _discover(self) -> str:
        config = self._get_json(self.issuer + "/.well-known/openid-configuration")
        named = config.get("issuer")
        if not isinstance(named, str) or named.rstrip("/") != self.issuer:
            raise FetchFailed(f"the discovery document names issuer {str(named)[:200]!r}")
        uri = config.get("jwks_uri")
        if not isinstance(uri, str) or not allowed_url(uri):
            raise FetchFailed(f"jwks_uri {str(uri)[:200]!r} is not an allowed URL")
        return uri

    def _get_json(self, url: str) -> dict[str, Any]:
        try:
            with self._open(url, timeout=self.timeout_s) as response:
                body = response.read(MAX_DOCUMENT_BYTES + 1)
        # URLError, HTTPError, timeouts, refused or reset connections, a body cut short
        except (OSError, ValueError, http.client.HTTPException) as exc:
            raise FetchFailed(f"{url}: {exc}") from None
        if len(body) > MAX_DOCUMENT_BYTES:
            raise FetchFailed(f"{url}: more than {MAX_DOCUMENT_BYTES} bytes")
        try:
            document = json.loads(body)
        except (UnicodeDecodeError, ValueError):
            raise FetchFailed(f"{url}: not JSON") from None
        if not isinstance(document, dict):
            raise FetchFailed(f"{url}: not a JSON object")
        return document


def rsa_signing_keys(document: dict[str, Any]) -> dict[str, RSAPublicKey]:
    """{kid: key} of the JWKS's RSA keys meant for signatures; other keys are ignored."""
    entries = document.get("keys")
    if not isinstance(entries, list):
        raise FetchFailed("the JWKS has no keys list")
    keys: dict[str, RSAPublicKey] = {}
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("kty") != "RSA":
            continue
        if entry.get("use", "sig") != "sig" or entry.get("alg", "RS256") != "RS256":
            continue
        kid = entry.get("kid")
        if not isinstance(kid, str) or not kid or "d" in entry:  # "d": a private key, published by mistake
            continue
        try:
            public = jwt.PyJWK(entry, algorithm="RS256").key
        except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError):
            continue
        if isinstance(public, RSAPublicKey) and public.key_size >= MIN_RSA_BITS:
            keys[kid] = public
    if not keys:
        # An issuer that signs with nothing is broken, not rotated: keep the keys already known.
        raise FetchFailed("the JWKS has no RSA signing key")
    return keys
