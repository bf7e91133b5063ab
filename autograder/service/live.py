"""The instructor's live view of the cohort (issue 33): routes under {public_url}/staff.

    GET  /staff/login      the login form (the only thing anybody without a session sees)
    POST /staff/login      token=<the staff token> (form body, never a URL) -> a session cookie
    POST /staff/logout     ends the session (CSRF token in the form)
    GET  /staff/           the page: cohort grid, queue, where the cohort is stuck, one learner's
                           history; without a session, the login form (401)
    GET  /staff/live.js    the page's script; /staff/live.css its style (served, never inline,
                           so the CSP allows scripts and styles from 'self' only)
    GET  /staff/state      the page's data as JSON (live_data.py), polled by the script every few
                           seconds: the page changes without a reload. ?learner=ID adds that
                           learner's history. Without a session: 401 JSON.
    POST /staff/regrade    JSON {"learners": [...]} (or none: every graded submission) with the
                           X-CSRF-Token header: Store.queue_regrade with the service's graders
                           (instructors only; assistants see everything and change nothing)

Access (staff.py): a token per instructor or assistant (`autograder staff add NAME`), posted once
on the login form for a random session id kept in a cookie that is HttpOnly, SameSite=Strict,
Secure when the public URL is HTTPS and limited to {prefix}/staff; the store keeps its hash.
Every POST is refused (403) unless its Origin is the service's own (or, without Origin, the
browser says Sec-Fetch-Site: same-origin), and, with a session, unless it carries the session's
CSRF token (synchronizer token). Every answer is no-store, framed by nobody, under a CSP with
no inline script or style, and says no referrer beyond the service's own origin ("same-origin":
"no-referrer" would make browsers send `Origin: null` on the service's own POSTs).
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import urllib.parse
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from autograder.core import i18n
from autograder.service.live_data import LiveData
from autograder.service.live_page import LIVE_CSS, LIVE_JS, live_page, login_page
from autograder.service.staff import SESSION_LIFETIME, Session, Staff

log = logging.getLogger(__name__)

COOKIE = "autograder_staff"
POLL_S = 3  # how often the page asks for the state
BODY_CAP = 4096  # a login or an action: nothing bigger is read
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "Cache-Control": "no-store",
    "Referrer-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "X-Robots-Tag": "noindex, nofollow",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


class _Refused(Exception):
    def __init__(self, status: int, key: str) -> None:
        super().__init__(key)
        self.status, self.key = status, key


def origin_of(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def routes(services) -> list:
    """The live view's routes (app.py mounts them under the public URL's path)."""
    config, course = services.config, services.course
    staff = Staff(services.store.engine)
    staff.create()  # the store's tables exist already; these may not (app.py imports us later)
    lessons = [course.lesson(key) for key in config.lessons] if config.lessons else list(course.lessons)
    data = LiveData(services.store, course, services.roster, lessons, config.lease_s)
    base = config.prefix + "/staff"
    origin = origin_of(config.public_url)
    secure = config.public_url.lower().startswith("https://")
    hashes: dict[str, str] = {}
    hash_lock = threading.Lock()

    def language(request: Request) -> str:
        asked = request.query_params.get("lang", "")
        return asked if asked in i18n.LANGUAGES else course.language

    def html(body: str, status: int = 200) -> HTMLResponse:
        return HTMLResponse(body, status, headers=HEADERS)

    def refusal(status: int, key: str, lang: str) -> JSONResponse:
        return JSONResponse({"error": key, "message": i18n.translate(key, lang)}, status, headers=HEADERS)

    async def session_of(request: Request) -> Session | None:
        sid = request.cookies.get(COOKIE)
        return await run_in_threadpool(staff.session, sid) if sid else None

    def same_origin(request: Request) -> None:
        """A POST from the service's own page: its Origin is ours, or, where a browser sends no
        Origin, it says the request is same-origin; anything else (a form on another site, a
        script elsewhere, a client that says nothing) is refused."""
        sent = request.headers.get("origin")
        site = request.headers.get("sec-fetch-site")
        if site is not None and site != "same-origin":
            raise _Refused(403, "service.live.cross_site")
        if sent is not None:
            if sent.lower() != origin:
                raise _Refused(403, "service.live.cross_site")
        elif site != "same-origin":
            raise _Refused(403, "service.live.cross_site")

    async def body_of(request: Request) -> bytes:
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > BODY_CAP:
            raise _Refused(413, "service.live.too_large")
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > BODY_CAP:
                raise _Refused(413, "service.live.too_large")
        return body

    def form_of(body: bytes) -> dict[str, str]:
        try:
            pairs = urllib.parse.parse_qsl(body.decode("utf-8"), keep_blank_values=True, max_num_fields=8)
        except (UnicodeDecodeError, ValueError):
            raise _Refused(400, "service.live.bad_request") from None
        return dict(pairs)

    def csrf_ok(session: Session, sent: str | None) -> bool:
        return bool(sent) and secrets.compare_digest(session.csrf.encode(), str(sent).encode())

    def login_form(lang: str, status: int, error: str | None = None) -> HTMLResponse:
        return html(login_page(lang=lang, action=f"{base}/login?lang={lang}", error=error), status)

    # ------------------------------------------------------------------ routes

    async def get_login(request: Request) -> Response:
        lang = language(request)
        if await session_of(request) is not None:
            return RedirectResponse(f"{base}/?lang={lang}", 303, headers=HEADERS)
        return login_form(lang, 200)

    async def post_login(request: Request) -> Response:
        lang = language(request)
        try:
            same_origin(request)
            token = form_of(await body_of(request)).get("token", "").strip()
        except _Refused as refused:
            return login_form(lang, refused.status, refused.key)
        opened = await run_in_threadpool(staff.login, token)
        if opened is None:
            return login_form(lang, 401, "service.live.bad_token")
        sid, session = opened
        log.info("staff login: %s (%s)", session.name, session.role)
        answer = RedirectResponse(f"{base}/?lang={lang}", 303, headers=HEADERS)
        answer.set_cookie(
            COOKIE,
            sid,
            max_age=int(SESSION_LIFETIME.total_seconds()),
            path=base,
            secure=secure,
            httponly=True,
            samesite="strict",
        )
        return answer

    async def post_logout(request: Request) -> Response:
        lang = language(request)
        session = await session_of(request)
        try:
            same_origin(request)
            sent = form_of(await body_of(request)).get("csrf")
        except _Refused as refused:
            return refusal(refused.status, refused.key, lang)
        if session is None:
            return login_form(lang, 401)
        if not csrf_ok(session, sent):
            return refusal(403, "service.live.bad_csrf", lang)
        await run_in_threadpool(staff.logout, request.cookies.get(COOKIE, ""))
        answer = RedirectResponse(f"{base}/login?lang={lang}", 303, headers=HEADERS)
        answer.delete_cookie(COOKIE, path=base, secure=secure, httponly=True, samesite="strict")
        return answer

    async def page(request: Request) -> Response:
        lang = language(request)
        session = await session_of(request)
        if session is None:
            return login_form(lang, 401)
        return html(
            live_page(
                lang=lang,
                base=base,
                name=session.name,
                role=session.role,
                csrf=session.csrf,
                poll_s=POLL_S,
                can_regrade=session.role == "instructor",
            )
        )

    async def script(request: Request) -> Response:
        if await session_of(request) is None:
            return refusal(401, "service.live.no_session", language(request))
        return Response(LIVE_JS, 200, media_type="text/javascript; charset=utf-8", headers=HEADERS)

    async def style(request: Request) -> Response:
        if await session_of(request) is None:
            return refusal(401, "service.live.no_session", language(request))
        return Response(LIVE_CSS, 200, media_type="text/css; charset=utf-8", headers=HEADERS)

    async def state(request: Request) -> Response:
        lang = language(request)
        if await session_of(request) is None:
            return refusal(401, "service.live.no_session", lang)
        learner = request.query_params.get("learner") or None
        body = await run_in_threadpool(data.state, lang, learner)
        return JSONResponse(body, 200, headers=HEADERS)

    def graders() -> str:
        with hash_lock:
            if "hash" not in hashes:  # the service's own graders, as its fetcher stamps pushes
                from autograder.service.worker import service_graders_hash

                hashes["hash"] = service_graders_hash(config, course)
            return hashes["hash"]

    async def regrade(request: Request) -> Response:
        lang = language(request)
        session = await session_of(request)
        try:
            same_origin(request)
            if session is None:
                raise _Refused(401, "service.live.no_session")
            if not csrf_ok(session, request.headers.get("x-csrf-token")):
                raise _Refused(403, "service.live.bad_csrf")
            if session.role != "instructor":
                raise _Refused(403, "service.live.not_instructor")
            if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
                raise _Refused(415, "service.live.bad_request")
            asked = _regrade_request(await body_of(request))
        except _Refused as refused:
            return refusal(refused.status, refused.key, lang)
        store = services.store
        if not hasattr(store, "queue_regrade"):
            return refusal(501, "service.live.regrade_unavailable", lang)
        queued = await run_in_threadpool(lambda: store.queue_regrade(graders(), learners=asked))
        log.info("regrade by %s: %d queued", session.name, queued)
        if queued and services.queue is not None:
            try:
                from autograder.service.queue import wake

                wake(services.queue)
            except Exception:  # noqa: BLE001 - recorded; the workers' timer finds them
                log.exception("wake-up not sent after a regrade")
        text = i18n.translate("service.live.regrade_queued", lang, n=queued)
        return JSONResponse({"queued": queued, "message": text}, 200, headers=HEADERS)

    return [
        Route("/staff", page, methods=["GET"]),
        Route("/staff/", page, methods=["GET"]),
        Route("/staff/login", get_login, methods=["GET"]),
        Route("/staff/login", post_login, methods=["POST"]),
        Route("/staff/logout", post_logout, methods=["POST"]),
        Route("/staff/live.js", script, methods=["GET"]),
        Route("/staff/live.css", style, methods=["GET"]),
        Route("/staff/state", state, methods=["GET"]),
        Route("/staff/regrade", regrade, methods=["POST"]),
    ]


def _regrade_request(body: bytes) -> list[str] | None:
    """{"learners": [ids]} -> those ids; {} -> None (every graded submission)."""
    try:
        data: Any = json.loads(body.decode("utf-8") or "{}")
    except (UnicodeDecodeError, ValueError):
        raise _Refused(400, "service.live.bad_request") from None
    if not isinstance(data, dict):
        raise _Refused(400, "service.live.bad_request")
    learners = data.get("learners")
    if learners is None:
        return None
    if not isinstance(learners, list) or not learners or not all(isinstance(x, str) and x for x in learners):
        raise _Refused(400, "service.live.bad_request")
    return learners[:10000]
