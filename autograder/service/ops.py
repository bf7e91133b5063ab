"""Operations endpoints, at the top level beside /healthz (app.py adds `routes(services)`):

    GET /readyz    200 {"status": "ready", "checks": {...}} when the service can do its work now:
                   the store answers, the queue is reachable, and (where the store has the
                   workers table) at least one worker is running and was seen within 3 of its
                   leases; 503 {"status": "unready", "error": <catalog key>, "message": <the
                   course's language>, "checks": {...}} naming the first that fails.
                   /readyz?workers=no leaves the workers out (still reported): the probe of a
                   load balancer in front of `serve --workers 0`, which should take pushes
                   (recorded, graded later) while every worker is away. /healthz
                   (app.py) stays the liveness probe: the process answers and the store too.
    GET /metrics   Prometheus' text format (metrics.py: queue depth, latency histogram, results,
                   workers, check runs; no per-learner label), read from the store at scrape
                   time. Not public: `Authorization: Bearer <AUTOGRADER_SERVE_METRICS_TOKEN>`,
                   compared in constant time; 401 with another or none; 404, as for any path the
                   service does not have, while the variable is not set.

Readiness says what failed, never the database's or Redis' error text (which may name hosts);
the log has it.
"""

from __future__ import annotations

import hmac
import logging
import os
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timezone

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import func, select
from sqlalchemy.exc import SQLAlchemyError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from autograder.core import i18n
from autograder.service import metrics, schema
from autograder.service.schema import submissions

log = logging.getLogger(__name__)

METRICS_TOKEN = "AUTOGRADER_SERVE_METRICS_TOKEN"
NO_STORE = {"Cache-Control": "no-store"}


def readiness(services, now: datetime | None = None, *, need_workers: bool = True) -> tuple[str | None, dict]:
    """(the catalog key of the first check that fails, or None; what each check found). The
    workers are reported either way, and required only with `need_workers`."""
    now = now or datetime.now(timezone.utc)
    found: dict = {}
    try:
        with services.store.engine.connect() as conn:
            found["queued"] = conn.execute(
                select(func.count()).select_from(submissions).where(submissions.c.state == "queued")
            ).scalar_one()
            found["store"] = "ok"
            workers = schema.metadata.tables.get("workers")
            rows = list(conn.execute(select(workers)).mappings()) if workers is not None else None
    except SQLAlchemyError as exc:
        log.error("readiness: the store did not answer", extra={"fields": {"error": type(exc).__name__}})
        found["store"] = "failed"
        return "service.ops.store_down", found
    if services.queue is not None:
        try:
            services.queue.storage.queue_size()
            found["queue"] = "ok"
        except Exception as exc:  # noqa: BLE001 - Redis or the queue's file: any failure is "unready"
            log.error("readiness: the queue did not answer", extra={"fields": {"error": type(exc).__name__}})
            found["queue"] = "failed"
            return "service.ops.queue_down", found
    else:
        found["queue"] = "none"
    if rows is not None:
        states = [metrics.worker_state(row, now) for row in rows]
        found["workers"] = {state: states.count(state) for state in sorted(set(states))}
        if need_workers and "running" not in states:
            return "service.ops.no_workers", found
    return None, found


def routes(services, *, env: Mapping[str, str] = os.environ, clock: Callable[[], float] = time.time) -> list:
    lang = services.course.language
    token = (env.get(METRICS_TOKEN) or "").strip()
    registry = metrics.registry(services.store, clock)
    # The check runs' table is defined by a module the store may not have known when it made its
    # tables (metrics.py imports it): made now if missing (create_all is idempotent).
    services.store.create()

    async def readyz(request: Request) -> Response:
        need = request.query_params.get("workers", "") not in ("no", "0", "optional")
        failed, found = await run_in_threadpool(lambda: readiness(services, need_workers=need))
        if failed is None:
            return JSONResponse({"status": "ready", "checks": found}, 200, headers=NO_STORE)
        body = {
            "status": "unready",
            "error": failed,
            "message": i18n.translate(failed, lang),
            "checks": found,
        }
        return JSONResponse(body, 503, headers=NO_STORE)

    async def scrape(request: Request) -> Response:
        if not token:
            return JSONResponse(
                {"error": "service.app.not_found", "message": i18n.translate("service.app.not_found", lang)},
                404,
                headers=NO_STORE,
            )
        scheme, _, given = request.headers.get("authorization", "").strip().partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
            return JSONResponse(
                {
                    "error": "service.ops.metrics_token",
                    "message": i18n.translate("service.ops.metrics_token", lang),
                },
                401,
                headers={**NO_STORE, "WWW-Authenticate": 'Bearer realm="metrics"'},
            )
        try:
            body = await run_in_threadpool(generate_latest, registry)
        except SQLAlchemyError as exc:
            log.error("metrics: the store did not answer", extra={"fields": {"error": type(exc).__name__}})
            return JSONResponse(
                {
                    "error": "service.ops.store_down",
                    "message": i18n.translate("service.ops.store_down", lang),
                },
                503,
                headers=NO_STORE,
            )
        return Response(body, 200, media_type=CONTENT_TYPE_LATEST, headers=NO_STORE)

    return [Route("/readyz", readyz, methods=["GET"]), Route("/metrics", scrape, methods=["GET"])]
