"""The grading service across machines, as an instructor runs it for a large course: a real
redis-server (the queue) and a real PostgreSQL server (the store), started once for the module;
`autograder serve --workers 0` (the app and the fetcher: the only process holding the GitHub
credential) and two `autograder worker` processes, each in a data folder of its own, sharing no
folder with the service and started with no GitHub credential in their environment: they read
each submission's files from the archive the service stored with it. Learners' repositories
are real bare git repositories the service fetches a sha from over file://, a real OIDC issuer
signs their tokens (support.oidc_issuer), and the stand-in of GitHub's API dates them.
Lesson 01 only, leases of 3 s, at most 2 attempts.

Shown here: a burst of pushes graded once each, by both workers, each result the same as
`autograder grade` on those files with the seed recorded; a worker killed with SIGKILL
mid-grading and the service killed and started again: nothing lost, one result each; a
submission whose every attempt loses its worker (the test kills whichever worker the store
names as its holder) ends as the error "worker lost" after the last attempt, on its page and in
the export; the graders changed (a copy of the graders with one file edited, for the service
and a third worker): the workers of the old graders refuse the new tasks and say so (a log line,
"refused" in the workers table), `autograder regrade` queues the chosen learners' graded
submissions on the regrading lane, the old results kept beside the new (the export's
regraded.csv puts the previous score beside the current one), and a push queued after the
regrades is graded before any regrade claimed after it. Waits are bounded (a hang fails
instead of blocking the run), never asserted on."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml
from support.fake_github import TOKEN, FakeGitHub
from support.oidc_issuer import LocalIssuer
from support.project import ROOT
from support.servers import free_port, new_database, postgres, redis_url  # noqa: F401 - fixtures
from support.service_repos import Remotes, named, slow_start, wait_for
from support.variants import solution_files

from autograder.core import i18n
from autograder.core.manifest import load_course
from autograder.engine.grading import GRADERS_ROOT
from autograder.service.schema import LOST
from autograder.service.store import Result, Store, Submission

LESSON = "01"
LEASE = 3  # seconds
ATTEMPTS = 2  # --max-attempts of the workers
WAIT = 300  # seconds: an outer bound on any one wait, so that a hang fails the test
LEARNERS = ("ana", "bea", "carla", "dario", "eva", "fede", "gil", "hugo", "ines", "juan", "kike", "lola")
CREDENTIALS = (
    "AUTOGRADER_SERVICE_TOKEN",
    "GITHUB_TOKEN",
    "AUTOGRADER_GITHUB_APP_KEY",
    "AUTOGRADER_GITHUB_APP_ID",
)


class Cluster:
    """`autograder serve --workers 0` and `autograder worker` processes over Redis and PostgreSQL."""

    def __init__(
        self, base: Path, issuer: LocalIssuer, github: FakeGitHub, database: str, queue: str
    ) -> None:
        self.base, self.issuer, self.github = base, issuer, github
        self.database, self.queue = database, queue
        self.port = int(issuer.audience.rsplit(":", 1)[1])
        self.url = f"http://127.0.0.1:{self.port}"
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
        self.store = Store(database)
        self.serve: subprocess.Popen | None = None
        self.workers: dict[str, subprocess.Popen] = {}
        self.starts = 0

    def env(self, *, credential: bool, graders: Path | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in CREDENTIALS and k != "AUTOGRADER_LANG"}
        if credential:
            env["AUTOGRADER_SERVICE_TOKEN"] = TOKEN
        if graders is not None:
            env["AUTOGRADER_GRADERS"] = str(graders)
        return env

    def start_serve(self, graders: Path | None = None) -> None:
        self.starts += 1
        log = open(self.base / f"serve-{self.starts}.log", "w")
        self.serve = subprocess.Popen(
            [sys.executable, "-m", "autograder", "--course", str(ROOT / "course.yml"), "serve"]
            + ["--roster", str(self.roster), "--public-url", self.url, "--issuer", self.issuer.url]
            + [
                "--github-api",
                self.github.url,
                "--data",
                str(self.base / "servicio"),
                "--port",
                str(self.port),
            ]
            + ["--workers", "0", "--lease", str(LEASE), "--lessons", LESSON]
            + ["--database-url", self.database, "--queue-url", self.queue]
            + ["--clone-url", f"file://{self.remotes.root}/{{repository}}.git", "--allow-scheme", "file"],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env(credential=True, graders=graders),
            start_new_session=True,
        )
        log.close()

        def answers() -> bool:
            assert self.serve.poll() is None, self.log()
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=5) as reply:
                    return reply.status == 200
            except OSError:
                return False

        wait_for(answers, "the service to answer /healthz")

    def start_worker(self, slot: str, graders: Path | None = None) -> subprocess.Popen:
        """`autograder worker` in its own folder, with no GitHub credential in its environment."""
        data = self.base / f"worker-{slot}"
        log = open(self.base / f"worker-{slot}-{time.monotonic_ns()}.log", "w")
        proc = subprocess.Popen(
            [sys.executable, "-m", "autograder", "--course", str(ROOT / "course.yml"), "worker"]
            + ["--database-url", self.database, "--queue-url", self.queue, "--workers", "1"]
            + [
                "--lease",
                str(LEASE),
                "--max-attempts",
                str(ATTEMPTS),
                "--data",
                str(data),
                "--lessons",
                LESSON,
            ],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env(credential=False, graders=graders),
            start_new_session=True,  # its own group: the test kills it with its grading processes
        )
        log.close()
        self.workers[slot] = proc
        name = f"{os.uname().nodename}:{proc.pid}"
        wait_for(
            lambda: (
                proc.poll() is None
                and any(w.name == name and w.state != "stopped" for w in self.store.workers())
            ),
            f"worker {slot} to start\n{self.log()}",
        )
        return proc

    def kill(self, proc: subprocess.Popen) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()

    def slot_of(self, worker: str) -> str:
        """The slot of the worker named "host:pid:thread" in the store."""
        pid = int(worker.split(":")[1])
        return next(slot for slot, proc in self.workers.items() if proc.pid == pid)

    def log(self) -> str:
        return "\n".join(
            f"--- {p.name}\n" + p.read_text(encoding="utf-8", errors="replace")
            for p in sorted(self.base.glob("*.log"))
        )

    def submit(self, learner: str, files: dict[str, str]) -> dict:
        sha = self.remotes.push(f"curso/{learner}", files)
        repo = self.repos[learner]
        token = self.issuer.mint(repository=repo["full_name"], repository_id=str(repo["id"]), sha=sha)
        request = urllib.request.Request(
            self.url + "/submissions", data=b"", headers={"Authorization": f"Bearer {token}"}, method="POST"
        )
        with urllib.request.urlopen(request, timeout=60) as reply:
            assert reply.status == 202
            body = json.loads(reply.read())
        return {**body, "sha": sha, "files": files, "learner": learner}

    def submission(self, submitted: dict) -> Submission:
        return self.store.by_key(submitted["submission"])

    def final(self, submitted: dict) -> tuple[Submission, Result]:
        def done():
            submission = self.submission(submitted)
            return submission.state in ("done", "error") and submission

        submission = wait_for(done, f"a result for {submitted['learner']}\n{self.log()}")
        return submission, self.store.result(submission.id)

    def stop(self) -> None:
        for proc in [*self.workers.values(), self.serve]:
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in [*self.workers.values(), self.serve]:
            if proc is not None:
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    self.kill(proc)
        self.store.close()


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
def cluster(postgres, redis_url):  # noqa: F811 - the fixtures imported above
    base = Path(tempfile.mkdtemp(prefix="autograder-cluster-test-"))
    os.chmod(base, 0o755)
    port = free_port()
    with LocalIssuer(audience=f"http://127.0.0.1:{port}") as issuer, FakeGitHub() as github:
        running = Cluster(base, issuer, github, new_database(postgres), redis_url)
        try:
            running.start_serve()
            running.start_worker("a")
            running.start_worker("b")
            yield running
        finally:
            running.stop()
            shutil.rmtree(base, ignore_errors=True)


def grade_locally(tmp_path: Path, files: dict[str, str], seed: int) -> dict:
    """`autograder grade LESSON --submission <the learner's exercises/> --seed SEED --format json`."""
    shutil.rmtree(tmp_path / "local", ignore_errors=True)
    for name, text in files.items():
        (tmp_path / "local" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "local" / name).write_text(text, encoding="utf-8")
    graded = subprocess.run(
        [
            sys.executable,
            "-m",
            "autograder",
            "grade",
            LESSON,
            "--submission",
            str(tmp_path / "local" / "exercises"),
        ]
        + ["--seed", str(seed), "--format", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert graded.returncode == 0, graded.stderr
    return json.loads(graded.stdout)


def wrong_quiz(files: dict[str, str], course) -> dict[str, str]:
    name = f"exercises/{course.lesson(LESSON).folder}/quiz.yml"
    key = yaml.safe_load(files[name])
    return {**files, name: "".join(f"{q}: {'b' if str(a).strip() == 'a' else 'a'}\n" for q, a in key.items())}


def slowed(files: dict[str, str], course, marker: str, seconds: float) -> dict[str, str]:
    data = f"exercises/{course.lesson(LESSON).folder}/data.py"
    return {**files, data: slow_start(marker, seconds) + files[data]}


def holder(cluster: Cluster, submitted: dict) -> str:
    """The worker (host:pid:thread) grading the submission, once one does."""
    return wait_for(
        lambda: (s := cluster.submission(submitted)).state == "grading" and s.worker,
        f"{submitted['learner']}'s grading to begin\n{cluster.log()}",
    )


# ------------------------------------------------------------------------------ a burst


def test_a_burst_is_graded_once_each_by_both_workers_as_autograder_grade_grades_it(
    cluster, solved, course, tmp_path
):
    variants = [solved, wrong_quiz(solved, course)]
    burst = [cluster.submit(name, variants[n % 2]) for n, name in enumerate(LEARNERS[:6])]
    graded = [cluster.final(submitted) for submitted in burst]
    graders = set()
    for submitted, (submission, result) in zip(burst, graded):
        assert submission.state == "done" and result.status == "done", cluster.log()
        assert len(cluster.store.results_of(submission.id)) == 1 and submission.lane == "push"
        assert result.graders_hash == submission.graders_hash
        assert json.loads(result.result_json) == grade_locally(tmp_path, submitted["files"], result.seed)
        graders.add(result.worker.rsplit(":", 1)[0])
    names = {f"{os.uname().nodename}:{proc.pid}" for proc in cluster.workers.values()}
    assert graders == names, (graders, names)  # both workers graded, none else
    table = {w.name: w for w in cluster.store.workers()}
    assert all(
        table[name].state == "running" and table[name].graders_hash == result.graders_hash for name in names
    )
    # The workers never held the credential: their environment (and their children's) has none.
    for proc in cluster.workers.values():
        environ = Path(f"/proc/{proc.pid}/environ").read_bytes().split(b"\0")
        assert not any(entry.split(b"=", 1)[0].decode() in CREDENTIALS for entry in environ if entry)


# ------------------------------------------------------------------------------ crashes


def test_a_worker_killed_mid_grading_and_the_service_restarted_lose_nothing(cluster, solved, course):
    marker = f"d{os.getpid()}"
    slow = cluster.submit("gil", slowed(solved, course, marker, 6))
    waiting = cluster.submit("hugo", solved)
    held = holder(cluster, slow)
    wait_for(lambda: named(marker), "gil's grading to begin")
    slot = cluster.slot_of(held)
    cluster.kill(cluster.workers[slot])  # SIGKILL: no goodbye, its lease stays in the store
    cluster.kill(cluster.serve)  # and the service too, whatever it was fetching
    assert cluster.store.result(cluster.submission(slow).id) is None
    cluster.start_serve()
    cluster.start_worker(slot)
    for submitted in (slow, waiting):
        submission, result = cluster.final(submitted)
        assert submission.state == "done" and result.status == "done", cluster.log()
        assert len(cluster.store.results_of(submission.id)) == 1
    assert cluster.submission(slow).attempts >= 1  # its lease lapsed, then it was graded
    mine = [s for s in cluster.store.submissions() if s.learner in ("gil", "hugo")]
    assert sorted(s.sha for s in mine) == sorted((slow["sha"], waiting["sha"]))  # nothing more, nothing less


def test_a_submission_that_loses_every_worker_ends_as_worker_lost(cluster, solved, course, tmp_path):
    marker = f"l{os.getpid()}"
    doomed = cluster.submit("ines", slowed(solved, course, marker, 60))
    killed = []
    while cluster.submission(doomed).state not in ("error", "done"):
        current = cluster.submission(doomed)
        if current.state == "grading" and current.worker and current.worker not in killed:
            killed.append(current.worker)
            slot = cluster.slot_of(current.worker)
            cluster.kill(cluster.workers[slot])  # the test kills whichever worker holds it
            cluster.start_worker(slot)
        assert len(killed) <= ATTEMPTS, (killed, cluster.log())
        time.sleep(0.1)
    submission, result = cluster.final(doomed)
    assert len(killed) == ATTEMPTS and submission.attempts == ATTEMPTS, (killed, cluster.log())
    assert (submission.state, result.status, result.error) == ("error", "error", LOST)
    said = i18n.translate(LOST, "es", attempts=ATTEMPTS)
    with urllib.request.urlopen(doomed["page"], timeout=60) as reply:
        assert said in reply.read().decode()
    out = tmp_path / "notas"
    exported = subprocess.run(
        [sys.executable, "-m", "autograder", "--course", str(ROOT / "course.yml"), "serve"]
        + ["--roster", str(cluster.roster), "--database-url", cluster.database, "--export", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=WAIT,
        env=cluster.env(credential=False),
    )
    assert exported.returncode == 0, exported.stderr
    assert said in (out / "results" / "ines.json").read_text(encoding="utf-8")
    # A killed worker's row ages: gone after three leases without a sign.
    first = killed[0].rsplit(":", 1)[0]
    wait_for(
        lambda: next(w for w in cluster.store.workers() if w.name == first).gone(datetime.now(timezone.utc)),
        "the killed worker's row to age",
        60,
    )


# ------------------------------------------------------------------------------ the graders change


def test_other_graders_are_refused_and_a_regrade_never_delays_a_push(cluster, solved, course, tmp_path):
    """The instructor edits one grader file mid-term and restarts the service with it; a new
    worker has the new graders, the two old ones do not."""
    graders = tmp_path / "graders"
    shutil.copytree(GRADERS_ROOT, graders, ignore=shutil.ignore_patterns("__pycache__"))
    edited = graders / course.lesson(LESSON).graders / "test_quiz.py"
    edited.write_text(
        edited.read_text(encoding="utf-8") + "\n# revisado a mitad de curso\n", encoding="utf-8"
    )
    subprocess.run(["chmod", "-R", "a+rX", str(tmp_path)], check=True)
    graded_before = [s for s in cluster.store.submissions() if s.state in ("done", "error")]
    assert graded_before, "the module's earlier tests graded nothing"
    old_hash = cluster.store.result(graded_before[0].id).graders_hash

    cluster.serve.send_signal(signal.SIGINT)
    assert cluster.serve.wait(timeout=60) == 0, cluster.log()
    cluster.start_serve(graders=graders)
    said = i18n.translate("service.serve.graded_by_others", "es", count=len(graded_before), graders="")
    wait_for(
        lambda: said.split("(")[0] in cluster.log(),
        f"serve to say what other graders graded\n{cluster.log()}",
    )
    new = cluster.start_worker("c", graders=graders)

    chosen = ["ana", "bea", "carla"]
    regraded = subprocess.run(
        [sys.executable, "-m", "autograder", "--course", str(ROOT / "course.yml"), "regrade"]
        + ["--database-url", cluster.database, "--lessons", LESSON, "--learners", *chosen],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=WAIT,
        env=cluster.env(credential=False, graders=graders),
    )
    assert regraded.returncode == 0, regraded.stderr
    assert regraded.stdout.strip().startswith("3 "), regraded.stdout
    push = cluster.submit("juan", solved)  # queued after the three regrades

    # The old workers refuse the new graders' tasks and say so.
    old = {f"{os.uname().nodename}:{cluster.workers[slot].pid}" for slot in ("a", "b")}
    refused: set[str] = set()

    def refusing() -> bool:
        refused.update(w.name for w in cluster.store.workers() if w.name in old and w.state == "refused")
        return refused == old

    wait_for(refusing, f"the old workers to refuse\n{cluster.log()}")
    assert " rechaza " in cluster.log() and i18n.translate("service.worker.refused", "es").startswith(
        "El corrector"
    )

    submission, result = cluster.final(push)
    assert result.status == "done" and result.worker.startswith(f"{os.uname().nodename}:{new.pid}:"), (
        cluster.log()
    )
    regrades = []
    for learner in chosen:
        first = min(
            (s for s in cluster.store.submissions(learner) if s.lane == "regrade"), key=lambda s: s.id
        )
        done = wait_for(
            lambda s=first: (now := cluster.store.get(s.id)).state == "done" and now, "the regrades"
        )
        every = cluster.store.results_of(done.id)
        assert [r.graders_hash for r in every] == [
            old_hash,
            done.graders_hash,
        ] and old_hash != done.graders_hash
        assert every[1].lane == "regrade" and every[1].worker.startswith(f"{os.uname().nodename}:{new.pid}:")
        assert cluster.store.result(done.id) == every[1]  # the current result: the new graders'
        regrades.append(every[1])
    # One thread grades the new graders' tasks: once the push was claimable, at most the regrade
    # in flight finished before it; every other regrade waited for the push.
    ready = submission.fetched_at
    assert sum(1 for r in regrades if ready < r.created_at < result.created_at) <= 1, (
        ready,
        regrades,
        result,
    )
    assert any(r.created_at > result.created_at for r in regrades)

    # The export holds the current results and puts the previous score beside each regraded one.
    out = tmp_path / "notas"
    exported = subprocess.run(
        [sys.executable, "-m", "autograder", "--course", str(ROOT / "course.yml"), "serve"]
        + ["--roster", str(cluster.roster), "--database-url", cluster.database, "--export", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=WAIT,
        env=cluster.env(credential=False),
    )
    assert exported.returncode == 0, exported.stderr
    rows = list(csv.DictReader(io.StringIO((out / "regraded.csv").read_text(encoding="utf-8"))))
    assert sorted(row["student_id"] for row in rows) == chosen
    for row, new_result in zip(sorted(rows, key=lambda r: r["student_id"]), regrades):
        old_result = cluster.store.results_of(new_result.submission_id)[0]
        assert (row["previous_graders"], row["graders"]) == (old_hash, new_result.graders_hash)
        assert float(row["previous_score"]) == json.loads(old_result.result_json)["score"]
        assert float(row["score"]) == json.loads(new_result.result_json)["score"]
        learner = row["student_id"]
        assert json.loads((out / "results" / f"{learner}.json").read_text(encoding="utf-8")) == json.loads(
            new_result.result_json
        )

    # Back to the module's graders for whatever runs next.
    cluster.kill(new)
    cluster.workers.pop("c")
    cluster.serve.send_signal(signal.SIGINT)
    assert cluster.serve.wait(timeout=60) == 0, cluster.log()
    cluster.start_serve()
