"""GitHub Actions and GitHub REST integration, standard library only.

A workflow step runs this module from a bare checkout, without the project's dependencies:

    python -m autograder.github.api comment --kind commit|issue --target X --body-file F [--marker M]
    python -m autograder.github.api status --sha S --state success --description D --context C [--target-url U]

so it imports nothing outside the standard library (autograder/__init__.py is stdlib only), and
it never runs a shell: learner text only ever travels in JSON bodies, escaped workflow commands
and environment files.

Workflow commands and environment files follow GitHub's documentation ("Workflow commands for
GitHub Actions") and @actions/core: data escapes %, CR and LF; properties also ':' and ',';
a multi-line output is `name<<DELIMITER`, value, `DELIMITER`, with a random delimiter that must
not occur in the value. A job summary is limited to 1 MiB (1024k) per step.

REST for `autograder handout` (autograder/github/handout.py): `exchange` makes any call and
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

The truncation notes come from the message catalog (autograder/messages/<lang>/formats.yml),
the pull request's unverified grade from ci.yml, read with a small line reader instead of
PyYAML; those files keep every entry on one line.

A pull request's grade (`pr-comment`, run by grade-comment.yml) comes from an artifact of the
pull request's own run, which the pull request could have changed: it is read as data only
(results.json), rendered here with every text made inert (autograder/core/neutral.py), and said to
be a practice grade, unverified, in the comment and in the status; never "XP n/m" as a grade.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from autograder import __version__
from autograder.core import neutral

DEFAULT_API_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
USER_AGENT = f"transformers-desde-cero-autograder/{__version__}"
DEFAULT_MARKER = "<!-- autograder:feedback -->"
DEFAULT_LANGUAGE = "es"
LANGUAGES = ("es", "en")

SUMMARY_LIMIT_BYTES = 1024 * 1024  # GitHub: "supports content up to a size of 1024k" per step
COMMENT_LIMIT = 65536  # characters in a comment body
STATUS_DESCRIPTION_LIMIT = 140
STATUS_STATES = ("error", "failure", "pending", "success")
ANNOTATION_LEVELS = ("notice", "warning", "error")

_SHA_RE = re.compile(r"[0-9a-fA-F]{40}")
_REPO_RE = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_MARKER_RE = re.compile(r"<!-- [A-Za-z0-9_.:/-]+ -->")
_OUTPUT_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_MAX_PAGES = 100  # 100 pages of 100 comments: far beyond any real thread
_MAX_ERROR_CHARS = 1000

_CATALOG_DIR = Path(__file__).resolve().parents[1] / "messages"
_CATALOG_LINE = re.compile(r'([a-z]+\.[A-Za-z0-9_.]+):\s*("(?:[^"\\]|\\.)*")\s*')
_FALLBACK_NOTES = {  # only if the catalog file cannot be read
    "formats.truncated_comment": "_(truncated)_",
    "formats.truncated_summary": "_(truncated)_",
}


# --- messages -------------------------------------------------------------------------------


def catalog_messages(lang: str, name: str = "formats") -> dict[str, str]:
    """The `name`.* entries of a language's catalog file `name`.yml (formats or ci), read
    without PyYAML (one `key: "double-quoted"` entry per line; the quoted text is decoded as
    JSON, which agrees with YAML for the escapes these files use; a test checks both readers
    agree)."""
    if lang not in LANGUAGES:
        raise ValueError(f"unknown language {lang!r}; expected one of {', '.join(LANGUAGES)}")
    out: dict[str, str] = {}
    try:
        text = (_CATALOG_DIR / lang / f"{name}.yml").read_text(encoding="utf-8")
    except OSError:
        return out
    for line in text.splitlines():
        match = _CATALOG_LINE.fullmatch(line)
        if match and match.group(1).startswith(name + "."):
            try:
                out[match.group(1)] = json.loads(match.group(2))
            except ValueError:
                continue
    return out


def _note(key: str, lang: str) -> str:
    return catalog_messages(lang).get(key) or _FALLBACK_NOTES[key]


# --- workflow commands and environment files ------------------------------------------------


def escape_data(value: Any) -> str:
    """A workflow command's message: % -> %25, CR -> %0D, LF -> %0A."""
    return str(value).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: Any) -> str:
    """A workflow command's property value: as escape_data, and also : -> %3A, , -> %2C."""
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def annotation(
    level: str,
    message: str,
    *,
    file: str | None = None,
    line: int | None = None,
    end_line: int | None = None,
    title: str | None = None,
) -> str:
    """`::error file=F,line=L,endLine=E,title=T::message`, every part escaped, so no text can
    end the command early or start another one on a new line."""
    if level not in ANNOTATION_LEVELS:
        raise ValueError(f"annotation level must be one of {', '.join(ANNOTATION_LEVELS)}, not {level!r}")
    props = []
    if file is not None:
        props.append(("file", file))
    for name, number in (("line", line), ("endLine", end_line)):
        if number is not None:
            if isinstance(number, bool) or not isinstance(number, int) or number < 1:
                raise ValueError(f"{name} must be a positive integer, not {number!r}")
            props.append((name, number))
    if title is not None:
        props.append(("title", title))
    head = "::" + level
    if props:
        head += " " + ",".join(f"{name}={escape_property(value)}" for name, value in props)
    return f"{head}::{escape_data(message)}"


def _truncate_markdown(text: str, fits, note: str) -> str:
    """`text` whole if fits(text), else its longest prefix that ends a line and, closed and
    followed by the note, fits. Closing means: an open code fence gets its closing fence and
    unclosed <details> get </details>, so the cut cannot swallow what follows."""
    if fits(text):
        return text
    lines = text.split("\n")

    def closed(count: int) -> str:
        kept = lines[:count]
        fence: str | None = None
        for row in kept:
            match = re.match(r"\s{0,3}(`{3,}|~{3,})", row)
            if not match:
                continue
            run = match.group(1)
            if fence is None:
                fence = run
            elif run[0] == fence[0] and len(run) >= len(fence) and row.strip() == run:
                fence = None
        tail = []
        if fence is not None:
            tail.append(fence)
        body = "\n".join(kept)
        opened = len(re.findall(r"<details\b", body)) - len(re.findall(r"</details>", body))
        tail += ["</details>"] * max(0, opened)
        return "\n".join([*kept, *tail, "", note]) + "\n"

    lo, hi = 0, len(lines)  # the largest count of whole lines that fits
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(closed(mid)):
            lo = mid
        else:
            hi = mid - 1
    result = closed(lo)
    if not fits(result):  # not even the note fits: cut hard, still valid text
        result = note
        while result and not fits(result):
            result = result[:-1]
    return result


def _utf16_len(text: str) -> int:
    # GitHub counts a comment's characters as JavaScript does (UTF-16 code units): an emoji
    # outside the BMP counts twice. Counting so is never too generous.
    return len(text.encode("utf-16-le")) // 2


def append_summary(markdown: str, env: Mapping[str, str] = os.environ, *, lang: str = DEFAULT_LANGUAGE) -> bool:
    """Append Markdown to $GITHUB_STEP_SUMMARY; False when not running in GitHub Actions.

    GitHub drops a step summary over 1 MiB entirely, so what would pass the limit (counting
    what the step already wrote) is cut at a line, any open code fence or <details> is closed,
    and a note says it was truncated."""
    path = env.get("GITHUB_STEP_SUMMARY")
    if not path:
        return False
    try:
        used = os.path.getsize(path)
    except OSError:
        used = 0
    budget = SUMMARY_LIMIT_BYTES - used
    text = markdown if markdown.endswith("\n") else markdown + "\n"
    text = _truncate_markdown(
        text, lambda s: len(s.encode("utf-8")) <= budget, _note("formats.truncated_summary", lang)
    )
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(text)
    return True


def set_output(name: str, value: Any, env: Mapping[str, str] = os.environ) -> bool:
    """Append a step output to $GITHUB_OUTPUT as `name<<DELIMITER` / value / `DELIMITER`, with a
    random delimiter checked not to occur in the value, so that a multi-line or hostile value
    cannot end early or define other outputs. False when not running in GitHub Actions."""
    if not isinstance(name, str) or not _OUTPUT_NAME_RE.fullmatch(name):
        raise ValueError(f"invalid output name {name!r}: letters, digits, '_' and '-' only")
    path = env.get("GITHUB_OUTPUT")
    if not path:
        return False
    text = str(value)
    delimiter = f"ghadelimiter_{uuid.uuid4()}"
    while delimiter in text or delimiter in name:
        delimiter = f"ghadelimiter_{uuid.uuid4()}"
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(f"{name}<<{delimiter}\n{text}\n{delimiter}\n")
    return True


# --- REST -----------------------------------------------------------------------------------


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


def _validate_sha(sha: str) -> str:
    if not isinstance(sha, str) or not _SHA_RE.fullmatch(sha):
        raise ValueError(f"a commit SHA must be 40 hexadecimal characters, not {sha!r}")
    return sha.lower()


def _validate_number(number: Any) -> int:
    text = str(number)
    if isinstance(number, bool) or not re.fullmatch(r"[0-9]+", text) or int(text) < 1:
        raise ValueError(f"a pull request or issue number must be a positive integer, not {number!r}")
    return int(text)


def _validate_marker(marker: str) -> str:
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

    def __init__(self, api_url: str, token: str, repository: str | None, *, timeout: float = 30.0,
                 limits: Limits | None = None):
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
                    raise RateLimited(exc.status, exc.message, wait, time.time() + wait,
                                      repeated=wait <= limits.max_wait) from None
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
            raise GitHubError(exc.code, _error_message(raw, str(exc.reason or "HTTP error")), exc.headers) from None
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
            return f"{repo}/commits/{_validate_sha(target)}/comments", f"{repo}/comments/"
        if kind == "issue":
            return f"{repo}/issues/{_validate_number(target)}/comments", f"{repo}/issues/comments/"
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
        marker = _validate_marker(marker)
        content = body.replace(marker, "").strip("\n")
        head = marker + "\n"
        content = _truncate_markdown(
            content + "\n",
            lambda s: _utf16_len(head + s) <= COMMENT_LIMIT,
            _note("formats.truncated_comment", lang),
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
        sha = _validate_sha(sha)
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
        data = self.request("GET", f"/repos/{self.repository}/pulls/{_validate_number(number)}") or {}
        sha = ((data.get("head") or {}).get("sha")) if isinstance(data, dict) else None
        if not isinstance(sha, str) or not _SHA_RE.fullmatch(sha):
            raise GitHubError(0, f"pull request {number}: no head SHA in the response")
        return sha.lower()


# --- command line ---------------------------------------------------------------------------


class _UsageError(Exception):
    pass


# Not the context of the verified "XP n/m" status grade.yml sets on a push: a pull request's
# own run can never overwrite it, nor satisfy a branch protection rule that requires it.
PR_STATUS_CONTEXT = "autograder / práctica (PR)"
# Bounds on what is read from a pull request's artifact (untrusted, possibly huge).
MAX_ARTIFACT_FILE = 1 << 20
MAX_RESULTS_FILE = 16 << 20
MAX_LESSONS = 100
MAX_FAILING_NAMED = 8
_NOT_FAILING = ("passed", "skipped")


def _read_artifact_file(folder: Path, name: str, limit: int = MAX_ARTIFACT_FILE) -> str:
    path = folder / name
    if path.is_symlink() or not path.is_file():
        raise ValueError(f"the graded artifact has no {name}")
    with open(path, "rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"the graded artifact's {name} is larger than {limit} bytes")
    return data.decode("utf-8", errors="replace")


def _read_graded_dir(folder: Path) -> tuple[int, dict]:
    """pr.json's number and results.json, validated as data (comment.md and status.json, which
    the pull request's run wrote as it pleased, are not used)."""
    try:
        pr = json.loads(_read_artifact_file(folder, "pr.json"))
        results = json.loads(_read_artifact_file(folder, "results.json", MAX_RESULTS_FILE))
    except json.JSONDecodeError as exc:
        raise ValueError(f"the graded artifact is not valid JSON: {exc}") from None
    if not isinstance(pr, dict) or not isinstance(results, dict):
        raise ValueError("the graded artifact's pr.json and results.json must be JSON objects")
    return _validate_number(pr.get("number")), results


def _amount(value: Any, what: str) -> int | float:
    """A points or XP value of an untrusted results.json: a finite number in [0, 10^6]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1_000_000:
        raise ValueError(f"the graded artifact's results.json: {what} is not a number of points")
    return int(value) if float(value).is_integer() else round(float(value), 2)


def _field(data: Any, key: str, kind: type, what: str) -> Any:
    value = data.get(key) if isinstance(data, dict) else None
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise ValueError(f"the graded artifact's results.json: {what}.{key} is missing or not a {kind.__name__}")
    return value


def unverified_report(results: dict, lang: str, run_url: str | None = None) -> tuple[str, str]:
    """(comment body, status description) for a pull request's results.json: a practice grade,
    unverified, said first; every value read as untrusted data (numbers checked, texts inert)."""
    lang = results.get("language") if results.get("language") in LANGUAGES else lang

    def t(key: str, **params: Any) -> str:
        template = catalog_messages(lang, "ci").get(key) or key
        return template.format(**params)

    xp, xp_max = _amount(results.get("xp"), "xp"), _amount(results.get("xp_max"), "xp_max")
    lessons = _field(results, "lessons", list, "results")
    if len(lessons) > MAX_LESSONS:
        raise ValueError(f"the graded artifact's results.json has more than {MAX_LESSONS} lessons")
    out = ["> [!WARNING]", f"> **{neutral.markdown_inline(t('ci.pr_title'))}** {neutral.markdown_inline(t('ci.pr_note'))}",
           "", neutral.markdown_inline(t("ci.pr_totals", xp=xp, xp_max=xp_max,
                                          score=_amount(results.get("score"), "score"),
                                          max_score=_amount(results.get("max_score"), "max_score"))), "",
           "| " + " | ".join(t(f"ci.pr_col_{c}") for c in ("lesson", "status", "points", "xp")) + " |",
           "|---|---|---:|---:|"]
    failing = []
    for lesson in lessons:
        name = f"{_field(lesson, 'id', str, 'lesson')} · {_field(lesson, 'title', str, 'lesson')}"
        done = _field(lesson, "completed", bool, "lesson")
        state = f"✅ {t('ci.pr_completed')}" if done else f"❌ {t('ci.pr_not_completed')}"
        points = f"{_amount(lesson.get('score'), 'score')}/{_amount(lesson.get('max_score'), 'max_score')}"
        gained = f"{_amount(lesson.get('xp'), 'xp')}/{_amount(lesson.get('xp_max'), 'xp_max')}"
        out.append("| " + " | ".join(neutral.markdown_inline(cell) for cell in (name, state, points, gained)) + " |")
        checks = _field(lesson, "checks", list, "lesson")
        bad = [_field(c, "id", str, "check") for c in checks
               if _field(c, "status", str, "check") not in _NOT_FAILING]
        if bad and not done:
            named = ", ".join(neutral.markdown_code(check) for check in bad[:MAX_FAILING_NAMED])
            if len(bad) > MAX_FAILING_NAMED:
                named += " " + neutral.markdown_inline(t("ci.pr_more", n=len(bad) - MAX_FAILING_NAMED))
            failing.append(f"- **{neutral.markdown_inline(name)}**: {neutral.markdown_inline(t('ci.pr_failing'))} {named}")
    if failing:
        out += ["", *failing]
    if run_url:
        out += ["", f"[{neutral.markdown_inline(t('ci.pr_run_link'))}]({run_url})"]
    return "\n".join(out) + "\n", t("ci.pr_status", xp=xp, xp_max=xp_max)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m autograder.github.api",
        description="Post the autograder's feedback to GitHub (token from $GITHUB_TOKEN or $GH_TOKEN, "
        "API from $GITHUB_API_URL, repository from $GITHUB_REPOSITORY).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    comment = sub.add_parser("comment", help="create or update the autograder's comment")
    comment.add_argument("--kind", choices=("commit", "issue"), required=True)
    comment.add_argument("--target", required=True, help="a commit SHA (commit) or a pull request number (issue)")
    comment.add_argument("--body-file", required=True, type=Path, help="Markdown file with the comment")
    comment.add_argument("--marker", default=DEFAULT_MARKER, help=f"hidden marker (default {DEFAULT_MARKER})")
    comment.add_argument("--lang", choices=LANGUAGES, default=DEFAULT_LANGUAGE, help="language of notes")
    pr = sub.add_parser("pr-comment", help="from a graded pull request's artifact (grade-comment.yml): "
                                           "comment on the pull request and set the XP status on its head")
    pr.add_argument("--graded-dir", required=True, type=Path,
                    help="the downloaded artifact: pr.json and results.json (untrusted data)")
    pr.add_argument("--head-sha", required=True, help="the graded commit, from the workflow_run event (trusted)")
    pr.add_argument("--run-url", default=None, help="link for the status (the graded run)")
    pr.add_argument("--lang", choices=LANGUAGES, default=DEFAULT_LANGUAGE, help="language of notes")
    status = sub.add_parser("status", help="set a commit status")
    status.add_argument("--sha", required=True)
    status.add_argument("--state", choices=STATUS_STATES, required=True)
    status.add_argument("--description", required=True)
    status.add_argument("--context", required=True)
    status.add_argument("--target-url", default=None)
    return parser


def _run(args: argparse.Namespace, env: Mapping[str, str]) -> str:
    # Validate everything before any request, so bad input is a usage error (exit 2).
    try:
        if args.command == "comment":
            if args.kind == "commit":
                _validate_sha(args.target)
            else:
                _validate_number(args.target)
            _validate_marker(args.marker)
            try:
                body = args.body_file.read_text(encoding="utf-8", errors="replace")
            except OSError as exc:
                raise ValueError(f"cannot read --body-file {args.body_file}: {exc.strerror or exc}") from None
        elif args.command == "pr-comment":
            _validate_sha(args.head_sha)
            if args.run_url is not None and urllib.parse.urlsplit(args.run_url).scheme not in ("http", "https"):
                raise ValueError(f"--run-url must be an http(s) URL, not {args.run_url!r}")
            pr_number, results = _read_graded_dir(args.graded_dir)
            body, description = unverified_report(results, args.lang, args.run_url)
        else:
            _validate_sha(args.sha)
            if not args.context.strip():
                raise ValueError("--context must not be empty")
            if args.target_url is not None and urllib.parse.urlsplit(args.target_url).scheme not in ("http", "https"):
                raise ValueError(f"--target-url must be an http(s) URL, not {args.target_url!r}")
        if not (env.get("GITHUB_TOKEN") or env.get("GH_TOKEN")):
            raise ValueError("no token: set GITHUB_TOKEN (or GH_TOKEN)")
        if not env.get("GITHUB_REPOSITORY"):
            raise ValueError("no repository: set GITHUB_REPOSITORY to owner/name")
        api = GitHubAPI.from_env(env)
    except ValueError as exc:
        raise _UsageError(str(exc)) from None

    if args.command == "comment":
        return api.upsert_comment(args.kind, args.target, body, args.marker, lang=args.lang)
    if args.command == "pr-comment":
        # The artifact came from a run of the pull request's own workflow file, so its number
        # is only trusted once GitHub confirms that pull request's head is the graded commit.
        head = api.pull_request_head_sha(pr_number)
        if head != args.head_sha.lower():
            raise GitHubError(0, f"pull request {pr_number} has head {head}, not the graded commit "
                                 f"{args.head_sha}; not commenting")
        url = api.upsert_comment("issue", pr_number, body, lang=args.lang)
        api.set_commit_status(head, "success", description, PR_STATUS_CONTEXT, args.run_url)
        return url
    data = api.set_commit_status(args.sha, args.state, args.description, args.context, args.target_url)
    return str(data.get("url") or "")


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """0 on success (the comment or status URL on stdout), 2 on bad input, 1 on an API error."""
    env = os.environ if env is None else env
    token = env.get("GITHUB_TOKEN") or env.get("GH_TOKEN") or ""

    def scrub(text: str) -> str:
        return text.replace(token, "***") if token else text

    args = _parser().parse_args(argv)  # exits 2 on a usage error, as argparse does
    try:
        url = _run(args, env)
    except _UsageError as exc:
        print(f"autograder.github.api: error: {scrub(str(exc))}", file=sys.stderr)
        return 2
    except GitHubError as exc:
        print(f"autograder.github.api: {scrub(str(exc))}", file=sys.stderr)
        return 1
    if url:
        print(scrub(url))
    return 0


if __name__ == "__main__":
    sys.exit(main())
