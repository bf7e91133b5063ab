"""The whole grading service as the instructor runs it: `autograder serve` in a process of its own
(the app in uvicorn, one worker process, SQLite in its data folder), started once for the module,
a real OIDC issuer made here (support.oidc_issuer.LocalIssuer) and the stand-in of GitHub's API
(support.fake_github.FakeGitHub: each learner's repository by id, its default branch). Learners'
repositories are real bare git repositories that the service fetches a sha from over file://
(uploadpack.allowAnySHA1InWant, as GitHub serves a sha). Lesson 01 only (cheap to grade).

Shown here: a learner's push, submitted with a valid token, is fetched and graded with the hidden
graders, the same result as `autograder grade` on those files with the seed the service recorded,
and the learner's verdict and page show it; a learner repository whose own autograder/ package,
conftest.py files and graders are hostile changes nothing (nothing of it runs, the result is
that of the lesson's files alone); the service killed with SIGKILL, with one submission grading
and another queued, then started again: nothing lost, one result each; the worker process killed
with SIGKILL mid-grading: the command starts another, which grades the submission once its lease
has lapsed. Waits are bounded (a hang fails instead of blocking the run), never asserted on."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from support.fake_github import TOKEN, FakeGitHub
from support.oidc_issuer import LocalIssuer
from support.processes import alive, children_of, descendants
from support.project import ROOT
from support.service_repos import Remotes, named, slow_start, wait_for
from support.variants import solution_files

from autograder.core import i18n
from autograder.core.manifest import load_course
from autograder.service.store import Result, Store, Submission

LESSON = "01"
LEASE = 5  # seconds: a killed worker's submission is graded again this long after its last beat
WAIT = 300  # seconds: an outer bound on any one wait, so that a hang fails the test
LEARNERS = ("ana", "bea", "carla", "dario", "eva", "fede", "gil", "hugo", "ines")


class Service:
    """`autograder serve` (one worker) over a data folder that outlives its restarts."""

    def __init__(self, base: Path, issuer: LocalIssuer, github: FakeGitHub, port: int) -> None:
        self.base, self.issuer, self.github, self.port = base, issuer, github, port
        self.url = f"http://127.0.0.1:{port}"
        self.data = base / "servicio"
        self.remotes = Remotes(base / "remotes")
        self.repos = {name: github.add_repo(f"curso/{name}") for name in LEARNERS}
        lines = ["version: 1", "learners:"]
        for name in LEARNERS:
            lines += [
                f"  - id: {name}",
                f"    repository: curso/{name}",
                f"    repository_id: {self.repos[name]['id']}",
            ]
        self.roster = base / "roster.yml"
        self.roster.write_text("\n".join(lines) + "\n", encoding="utf-8")
        self.store = Store(f"sqlite:///{self.data / 'servicio.db'}")
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        log = open(self.base / f"serve-{self.starts}.log", "w")
        env = {**os.environ, "AUTOGRADER_SERVICE_TOKEN": TOKEN}
        env.pop("AUTOGRADER_LANG", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "autograder", "--course", str(ROOT / "course.yml"), "serve"]
            + ["--roster", str(self.roster), "--public-url", self.url, "--issuer", self.issuer.url]
            + ["--github-api", self.github.url, "--data", str(self.data), "--port", str(self.port)]
            + ["--workers", "1", "--lease", str(LEASE), "--lessons", LESSON]
            + ["--clone-url", f"file://{self.remotes.root}/{{repository}}.git", "--allow-scheme", "file"],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own process group: a test can kill the whole service at once
        )
        log.close()

        def answers() -> bool:
            assert self.proc.poll() is None, self.log()
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=5) as reply:
                    return reply.status == 200
            except OSError:
                return False

        wait_for(answers, "the service to answer /healthz")

    def log(self) -> str:
        return "\n".join(
            p.read_text(encoding="utf-8", errors="replace") for p in sorted(self.base.glob("serve-*.log"))
        )

    def worker(self) -> int:
        """The pid of the command's worker process (its child that multiprocessing spawned, not
        multiprocessing's resource tracker)."""
        found = [
            pid
            for pid in children_of(self.proc.pid)
            if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
        ]
        assert len(found) == 1, found
        return found[0]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # Ctrl-C
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.store.close()

    def submit(self, learner: str, files: dict[str, str]) -> dict:
        """Push `files` to the learner's repository and submit that commit as its workflow would."""
        sha = self.remotes.push(f"curso/{learner}", files)
        repo = self.repos[learner]
        token = self.issuer.mint(repository=repo["full_name"], repository_id=str(repo["id"]), sha=sha)
        request = urllib.request.Request(
            self.url + "/submissions", data=b"", headers={"Authorization": f"Bearer {token}"}, method="POST"
        )
        with urllib.request.urlopen(request, timeout=60) as reply:
            assert reply.status == 202
            body = json.loads(reply.read())
        body["sha"] = sha
        return body

    def verdict(self, submitted: dict) -> dict:
        """The verdict once final (polled as the learner's job polls)."""

        def final():
            with urllib.request.urlopen(submitted["poll"], timeout=60) as reply:
                data = json.loads(reply.read())
            return data if data["state"] in ("done", "error") else None

        return wait_for(final, f"a verdict for {submitted['sha'][:12]}\n{self.log()}")

    def recorded(self, submitted: dict) -> tuple[Submission, Result]:
        submission = self.store.by_key(submitted["submission"])
        return submission, self.store.result(submission.id)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def course():
    return load_course(ROOT / "course.yml")


@pytest.fixture(scope="module")
def solved(course) -> dict[str, str]:
    folder = course.lesson(LESSON).folder
    return {
        f"exercises/{folder}/{name}": text for name, text in solution_files(course.lesson(LESSON)).items()
    }


@pytest.fixture(scope="module")
def service():
    # Outside pytest's private temporary folder: git runs as an unprivileged user when we are
    # root, and must reach the remotes and the data folder.
    base = Path(tempfile.mkdtemp(prefix="autograder-serve-test-"))
    os.chmod(base, 0o755)
    port = free_port()
    with LocalIssuer(audience=f"http://127.0.0.1:{port}") as issuer, FakeGitHub() as github:
        running = Service(base, issuer, github, port)
        try:
            running.start()
            yield running
        finally:
            running.stop()
            shutil.rmtree(base, ignore_errors=True)


def grade_locally(tmp_path: Path, files: dict[str, str], seed: int) -> dict:
    """`autograder grade LESSON --submission <the learner's exercises/> --seed SEED --format json`."""
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    graded = subprocess.run(
        [sys.executable, "-m", "autograder", "grade", LESSON, "--submission", str(tmp_path / "exercises")]
        + ["--seed", str(seed), "--format", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert graded.returncode == 0, graded.stderr
    return json.loads(graded.stdout)


def statuses(result_json: str) -> dict[str, str]:
    data = json.loads(result_json)
    return {check["id"]: check["status"] for lesson in data["lessons"] for check in lesson["checks"]}


def wrong_quiz(files: dict[str, str], course) -> dict[str, str]:
    """`files` with every quiz answer wrong."""
    name = f"exercises/{course.lesson(LESSON).folder}/quiz.yml"
    key = yaml.safe_load(files[name])
    wrong = "".join(f"{q}: {'b' if str(a).strip() == 'a' else 'a'}\n" for q, a in key.items())
    return {**files, name: wrong}


# ------------------------------------------------------------------------------ grading


def test_a_push_is_graded_with_the_hidden_graders_as_autograder_grade_grades_it(service, solved, tmp_path):
    submitted = service.submit("ana", solved)
    verdict = service.verdict(submitted)
    submission, result = service.recorded(submitted)
    assert verdict["state"] == "done" and result.status == "done", service.log()
    assert set(statuses(result.result_json).values()) == {"passed"}
    assert submission.sha == submitted["sha"] and submission.state == "done" and result.graders_hash

    local = grade_locally(tmp_path, solved, result.seed)
    assert json.loads(result.result_json) == local  # the same grade, with the seed the service drew
    assert (verdict["score"], verdict["max"]) == (local["score"], local["max_score"])
    title = i18n.translate("service.verdict.title", "es")
    assert verdict["text"].startswith(title) and submitted["page"] in verdict["text"]
    with urllib.request.urlopen(submitted["page"], timeout=60) as reply:
        page = reply.read().decode()
    assert title in page and submitted["sha"] in page and result.graders_hash in page


def test_a_hostile_autograder_in_the_learners_repository_changes_nothing(service, solved, course, tmp_path):
    """The learner's repository ships its own autograder/ (a package that would grade everything
    full marks and leave a mark where the service's own process could write it), conftest.py
    files at its root, in exercises/ and in the lesson's folder, and graders of its own: none of
    it is run or imported. The grade is that of the lesson's files alone."""
    mark = tempfile.mktemp(prefix="autograder-serve-pwned-", dir="/tmp")
    leave_mark = f"open({mark!r}, 'w').write('ran')\n"
    everything_passes = (
        leave_mark
        + "import pytest\n@pytest.hookimpl(tryfirst=True)\ndef pytest_runtest_call(item):\n    return True\n"
    )
    learner_files = wrong_quiz(solved, course)  # a grade that is not full marks
    folder = course.lesson(LESSON).folder
    hostile = {
        **learner_files,
        "autograder/__init__.py": leave_mark,
        "autograder/__main__.py": leave_mark + "print('{\"score\": 100}')\n",
        "autograder/cli.py": leave_mark,
        "autograder/graders/lesson01/test_batch.py": leave_mark + "def test_all():\n    pass\n",
        "conftest.py": everything_passes,
        "exercises/conftest.py": everything_passes,
        f"exercises/{folder}/conftest.py": everything_passes,
        f"exercises/{folder}/pytest.ini": "[pytest]\naddopts = -p no:cacheprovider\n",
        "sitecustomize.py": leave_mark,
    }
    submitted = service.submit("bea", hostile)
    verdict = service.verdict(submitted)
    _, result = service.recorded(submitted)
    assert verdict["state"] == "done", service.log()
    graded = statuses(result.result_json)
    assert [graded.pop(f"quiz-{n}") for n in (1, 2, 3)] == ["failed"] * 3
    assert set(graded.values()) == {"passed"}
    assert json.loads(result.result_json) == grade_locally(tmp_path, learner_files, result.seed)
    assert not os.path.exists(mark), "the learner's code ran outside the sandbox"


def test_the_verdict_shows_what_failed_and_nothing_of_the_graders_or_the_quiz_key(service, solved, course):
    """A learner whose targets are not shifted and whose quiz answers are all wrong reads why
    their check failed, and the quiz as a count: no line of the hidden graders or of the
    reference code, no word of which answer is wrong."""
    folder = course.lesson(LESSON).folder
    data = f"exercises/{folder}/data.py"
    shifted = "y = torch.stack([data[i + 1 : i + 1 + block_size] for i in ix])"
    assert solved[data].count(shifted) == 1
    buggy = {
        **wrong_quiz(solved, course),
        data: solved[data].replace(shifted, shifted.replace("i + 1 :", "i :")),
    }
    submitted = service.submit("hugo", buggy)
    verdict = service.verdict(submitted)
    _, result = service.recorded(submitted)
    assert verdict["state"] == "done" and statuses(result.result_json)["targets-shift"] == "failed"
    with urllib.request.urlopen(submitted["page"], timeout=60) as reply:
        page = reply.read().decode()
    shown = {"text": verdict["text"], "markdown": verdict["markdown"], "page": page}
    for where, text in shown.items():
        assert "targets-shift" in text and "Preguntas: 0 de 3 correctas" in text, where
        assert "quiz-1" not in text and "README" not in text, where  # the wrong answers' hints
    graders = ROOT / "autograder" / "graders" / course.lesson(LESSON).graders
    lines = {
        line.strip()
        for path in graders.rglob("*.py")
        for line in path.read_text(encoding="utf-8").splitlines()
        if len(line.strip()) >= 30
    }
    assert lines  # the check below is not vacuous
    for where, text in shown.items():
        leaked = [line for line in lines if line in text]
        assert not leaked, (where, leaked)


def test_a_commit_the_service_cannot_fetch_is_said_with_no_grade(service, solved):
    """A token for a commit that is not in the repository (pushed elsewhere, or forced away): the
    submission is recorded, the worker cannot fetch it, and the learner reads why, with no grade."""
    service.remotes.push("curso/ines", solved)
    repo = service.repos["ines"]
    token = service.issuer.mint(
        repository=repo["full_name"], repository_id=str(repo["id"]), sha="0123456789" * 4
    )
    request = urllib.request.Request(
        service.url + "/submissions", data=b"", headers={"Authorization": f"Bearer {token}"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=60) as reply:
        submitted = {**json.loads(reply.read()), "sha": "0123456789" * 4}
    verdict = service.verdict(submitted)
    _, result = service.recorded(submitted)
    assert verdict["state"] == "error" and result.error == "service.worker.fetch_failed", service.log()
    assert verdict["score"] is None and verdict["max"] is None
    assert verdict["text"].startswith(i18n.translate("service.verdict.title_error", "es"))
    said = i18n.translate("service.worker.fetch_failed", "es", reason="").strip()
    assert said in verdict["text"] and said in verdict["markdown"]
    assert verdict["text"].count(said) == 1  # said once, not once per check


# ------------------------------------------------------------------------------ crashes


def test_the_service_killed_and_started_again_loses_nothing(service, solved, course):
    """SIGKILL to the whole service (app, worker, grading processes) while one submission is
    grading and another waits: after a restart both are graded, one result each."""
    marker = f"s{os.getpid()}"
    folder = course.lesson(LESSON).folder
    data = f"exercises/{folder}/data.py"
    slow = service.submit("carla", {**solved, data: slow_start(marker, 8) + solved[data]})
    waiting = service.submit("dario", solved)
    wait_for(lambda: named(marker), "carla's grading to begin\n" + service.log())
    tree = descendants(service.proc.pid)
    os.killpg(service.proc.pid, signal.SIGKILL)
    service.proc.wait()
    wait_for(lambda: not alive(tree), f"the killed service's processes to end: {sorted(alive(tree))}", 60)
    assert service.recorded(slow)[1] is None and service.recorded(waiting)[1] is None
    assert service.recorded(slow)[0].state == "grading"

    service.start()
    for submitted in (slow, waiting):
        verdict = service.verdict(submitted)
        submission, result = service.recorded(submitted)
        assert verdict["state"] == "done" and result.status == "done", service.log()
        assert set(statuses(result.result_json).values()) == {"passed"}
    assert service.recorded(slow)[0].attempts == 1  # its lease lapsed once, then it was graded
    mine = [s for s in service.store.submissions() if s.learner in ("carla", "dario")]
    assert sorted(s.sha for s in mine) == sorted((slow["sha"], waiting["sha"]))  # nothing more, nothing less


def test_a_worker_killed_mid_grading_is_replaced_and_the_submission_graded_once(service, solved, course):
    marker = f"w{os.getpid()}"
    folder = course.lesson(LESSON).folder
    data = f"exercises/{folder}/data.py"
    submitted = service.submit("eva", {**solved, data: slow_start(marker, 8) + solved[data]})
    wait_for(lambda: named(marker), "eva's grading to begin\n" + service.log())
    worker = service.worker()
    tree = descendants(worker)
    os.kill(worker, signal.SIGKILL)
    wait_for(lambda: not alive(tree | {worker}), "the killed worker's processes to end", 60)

    verdict = service.verdict(submitted)
    submission, result = service.recorded(submitted)
    assert verdict["state"] == "done" and result.status == "done", service.log()
    assert set(statuses(result.result_json).values()) == {"passed"}
    assert submission.attempts == 1 and service.proc.poll() is None
    assert service.worker() != worker  # the command started another
    assert [s.id for s in service.store.submissions() if s.learner == "eva"] == [submission.id]

    # The service goes on grading as before.
    after = service.submit("fede", solved)
    assert service.verdict(after)["state"] == "done"


def test_ctrl_c_stops_the_app_and_the_workers_cleanly(service):
    tree = descendants(service.proc.pid) | {service.proc.pid}
    service.proc.send_signal(signal.SIGINT)
    assert service.proc.wait(timeout=WAIT) == 0, service.log()
    wait_for(lambda: not alive(tree), f"the service's processes to end: {sorted(alive(tree))}", 60)
    assert service.log().rstrip().endswith(i18n.translate("service.serve.stopped", "es")), service.log()
    service.start()  # for the module's other tests, whatever their order


# ------------------------------------------------------------------------------ the export


def test_the_export_is_the_gradebook_and_csvs_of_each_learners_latest_grade(
    service, solved, course, tmp_path
):
    first = service.submit("gil", wrong_quiz(solved, course))
    service.verdict(first)
    latest = service.submit("gil", solved)
    service.verdict(latest)
    submission, result = service.recorded(latest)
    out = tmp_path / "notas"
    command = [sys.executable, "-m", "autograder", "--course", str(ROOT / "course.yml"), "serve"]
    command += ["--roster", str(service.roster), "--data", str(service.data), "--export", str(out)]
    env = {key: value for key, value in os.environ.items() if key != "AUTOGRADER_LANG"}
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=WAIT, env=env)
    assert done.returncode == 0, done.stderr
    assert (out / "gradebook.db").is_file() and (out / "report.md").is_file()
    rows = list(csv.DictReader(io.StringIO((out / "grades.csv").read_text(encoding="utf-8"))))
    mine = [row for row in rows if row["student_id"] == "gil"]
    assert len(mine) == 1, rows
    score = json.loads(result.result_json)["score"]
    assert float(mine[0]["score"]) == score and mine[0]["assignment"] == course.lesson(LESSON).folder
    assert mine[0]["timestamp"] == submission.submitted_at.strftime("%Y-%m-%d %H:%M:%S")
    assert json.loads((out / "results" / "gil.json").read_text(encoding="utf-8")) == json.loads(
        result.result_json
    )
    graded = {s.learner for s in service.store.submissions() if s.state in ("done", "error")}
    assert {row["student_id"] for row in rows} == graded
    # Every learner without a grade yet is named; gil has one. (moodle.csv's note may name gil:
    # the roster gives no e-mail for him.)
    missing = [line for line in done.stderr.splitlines() if "sin ninguna entrega corregida" in line]
    assert len(missing) == 1 and "gil" not in missing[0]

    # A grade-all folder is not overwritten with the service's grades.
    (tmp_path / "cohorte").mkdir()
    (tmp_path / "cohorte" / "run.json").write_text('{"course": "x", "seed": 1}', encoding="utf-8")
    command[-1] = str(tmp_path / "cohorte")
    refused = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=WAIT, env=env)
    assert refused.returncode == 2 and "grade-all" in refused.stderr
