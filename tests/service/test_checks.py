"""Official verdicts posted as check runs (autograder/service/checks.py) to the stand-in of
GitHub's API (tests/support/fake_github.py, real HTTP on 127.0.0.1): the App's JWT, signed with a
test key, verified by the stand-in and exchanged for an installation token; each check run says
the verdict; the backlog keeps the newest verdict per learner and never exceeds the injected
limits; Retry-After and x-ratelimit-reset are honoured; 5xx answers are retried; a restart
resumes. The clock is a fake one the tests move (no sleeping), except where the thread runs."""

from __future__ import annotations

import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from sqlalchemy import insert, select
from support import term_results
from support.fake_github import FakeGitHub

from autograder.service import checks_table
from autograder.service.checks import CheckLimits, Publisher, start_publisher
from autograder.service.credentials import AppInstallation, StaticToken
from autograder.service.schema import results, submissions
from autograder.service.store import Store

APP_ID, INSTALLATION = 31337, 4242
PUBLIC = "https://curso.example/autograder"
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(scope="module")
def key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def github(key):
    with FakeGitHub() as fake:
        fake.add_app(APP_ID, key.public_key(), INSTALLATION)
        yield fake


@pytest.fixture
def app(github, key):
    from cryptography.hazmat.primitives import serialization

    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return AppInstallation(APP_ID, pem, INSTALLATION, github.url)


@pytest.fixture
def store(tmp_path):
    made = Store(f"sqlite:///{tmp_path / 'service.db'}")
    made.create()
    yield made
    made.close()


class Verdicts:
    """Results recorded straight into the store's tables, as the workers record them."""

    def __init__(self, store: Store, course) -> None:
        self.store, self.course = store, course
        self.count = 0
        self.shas: dict[int, str] = {}  # result id -> commit

    def add(self, learner: str, fraction: float | None = 1.0) -> int:
        self.count += 1
        n = self.count
        at = T0 + timedelta(minutes=n)
        status = "done" if fraction is not None else "error"
        with self.store.engine.begin() as conn:
            sid = conn.execute(
                insert(submissions).values(
                    page_key=f"page-{n:04d}-abcdefghijklmnop",
                    learner=learner,
                    repository_id=1000 + sum(map(ord, learner)),
                    repository=f"curso/{learner}",
                    sha=f"{n:040x}",
                    ref="refs/heads/main",
                    event_name="push",
                    run_id=n,
                    token_id=f"jti{n}",
                    submitted_at=at,
                    time_source="run",
                    received_at=at,
                    state=status,
                )
            ).inserted_primary_key[0]
            body = (
                term_results.result_json(self.course, ["01"], fraction)
                if fraction is not None
                else '{"error": {"key": "service.worker.lost", "params": {"attempts": 3}}}'
            )
            rid = conn.execute(
                insert(results).values(
                    submission_id=sid,
                    status=status,
                    result_json=body,
                    graders_hash="g" * 64,
                    seed=1,
                    error=None if fraction is not None else "service.worker.lost",
                    created_at=at + timedelta(seconds=30),
                )
            ).inserted_primary_key[0]
        self.shas[rid] = f"{n:040x}"
        return rid


def publisher(store, course, github, credential, clock, **limits) -> Publisher:
    return Publisher(
        store,
        course,
        credential,
        github.url,
        lambda path: PUBLIC + path,
        limits=CheckLimits(**limits),
        clock=clock,
    )


def states(store) -> Counter:
    with store.engine.connect() as conn:
        return Counter(checks_table.counts(conn))


def posts(github) -> list[dict]:
    return [e for e in github.log if e["method"] == "POST" and e["path"].endswith("/check-runs")]


def test_a_verdict_is_posted_as_a_check_run_with_the_apps_installation_token(store, course, github, app):
    verdicts = Verdicts(store, course)
    passed = verdicts.add("ana", 1.0)
    failed = verdicts.add("bea", 0.5)
    lost = verdicts.add("carla", None)
    clock = Clock()
    publisher(store, course, github, app, clock).step()
    assert app.exchanges == 1  # the JWT was accepted by the stand-in, the token reused
    runs = {run["external_id"]: run for run in github.check_runs}
    assert set(runs) == {str(passed), str(failed), str(lost)}
    ana = runs[str(passed)]
    assert ana["repository"] == "curso/ana" and ana["head_sha"] == verdicts.shas[passed]
    assert ana["name"] == "autograder: nota oficial" and ana["status"] == "completed"
    assert ana["conclusion"] == "success"
    assert ana["details_url"].startswith(PUBLIC + "/s/page-")
    assert ana["output"]["title"].startswith("Nota oficial: ")
    assert "Nota oficial según el servicio" in ana["output"]["summary"]
    assert ana["details_url"] in ana["output"]["summary"]
    assert runs[str(failed)]["conclusion"] == "failure"
    assert runs[str(lost)]["conclusion"] == "neutral"
    assert runs[str(lost)]["output"]["title"].startswith("Sin nota oficial")
    assert states(store) == {"posted": 3}
    publisher(store, course, github, app, clock).step()  # a restart: nothing posted twice
    assert len(github.check_runs) == 3


def test_the_backlog_keeps_each_learners_newest_verdict_within_the_limits(store, course, github, app):
    verdicts = Verdicts(store, course)
    learners = [f"l{i}" for i in range(8)]
    newest = {}
    for n in range(20):  # 20 verdicts of 8 learners, each learner's arriving over time
        learner = learners[(n * 3) % 8]
        newest[learner] = verdicts.add(learner, 1.0 if n % 2 else 0.5)
    clock = Clock()
    start = clock.now
    pub = publisher(store, course, github, app, clock, per_minute=3, per_hour=5)
    sent_at: list[float] = []
    while clock.now < start + 2.5 * 3600:
        before = len(github.check_runs)
        wait = pub.step()
        sent_at += [clock.now] * (len(github.check_runs) - before)
        assert 0 <= wait <= pub.limits.poll_s
        clock.advance(max(wait, 1.0))
    posted = [int(run["external_id"]) for run in github.check_runs]
    assert sorted(posted) == sorted(newest.values())  # each learner's newest, once; no older one
    assert states(store) == {"posted": 8, "dropped": 12}
    for moment in sent_at:
        assert sum(moment <= t < moment + 60 for t in sent_at) <= 3
        assert sum(moment <= t < moment + 3600 for t in sent_at) <= 5
    assert sum(t < start + 3600 for t in sent_at) == 5  # the hour's budget was used, not more
    # A newer verdict of a learner whose older one was posted is posted too.
    again = verdicts.add("l0", 1.0)
    clock.advance(3600)
    pub.step()
    assert int(github.check_runs[-1]["external_id"]) == again


def test_retry_after_and_the_rate_limit_reset_pause_every_post(store, course, github, app):
    verdicts = Verdicts(store, course)
    first, second = verdicts.add("ana"), verdicts.add("bea")
    clock = Clock()
    pub = publisher(store, course, github, app, clock)
    app.token()  # the installation token first: the armed answers are for the check runs
    github.arm_secondary(retry_after=120, status=429)
    pub.step()
    assert len(posts(github)) == 1 and github.check_runs == []
    clock.advance(100)
    assert pub.step() <= 20 + 1e-6  # it comes back when the wait ends
    assert len(posts(github)) == 1  # nothing sent before Retry-After passed
    clock.advance(21)
    github.arm_primary(reset_in=600)  # then the hourly limit: x-ratelimit-remaining 0, reset
    pub.step()
    assert len(posts(github)) == 2 and github.check_runs == []
    clock.now = time.time() + 300
    pub.step()
    assert len(posts(github)) == 2
    clock.now = time.time() + 610
    pub.step()
    assert sorted(int(run["external_id"]) for run in github.check_runs) == [first, second]
    assert states(store) == {"posted": 2}


def test_server_errors_are_retried_with_a_growing_delay_then_given_up(store, course, github, app):
    verdicts = Verdicts(store, course)
    rid = verdicts.add("ana")
    clock = Clock()
    pub = publisher(store, course, github, app, clock, max_attempts=4, backoff_s=2.0)
    app.token()
    github.fail_after(0)  # every request answers 500
    pub.step()
    assert len(posts(github)) == 1
    clock.advance(1)
    pub.step()
    assert len(posts(github)) == 1  # the first retry waits 2 s
    clock.advance(1.5)
    pub.step()
    assert len(posts(github)) == 2
    clock.advance(3)
    pub.step()
    assert len(posts(github)) == 2  # the second waits 4 s
    github.fail_after(None)
    clock.advance(1.5)
    pub.step()
    assert [int(run["external_id"]) for run in github.check_runs] == [rid]
    with store.engine.connect() as conn:
        row = conn.execute(select(checks_table.check_runs)).one()
    assert row.state == "posted" and row.attempts == 2
    # A verdict whose every attempt fails is set aside, with GitHub's answer ...
    later = verdicts.add("bea")
    github.fail_after(0)
    for _ in range(10):
        pub.step()
        clock.advance(60)
    github.fail_after(None)
    assert states(store) == {"posted": 1, "given_up": 1}
    assert len(posts(github)) == 3 + 4  # 2 failed and 1 posted before, 4 failed now
    with store.engine.connect() as conn:
        given_up = conn.execute(
            select(checks_table.check_runs).where(checks_table.check_runs.c.state == "given_up")
        ).one()
    assert given_up.attempts == 4 and given_up.detail.startswith("500")
    # ... and posted after the service starts again.
    publisher(store, course, github, app, clock).step()
    assert int(github.check_runs[-1]["external_id"]) == later
    assert states(store) == {"posted": 2}


def test_a_refusal_that_is_not_a_rate_limit_is_recorded_at_once(store, course, github):
    Verdicts(store, course).add("ana")
    # A token that is not an App's: GitHub answers 403 "You must authenticate via a GitHub App."
    pub = publisher(store, course, github, StaticToken(github.token), Clock())
    pub.step()
    pub.step()
    assert len(posts(github)) == 1 and github.check_runs == []
    with store.engine.connect() as conn:
        row = conn.execute(select(checks_table.check_runs)).one()
    assert row.state == "failed" and "GitHub App" in row.detail


def test_a_restart_resumes_the_backlog_and_keeps_within_the_limits(store, course, github, app):
    verdicts = Verdicts(store, course)
    ids = [verdicts.add(name) for name in ("ana", "bea", "carla")]
    clock = Clock()
    publisher(store, course, github, app, clock, per_minute=1, per_hour=10).step()
    assert len(github.check_runs) == 1
    # The service restarts: a new publisher on the same store, at the same moment.
    restarted = publisher(store, course, github, app, clock, per_minute=1, per_hour=10)
    restarted.step()
    assert len(github.check_runs) == 1  # the minute's one post was already made before
    for _ in range(2):
        clock.advance(61)
        restarted.step()
    assert sorted(int(run["external_id"]) for run in github.check_runs) == ids
    assert states(store) == {"posted": 3}


def test_serve_starts_the_publisher_thread_only_with_an_app(store, course, github, app):
    rid = Verdicts(store, course).add("ana")
    said = []
    say = SimpleNamespace(line=lambda key, **params: said.append(key))

    def services(credential):
        return SimpleNamespace(
            store=store,
            course=course,
            lookup=SimpleNamespace(credential=credential),
            config=SimpleNamespace(api_url=github.url, url=lambda path: PUBLIC + path),
        )

    assert start_publisher(services(StaticToken("t0ken")), say, env={}) is None
    assert start_publisher(services(None), say, env={}) is None
    assert start_publisher(services(app), say, env={"AUTOGRADER_CHECKS": "off"}) is None
    assert said == ["service.checks.no_app"]
    running = start_publisher(services(app), say, env={"AUTOGRADER_CHECKS_PER_HOUR": "many"})
    assert said[1:] == ["service.checks.bad_limit", "service.checks.started"]
    try:
        deadline = time.monotonic() + 20  # a hang guard: the first step runs at once
        while not github.check_runs and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        running.stop()
    assert [int(run["external_id"]) for run in github.check_runs] == [rid]
    assert running.limits.per_hour == 500
