"""A small GitHub REST client, standard library only, and its rate-limit pacing.

The workflow's steps (through api.py's command line, from a bare checkout) and `autograder
handout` (handout.py) use it; it imports nothing outside the standard library but texts.py, and
learner text only ever travels in JSON bodies.

For `autograder handout` (autograder/github/handout.py): `exchange` makes any call and
returns the status too (a 204 has no body), and a client made with `Limits` stays within
GitHub's rate limits ("Rate limits for the REST API", "Best practices for using the REST API"):
at least `Limits.mutation_interval` seconds (1 by default) between mutating requests; on a 403
or 429 it waits `Retry-After` seconds when the answer names them, until `x-ratelimit-reset`
when `x-ratelimit-remaining` is 0, else a minute (a secondary limit without headers), then
retries; after a successful answer with `x-ratelimit-remaining: 0` it waits for the reset
before the next request. A wait longer than `Limits.max_wait` raises RateLimited instead, so
the caller stops cleanly and says when to rerun. Without Limits (the workflow's steps) nothing
waits, as before.

REST: comments on a commit (/repos/{repo}/commits/{sha}/comments, PATCH
/repos/{repo}/comments/{id}) or an issue / pull request (/repos/{repo}/issues/{n}/comments,
PATCH /repos/{repo}/issues/comments/{id}); commit statuses (POST /repos/{repo}/statuses/{sha},
description at most 140 characters); a comment body at most 65536 characters.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping

from autograder import __version__
from autograder.github.texts import DEFAULT_LANGUAGE, truncate_markdown, truncation_note, utf16_len

DEFAULT_API_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
USER_AGENT = f"transformers-desde-cero-autograder/{__version__}"
DEFAULT_MARKER = "<!-- autograder:feedback -->"

COMMENT_LIMIT = 65536  # characters in a comment body
STATUS_DESCRIPTION_LIMIT = 140
STATUS_STATES = ("error", "failure", "pending", "success")

SHA_RE = re.compile(r"[0-9a-fA-F]{40}")
_REPO_RE = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_MARKER_RE = re.compile(r"<!-- [A-Za-z0-9_.:/-]+ -->")
_MAX_PAGES = 100  # 100 pages of 100 comments: far beyond any real thread
_MAX_ERROR_CHARS = 1000


class GitHubError(Exception):
    """A failed GitHub API call: the HTTP status (0 when GitHub could not be reached) and
    GitHub's own error message."""

    def __init__(self, status: int, message: str, headers: Any = None):
        super().__init__(f"GitHub API error {status}: {message}" if status else message)
        self.status = status
        self.message = message
        self.headers = headers  # the answer's headers (rate-limit ones), when there was an answer


class RateLimited(GitHubError):
    """GitHub asks to wait `wait` seconds, longer than the caller allows (Limits.max_wait):
    stop cleanly and run again after `until` (Unix time)."""

    def __init__(self, status: int, message: str, wait: float, until: float, *, repeated: bool = False):
        super().__init__(status, message)
        self.wait = wait
        self.until = until
        self.repeated = repeated  # the wait was allowed, but GitHub kept limiting after Limits.retries waits


MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
SECONDARY_LIMIT_WAIT = 60.0  # GitHub: without retry-after, wait at least one minute


@dataclass
class Limits:
    """How a client paces itself (see the module docstring). `waits` records every rate-limit
    wait it made, in seconds, for the caller's report."""

    mutation_interval: float = 1.0
    max_wait: float = 900.0
    retries: int = 3  # rate-limit answers waited out for one request
    sleep: Callable[[float], None] = time.sleep
    waits: list[float] = field(default_factory=list)
    on_wait: Callable[[float, str], None] | None = None  # told (seconds, why) before each wait


@dataclass(frozen=True)
class Response:
    status: int
    data: Any  # decoded JSON; None for an empty body (204)
    headers: Any


def validate_sha(sha: str) -> str:
    if not isinstance(sha, str) or not SHA_RE.fullmatch(sha):
        raise ValueError(f"a commit SHA must be 40 hexadecimal characters, not {sha!r}")
    return sha.lower()


def validate_number(number: Any) -> int:
    text = str(number)
    if isinstance(number, bool) or not re.fullmatch(r"[0-9]+", text) or int(text) < 1:
        raise ValueError(f"a pull request or issue number must be a positive integer, not {number!r}")
    return int(text)


def validate_marker(marker: str) -> str:
    if not isinstance(marker, str) or not _MARKER_RE.fullmatch(marker):
        raise ValueError(
            f"a marker must be an HTML comment like {DEFAULT_MARKER!r} "
            f"(letters, digits and _ . : / - inside), not {marker!r}"
        )
    return marker


def _error_message(body: bytes, fallback: str) -> str:
    """GitHub's error message ({"message": ..., "errors": [...]}) or the HTTP reason."""
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        data = None
    message = fallback
    if isinstance(data, dict) and data.get("message"):
        message = str(data["message"])
        details = []
        for err in data.get("errors") or []:
            if isinstance(err, dict):
                details.append(str(err.get("message") or ", ".join(f"{k}: {v}" for k, v in err.items())))
            else:
                details.append(str(err))
        if details:
            message += ": " + "; ".join(details)
    return message[:_MAX_ERROR_CHARS]


def _header(headers: Any, name: str) -> str | None:
    return headers.get(name) if headers is not None else None


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def _next_link(header: str | None) -> str | None:
    """The rel="next" URL of a Link header, if any."""
    for url, rels in re.findall(r'<([^>]*)>\s*;\s*rel="([^"]*)"', header or ""):
        if "next" in rels.split():
            return url
    return None


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follows GitHub's redirects (a renamed repository's old name answers 301) only within the
    API's own origin: urllib would send the Authorization header to any host it is sent to."""

    def __init__(self, origin: tuple[str, str]):
        self.origin = origin

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        parsed = urllib.parse.urlsplit(newurl)
        if (parsed.scheme, parsed.netloc) != self.origin:
            return None  # urllib then raises the redirect as an HTTPError: nothing is sent there
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class GitHubAPI:
    """A small client for the few REST endpoints the autograder uses."""

    def __init__(
        self,
        api_url: str,
        token: str,
        repository: str | None,
        *,
        timeout: float = 30.0,
        limits: Limits | None = None,
    ):
        parsed = urllib.parse.urlsplit(api_url or "")
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"the API URL must be an http(s) URL, not {api_url!r}")
        if not token or any(ch in token for ch in "\r\n"):
            raise ValueError("a GitHub token is required (GITHUB_TOKEN or GH_TOKEN)")
        # None: a client for calls that name their repositories themselves (handout)
        if repository is not None and (not isinstance(repository, str) or not _REPO_RE.fullmatch(repository)):
            raise ValueError(f"the repository must be 'owner/name', not {repository!r}")
        self.api_url = api_url.rstrip("/")
        self.repository = repository
        self.timeout = timeout
        self._origin = (parsed.scheme, parsed.netloc)
        self._token = token
        self.limits = limits
        self._opener = urllib.request.build_opener(_SameOriginRedirects(self._origin))
        self._last_mutation: float | None = None  # time.monotonic() of the last mutating request
        self._resume_at = 0.0  # Unix time before which the primary limit allows no request

    def __repr__(self) -> str:  # never shows the token
        return f"GitHubAPI({self.api_url!r}, repository={self.repository!r})"

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ, **kwargs: Any) -> "GitHubAPI":
        return cls(
            env.get("GITHUB_API_URL") or DEFAULT_API_URL,
            env.get("GITHUB_TOKEN") or env.get("GH_TOKEN") or "",
            env.get("GITHUB_REPOSITORY") or "",
            **kwargs,
        )

    # -- transport

    def _url(self, path: str) -> str:
        if path.startswith(("http://", "https://")):
            parsed = urllib.parse.urlsplit(path)
            if (parsed.scheme, parsed.netloc) != self._origin:
                # A Link header pointing elsewhere would receive the token: never follow it.
                raise GitHubError(0, f"refusing to send the token to another host: {parsed.netloc}")
            return path
        if not path.startswith("/"):
            path = "/" + path
        return self.api_url + path

    def _send(self, method: str, path: str, body: Any = None) -> tuple[Any, Any]:
        answer = self.exchange(method, path, body)
        return answer.data, answer.headers

    def exchange(self, method: str, path: str, body: Any = None) -> Response:
        """One API call, paced and retried as `limits` says (none: one attempt); the status,
        decoded JSON (None for an empty body) and headers. Raises GitHubError (RateLimited when
        the wait asked for is longer than allowed)."""
        limits, method = self.limits, method.upper()
        attempts = 0
        while True:
            if limits is not None:
                self._pace(limits, method)
            try:
                try:
                    answer = self._once(method, path, body)
                finally:
                    if method in MUTATING:  # the pause runs from the answer: never less than asked
                        self._last_mutation = time.monotonic()
            except GitHubError as exc:
                wait = self._rate_wait(exc) if limits is not None else None
                if wait is None:
                    raise
                if wait > limits.max_wait or attempts >= limits.retries:
                    raise RateLimited(
                        exc.status, exc.message, wait, time.time() + wait, repeated=wait <= limits.max_wait
                    ) from None
                attempts += 1
                self._wait(limits, wait, "rate_limit")
                continue
            if limits is not None and _header(answer.headers, "x-ratelimit-remaining") == "0":
                reset = _number(_header(answer.headers, "x-ratelimit-reset"))
                if reset is not None:
                    self._resume_at = reset + 1
            return answer

    def _pace(self, limits: Limits, method: str) -> None:
        wait = self._resume_at - time.time()
        if wait > 0:
            if wait > limits.max_wait:
                raise RateLimited(403, "API rate limit exceeded", wait, self._resume_at)
            self._wait(limits, wait, "rate_limit")
        if method in MUTATING:
            if self._last_mutation is not None:
                gap = limits.mutation_interval - (time.monotonic() - self._last_mutation)
                if gap > 0:
                    limits.sleep(gap)  # GitHub's guidance for content creation: not a limit hit

    def _wait(self, limits: Limits, seconds: float, why: str) -> None:
        limits.waits.append(seconds)
        if limits.on_wait is not None:
            limits.on_wait(seconds, why)
        limits.sleep(seconds)

    @staticmethod
    def _rate_wait(exc: GitHubError) -> float | None:
        """Seconds to wait before retrying a rate-limited answer; None for any other error."""
        if exc.status not in (403, 429):
            return None
        retry_after = _number(_header(exc.headers, "retry-after"))
        if retry_after is not None:
            return max(0.0, retry_after)
        if _header(exc.headers, "x-ratelimit-remaining") == "0":
            reset = _number(_header(exc.headers, "x-ratelimit-reset"))
            if reset is not None:
                return max(1.0, reset - time.time() + 1)
        if exc.status == 429 or "rate limit" in exc.message.lower():
            return SECONDARY_LIMIT_WAIT
        return None  # a plain 403: no access

    def _once(self, method: str, path: str, body: Any = None) -> Response:
        data = None
        headers = {
            "Accept": "application/vnd.github+json",
            "Authorization": f"Bearer {self._token}",
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": USER_AGENT,
        }
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json; charset=utf-8"
        req = urllib.request.Request(self._url(path), data=data, headers=headers, method=method.upper())
        try:
            with self._opener.open(req, timeout=self.timeout) as resp:
                raw = resp.read()
                response_headers = resp.headers
                status = resp.status
        except urllib.error.HTTPError as exc:
            try:
                raw = exc.read()
            except (OSError, http.client.HTTPException):
                raw = b""
            finally:
                exc.close()
            raise GitHubError(
                exc.code, _error_message(raw, str(exc.reason or "HTTP error")), exc.headers
            ) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", exc)
            host = urllib.parse.urlsplit(self.api_url).netloc
            raise GitHubError(0, f"could not reach {host}: {reason}") from None
        if not raw.strip():
            return Response(status, None, response_headers)
        try:
            return Response(status, json.loads(raw.decode("utf-8")), response_headers)
        except (UnicodeDecodeError, ValueError):
            raise GitHubError(0, f"{method.upper()} {path}: the response is not JSON") from None

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """One API call: `path` relative to the API URL ("/repos/o/r/..."), a JSON body; returns
        the decoded JSON (None for an empty response). Raises GitHubError."""
        return self._send(method, path, body)[0]

    def paginate(self, path: str) -> Iterator[Any]:
        """Every item of a list endpoint, following Link rel="next" (100 per page)."""
        split = urllib.parse.urlsplit(path)
        query = urllib.parse.parse_qsl(split.query)
        if not any(k == "per_page" for k, _ in query):
            query.append(("per_page", "100"))
        url: str | None = urllib.parse.urlunsplit(split._replace(query=urllib.parse.urlencode(query)))
        seen: set[str] = set()
        while url is not None:
            if url in seen or len(seen) >= _MAX_PAGES:
                raise GitHubError(0, f"pagination of {split.path} does not end")
            seen.add(url)
            data, headers = self._send("GET", url)
            if not isinstance(data, list):
                raise GitHubError(0, f"GET {split.path}: expected a list")
            yield from data
            url = _next_link(headers.get("Link") if headers is not None else None)

    # -- endpoints

    def _comment_paths(self, kind: str, target: Any) -> tuple[str, str]:
        """(list/create path, update path prefix) for a kind of comment."""
        repo = f"/repos/{self.repository}"
        if kind == "commit":
            return f"{repo}/commits/{validate_sha(target)}/comments", f"{repo}/comments/"
        if kind == "issue":
            return f"{repo}/issues/{validate_number(target)}/comments", f"{repo}/issues/comments/"
        raise ValueError(f"comment kind must be 'commit' or 'issue', not {kind!r}")

    def upsert_comment(
        self, kind: str, target: Any, body: str, marker: str = DEFAULT_MARKER, *, lang: str = DEFAULT_LANGUAGE
    ) -> str:
        """Create the autograder's comment on a commit ("commit", target a SHA) or a pull
        request / issue ("issue", target its number), or update it if it exists: the comment
        written by a bot (user.type "Bot") whose body contains `marker`. A person's comment
        quoting the marker is never touched. The body carries the marker once, first, and is
        cut to GitHub's 65536 characters with a note. Returns the comment's URL."""
        list_path, update_prefix = self._comment_paths(kind, target)
        marker = validate_marker(marker)
        content = body.replace(marker, "").strip("\n")
        head = marker + "\n"
        content = truncate_markdown(
            content + "\n",
            lambda s: utf16_len(head + s) <= COMMENT_LIMIT,
            truncation_note("formats.truncated_comment", lang),
        )
        full = head + content
        existing = None
        for comment in self.paginate(list_path):
            user = comment.get("user") or {}
            if user.get("type") == "Bot" and marker in (comment.get("body") or ""):
                existing = comment
                break
        if existing is not None:
            saved = self.request("PATCH", f"{update_prefix}{int(existing['id'])}", {"body": full})
        else:
            saved = self.request("POST", list_path, {"body": full})
        return str((saved or {}).get("html_url") or (saved or {}).get("url") or "")

    def set_commit_status(
        self, sha: str, state: str, description: str, context: str, target_url: str | None = None
    ) -> dict:
        """A commit status; the description is cut to GitHub's 140 characters."""
        sha = validate_sha(sha)
        if state not in STATUS_STATES:
            raise ValueError(f"state must be one of {', '.join(STATUS_STATES)}, not {state!r}")
        if not context or not str(context).strip():
            raise ValueError("a status needs a context")
        description = " ".join(str(description).split())
        if len(description) > STATUS_DESCRIPTION_LIMIT:
            description = description[: STATUS_DESCRIPTION_LIMIT - 1].rstrip() + "…"
        body: dict[str, Any] = {"state": state, "description": description, "context": str(context)}
        if target_url is not None:
            if urllib.parse.urlsplit(target_url).scheme not in ("http", "https"):
                raise ValueError(f"target URL must be an http(s) URL, not {target_url!r}")
            body["target_url"] = target_url
        return self.request("POST", f"/repos/{self.repository}/statuses/{sha}", body) or {}

    def pull_request_head_sha(self, number: Any) -> str:
        data = self.request("GET", f"/repos/{self.repository}/pulls/{validate_number(number)}") or {}
        sha = ((data.get("head") or {}).get("sha")) if isinstance(data, dict) else None
        if not isinstance(sha, str) or not SHA_RE.fullmatch(sha):
            raise GitHubError(0, f"pull request {number}: no head SHA in the response")
        return sha.lower()
