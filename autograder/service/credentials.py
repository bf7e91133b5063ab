"""The service's own GitHub credential: what it reads learners' repositories and their runs with.

Two kinds, one method (`token()`, the current token to send):

- `StaticToken`: a token given as it is (a fine-grained personal access token, or a workflow's
  GITHUB_TOKEN where the service runs inside GitHub Actions).
- `AppInstallation`: a GitHub App installed on the course's organization, the recommended
  setup ("Authenticating as a GitHub App installation"). The App proves itself with a JWT signed
  RS256 with its private key (iat 60 s in the past for clock drift, exp 9 minutes ahead:
  GitHub refuses one more than 10 minutes ahead; iss the App's id) and exchanges it at
  POST /app/installations/{id}/access_tokens for an installation token, which lives an hour;
  the token is kept and reused until REFRESH_BEFORE_S before its `expires_at`, so a request never
  starts with a token that expires under it. Thread-safe: the workers' threads share one.

`credential_from_env(env, api_url)` picks one from the environment, in this order:
AUTOGRADER_GITHUB_APP_ID + AUTOGRADER_GITHUB_APP_KEY (the path of the App's PEM private key) +
AUTOGRADER_GITHUB_APP_INSTALLATION; else AUTOGRADER_SERVICE_TOKEN; else GITHUB_TOKEN; None when
none is set (the lookups then fall back: autograder/service/github_lookup.py). An App set up by
halves, or a key that cannot be read, is an error at start-up, not a silent fallback to a weaker
credential.

A token is never logged, never put in an error, never shown by repr(); a failed exchange says
GitHub's status and message only.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Protocol

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from autograder.github.rest import DEFAULT_API_URL, GitHubAPI, GitHubError
from autograder.service.errors import ServiceRefusal

__all__ = ["AppInstallation", "Credential", "StaticToken", "credential_from_env", "parse_time"]

APP_ID, APP_KEY, APP_INSTALLATION = (
    "AUTOGRADER_GITHUB_APP_ID",
    "AUTOGRADER_GITHUB_APP_KEY",
    "AUTOGRADER_GITHUB_APP_INSTALLATION",
)
TOKEN_VARIABLES = ("AUTOGRADER_SERVICE_TOKEN", "GITHUB_TOKEN")
JWT_BACKDATE_S = 60  # GitHub's advice: iat a minute early, against clock drift
JWT_LIFETIME_S = 540  # exp at most 10 minutes after now; one minute spare for drift
REFRESH_BEFORE_S = 300  # an installation token is renewed this long before it expires
EXCHANGE_TIMEOUT_S = 10.0


class Credential(Protocol):
    def token(self) -> str: ...


class StaticToken:
    """A token as given; never shown by repr()."""

    def __init__(self, value: str) -> None:
        if not value or not value.strip() or any(ch in value for ch in "\r\n"):
            raise ValueError("a GitHub token must be one non-empty line")
        self._value = value.strip()

    def token(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "StaticToken(***)"


class AppInstallation:
    """A GitHub App's installation token, exchanged for an App JWT and reused while it lives."""

    def __init__(
        self,
        app_id: str | int,
        private_key: str | bytes,
        installation_id: int,
        api_url: str = DEFAULT_API_URL,
        *,
        timeout_s: float = EXCHANGE_TIMEOUT_S,
    ) -> None:
        self.app_id = str(app_id).strip()
        if not self.app_id:
            raise ValueError("a GitHub App id is required")
        self.installation_id = int(installation_id)
        self.api_url = api_url
        self.timeout_s = timeout_s
        pem = private_key.encode() if isinstance(private_key, str) else private_key
        key = serialization.load_pem_private_key(pem, password=None)  # ValueError when not a key
        if not isinstance(key, rsa.RSAPrivateKey):
            raise ValueError("a GitHub App's private key is an RSA key (the .pem GitHub gives)")
        self._key = key
        self._lock = threading.Lock()
        self._token: str | None = None
        self._renew_at = 0.0  # Unix time after which the cached token is exchanged again
        self.exchanges = 0  # how many installation tokens this credential asked for

    def __repr__(self) -> str:
        return f"AppInstallation(app_id={self.app_id!r}, installation_id={self.installation_id})"

    def app_jwt(self, now: float | None = None) -> str:
        """The App's own JWT (RS256; iat a minute back, exp 9 minutes ahead, iss the App id)."""
        now = int(time.time() if now is None else now)
        claims = {"iat": now - JWT_BACKDATE_S, "exp": now + JWT_LIFETIME_S, "iss": self.app_id}
        return jwt.encode(claims, self._key, algorithm="RS256")

    def token(self) -> str:
        """The installation token: the cached one while it has more than REFRESH_BEFORE_S to live,
        else a new one. ServiceRefusal("service.github.app_token", 502) when GitHub refuses or
        does not answer (the caller falls back or tries later)."""
        with self._lock:
            if self._token is not None and time.time() < self._renew_at:
                return self._token
            token, expires_at = self._exchange()
            self._token, self._renew_at = token, expires_at - REFRESH_BEFORE_S
            self.exchanges += 1
            return token

    def _exchange(self) -> tuple[str, float]:
        path = f"/app/installations/{self.installation_id}/access_tokens"
        try:
            api = GitHubAPI(self.api_url, self.app_jwt(), None, timeout=self.timeout_s)
            answer = api.exchange("POST", path)
        except GitHubError as exc:
            raise self._refusal(exc.status, exc.message) from None
        data = answer.data if isinstance(answer.data, dict) else {}
        token, expires = data.get("token"), data.get("expires_at")
        try:
            expires_at = parse_time(expires).timestamp()
        except (TypeError, ValueError):
            expires_at = None
        if not isinstance(token, str) or not token or any(ch in token for ch in "\r\n") or expires_at is None:
            raise self._refusal(answer.status, "the answer has no token and expires_at")
        return token, expires_at

    def _refusal(self, status: int, detail: str) -> ServiceRefusal:
        return ServiceRefusal(
            "service.github.app_token",
            502,
            app_id=self.app_id,
            installation=self.installation_id,
            answer=status,
            detail=detail,
        )


def parse_time(value: object) -> datetime:
    """A GitHub timestamp ("2024-05-01T10:00:00Z") as an aware UTC datetime; ValueError otherwise."""
    if not isinstance(value, str):
        raise ValueError(f"not a timestamp: {value!r}")
    parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        raise ValueError(f"a timestamp without a time zone: {value!r}")
    return parsed.astimezone(timezone.utc)


def credential_from_env(env: Mapping[str, str], api_url: str = DEFAULT_API_URL) -> Credential | None:
    """The credential the environment names (see the module docstring), or None.
    ServiceRefusal("service.github.app_config" / "service.github.app_key", 500) for an App set up
    by halves or a key that cannot be used: the service must not start that way."""
    app = {name: (env.get(name) or "").strip() for name in (APP_ID, APP_KEY, APP_INSTALLATION)}
    if any(app.values()):
        missing = [name for name, value in app.items() if not value]
        if missing:
            raise ServiceRefusal("service.github.app_config", 500, missing=", ".join(missing))
        if not app[APP_INSTALLATION].isdigit():
            raise ServiceRefusal(
                "service.github.app_config_number",
                500,
                variable=APP_INSTALLATION,
                value=app[APP_INSTALLATION],
            )
        try:
            pem = Path(app[APP_KEY]).read_bytes()
            return AppInstallation(app[APP_ID], pem, int(app[APP_INSTALLATION]), api_url)
        except (OSError, ValueError, TypeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise ServiceRefusal("service.github.app_key", 500, path=app[APP_KEY], detail=reason) from None
    for name in TOKEN_VARIABLES:
        value = (env.get(name) or "").strip()
        if value:
            try:
                return StaticToken(value)
            except ValueError:
                raise ServiceRefusal("service.github.token_config", 500, variable=name) from None
    return None
