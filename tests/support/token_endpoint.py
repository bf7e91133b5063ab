"""A stand-in for GitHub Actions' OIDC token request endpoint on 127.0.0.1 (tests and benches).

    from support.oidc_issuer import LocalIssuer
    from support.token_endpoint import TokenEndpoint

    with LocalIssuer() as issuer, TokenEndpoint(issuer) as endpoint:
        endpoint.claims = {"repository": "curso/tdc-ana", "repository_id": "42", "sha": sha}
        endpoint.env()      # {"ACTIONS_ID_TOKEN_REQUEST_URL": ..., "ACTIONS_ID_TOKEN_REQUEST_TOKEN": ...}
        endpoint.requests   # [(audience or None, authorization header), ...]
        endpoint.minted     # every token it handed out
        endpoint.available = False     # answers 503 until set back to True

A job with `permissions: id-token: write` gets ACTIONS_ID_TOKEN_REQUEST_URL (with a query
already in it, `?api-version=2.0`) and ACTIONS_ID_TOKEN_REQUEST_TOKEN; a GET of that URL plus
`&audience=<URL-encoded audience>` with `Authorization: bearer <request token>` answers
{"count": n, "value": "<JWT>"} (GitHub's documentation, "OpenID Connect", and @actions/core's
getIDToken). Here the JWT is minted by a LocalIssuer with that audience and `claims` (what GitHub
would put for the run: repository, its id, sha, ref, event, run id); a wrong request token
answers 401, as GitHub's does.
"""

from __future__ import annotations

import secrets
import threading
import urllib.parse
from http.server import ThreadingHTTPServer
from typing import Any

from support.local_http import JSONHandler, serve, stop

__all__ = ["TokenEndpoint"]


class TokenEndpoint:
    """See the module docstring."""

    def __init__(self, issuer: Any) -> None:
        self.issuer = issuer
        self.request_token = secrets.token_urlsafe(32)
        self.claims: dict[str, Any] = {}
        self.available = True
        self.requests: list[tuple[str | None, str]] = []
        self.minted: list[str] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.url = ""

    def env(self) -> dict[str, str]:
        """The two variables the runner gives a job with `id-token: write`."""
        return {
            "ACTIONS_ID_TOKEN_REQUEST_URL": self.url,
            "ACTIONS_ID_TOKEN_REQUEST_TOKEN": self.request_token,
        }

    def __enter__(self) -> TokenEndpoint:
        endpoint = self

        class Handler(JSONHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                split = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(split.query))
                authorization = self.headers.get("Authorization", "")
                with endpoint._lock:
                    endpoint.requests.append((query.get("audience"), authorization))
                if split.path != "/idtoken" or query.get("api-version") != "2.0":
                    return self._send(404, {"message": "Not Found"})
                if not endpoint.available:
                    return self._send(503, {"message": "Service Unavailable"})
                scheme, _, given = authorization.partition(" ")
                if scheme.lower() != "bearer" or given != endpoint.request_token:
                    return self._send(401, {"message": "Unauthorized"})
                overrides = dict(endpoint.claims)
                if "audience" in query:  # without it GitHub uses its default, the owner's URL
                    overrides["aud"] = query["audience"]
                else:
                    owner = overrides.get("repository", "curso-tdc/x").split("/")[0]
                    overrides["aud"] = f"https://github.com/{owner}"
                token = endpoint.issuer.mint(**overrides)
                with endpoint._lock:
                    endpoint.minted.append(token)
                    count = len(endpoint.minted)
                return self._send(200, {"count": count, "value": token})

        self._server, base = serve(Handler)
        self.url = f"{base}/idtoken?api-version=2.0"
        return self

    def __exit__(self, *exc: Any) -> None:
        stop(self._server)
        self._server = None
