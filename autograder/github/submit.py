"""The learner's side of the grading service: the `submit` job of grade.yml, standard library only.

    python3 -m autograder.github.submit [--url URL] [--wait SECONDS] [--lang es|en]

It runs in a bare checkout (no pip install, no torch) in a job with `permissions: id-token:
write`, and does four things:

1. Asks GitHub for an OIDC token whose audience is the service's URL (GitHub's documented
   request: GET $ACTIONS_ID_TOKEN_REQUEST_URL + "&audience=" + the URL-encoded audience, with
   `Authorization: bearer $ACTIONS_ID_TOKEN_REQUEST_TOKEN`; the answer is {"value": token}) and
   masks it (`::add-mask::`) before it prints anything else. The token is never printed.
2. POSTs it to {URL}/submissions as `Authorization: Bearer`, with an empty body: the service
   trusts the token's verified claims (which repository, which commit, which run) and nothing
   else, so there is nothing else to send.
3. Polls the answer's `poll` URL for a bounded time: --wait, else $AUTOGRADER_SERVICE_WAIT,
   else the `wait` the service's answer names (its --wait), else DEFAULT_WAIT_S seconds, at
   most MAX_WAIT_S; as often as the service's Retry-After says, within [1 s, 10 s]. Each
   request gives up after $AUTOGRADER_SERVICE_TIMEOUT, else HTTP_TIMEOUT_S seconds.
4. Shows the service's verdict as a copy: its text in the log, its Markdown in the job summary,
   titled "nota oficial según el servicio" and linked to the submission's page, which is the
   record. When the wait runs out: "en cola", with the link.

What becomes of the job (decided here, said in the README):
- The service refuses the submission (any 4xx: the repository is not on the roster, the token
  is not acceptable, too many submissions in the hour) or the job cannot ask for a token at all
  (no `id-token: write`: grade.yml was changed), or AUTOGRADER_SERVICE_URL is not a usable URL:
  the reason as an error annotation and exit 1. Someone must fix something, and a push that
  silently never counts is worse than a red mark that says why.
- The service or GitHub's token endpoint is down (connection refused, a timeout, a 5xx, an
  answer that is not the service's): said plainly as a warning, exit 0. An outage is never a
  red mark on the learner's commit; the practice grade of the other job is unaffected.
- Everything else (graded, still queued, superseded by a newer push, graded with an error the
  page explains): exit 0.

No redirect is ever followed: urllib would carry the Authorization header to wherever the
answer points, and a token's audience names one URL only. What the service writes (its
messages, the verdict's text) is shown inside `::stop-commands::`, so no text in it can act as
a workflow command, and made inert (core/neutral.py, standard library only as well): no escape
sequence reaches the log, and no Markdown reaches the summary but the verdict's own. Messages
come from the catalogs' `service.submit.*` entries (messages/<lang>/service*.yml), read with a
line reader as texts.py does, without PyYAML.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from autograder import __version__
from autograder.core import neutral
from autograder.github.actions import annotation, append_summary, set_output
from autograder.github.texts import DEFAULT_LANGUAGE, LANGUAGES

DEFAULT_WAIT_S = 180.0  # a few minutes: a warm service grades the whole course in seconds
MAX_WAIT_S = 900.0  # below the job's timeout-minutes (20), so the wait never cancels the job
HTTP_TIMEOUT_S = 30.0
POLL_FIRST_S, POLL_FACTOR, POLL_MAX_S = 1.0, 1.5, 10.0
MAX_ANSWER_BYTES = 4 << 20  # a verdict's Markdown and text, with room to spare
LANG_ENV_VAR = "AUTOGRADER_LANG"
URL_ENV_VAR = "AUTOGRADER_SERVICE_URL"
WAIT_ENV_VAR = "AUTOGRADER_SERVICE_WAIT"
TIMEOUT_ENV_VAR = "AUTOGRADER_SERVICE_TIMEOUT"
USER_AGENT = f"transformers-desde-cero-submit/{__version__}"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")

EXIT_OK, EXIT_REFUSED = 0, 1

_CATALOG_DIR = Path(__file__).resolve().parents[1] / "messages"
_CATALOG_LINE = re.compile(r'(service\.submit\.[A-Za-z0-9_.]+):\s*("(?:[^"\\]|\\.)*")\s*')


# --- the catalog's lines ------------------------------------------------------------------------


def messages(lang: str) -> dict[str, str]:
    """The `service.submit.*` entries of a language's service*.yml catalog files (one
    `key: "double-quoted"` entry per line, decoded as JSON; a test checks this reader against
    the YAML catalog). Every service*.yml is read, so the entries are found whether they sit in
    service_submit.yml or in another service*.yml."""
    if lang not in LANGUAGES:
        raise ValueError(f"unknown language {lang!r}; expected one of {', '.join(LANGUAGES)}")
    out: dict[str, str] = {}
    for path in sorted((_CATALOG_DIR / lang).glob("service*.yml")):
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            continue
        for line in text.splitlines():
            match = _CATALOG_LINE.fullmatch(line)
            if match:
                try:
                    out[match.group(1)] = json.loads(match.group(2))
                except ValueError:
                    continue
    return out


class Say:
    """The catalog's words in one language; a missing entry shows its key, never fails."""

    def __init__(self, lang: str) -> None:
        self.lang = lang
        self._words = messages(lang)
        if lang != DEFAULT_LANGUAGE:
            self._words = {**messages(DEFAULT_LANGUAGE), **self._words}

    def __call__(self, key: str, **params: Any) -> str:
        template = self._words.get(f"service.submit.{key}")
        if template is None:
            return f"service.submit.{key}"
        try:
            return template.format(**params)
        except (KeyError, IndexError, ValueError):
            return template


# --- settings -----------------------------------------------------------------------------------


def language(cli: str | None, env: Mapping[str, str], workspace: Path) -> str:
    """--lang, over $AUTOGRADER_LANG, over course.yml's `language`, over Spanish (the command
    line's rule, cli_language.py, read here without PyYAML)."""
    if cli in LANGUAGES:
        return cli
    value = env.get(LANG_ENV_VAR, "").strip()
    if value in LANGUAGES:
        return value
    try:
        text = (workspace / "course.yml").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return DEFAULT_LANGUAGE
    found = re.search(r"^language:[ \t]*[\"']?([a-z]+)", text, re.MULTILINE)
    return found.group(1) if found and found.group(1) in LANGUAGES else DEFAULT_LANGUAGE


def service_url(value: str) -> str | None:
    """The service's URL when usable: https://, or http:// on the loopback only (a token is a
    credential for five minutes and never travels unencrypted), with a host and no query,
    fragment or credentials. None otherwise."""
    value = (value or "").strip()
    try:
        parts = urllib.parse.urlsplit(value)
        host = parts.hostname
    except ValueError:
        return None
    if not host or parts.query or parts.fragment or parts.username or parts.password:
        return None
    if parts.scheme == "https" or (parts.scheme == "http" and host in LOOPBACK_HOSTS):
        return value
    return None


def seconds_setting(
    cli: float | None, env: Mapping[str, str], name: str, default: float | None, low: float, high: float
) -> tuple[float | None, str | None]:
    """(seconds, the raw value when it was not a number): the command line's value over $name
    over `default`, clamped to [low, high]."""
    raw: Any = cli if cli is not None else env.get(name, "").strip()
    if raw in ("", None):
        return default, None
    try:
        seconds = float(raw)
    except ValueError:
        return default, str(raw)
    if seconds != seconds:  # NaN
        return default, str(raw)
    return min(max(seconds, low), high), None


# --- HTTP ---------------------------------------------------------------------------------------


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # urllib then raises the 3xx as an HTTPError: nothing is sent anywhere else


_OPENER = urllib.request.build_opener(_NoRedirects())


@dataclass(frozen=True)
class Answer:
    """An HTTP answer: status (0 when nothing answered), the decoded JSON (None when the body was
    not a JSON object), headers, and why nothing usable came (for the log; never a token)."""

    status: int
    data: dict | None = None
    headers: Any = None
    problem: str = ""

    @property
    def reached(self) -> bool:
        return self.status != 0


def call(method: str, url: str, headers: Mapping[str, str], *, timeout: float = HTTP_TIMEOUT_S) -> Answer:
    """One request with an empty body, no redirects followed; never raises for the network."""
    request = urllib.request.Request(
        url,
        data=b"" if method == "POST" else None,
        headers={"User-Agent": USER_AGENT, "Accept": "application/json", **headers},
        method=method,
    )
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            status, raw, answer_headers = (
                response.status,
                response.read(MAX_ANSWER_BYTES + 1),
                response.headers,
            )
    except urllib.error.HTTPError as exc:
        status, answer_headers = exc.code, exc.headers
        try:
            raw = exc.read(MAX_ANSWER_BYTES + 1)
        except (OSError, ValueError, http.client.HTTPException):
            raw = b""
        finally:
            exc.close()
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, socket.timeout) or isinstance(exc, TimeoutError):
            reason = f"no answer in {timeout:g} s"
        return Answer(0, problem=str(reason))
    if len(raw) > MAX_ANSWER_BYTES:
        return Answer(
            status, None, answer_headers, f"HTTP {status}: an answer larger than {MAX_ANSWER_BYTES} bytes"
        )
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        data = None
    if not isinstance(data, dict):
        return Answer(status, None, answer_headers, f"HTTP {status}: not a JSON object")
    return Answer(status, data, answer_headers)


# --- what the job shows -------------------------------------------------------------------------


class Log:
    """Everything the job prints: workflow commands, plain lines, and text from the service
    shown inertly. Every line goes through scrub(), which removes the token wherever it might
    appear (it never should: belt and braces)."""

    def __init__(self, out: Callable[[str], None], secrets: list[str]) -> None:
        self._out = out
        self._secrets = secrets

    def scrub(self, text: str) -> str:
        for secret in self._secrets:
            if secret:
                text = text.replace(secret, "***")
        return text

    def mask(self, secret: str) -> None:
        """Tell the runner to hide `secret` in the log from here on, and scrub it here too."""
        self._out(f"::add-mask::{secret}")
        self._secrets.append(secret)

    def line(self, text: str) -> None:
        self._out(self.scrub(text))

    def annotate(self, level: str, message: str, title: str) -> None:
        self._out(annotation(level, self.scrub(message), title=self.scrub(title)))

    def inert(self, text: str) -> None:
        """`text` as it is, with workflow commands off while it prints (GitHub's stop-commands,
        ended by a token that cannot occur in the text)."""
        end = uuid.uuid4().hex
        while end in text:
            end = uuid.uuid4().hex
        self._out(f"::stop-commands::{end}")
        self._out(self.scrub(neutral.terminal(text.rstrip("\n"))))
        self._out(f"::{end}::")


# --- the steps ----------------------------------------------------------------------------------


class Stop(Exception):
    """The job ends here with `code` (its message already printed)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


@dataclass
class Context:
    url: str
    wait: float | None  # None: as long as the service says
    lang: str
    env: Mapping[str, str]
    log: Log
    say: Say
    timeout: float = HTTP_TIMEOUT_S
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic


def tell(ctx: Context, level: str, message: str, title: str) -> None:
    """One thing the learner must know: an annotation (it shows on the run's page) and the same
    words, inert, in the job summary."""
    ctx.log.annotate(level, message, title)
    note = f"### {ctx.say('title')}\n\n**{neutral.markdown_inline(title)}**: {neutral.markdown_inline(message)}\n"
    append_summary(ctx.log.scrub(note), ctx.env, lang=ctx.lang)


def outage(ctx: Context, message: str) -> Stop:
    """The service or GitHub is down: a plain warning, and the job succeeds."""
    tell(ctx, "warning", message, ctx.say("outage_title"))
    return Stop(EXIT_OK)


def refusal(ctx: Context, message: str, title_key: str = "refused_title") -> Stop:
    """Someone must fix something: an error annotation, and the job fails."""
    tell(ctx, "error", message, ctx.say(title_key))
    return Stop(EXIT_REFUSED)


def request_token(ctx: Context) -> str:
    """GitHub's OIDC token for the service's URL, masked before anything is printed."""
    request_url = ctx.env.get("ACTIONS_ID_TOKEN_REQUEST_URL", "")
    request_token = ctx.env.get("ACTIONS_ID_TOKEN_REQUEST_TOKEN", "")
    if not request_url or not request_token:
        raise refusal(ctx, ctx.say("no_id_token"), "config_title")
    separator = "&" if "?" in request_url else "?"
    url = f"{request_url}{separator}audience={urllib.parse.quote(ctx.url, safe='')}"
    answer = call("GET", url, {"Authorization": f"bearer {request_token}"}, timeout=ctx.timeout)
    token = (answer.data or {}).get("value")
    if answer.status != 200 or not isinstance(token, str) or not token.strip():
        raise outage(ctx, ctx.say("token_unavailable", reason=answer.problem or f"HTTP {answer.status}"))
    token = token.strip()
    # Before any other line: from here on the runner replaces the token with *** in the log.
    ctx.log.mask(token)
    return token


def submit(ctx: Context, token: str) -> dict:
    """POST the token; the service's answer (202 new, 200 already recorded)."""
    endpoint = ctx.url.rstrip("/") + "/submissions"
    answer = call("POST", endpoint, {"Authorization": f"Bearer {token}"}, timeout=ctx.timeout)
    data = answer.data or {}
    if not answer.reached:
        raise outage(ctx, ctx.say("outage", url=ctx.url, reason=answer.problem))
    if 300 <= answer.status < 400:
        location = (answer.headers.get("Location") if answer.headers is not None else None) or "?"
        raise refusal(ctx, ctx.say("redirect", url=ctx.url, location=location), "config_title")
    if answer.status >= 500 or answer.data is None:
        reason = str(data.get("message") or answer.problem or f"HTTP {answer.status}")
        raise outage(ctx, ctx.say("outage", url=ctx.url, reason=reason))
    if answer.status >= 400:
        # The service's words say what to do (a 429's say when to try again).
        message = str(data.get("message") or data.get("error") or f"HTTP {answer.status}")
        raise refusal(ctx, ctx.say("refused", status=answer.status, message=message))
    page, poll = data.get("page"), data.get("poll")
    if answer.status not in (200, 202) or not _http_url(page) or not _http_url(poll):
        reason = f"HTTP {answer.status}: not the service's answer to a submission"
        raise outage(ctx, ctx.say("outage", url=ctx.url, reason=reason))
    for warning in data.get("warnings") or []:
        ctx.log.annotate("warning", str(warning), ctx.say("service_warning_title"))
    key = "again" if answer.status == 200 else "received"
    ctx.log.line(ctx.say(key, page=page))
    set_output("page", page, ctx.env)
    return data


def _http_url(value: Any) -> bool:
    # Printed as it is on lines of the log: no whitespace or control character may ride along.
    if not isinstance(value, str) or len(value) > 2048 or re.search(r"[\s\x00-\x1f\x7f]", value):
        return False
    return urllib.parse.urlsplit(value).scheme in ("http", "https")


def poll(ctx: Context, submission: dict) -> int:
    """Ask for the verdict until it is there or the wait is over."""
    page = submission["page"]
    split = urllib.parse.urlsplit(submission["poll"])
    query = urllib.parse.urlencode([*urllib.parse.parse_qsl(split.query), ("lang", ctx.lang)])
    url = urllib.parse.urlunsplit(split._replace(query=query))
    wait = ctx.wait
    if wait is None:
        told = submission.get("wait")
        wait = min(max(float(told), 0.0), MAX_WAIT_S) if _number(told) and told == told else DEFAULT_WAIT_S
    deadline = ctx.clock() + wait
    interval, state, trouble = POLL_FIRST_S, str(submission.get("state") or "queued"), ""
    if wait > 0:
        ctx.log.line(ctx.say("waiting", seconds=round(wait)))
    while wait > 0:
        answer = call("GET", url, {}, timeout=min(ctx.timeout, max(1.0, deadline - ctx.clock())))
        data = answer.data or {}
        if answer.status == 200 and isinstance(data.get("state"), str):
            state, trouble = data["state"], ""
            if state in ("done", "error"):
                return verdict(ctx, data, page)
            if state == "superseded":
                tell(ctx, "notice", ctx.say("superseded", page=page), ctx.say("superseded_title"))
                set_output("state", state, ctx.env)
                return EXIT_OK
        elif answer.status == 404:
            tell(ctx, "warning", ctx.say("unknown", page=page), ctx.say("outage_title"))
            set_output("state", "unknown", ctx.env)
            return EXIT_OK
        else:  # down for a moment, perhaps: keep asking until the wait is over
            trouble = answer.problem or f"HTTP {answer.status}"
        left = deadline - ctx.clock()
        if left <= 0:
            break
        retry = answer.headers.get("Retry-After") if answer.headers is not None else None
        pause = min(max(float(retry), POLL_FIRST_S), POLL_MAX_S) if retry and retry.isdigit() else interval
        ctx.sleep(min(pause, left))
        interval = min(interval * POLL_FACTOR, POLL_MAX_S)
    message = ctx.say("queued", seconds=round(wait), page=page)
    if trouble:
        message += " " + ctx.say("poll_trouble", reason=trouble)
    tell(ctx, "notice", message, ctx.say("queued_title"))
    set_output("state", state, ctx.env)
    return EXIT_OK


def verdict(ctx: Context, data: dict, page: str) -> int:
    """The service's verdict, as a copy: its text in the log, its Markdown in the summary, the
    score as a notice, each linked to the page that is the record."""
    state = data["state"]
    score, top = data.get("score"), data.get("max")
    text = data.get("text") if isinstance(data.get("text"), str) else ""
    markdown = data.get("markdown") if isinstance(data.get("markdown"), str) else ""
    if text:
        ctx.log.inert(text)
    if state == "error":
        ctx.log.annotate("warning", ctx.say("graded_error", page=page), ctx.say("title"))
    elif _number(score) and _number(top):
        ctx.log.annotate("notice", ctx.say("score", score=score, max=top, page=page), ctx.say("title"))
    else:
        ctx.log.annotate("notice", ctx.say("graded", page=page), ctx.say("title"))
    if not markdown.strip():
        markdown = f"### {ctx.say('title')}\n"
    if page not in markdown:
        markdown = markdown.rstrip("\n") + f"\n\n[{neutral.markdown_inline(ctx.say('page_link'))}]({page})\n"
    append_summary(ctx.log.scrub(markdown), ctx.env, lang=ctx.lang)
    set_output("state", state, ctx.env)
    if _number(score) and _number(top):
        set_output("score", score, ctx.env)
        set_output("max", top, ctx.env)
    return EXIT_OK


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# --- the command line ---------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python3 -m autograder.github.submit",
        description="Submit this run's commit to the course's grading service with GitHub's OIDC "
        "token, and show its verdict (the grade.yml `submit` job).",
    )
    parser.add_argument("--url", default=None, help=f"the service's URL (default: ${URL_ENV_VAR})")
    parser.add_argument(
        "--wait",
        type=float,
        default=None,
        help=f"seconds to wait for the verdict (default: ${WAIT_ENV_VAR}, else what the service "
        f"says, else {DEFAULT_WAIT_S:g}; at most {MAX_WAIT_S:g})",
    )
    parser.add_argument("--lang", choices=LANGUAGES, default=None, help="language of the messages")
    return parser


def main(
    argv: list[str] | None = None,
    env: Mapping[str, str] | None = None,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """0: submitted (graded, queued or superseded) or the service is down; 1: refused, or this
    job cannot submit (see the module docstring); 2: bad arguments."""
    env = os.environ if env is None else env
    args = _parser().parse_args(argv)
    workspace = Path(env.get("GITHUB_WORKSPACE") or ".")
    lang = language(args.lang, env, workspace)
    say = Say(lang)
    log = Log(lambda text: print(text, flush=True), [])
    raw_url = args.url if args.url is not None else env.get(URL_ENV_VAR, "")
    wait, bad_wait = seconds_setting(args.wait, env, WAIT_ENV_VAR, None, 0.0, MAX_WAIT_S)
    timeout, _ = seconds_setting(None, env, TIMEOUT_ENV_VAR, HTTP_TIMEOUT_S, 1.0, 120.0)
    ctx = Context(
        service_url(raw_url) or raw_url.strip(), wait, lang, env, log, say, timeout or HTTP_TIMEOUT_S, sleep
    )
    try:
        if service_url(raw_url) is None:
            # Checked before a token is asked for: an http:// URL to another host would carry it
            # unencrypted.
            raise refusal(
                ctx, say("bad_url", url=raw_url.strip() or '""', variable=URL_ENV_VAR), "config_title"
            )
        token = request_token(ctx)
        if bad_wait is not None:
            log.annotate("warning", say("bad_wait", value=bad_wait), say("title"))
        log.line(say("sending", url=ctx.url))
        submission = submit(ctx, token)
        return poll(ctx, submission)
    except Stop as stop:
        return stop.code


if __name__ == "__main__":
    sys.exit(main())
