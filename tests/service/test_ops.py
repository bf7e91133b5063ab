"""The operations endpoints (autograder/service/ops.py, metrics.py) on the service's real app, in
process (Starlette's test client) over a real SQLite store and the real queue file: readiness
that fails, with its reason, when the database is gone, the queue does not answer or no worker
was seen; metrics that need the bearer token, parse with prometheus_client's own parser, and
name no learner; and the JSON log lines (logs.py), which carry no token."""

from __future__ import annotations

import io
import json
import logging
import socket
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import insert
from starlette.applications import Starlette
from support.project import ROOT

from autograder.service import logs, ops, schema
from autograder.service.app import Services
from autograder.service.config import ServiceConfig
from autograder.service.jwks import KeySet
from autograder.service.queue import make_queue
from autograder.service.schema import results, submissions
from autograder.service.store import Store

TOKEN = "metrics-token-0123456789abcdef"
LEARNERS = ("learner-ana-7f3e", "learner-bea-91c2")
NOW = datetime.now(timezone.utc)


def make_services(tmp_path: Path, course) -> Services:
    config = ServiceConfig(
        course_file=ROOT / "course.yml",
        roster_file=tmp_path / "roster.yml",
        public_url="http://127.0.0.1:9",
        issuer="https://token.actions.githubusercontent.com",
        data_dir=tmp_path,
    )
    store = Store(config.database)
    store.create()
    queue = make_queue(None, tmp_path)
    return Services(config, course, None, store, KeySet(config.issuer), None, queue)


class Answer:
    def __init__(self, status: int, raw: bytes, headers) -> None:
        self.status_code, self.text, self.headers = status, raw.decode("utf-8"), headers

    def json(self):
        return json.loads(self.text)


class Client:
    def __init__(self, url: str) -> None:
        self.url = url

    def get(self, path: str, headers: dict | None = None) -> Answer:
        request = urllib.request.Request(self.url + path, headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=30) as reply:
                return Answer(reply.status, reply.read(), reply.headers)
        except urllib.error.HTTPError as error:
            return Answer(error.code, error.read(), error.headers)


@contextmanager
def serving(services: Services, env: dict):
    """ops' routes (the metrics' token read from `env`) in a real uvicorn on 127.0.0.1."""
    import uvicorn

    app = Starlette(routes=ops.routes(services, env=env))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30  # a hang guard
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        yield Client(f"http://127.0.0.1:{sock.getsockname()[1]}")
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def record(services: Services) -> None:
    """Two learners' submissions: one graded 40 s after it was received, one queued."""
    with services.store.engine.begin() as conn:
        for n, (learner, state) in enumerate(zip(LEARNERS, ("done", "queued")), 1):
            received = NOW - timedelta(minutes=5)
            sid = conn.execute(
                insert(submissions).values(
                    page_key=f"page-{n:04d}-abcdefghijklmnop",
                    learner=learner,
                    repository_id=500 + n,
                    repository=f"curso/{learner}",
                    sha=f"{n:040x}",
                    ref="refs/heads/main",
                    event_name="push",
                    run_id=n,
                    token_id=f"jti{n}",
                    submitted_at=received,
                    time_source="run",
                    received_at=received,
                    state=state,
                )
            ).inserted_primary_key[0]
            if state == "done":
                conn.execute(
                    insert(results).values(
                        submission_id=sid,
                        status="done",
                        result_json="{}",
                        graders_hash="g" * 64,
                        seed=1,
                        created_at=received + timedelta(seconds=40),
                    )
                )


def add_worker(services: Services, seen: datetime, state: str = "running") -> None:
    workers = schema.metadata.tables["workers"]
    values = {
        "name": f"host-a:{int(seen.timestamp())}",
        "host": "host-a",
        "pid": 4242,
        "graders_hash": "g" * 64,
        "threads": 2,
        "started_at": seen,
        "seen_at": seen,
        "state": state,
    }
    with services.store.engine.begin() as conn:
        conn.execute(insert(workers).values(**{k: v for k, v in values.items() if k in workers.c}))


@pytest.fixture
def services(tmp_path, course):
    made = make_services(tmp_path, course)
    yield made
    made.store.close()


def test_readiness_needs_the_store_the_queue_and_a_worker_seen_recently(services, tmp_path):
    with serving(services, {}) as web:
        readiness_checks(services, tmp_path, web)


def readiness_checks(services, tmp_path, web):
    answer = web.get("/readyz")
    assert answer.status_code == 503 and answer.json()["error"] == "service.ops.no_workers"
    assert "corrector" in answer.json()["message"]  # the course's language
    add_worker(services, NOW - timedelta(hours=1))  # gone: not seen for 3 leases
    assert web.get("/readyz").json()["checks"]["workers"] == {"gone": 1}
    assert web.get("/readyz").status_code == 503
    assert web.get("/readyz?workers=no").status_code == 200  # a load balancer's probe: pushes recorded
    add_worker(services, datetime.now(timezone.utc))
    answer = web.get("/readyz")
    assert answer.status_code == 200, answer.text
    assert answer.json()["checks"] == {
        "queued": 0,
        "store": "ok",
        "queue": "ok",
        "workers": {"gone": 1, "running": 1},
    }
    # The queue on a Redis that does not answer (nothing listens on the port): unready, the
    # queue named.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    services.queue = make_queue(f"redis://127.0.0.1:{port}/0", tmp_path)
    answer = web.get("/readyz")
    assert answer.status_code == 503 and answer.json()["error"] == "service.ops.queue_down"
    assert answer.json()["checks"]["store"] == "ok"


def test_readiness_fails_when_the_database_is_gone(services, tmp_path):
    add_worker(services, datetime.now(timezone.utc))
    with serving(services, {}) as web:
        assert web.get("/readyz").status_code == 200
        for path in tmp_path.glob("servicio.db*"):
            path.unlink()
        services.store.engine.dispose()  # the pool's connections held the deleted file open
        answer = web.get("/readyz")
    assert answer.status_code == 503
    body = answer.json()
    assert body["error"] == "service.ops.store_down" and body["checks"]["store"] == "failed"
    assert "servicio.db" not in answer.text  # the database's own error is the log's, not the answer's


def test_metrics_need_the_token_and_name_no_learner(services):
    record(services)
    add_worker(services, datetime.now(timezone.utc))
    with serving(services, {}) as web:
        assert web.get("/metrics").status_code == 404  # no token set: no metrics
    with serving(services, {"AUTOGRADER_SERVE_METRICS_TOKEN": TOKEN}) as web:
        scrape_checks(web)


def scrape_checks(web):
    assert web.get("/metrics").status_code == 401
    assert web.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}x"}).status_code == 401
    assert web.get("/metrics", headers={"Authorization": f"Basic {TOKEN}"}).status_code == 401
    assert web.get(f"/metrics?token={TOKEN}").status_code == 401  # never in a URL
    answer = web.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
    text = answer.text
    for learner in LEARNERS:
        assert learner not in text
    assert "curso/" not in text and "page-" not in text
    families = {family.name: family for family in text_string_to_metric_families(text)}
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in families.values()
        for sample in family.samples
    }
    assert samples[("autograder_submissions", (("lane", "push"), ("state", "queued")))] == 1
    assert samples[("autograder_submissions", (("lane", "push"), ("state", "done")))] == 1
    assert samples[("autograder_results_total", (("lane", "push"), ("status", "done")))] == 1
    latency = "autograder_grading_latency_seconds"
    assert families[latency].type == "histogram"
    assert samples[(f"{latency}_bucket", (("le", "30.0"),))] == 0
    assert samples[(f"{latency}_bucket", (("le", "60.0"),))] == 1
    assert samples[(f"{latency}_count", ())] == 1 and samples[(f"{latency}_sum", ())] == pytest.approx(40)
    assert samples[("autograder_workers", (("state", "running"),))] == 1
    assert samples[("autograder_oldest_queued_seconds", ())] >= 299
    allowed = {"state", "lane", "status", "le"}
    for family in families.values():
        for sample in family.samples:
            assert set(sample.labels) <= allowed, sample
    # A second scrape reads the results again incrementally: the histogram does not double.
    again = web.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).text
    assert f"{latency}_count 1.0" in again


def test_json_logs_carry_fields_and_never_a_token():
    stream = io.StringIO()
    root = logging.getLogger()
    before = (list(root.handlers), root.level, logging.getLogger("autograder").level)
    try:
        assert logs.configure(env={"AUTOGRADER_SERVE_LOG_FORMAT": "text"}, stream=stream) == "text"
        assert logs.configure("json", env={"AUTOGRADER_SERVE_METRICS_TOKEN": TOKEN}, stream=stream) == "json"
        log = logging.getLogger("autograder.service.test")
        jwt_like = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJyZXBvOmN1cnNvIn0.c2lnbmF0dXJl"
        log.info(
            "fetch with %s and Bearer %s",
            "https://x-access-token:ghs_abcdefghijklmnopqrstuvwxyz@github.com/curso/ana",
            jwt_like,
            extra={"fields": {"learner": "ana", "header": f"Bearer {TOKEN}", "n": 3, "big": "x" * 5000}},
        )
        try:
            raise RuntimeError(f"token={TOKEN}")
        except RuntimeError:
            log.exception("failed")
    finally:
        for handler in list(root.handlers):
            if handler not in before[0]:
                root.removeHandler(handler)
        root.setLevel(before[1])
        logging.getLogger("autograder").setLevel(before[2])
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line["event"][:5] for line in lines] == ["fetch", "faile"]
    first = lines[0]
    assert set(first) == {"ts", "level", "logger", "event", "fields"}
    assert first["level"] == "INFO" and first["logger"] == "autograder.service.test"
    assert first["ts"].endswith("Z")
    assert first["fields"]["learner"] == "ana" and first["fields"]["n"] == 3
    assert len(first["fields"]["big"]) < 600
    assert "exception" in lines[1]["fields"]
    raw = stream.getvalue()
    for secret in (TOKEN, "ghs_abcdefghijklmnopqrstuvwxyz", jwt_like):
        assert secret not in raw
    assert "[redacted]" in first["event"] and "[redacted]" in first["fields"]["header"]
    with pytest.raises(logs.LogFormatError) as refused:
        logs.configure(env={"AUTOGRADER_SERVE_LOG_FORMAT": "xml"})
    assert refused.value.text.key == "service.ops.log_format"
