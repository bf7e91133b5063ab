"""The service's HTTP side: a Starlette app that takes learners' submissions and shows verdicts.

    POST {public_url}/submissions        Authorization: Bearer <GitHub OIDC token>; body ignored
         202 {"submission", "state": "queued", "page", "poll", "warnings", "wait"}: recorded
         200 the same body: this submission was recorded before (the same token, or another
             token for the same repository and commit)
         4xx/5xx {"error": <catalog key>, "message": <the course's language>}
    GET  {public_url}/submissions/<key>[?lang=es|en]   the verdict as JSON (verdict.py)
    GET  {public_url}/s/<key>[?lang=es|en]             the submission's page, the record (page.py)
    GET  /healthz                                      the store answers

A submission, in order (`Intake.submit`, blocking, run in the threadpool): the body is never
read past its cap (413 beyond it; nothing in it is parsed); the token is verified against the
issuer's keys (tokens.py) and read into an Identity (claims.py); a repository the roster does not
have, or an event the course does not grade, is refused before anything is asked of GitHub; a
submission recorded before (the same token, or the same commit) is answered from the store; the
repository's submissions of the last hour are counted from the store (over the limit the push is
still recorded, dated by its token without asking GitHub, with a warning: one learner's flood
spends nobody else's quota, GitHub's included, and the newest push is still graded); the default branch is looked up
with the service's credential (github_lookup.py, cached a minute) and the push admitted (claims.py);
the submission time is looked up (github_lookup.py: never an error); the submission is recorded
in the store before the answer (store.py), then the workers are woken (queue.py: a lost wake-up
costs latency only). Every ServiceRefusal is answered with its status and its catalog text.

The page key is the only secret of a submission's URL: unknown keys are 404 with nothing more,
and pages are sent with no-referrer and no-store so the key does not travel on.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route

from autograder.core import i18n
from autograder.core.manifest import Course
from autograder.core.results import Text, message
from autograder.core.roster import Roster
from autograder.service.claims import EVENTS, admit, identity
from autograder.service.config import ConfigError, ServiceConfig
from autograder.service.errors import ServiceRefusal
from autograder.service.github_lookup import SubmissionTime
from autograder.service.jwks import KeySet
from autograder.service.page import render_page
from autograder.service.queue import wake
from autograder.service.store import Store, Submission, now_utc
from autograder.service.tokens import verify
from autograder.service.verdict import FINAL_STATES, verdict

log = logging.getLogger(__name__)

KEY = re.compile(r"[A-Za-z0-9_-]{16,64}")  # what secrets.token_urlsafe gives
WINDOW = timedelta(hours=1)  # the rate limit's window
BRANCH_CACHE_S = 60.0  # a default branch is asked of GitHub at most once a minute per repository
POLL_AFTER_S = 2  # Retry-After of a verdict not final yet: how soon the job may ask again
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
    "X-Robots-Tag": "noindex, nofollow",
}


@dataclass
class Services:
    """What the app works with; tests and `serve` build them alike (make_services)."""

    config: ServiceConfig
    course: Course
    roster: Roster
    store: Store
    keys: KeySet
    lookup: Any  # github_lookup.GitHubLookup
    queue: Any  # huey.Huey, or None: nothing to wake (the workers' timer finds what waits)


def make_services(config: ServiceConfig, course: Course, roster: Roster) -> Services:
    from autograder.service.credentials import credential_from_env
    from autograder.service.github_lookup import GitHubLookup
    from autograder.service.queue import make_queue

    """The app's parts from the configuration; ConfigError for a database or queue that cannot be
    opened, ServiceRefusal for a GitHub credential set up by halves (credentials.py)."""
    try:
        store = Store(config.database)
        store.create()
    except (SQLAlchemyError, ValueError, ImportError) as exc:  # ImportError: the URL's driver
        raise ConfigError(
            "service.serve.database_failed", url=config.database, detail=str(exc)[:300]
        ) from None
    try:
        queue = make_queue(config.queue_url, config.data_dir)
    except (ValueError, OSError, ImportError) as exc:
        store.close()
        raise ConfigError("service.serve.queue_failed", url=config.queue_url, detail=str(exc)[:300]) from None
    lookup = GitHubLookup(config.api_url, credential_from_env(os.environ, config.api_url))
    return Services(config, course, roster, store, KeySet(config.issuer), lookup, queue)


# ------------------------------------------------------------------------------ intake


class Intake:
    """The steps of one submission (see the module docstring); thread-safe."""

    def __init__(self, services: Services, clock: Callable[[], float] = time.monotonic) -> None:
        self.services = services
        self._clock = clock
        self._branches: dict[int, tuple[float, str | None]] = {}
        self._lock = threading.Lock()

    def submit(self, token: str, received_at: datetime) -> tuple[Submission, bool]:
        s = self.services
        claims = verify(token, s.keys, issuer=s.config.issuer, audience=s.config.public_url)
        ident = identity(claims)
        learner = next((one for one in s.roster.learners if one.repository_id == ident.repository_id), None)
        if learner is None or ident.event_name not in EVENTS:
            admit(ident, s.roster, None)  # raises the refusal that says why, before GitHub is asked
        mine = [one for one in s.store.submissions(learner.id) if one.repository_id == ident.repository_id]
        again = next((one for one in mine if ident.token_id == one.token_id or ident.sha == one.sha), None)
        if again is not None and again.state != "superseded":
            # This submission again (the job retried, the workflow re-ran): the record answers,
            # and nothing is asked of GitHub or counted against the limit. (A superseded commit
            # pushed again goes on: the store queues it again if it is the newest push.)
            return again, False
        over = self._over_limit(mine, received_at) if again is None else None
        admitted = admit(ident, s.roster, self._default_branch(ident.repository_id))
        if over is None:
            submitted = s.lookup.submission_time(ident)
        else:
            # Over the repository's hourly limit the push is still recorded (its newest push is
            # always graded: the store supersedes the older ones still queued), but dated by the
            # token alone: a flood spends none of the service's GitHub quota, nobody else's.
            submitted = SubmissionTime(ident.issued_at, "token")
            admitted = replace(admitted, warnings=(*admitted.warnings, over))
        submission, new = s.store.record(admitted=admitted, submitted=submitted, received_at=received_at)
        if new and s.queue is not None:
            try:
                wake(s.queue)
            except Exception:  # noqa: BLE001 - recorded already; the workers' timer finds it
                log.exception("wake-up not sent for submission %s", submission.id)
        return submission, new

    def _over_limit(self, mine: list[Submission], now: datetime) -> Text | None:
        """What to tell the learner when the repository's submissions received in the last hour
        reach the limit; None under it."""
        limit = self.services.config.limits.per_hour
        recent = [one.received_at for one in mine if one.received_at >= now - WINDOW]
        if len(recent) < limit:
            return None
        return message("service.app.over_limit", limit=limit)

    def _default_branch(self, repository_id: int) -> str | None:
        now = self._clock()
        with self._lock:
            cached = self._branches.get(repository_id)
        if cached is not None and now - cached[0] < BRANCH_CACHE_S:
            return cached[1]
        info = self.services.lookup.repository(repository_id)
        branch = getattr(info, "default_branch", None) or None
        if branch is not None:  # an unknown branch is asked again next time: GitHub may be back
            with self._lock:
                self._branches[repository_id] = (now, branch)
        return branch


# ------------------------------------------------------------------------------ the app


def create_app(services: Services) -> Starlette:
    config = services.config
    intake = Intake(services)
    lang = services.course.language

    def refused(refusal: ServiceRefusal, language: str = lang) -> JSONResponse:
        headers = {}
        if "retry_after" in refusal.params:
            headers["Retry-After"] = str(refusal.params["retry_after"])
        text = i18n.translate(refusal.key, language, **refusal.params)
        return JSONResponse({"error": refusal.key, "message": text}, refusal.status, headers=headers)

    def submission_body(submission: Submission, language: str) -> dict[str, Any]:
        return {
            "submission": submission.page_key,
            "state": submission.state,
            "page": config.url(f"/s/{submission.page_key}"),
            "poll": config.url(f"/submissions/{submission.page_key}"),
            "warnings": [str(i18n.localize(text, language)) for text in submission.warnings],
            "wait": config.limits.wait_s,
        }

    async def submit(request: Request) -> Response:
        received_at = now_utc()
        try:
            await _read_capped(request, config.limits.body_bytes)
            token = _bearer(request.headers.get("authorization", ""))
            submission, new = await run_in_threadpool(intake.submit, token, received_at)
        except ServiceRefusal as refusal:
            return refused(refusal)
        except SQLAlchemyError:
            raise  # the app's handler: 503
        except Exception:  # noqa: BLE001 - an internal failure: said, logged, never a hang
            log.exception("submission failed")
            return refused(ServiceRefusal("service.app.internal", 500))
        return JSONResponse(submission_body(submission, lang), 202 if new else 200)

    async def poll(request: Request) -> Response:
        language = _language(request, lang)
        found = await _find(services.store, request.path_params["key"])
        if found is None:
            return _not_found(language)
        submission, result = found
        shown = verdict(
            submission,
            result,
            page=config.url(f"/s/{submission.page_key}"),
            lang=language,
            course=services.course,
        )
        headers = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}
        if shown.state not in FINAL_STATES:
            headers["Retry-After"] = str(POLL_AFTER_S)
        return JSONResponse(shown.as_json(), 200, headers=headers)

    async def page(request: Request) -> Response:
        language = _language(request, lang)
        found = await _find(services.store, request.path_params["key"])
        if found is None:
            return HTMLResponse(
                render_page(None, None, course=services.course, lang=language, url=""),
                404,
                headers=PAGE_HEADERS,
            )
        submission, result = found
        html = render_page(
            submission,
            result,
            course=services.course,
            lang=language,
            url=config.url(f"/s/{submission.page_key}"),
        )
        return HTMLResponse(html, 200, headers=PAGE_HEADERS)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok", "queued": await run_in_threadpool(services.store.queued)})

    async def store_unavailable(request: Request, exc: Exception) -> Response:
        log.error("the store did not answer: %s", exc)
        return refused(ServiceRefusal("service.app.store_unavailable", 503), _language(request, lang))

    routes = [
        Route("/submissions", submit, methods=["POST"]),
        Route("/submissions/{key}", poll, methods=["GET"]),
        Route("/s/{key}", page, methods=["GET"]),
    ]
    from autograder.service import live, ops

    routes.extend(live.routes(services))  # the instructor's live view, under the prefix
    prefix = config.prefix
    top = [Route("/healthz", healthz, methods=["GET"]), *ops.routes(services)]
    if prefix:
        top.append(Mount(prefix, routes=routes))
    else:
        top.extend(routes)

    async def no_route(request: Request, exc: Exception) -> Response:
        return _not_found(_language(request, lang))

    return Starlette(routes=top, exception_handlers={SQLAlchemyError: store_unavailable, 404: no_route})


# ------------------------------------------------------------------------------ helpers


async def _read_capped(request: Request, cap: int) -> None:
    """Read (and drop) the body up to `cap` bytes; 413 beyond. Nothing in it is parsed."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap:
        raise ServiceRefusal("service.app.body_too_large", 413, limit=cap)
    seen = 0
    async for chunk in request.stream():
        seen += len(chunk)
        if seen > cap:
            raise ServiceRefusal("service.app.body_too_large", 413, limit=cap)


def _bearer(header: str) -> str:
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ServiceRefusal("service.app.no_token", 401)
    return token.strip()


def _language(request: Request, default: str) -> str:
    asked = request.query_params.get("lang", "")
    return asked if asked in i18n.LANGUAGES else default


async def _find(store: Store, key: str):
    if not KEY.fullmatch(key):
        return None

    def read():
        submission = store.by_key(key)
        if submission is None:
            return None
        return submission, store.result(submission.id)

    return await run_in_threadpool(read)


def _not_found(lang: str) -> JSONResponse:
    return JSONResponse(
        {"error": "service.app.not_found", "message": i18n.translate("service.app.not_found", lang)},
        404,
        headers={"Cache-Control": "no-store"},
    )
