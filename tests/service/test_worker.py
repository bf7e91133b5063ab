"""The service's workers as real processes: `run_workers` in a subprocess (Huey's consumer, a warm
grading process) over a SQLite store, grading lesson 01 with the course's engine the learners'
commits that the service's fetcher (autograder/service/archiver.py, run here in the test's own
process as `serve` runs it) fetched from real bare git repositories (file://,
`uploadpack.allowAnySHA1InWant`, as autograder/service/fetch.py fetches a sha) and stored as
archives with the submissions.

Shown here: a queued submission fetched, graded with a fresh seed and recorded once, with the
graders' hash, the same result as `autograder grade` on those files and that seed; a wake-up
never sent costs only latency (the timer finds the submission); a commit the fetch cannot get is
an error result that says so; a grading process killed mid-grading costs that submission only;
a worker process killed with SIGKILL mid-grading loses nothing: after its lease expires another
worker grades the submission, one result recorded; one stopped with SIGTERM (a restart) records
nothing for the submission it was grading, which the next worker grades.

The worker of the first tests is started once for the module; the SIGKILL test starts its own
two. Waits are bounded (a hang fails instead of blocking the run), never asserted on."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml
from support.processes import alive, children_of, descendants
from support.project import ROOT
from support.service_repos import named, slow_start, wait_for
from support.variants import solution_files

from autograder.cohort.outputs import Say
from autograder.cohort.roster import Allowed
from autograder.core import i18n
from autograder.core.manifest import load_course
from autograder.core.roster import Learner
from autograder.service.archiver import Archiver, ArchiverConfig
from autograder.service.claims import Admitted, Identity
from autograder.service.queue import make_queue, wake
from autograder.service.store import Result, Store, Submission
from autograder.service.worker import graders_hash

LESSON = "01"
WAIT = 300  # seconds: an outer bound on any one wait, so that a hang fails the test
DIGITS = str(random.SystemRandom().randrange(10**9, 10**10))
GIT = [
    "git",
    "-c",
    "user.name=Alumna",
    "-c",
    "user.email=alumna@example.org",
    "-c",
    "init.defaultBranch=main",
]


@dataclass(frozen=True)
class When:
    """A submission time as autograder/service/github_lookup.py's SubmissionTime has it."""

    at: datetime
    source: str = "run"


class Remotes:
    """Learners' repositories as bare git repositories under one folder, fetchable by sha over
    file:// (uploadpack.allowAnySHA1InWant), readable by the unprivileged user git runs as."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def push(self, repository: str, files: dict[str, str]) -> str:
        """Commit exercises/01-.../ with `files` to `repository` (owner/name); its sha."""
        bare = self.root / f"{repository}.git"
        work = self.root / "work" / repository
        if not bare.exists():
            bare.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run([*GIT, "init", "-q", "--bare", str(bare)], check=True)
            subprocess.run(["git", "config", "uploadpack.allowAnySHA1InWant", "true"], cwd=bare, check=True)
            subprocess.run([*GIT, "clone", "-q", str(bare), str(work)], check=True, capture_output=True)
        folder = work / "exercises" / load_course(ROOT / "course.yml").lesson(LESSON).folder
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for name, text in files.items():
            (folder / name).write_text(text, encoding="utf-8")
        subprocess.run([*GIT, "add", "-A"], cwd=work, check=True)
        subprocess.run([*GIT, "commit", "-q", "-m", "entrega"], cwd=work, check=True)
        subprocess.run([*GIT, "push", "-q", "--force", "origin", "HEAD:main"], cwd=work, check=True)
        subprocess.run(["chmod", "-R", "a+rX", str(self.root)], check=True)
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=work, check=True, capture_output=True, text=True
        ).stdout.strip()


class Service:
    """The store, the queue and the folders one or more worker processes share."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.data = base / "servicio"
        self.data.mkdir()
        self.remotes = Remotes(base / "remotes")
        self.store = Store(f"sqlite:///{self.data / 'servicio.db'}")
        self.store.create()
        self.queue = make_queue(None, self.data)
        self.repository_ids: dict[str, int] = {}
        self.workers: list[subprocess.Popen] = []
        course = load_course(ROOT / "course.yml")
        lessons = [course.lesson(LESSON)]
        self.fetcher = Archiver(
            ArchiverConfig(
                data_dir=self.data,
                url_template=f"file://{self.remotes.root}/{{repository}}.git",
                allowed=Allowed(schemes=("file",), hosts=()),
            ),
            self.store,
            course,
            lessons,
            graders_hash(course, lessons, "es"),
            None,
            Say("es"),
            wake=lambda: wake(self.queue) if self.send_wakes else None,
        )
        self.send_wakes = True  # the wake-up the fetcher sends once a submission is claimable
        self.fetcher.start()

    def start_worker(
        self, *, lease_s: float, max_attempts: int = 3, env: dict[str, str] | None = None
    ) -> subprocess.Popen:
        config = {
            "course_file": str(ROOT / "course.yml"),
            "database_url": self.store.url,
            "data_dir": str(self.data),
            "lease_s": lease_s,
            "max_attempts": max_attempts,
        }
        script = (
            "import json, sys\n"
            "from pathlib import Path\n"
            "from autograder.service.worker import WorkerConfig, run_workers\n"
            "c = json.loads(sys.argv[1])\n"
            "run_workers(WorkerConfig(course_file=Path(c['course_file']), database_url=c['database_url'],\n"
            "    queue_url=None, data_dir=Path(c['data_dir']), workers=1, lease_s=c['lease_s'],\n"
            "    max_attempts=c['max_attempts'], lessons=('01',)))\n"
        )
        log = open(self.base / f"worker-{len(self.workers)}.log", "w")
        proc = subprocess.Popen(
            [sys.executable, "-c", script, json.dumps(config)],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "AUTOGRADER_LANG": "es", **(env or {})},
        )
        log.close()
        self.workers.append(proc)
        return proc

    def log(self) -> str:
        return "\n".join(
            p.read_text(encoding="utf-8", errors="replace") for p in sorted(self.base.glob("*.log"))
        )

    def submit(self, learner: str, files: dict[str, str], *, send_wake: bool = True) -> Submission:
        """Push `files` as `learner`'s new commit and record it as the app does (then wake)."""
        repository = f"curso/{learner}"
        repository_id = self.repository_ids.setdefault(learner, 5000 + len(self.repository_ids))
        sha = self.remotes.push(repository, files)
        return self.record(learner, repository_id, sha, send_wake=send_wake)

    def record(self, learner: str, repository_id: int, sha: str, *, send_wake: bool = True) -> Submission:
        now = datetime.now(timezone.utc)
        ident = Identity(
            repository_id=repository_id,
            repository=f"curso/{learner}",
            repository_owner="curso",
            sha=sha,
            ref="refs/heads/main",
            event_name="push",
            run_id=int(time.time() * 1000),
            run_attempt=1,
            issued_at=now,
            token_id=f"jti-{sha}",
            actor=learner,
        )
        admitted = Admitted(ident, Learner(learner, repository_id=repository_id))
        self.send_wakes = send_wake
        submission, new = self.store.record(admitted=admitted, submitted=When(now), received_at=now)
        assert new
        return submission

    def result(self, submission: Submission, seconds: float = WAIT) -> Result:
        return wait_for(
            lambda: self.store.result(submission.id),
            f"a result for submission {submission.id}\n{self.log()}",
            seconds,
        )

    def stop(self) -> None:
        for proc in self.workers:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)  # Huey's graceful stop
        for proc in self.workers:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.fetcher.stop()
        self.store.close()


def make_service() -> Service:
    # Outside pytest's private temporary folder: git runs as an unprivileged user when we are
    # root, and must reach the remotes and the data folder.
    base = Path(tempfile.mkdtemp(prefix="autograder-service-test-"))
    os.chmod(base, 0o755)
    return Service(base)


@pytest.fixture(scope="module")
def course():
    return load_course(ROOT / "course.yml")


@pytest.fixture(scope="module")
def solved(course) -> dict[str, str]:
    return solution_files(course.lesson(LESSON))


@pytest.fixture(scope="module")
def service():
    """One worker process for the module (two attempts before "worker lost")."""
    running = make_service()
    running.start_worker(lease_s=10, max_attempts=2)
    try:
        yield running
    finally:
        running.stop()
        shutil.rmtree(running.base, ignore_errors=True)


def checks(result: Result) -> dict[str, str]:
    data = json.loads(result.result_json)
    return {check["id"]: check["status"] for lesson in data["lessons"] for check in lesson["checks"]}


def messages(result: Result) -> list[str]:
    data = json.loads(result.result_json)
    return [check["message"] for lesson in data["lessons"] for check in lesson["checks"]]


# ------------------------------------------------------------------------------ grading


def test_a_submission_is_fetched_graded_with_a_fresh_seed_and_recorded_once(
    service, course, solved, tmp_path
):
    first = service.submit("ana", solved)
    result = service.result(first)
    assert result.status == "done" and result.error is None, service.log()
    assert set(checks(result).values()) == {"passed"}, checks(result)
    data = json.loads(result.result_json)
    assert data["seed"] == result.seed and isinstance(result.seed, int)
    assert result.graders_hash == graders_hash(course, [course.lesson(LESSON)], "es")
    assert service.store.get(first.id).state == "done"

    # The same as `autograder grade` on those files with that seed.
    files = tmp_path / "ana"
    for name, text in solved.items():
        (files / name).parent.mkdir(parents=True, exist_ok=True)
        (files / name).write_text(text, encoding="utf-8")
    graded = subprocess.run(
        [sys.executable, "-m", "autograder", "grade", LESSON, "--submission", str(files)]
        + ["--seed", str(result.seed), "--format", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert graded.returncode == 0, graded.stderr
    assert json.loads(graded.stdout) == data

    # A new commit of the same learner: graded too, with a seed of its own.
    key = yaml.safe_load(solved["quiz.yml"])
    wrong = "".join(
        f"{question}: {'b' if str(answer).strip() == 'a' else 'a'}\n" for question, answer in key.items()
    )
    wrong_quiz = {**solved, "quiz.yml": wrong}
    second = service.submit("ana", wrong_quiz)
    again = service.result(second)
    assert again.status == "done" and again.seed != result.seed
    statuses = checks(again)
    assert statuses.pop("quiz-1") == statuses.pop("quiz-2") == statuses.pop("quiz-3") == "failed"
    assert set(statuses.values()) == {"passed"}
    assert service.store.result(first.id) == result  # the first result stays as it was


def test_a_wake_up_never_sent_costs_latency_only(service, solved):
    """The app died between recording and waking (or the queue lost the wake-up): the workers'
    timer finds the submission in the store."""
    quiet = service.submit("bea", solved, send_wake=False)
    assert service.result(quiet).status == "done"


def test_a_commit_the_fetch_cannot_get_is_an_error_result_that_says_so(service, solved):
    service.submit("carla", solved)  # the repository exists; the commit below does not
    missing = service.record("carla", service.repository_ids["carla"], "0123456789abcdef" * 2 + "01234567")
    result = service.result(missing)
    assert result.status == "error" and result.error == "service.worker.fetch_failed", service.log()
    assert set(checks(result).values()) == {"error"}
    prefix = i18n.translate("service.worker.fetch_failed", "es", reason="").strip()
    assert all(message.startswith(prefix) for message in messages(result)), messages(result)
    assert service.store.get(missing.id).state == "error"


def test_a_grading_process_killed_mid_grading_costs_only_that_submission(service, solved):
    """dario's code sleeps at import (tagged, so the test sees grading begin). Meanwhile the
    lease is renewed; then his grading process is killed from outside: an error for him, and a
    fresh grading process grades eva."""
    marker = f"g{DIGITS}"
    worker = service.workers[0]
    doomed = service.submit("dario", {**solved, "data.py": slow_start(marker, 30) + solved["data.py"]})
    wait_for(lambda: named(marker), "dario's grading to begin")
    # While it grades, the heartbeat renews the lease (its first expiry is pushed back).
    claimed = service.store.get(doomed.id)
    assert claimed.state == "grading" and claimed.attempts == 0
    renewed = wait_for(
        lambda: (now := service.store.get(doomed.id)).lease_expires > claimed.lease_expires and now,
        "the lease to be renewed",
    )
    assert renewed.state == "grading" and renewed.worker == claimed.worker and renewed.attempts == 0
    graders = [
        pid for pid in children_of(worker.pid) if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]
    assert len(graders) == 1, graders
    os.kill(graders[0], signal.SIGKILL)  # as the kernel's OOM killer would
    result = service.result(doomed)
    assert result.status == "error" and result.error == "service.worker.crashed"
    assert set(checks(result).values()) == {"error"}
    assert all("SIGKILL" in message for message in messages(result))

    # A fresh grading process grades the next submission.
    after = service.submit("eva", solved)
    assert service.result(after).status == "done", service.log()
    assert worker.poll() is None
    wait_for(lambda: not named(marker), "dario's sleeping worker to go")


# ------------------------------------------------------------------------------ a lost worker


def test_a_worker_killed_or_stopped_mid_grading_loses_nothing_and_one_result_is_recorded(solved):
    # The killed worker's lease is short, so that the test waits little for it to lapse; the
    # others' are longer, so that a loaded machine never delays their heartbeats past theirs.
    running = make_service()
    try:
        first = running.start_worker(lease_s=3)
        marker = f"k{DIGITS}"
        submission = running.submit("fede", {**solved, "data.py": slow_start(marker, 4) + solved["data.py"]})
        wait_for(lambda: named(marker), "fede's grading to begin\n" + running.log())
        holder = running.store.get(submission.id)
        assert holder.state == "grading" and holder.worker.startswith(f"{os.uname().nodename}:{first.pid}:")
        tree = descendants(first.pid)
        first.kill()  # SIGKILL: no goodbye, its lease stays in the store
        first.wait()
        assert running.store.result(submission.id) is None  # it was killed mid-grading

        second = running.start_worker(lease_s=10)
        result = running.result(submission)
        assert result.status == "done" and set(checks(result).values()) == {"passed"}, running.log()
        assert result.worker.startswith(f"{os.uname().nodename}:{second.pid}:")
        final = running.store.get(submission.id)
        assert final.state == "done" and final.attempts == 1  # one lease expired, then graded
        assert [s.id for s in running.store.submissions()] == [submission.id]
        # Nothing of the killed worker outlives it (its grading process, zygote, sandboxes).
        wait_for(lambda: not alive(tree), f"the killed worker's processes to end: {sorted(alive(tree))}", 60)

        # Stopped (SIGTERM, as a service being restarted) mid-grading: no error is recorded for
        # the submission it was grading; the next worker grades it.
        marker = f"t{DIGITS}"
        stopped = running.submit("gala", {**solved, "data.py": slow_start(marker, 4) + solved["data.py"]})
        wait_for(lambda: named(marker), "gala's grading to begin\n" + running.log())
        second.terminate()
        assert second.wait(timeout=60) == 0, running.log()
        assert running.store.result(stopped.id) is None and running.store.get(stopped.id).state == "grading"
        third = running.start_worker(lease_s=10)
        result = running.result(stopped)
        assert result.status == "done" and result.worker.startswith(f"{os.uname().nodename}:{third.pid}:")
        assert running.store.get(stopped.id).attempts == 1
    finally:
        running.stop()
        shutil.rmtree(running.base, ignore_errors=True)


def test_a_worker_whose_grading_processes_cannot_start_stops_and_leaves_the_submission_queued(solved):
    """A broken installation (here: torch cannot be imported by the grading processes) is no
    submission's fault: the worker stops with status 1 and says why, and the submission it took
    goes back to the queue without spending an attempt, for a worker that can grade."""
    running = make_service()
    broken = running.base / "broken"
    (broken / "torch").mkdir(parents=True)
    (broken / "torch" / "__init__.py").write_text('raise ImportError("torch roto a propósito")\n')
    try:
        submission = running.submit("hugo", solved)
        worker = running.start_worker(lease_s=10, env={"PYTHONPATH": f"{broken}:{ROOT}"})
        assert worker.wait(timeout=WAIT) == 1, running.log()
        assert "torch roto a propósito" in running.log()
        assert "se detiene" in running.log()
        left = running.store.get(submission.id)
        assert left.state == "queued" and left.attempts == 0 and left.worker is None, running.log()
        assert running.store.result(submission.id) is None
    finally:
        running.stop()
        shutil.rmtree(running.base, ignore_errors=True)
