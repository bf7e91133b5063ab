"""The service's HTTP side, through real HTTP: `autograder serve --workers 0` (the app alone, in
uvicorn, started once for the module) on 127.0.0.1, a real OIDC issuer made here
(support.oidc_issuer.LocalIssuer: its own RSA keys, JWKS over HTTP) and the stand-in of GitHub's
API (support.fake_github.FakeGitHub: repositories by id with their default branch, workflow runs).

Shown here: a valid token is recorded before the reply (202 with the links), dated by its
workflow run, and the same submission again (the same token, or another token for the same
commit) is that one submission (200); every refusal (forged tokens of each kind, another
audience, GitHub's default audience, an expired token, a pull_request event, a branch that is not
the default one, a repository not on the roster or without its id, no token, a body over the
cap, GitHub down) answers its status with its catalog text
in the course's language, and records nothing; a repository over its hourly limit is
recorded, dated by its token without asking GitHub; an unknown key is a 404 that says nothing more;
a graded submission's verdict and page show the grade as a copy linked to the record, quiz
answers as a count only, messages capped and escaped. The configurations the service must not
start with are refused with the option named; a public URL with a path serves below it, and the
options may come from the environment.

Nothing here grades (no workers): tests/service/test_service_end_to_end.py does."""

from __future__ import annotations

import html
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from support.fake_github import TOKEN, FakeGitHub
from support.oidc_issuer import FORGERIES, LocalIssuer
from support.project import ROOT

from autograder.core import i18n
from autograder.core.manifest import load_course
from autograder.core.results import CheckResult, CourseResult, Feedback, LessonResult, Status, message
from autograder.render.output import render_json
from autograder.service.store import Store

WAIT = 120  # seconds: an outer bound on the service's start, so that a hang fails
PER_HOUR = 3
SHA = "a" * 40


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Service:
    """`autograder serve --workers 0` with its issuer, GitHub and roster."""

    def __init__(self, base: Path, issuer: LocalIssuer, github: FakeGitHub, port: int) -> None:
        self.base, self.issuer, self.github, self.port = base, issuer, github, port
        self.url = f"http://127.0.0.1:{port}"
        self.data = base / "servicio"
        self.repos = {
            name: github.add_repo(f"curso-tdc/tdc-{name}")
            for name in ("ana", "luis", "sara", "rosa", "pablo", "marta", "intrusa")
        }
        github.repo("curso-tdc/tdc-rosa")["default_branch"] = "entrega"
        roster = ["version: 1", "organization: curso-tdc", "repository_prefix: tdc-", "learners:"]
        for name in ("ana", "luis", "sara", "rosa", "pablo"):
            roster += [
                f"  - id: {name}",
                f"    github: {name}",
                f"    repository_id: {self.repos[name]['id']}",
            ]
        roster += ["  - id: marta", "    github: marta"]  # no repository_id yet
        self.roster = base / "roster.yml"
        self.roster.write_text("\n".join(roster) + "\n", encoding="utf-8")
        self.store = Store(f"sqlite:///{self.data / 'servicio.db'}")
        self.proc: subprocess.Popen | None = None

    def args(self, *extra: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "autograder",
            "--course",
            str(ROOT / "course.yml"),
            "serve",
            "--roster",
            str(self.roster),
            "--public-url",
            self.url,
            "--issuer",
            self.issuer.url,
            "--github-api",
            self.github.url,
            "--data",
            str(self.data),
            "--port",
            str(self.port),
            *extra,
        ]

    def start(self) -> None:
        log = open(self.base / "serve.log", "w")
        env = {**os.environ, "AUTOGRADER_SERVICE_TOKEN": TOKEN}
        env.pop("AUTOGRADER_LANG", None)
        self.proc = subprocess.Popen(
            self.args("--workers", "0", "--per-hour", str(PER_HOUR)),
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        log.close()
        end = time.monotonic() + WAIT
        while time.monotonic() < end:
            assert self.proc.poll() is None, self.log()
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=5) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        raise AssertionError(f"the service did not answer within {WAIT} s\n{self.log()}")

    def log(self) -> str:
        return (self.base / "serve.log").read_text(encoding="utf-8", errors="replace")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=60)
        self.store.close()

    def token(self, name: str = "ana", **overrides) -> str:
        repo = self.repos[name]
        claims = {"repository": repo["full_name"], "repository_id": str(repo["id"]), "sha": SHA}
        claims.update(overrides)
        return self.issuer.mint(**claims)

    def post(
        self, token: str | None, body: bytes = b"", headers: dict | None = None
    ) -> tuple[int, dict, dict]:
        sent = {"Content-Type": "application/json", **(headers or {})}
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        request = urllib.request.Request(self.url + "/submissions", data=body, headers=sent, method="POST")
        return answer(request)

    def get(self, path: str) -> tuple[int, dict | str, dict]:
        return answer(urllib.request.Request(self.url + path))


def answer(request: urllib.request.Request) -> tuple[int, dict | str, dict]:
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            status, raw, headers = reply.status, reply.read(), reply.headers
    except urllib.error.HTTPError as error:
        status, raw, headers = error.code, error.read(), error.headers
    text = raw.decode("utf-8")
    if (headers.get("content-type") or "").startswith("application/json"):
        return status, json.loads(text), headers
    return status, text, headers


@pytest.fixture(scope="module")
def service():
    base = Path(tempfile.mkdtemp(prefix="autograder-app-test-"))
    port = free_port()
    with LocalIssuer(audience=f"http://127.0.0.1:{port}") as issuer, FakeGitHub() as github:
        running = Service(base, issuer, github, port)
        try:
            running.start()
            yield running
        finally:
            running.stop()
            shutil.rmtree(base, ignore_errors=True)


def recorded(service: Service) -> list[tuple[str, str, str]]:
    return [(s.learner, s.sha, s.token_id) for s in service.store.submissions()]


def assert_refused(service: Service, reply: tuple, status: int, key: str, before: list) -> dict:
    got, body, headers = reply
    assert got == status and body["error"] == key, (reply, service.log())
    said = i18n.translate(key, "es")  # the course's language
    assert body["message"] and "{" not in body["message"] and not body["message"].startswith("service.")
    assert body["message"].split("{")[0] in said or said.split("{")[0] in body["message"], body["message"]
    assert recorded(service) == before, "a refused submission was recorded"
    return body


# ------------------------------------------------------------------------------ accepted


def test_a_valid_token_is_recorded_before_the_reply_and_dated_by_its_run(service):
    created = time.time() - 90
    sha = "b" * 40
    run = service.github.add_run("curso-tdc/tdc-ana", head_sha=sha, created_at=created)
    token = service.token(sha=sha, run_id=str(run["id"]))
    status, body, _ = service.post(token, b'{"score": 100, "sha": "' + b"c" * 40 + b'"}')
    assert status == 202, (body, service.log())
    key = body["submission"]
    assert body == {
        "submission": key,
        "state": "queued",
        "page": f"{service.url}/s/{key}",
        "poll": f"{service.url}/submissions/{key}",
        "warnings": [],
        "wait": 300.0,
    }
    stored = service.store.by_key(key)
    assert (stored.learner, stored.sha, stored.state) == ("ana", sha, "queued")  # the body's sha is ignored
    assert stored.time_source == "run" and int(stored.submitted_at.timestamp()) == int(created)
    assert len(key) >= 32

    status, verdict, headers = service.get(f"/submissions/{key}")
    assert status == 200 and headers["Retry-After"] == "2"
    assert verdict["state"] == "queued" and verdict["official"] is True
    assert verdict["score"] is None and verdict["max"] is None
    assert i18n.translate("service.verdict.queued", "es") in verdict["text"]
    assert body["page"] in verdict["text"] and f"]({body['page']})" in verdict["markdown"]

    status, page, headers = service.get(f"/s/{key}")
    assert status == 200 and "text/html" in headers["content-type"]
    assert (
        headers["referrer-policy"] == "no-referrer"
        and "default-src 'none'" in headers["content-security-policy"]
    )
    assert sha in page and "curso-tdc/tdc-ana" in page and 'http-equiv="refresh"' in page
    zone = load_course(ROOT / "course.yml").timezone  # the time as the course's deadlines will be said
    assert stored.submitted_at.astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M:%S") + f" ({zone})" in page
    assert i18n.translate("service.page.source_run", "es") in page
    assert "<script" not in page


def test_the_same_submission_again_is_one_submission(service):
    sha = "d" * 40
    token = service.token(sha=sha)
    first = service.post(token)
    assert first[0] == 202
    asked = len(service.github.log)
    again = service.post(token)  # the job retried the same token
    assert again[0] == 200 and again[1] == first[1]
    other = service.post(service.token(sha=sha, run_id="999", run_attempt="2"))  # a re-run, same commit
    assert other[0] == 200 and other[1]["submission"] == first[1]["submission"]
    assert len(service.github.log) == asked  # answered from the record: GitHub is not asked again
    assert [s for s in service.store.submissions() if s.sha == sha].__len__() == 1


def test_a_renamed_repository_counts_with_a_warning(service):
    token = service.token("sara", sha="e" * 40, repository="curso-tdc/nuevo-nombre")
    status, body, _ = service.post(token)
    assert status == 202, body
    assert len(body["warnings"]) == 1 and "curso-tdc/nuevo-nombre" in body["warnings"][0]
    assert "curso-tdc/tdc-sara" in body["warnings"][0]


# ------------------------------------------------------------------------------ refused


@pytest.mark.parametrize("kind", sorted(FORGERIES))
def test_a_forged_token_is_refused_and_nothing_is_recorded(service, kind):
    before = recorded(service)
    repo = service.repos["ana"]
    token = service.issuer.forge(
        kind, repository=repo["full_name"], repository_id=str(repo["id"]), sha="f" * 40
    )
    expected = {
        "none": "service.token.algorithm",
        "hs256_public_key": "service.token.algorithm",
        "rs512": "service.token.algorithm",
        "es256": "service.token.algorithm",
        "foreign_key": "service.token.signature",
        "unknown_kid": "service.token.unknown_key",
        "no_kid": "service.token.no_key_id",
    }[kind]
    assert_refused(service, service.post(token), 401, expected, before)


@pytest.mark.parametrize(
    "overrides, status, key",
    [
        ({"aud": "https://grader.example.org"}, 401, "service.token.audience"),
        ({"aud": "https://github.com/curso-tdc"}, 401, "service.token.default_audience"),
        ({"issued_at": time.time() - 3600}, 401, "service.token.expired"),
        ({"iss": "https://token.actions.githubusercontent.com"}, 401, "service.token.issuer"),
        ({"event_name": "pull_request", "ref": "refs/pull/3/merge"}, 403, "service.claims.event"),
        ({"ref": "refs/heads/experimento"}, 403, "service.claims.branch"),
        ({"drop": ("repository_id",)}, 401, "service.claims.missing"),
    ],
    ids=["audience", "default-audience", "expired", "issuer", "pull-request", "branch", "no-repository-id"],
)
def test_a_token_the_course_does_not_grade_is_refused_with_its_reason(service, overrides, status, key):
    before = recorded(service)
    assert_refused(service, service.post(service.token(sha="1" * 40, **overrides)), status, key, before)


def test_the_default_branch_is_the_repositorys_own(service):
    """rosa's default branch is `entrega`: a push to main does not count, one to entrega does."""
    before = recorded(service)
    body = assert_refused(
        service, service.post(service.token("rosa", sha="2" * 40)), 403, "service.claims.branch", before
    )
    assert "entrega" in body["message"]
    accepted = service.post(service.token("rosa", sha="2" * 40, ref="refs/heads/entrega"))
    assert accepted[0] == 202, accepted


def test_a_repository_not_on_the_roster_is_refused_before_github_is_asked(service):
    before = recorded(service)
    asked = len(service.github.log)
    assert_refused(
        service,
        service.post(service.token("intrusa", sha="3" * 40)),
        403,
        "service.claims.not_on_roster",
        before,
    )
    body = assert_refused(
        service,
        service.post(service.token("marta", sha="3" * 40)),
        403,
        "service.claims.roster_without_id",
        before,
    )
    assert str(service.repos["marta"]["id"]) in body["message"]
    assert len(service.github.log) == asked  # GitHub's quota is not spent on strangers


def test_a_request_without_a_token_or_with_a_large_body_is_refused(service):
    before = recorded(service)
    assert_refused(service, service.post(None), 401, "service.app.no_token", before)
    assert_refused(
        service,
        service.post(service.token(), b"x" * (16 * 1024 + 1)),
        413,
        "service.app.body_too_large",
        before,
    )
    # The same without a Content-Length: the body is counted as it arrives.
    host, port = "127.0.0.1", service.port
    conn = http.client.HTTPConnection(host, port, timeout=60)
    conn.putrequest("POST", "/submissions")
    conn.putheader("Authorization", f"Bearer {service.token(sha='4' * 40)}")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    for _ in range(20):
        conn.send(b"400\r\n" + b"y" * 1024 + b"\r\n")
    conn.send(b"0\r\n\r\n")
    reply = conn.getresponse()
    body = json.loads(reply.read())
    conn.close()
    assert reply.status == 413 and body["error"] == "service.app.body_too_large"
    assert recorded(service) == before


def test_a_repository_over_its_hourly_limit_is_recorded_dated_by_its_token_without_asking_github(service):
    """A flood spends nobody's quota but the newest push still counts: over the limit the push is
    recorded (the store grades the newest of those queued) with the token's time and a warning,
    and the service asks GitHub nothing more for it."""
    shas = [f"{n}" * 40 for n in (5, 6, 7)]
    for sha in shas:
        status, body, _ = service.post(service.token("luis", sha=sha))
        assert status == 202, body
    runs_before = sum(1 for entry in service.github.log if "/actions/runs/" in entry["path"])
    status, body, _ = service.post(service.token("luis", sha="8" * 40))
    assert status == 202 and body["state"] == "queued", body
    assert any("3 entregas en la última hora" in warning for warning in body["warnings"]), body
    assert sum(1 for entry in service.github.log if "/actions/runs/" in entry["path"]) == runs_before
    newest = next(one for one in service.store.submissions() if one.sha == "8" * 40)
    assert newest.time_source == "token"
    # The same commit again is answered from the record (nothing new is spent); others go on.
    # Its state is the record's: queued, or superseded once the service's fetcher has seen the newer
    # pushes (issue 33: older queued pushes are superseded at fetch time), whichever came first.
    again = service.post(service.token("luis", sha=shas[0]))
    assert again[0] == 200 and again[1]["state"] in ("queued", "superseded"), again
    assert service.post(service.token("sara", sha="9" * 40))[0] == 202


def test_github_down_is_said_plainly_as_try_again_later(service):
    """GitHub does not answer: the default branch cannot be known, so the push cannot be admitted
    (any branch would count); the learner reads that it is not their fault, and nothing is recorded."""
    service.github.fail_after(0)
    try:
        before = recorded(service)
        body = assert_refused(
            service,
            service.post(service.token("pablo", sha="0" * 40)),  # his branch not asked before
            503,
            "service.claims.branch_unknown",
            before,
        )
    finally:
        service.github.fail_after(None)
    assert "curso-tdc/tdc-pablo" in body["message"]
    assert service.post(service.token("pablo", sha="0" * 40))[0] == 202  # GitHub is back


def test_an_unknown_key_is_a_404_that_says_nothing_more(service):
    for path in ("/submissions/" + "A" * 32, "/s/" + "A" * 32, "/submissions/..%2Fx", "/s/x"):
        status, body, headers = service.get(path)
        assert status == 404, path
        if isinstance(body, dict):
            assert body == {
                "error": "service.app.not_found",
                "message": i18n.translate("service.app.not_found", "es"),
            }
        else:
            assert i18n.translate("service.page.not_found", "es") in body


# ------------------------------------------------------------------------------ the verdict


def graded_result(course) -> str:
    """A grade of lesson 01 as the worker records it: quiz answers right, wrong and blank, a
    message with markup, and a message far too long."""
    lesson = course.lesson("01")
    checks = []
    for spec in lesson.checks:
        status, feedback = Status.PASSED, Feedback()
        if spec.id == "quiz-2":
            status, feedback = Status.FAILED, Feedback.of(message("lesson01.quiz_wrong_2", given="c"))
        elif spec.id == "quiz-3":
            status, feedback = Status.FAILED, Feedback.of(message("quiz.blank", n=3))
        elif not spec.id.startswith("quiz-") and not checks:
            status, feedback = Status.FAILED, Feedback.of("<script>alert('x')</script> " + "9.99 " * 20000)
        score = float(spec.points) if status is Status.PASSED else 0.0
        checks.append(CheckResult(spec.id, spec.todo, status, score, float(spec.points), feedback))
    result = CourseResult(
        course.name, "es", 1234, [LessonResult(lesson.id, lesson.slug, dict(lesson.title), lesson.xp, checks)]
    )
    return render_json(result, "es")


def test_a_graded_submission_shows_the_official_grade_as_a_copy_with_quiz_answers_counted_only(service):
    course = load_course(ROOT / "course.yml")
    status, body, _ = service.post(service.token("ana", sha="c" * 40))
    assert status == 202
    submission = service.store.by_key(body["submission"])
    assert service.store.complete(
        submission.id,
        "a-test-worker",
        status="done",
        result_json=graded_result(course),
        graders_hash="h" * 64,
        seed=1234,
    )
    status, verdict, headers = service.get(f"/submissions/{body['submission']}")
    assert status == 200 and "Retry-After" not in headers
    data = json.loads(graded_result(course))
    assert verdict["state"] == "done" and verdict["official"] is True
    assert (verdict["score"], verdict["max"]) == (data["score"], data["max_score"])
    title = i18n.translate("service.verdict.title", "es")
    assert verdict["text"].startswith(title) and body["page"] in verdict["text"]
    assert title in verdict["markdown"] and f"]({body['page']})" in verdict["markdown"]
    for shown in (verdict["text"], verdict["markdown"]):
        assert "Preguntas: 1 de 3 correctas" in shown
        assert i18n.translate("quiz.blank", "es", n=3) in shown  # about the file, not the key
        assert "quiz-2" not in shown and "'c'" not in shown and "Repasa en el README" not in shown
        assert "caracteres más, recortados" in shown and shown.count("9.99") < 1000
    assert "<script>" not in verdict["markdown"] and "&lt;script&gt;" in verdict["markdown"]  # inert

    status, page, _ = service.get(f"/s/{body['submission']}")
    assert status == 200 and title in page and "h" * 64 in page and "1234" in page
    assert "&lt;script&gt;" in page and "<script>" not in page
    assert "Preguntas: 1 de 3 correctas" in page and "quiz-2" not in page
    assert 'http-equiv="refresh"' not in page

    status, english, _ = service.get(f"/submissions/{body['submission']}?lang=en")
    assert english["text"].startswith(i18n.translate("service.verdict.title", "en"))
    assert "Questions: 1 of 3 right" in english["text"]
    status, page, _ = service.get(f"/s/{body['submission']}?lang=en")
    assert '<html lang="en">' in page and html.escape(i18n.translate("service.page.footer", "en")) in page


# ------------------------------------------------------------------------------ start-up


@pytest.mark.parametrize(
    "change, key",
    [
        (("--public-url", "http://grader.example.org"), "service.serve.public_url_not_https"),
        (("--public-url", "https://grader.example.org/"), "service.serve.public_url_shape"),
        (("--issuer", "http://issuer.example.org"), "service.serve.issuer_not_https"),
        (("--clone-url", "https://github.com/repo.git"), "service.serve.clone_url_template"),
        (("--workers", "-1"), "service.serve.bad_number"),
    ],
)
def test_a_configuration_the_service_must_not_start_with_is_refused(service, change, key):
    args = service.args()
    index = args.index(change[0]) if change[0] in args else None
    if index is None:
        args += list(change)
    else:
        args[index + 1] = change[1]
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=WAIT)
    assert proc.returncode == 2, proc.stderr
    first = i18n.translate(key, "es").split("{")[0]
    assert proc.stderr.startswith("autograder serve: ") and first.strip() in proc.stderr, proc.stderr


def test_without_a_roster_the_service_does_not_start(service):
    args = service.args()
    args[args.index("--roster") : args.index("--roster") + 2] = []
    proc = subprocess.run(
        args,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=WAIT,
        env={k: v for k, v in os.environ.items() if not k.startswith("AUTOGRADER_SERVE_")},
    )
    assert proc.returncode == 2 and "--roster" in proc.stderr and "AUTOGRADER_SERVE_ROSTER" in proc.stderr


def test_a_public_url_with_a_path_serves_below_it_and_options_come_from_the_environment(service):
    """Behind a proxy at https://host/corrector the routes live below /corrector (the proxy passes
    the path as it is), the links carry it, and the tokens' audience is that whole URL. The
    roster and the public URL come from $AUTOGRADER_SERVE_ROSTER and _PUBLIC_URL here."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/corrector"
    args = service.args("--workers", "0")
    for option in ("--roster", "--public-url", "--port"):
        at = args.index(option)
        del args[at : at + 2]
    args += ["--port", str(port), "--data", str(service.base / "otro")]
    env = {**os.environ, "AUTOGRADER_SERVICE_TOKEN": TOKEN}
    env.update(AUTOGRADER_SERVE_ROSTER=str(service.roster), AUTOGRADER_SERVE_PUBLIC_URL=url)
    log = open(service.base / "prefix.log", "w")
    proc = subprocess.Popen(args, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
    log.close()
    try:
        end = time.monotonic() + WAIT
        while True:
            assert proc.poll() is None and time.monotonic() < end, (service.base / "prefix.log").read_text()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5):
                    break
            except OSError:
                time.sleep(0.1)
        repo = service.repos["ana"]
        token = service.issuer.mint(
            aud=url, repository=repo["full_name"], repository_id=str(repo["id"]), sha=SHA
        )
        request = urllib.request.Request(
            url + "/submissions", data=b"", headers={"Authorization": f"Bearer {token}"}, method="POST"
        )
        status, body, _ = answer(request)
        assert status == 202, body
        assert body["page"].startswith(url + "/s/") and body["poll"].startswith(url + "/submissions/")
        assert answer(urllib.request.Request(body["poll"]))[1]["state"] == "queued"
        status, _, _ = answer(
            urllib.request.Request(f"http://127.0.0.1:{port}/submissions/{body['submission']}")
        )
        assert status == 404  # nothing outside the public URL's path
    finally:
        proc.terminate()
        proc.wait(timeout=60)


@pytest.mark.parametrize("state", ["queued", "grading", "superseded", "done"])
def test_a_submission_without_a_grade_yet_says_what_it_waits_for(state):
    """The verdict before a result is readable: one sentence and the link, no score (a "done"
    read a moment before its result is said as grading)."""
    from datetime import datetime, timezone

    from autograder.service.store import Submission
    from autograder.service.verdict import verdict

    now = datetime.now(timezone.utc)
    fields = dict.fromkeys(Submission.__dataclass_fields__)
    fields.update(id=1, page_key="k" * 32, learner="ana", sha=SHA, state=state, warnings_json="[]")
    fields.update(submitted_at=now, received_at=now, attempts=0)
    course = load_course(ROOT / "course.yml")
    for lang in i18n.LANGUAGES:
        shown = verdict(
            Submission(**fields), None, page="https://grader.example.org/s/kkk", lang=lang, course=course
        )
        said = i18n.translate(f"service.verdict.{'grading' if state == 'done' else state}", lang)
        assert shown.state == ("grading" if state == "done" else state) and shown.score is None
        assert shown.text.startswith(said) and "https://grader.example.org/s/kkk" in shown.text
        assert "](https://grader.example.org/s/kkk)" in shown.markdown


def test_a_log_format_neither_text_nor_json_stops_serve_and_worker_saying_which(service, tmp_path):
    """AUTOGRADER_SERVE_LOG_FORMAT picks the logs' shape (service/logs.py) for serve and for
    `autograder worker` alike; another word stops either before anything starts."""
    env = {**os.environ, "AUTOGRADER_SERVE_LOG_FORMAT": "xml"}
    first = i18n.translate("service.ops.log_format", "es").split("{")[0].strip()
    serve = subprocess.run(service.args(), cwd=ROOT, capture_output=True, text=True, timeout=WAIT, env=env)
    assert serve.returncode == 2 and first in serve.stderr and "xml" in serve.stderr, serve.stderr
    worker = subprocess.run(
        [sys.executable, "-m", "autograder", "worker", "--database-url", f"sqlite:///{tmp_path / 'w.db'}"]
        + ["--data", str(tmp_path / "w")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=WAIT,
        env=env,
    )
    assert worker.returncode == 2 and first in worker.stderr and "xml" in worker.stderr, worker.stderr
