"""One warm-pool zygote shared by all the grading processes of a `grade-all` run
(autograder/cohort/pool.py, autograder/sandbox/pool.py, autograder/sandbox/worker/zygote.py).

What must hold: the run's parent starts one zygote and every grading process (those started
later to replace a killed one included) forks its workers from it; killing a grading process
ends its own workers only, never the zygote or the other process's workers; the zygote exits
when the run ends; and a grading process whose shared zygote died still grades, through a
zygote of its own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support.cohort_factory import HANG_NAME, RUN_TIMEOUT, forever_hanging, lesson03_cohort, records, results
from support.processes import alive, children_of, descendants
from support.project import ROOT, SEED

from autograder.sandbox.client import Sandbox, worker_user

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the warm pool is Linux only"),
    pytest.mark.timeout(1200),
]
ZYGOTE_MAIN = b"autograder.sandbox.worker.zygote import main"
UNPRIVILEGED = worker_user() is not None


@pytest.fixture(autouse=True)
def warm_pool_on(monkeypatch):
    """The shared zygote is the subject: on whatever the caller's AUTOGRADER_WARM_POOL."""
    monkeypatch.setenv("AUTOGRADER_WARM_POOL", "1")


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _ppid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def zygotes_under(root: int) -> set[int]:
    """The zygotes below `root`: processes running the zygote whose parent does not (the
    supervisors and workers a zygote forks run the same command line)."""
    return {
        pid
        for pid in descendants(root)
        if ZYGOTE_MAIN in _cmdline(pid) and ZYGOTE_MAIN not in _cmdline(_ppid(pid) or 0)
    }


def grading_processes(root: int) -> list[int]:
    return [pid for pid in children_of(root) if b"spawn_main" in _cmdline(pid)]


def _pipes(pid: int) -> set[str]:
    found = set()
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return found
    for name in names:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
        if target.startswith("pipe:"):
            found.add(target)
    return found


def hanging_workers(root: int) -> dict[int, int]:
    """{hanging worker: the grading process it serves}: the one holding the other ends of its
    request and response pipes (a forked worker is the zygote's descendant, not its own)."""
    graders = {pid: _pipes(pid) for pid in grading_processes(root)}
    owners = {}
    for pid in descendants(root):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() != HANG_NAME[:15]:
                continue
        except OSError:
            continue
        theirs = _pipes(pid)
        for grader, pipes in graders.items():
            if pipes & theirs:
                owners[pid] = grader
    return owners


class Watch:
    """Every zygote seen below a running grade-all, sampled until `stop`."""

    def __init__(self, root: int) -> None:
        self.root, self.seen, self.parents = root, set(), set()
        self.workers_by_zygote: dict[int, set[int]] = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.is_set():
            for zygote in zygotes_under(self.root):
                self.seen.add(zygote)
                self.parents.add(_ppid(zygote))
                self.workers_by_zygote.setdefault(zygote, set()).update(children_of(zygote))
            time.sleep(0.02)

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


def _wait(condition, seconds: float, what: str):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


def _start(submissions: Path, out: Path, jobs: int) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "autograder",
            "grade-all",
            str(submissions),
            "--out",
            str(out),
            "--jobs",
            str(jobs),
            "--lessons",
            "03",
            "--seed",
            str(SEED),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_grading_processes_fork_their_workers_from_one_zygote(course, tmp_path):
    submissions = tmp_path / "submissions"
    lesson03_cohort(submissions, course, unprivileged=UNPRIVILEGED, only=("ana", "beto", "carla", "dario"))
    proc = _start(submissions, tmp_path / "out", jobs=2)
    watch = Watch(proc.pid)
    try:
        graders = _wait(
            lambda: len(grading_processes(proc.pid)) == 2 and grading_processes(proc.pid),
            120,
            "two grading processes",
        )
        stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT)
    finally:
        proc.kill()
        watch.stop()
    assert proc.returncode == 0, stdout + stderr
    assert "4 corregidos" in stdout, stdout
    assert len(watch.seen) == 1, watch.seen  # one zygote for the run...
    (zygote,) = watch.seen
    assert watch.parents == {proc.pid}  # ...started by the run's parent, not by a grading process
    assert watch.workers_by_zygote[zygote], "no worker was forked by the shared zygote"
    assert not alive([zygote, *graders])  # and it ended with the run
    scores = {learner: result["score"] for learner, result in results(tmp_path / "out").items()}
    assert scores["ana"] == 100 and scores["beto"] == 0, scores


@pytest.mark.skipif(
    os.geteuid() != 0,
    reason="which worker serves which grading process is read from the grading "
    "processes' /proc/PID/fd, which only root can read: they make themselves non-dumpable "
    "(isolation.hide_environment)",
)
def test_a_killed_grading_process_leaves_the_zygote_and_the_other_workers_alone(course, tmp_path):
    """Two learners hang in forward(), one per grading process. Killing one grading process ends
    its worker only: the other worker, and the zygote, go on; the process started in its place
    forks from the same zygote and grades the learners still waiting."""
    submissions = tmp_path / "submissions"
    forever_hanging(submissions / "a-hangs", course)
    forever_hanging(submissions / "b-hangs", course)
    lesson03_cohort(submissions, course, unprivileged=UNPRIVILEGED, only=("ana", "carla"))
    proc = _start(submissions, tmp_path / "out", jobs=2)
    watch = Watch(proc.pid)
    try:
        # Learners go out in name order: each grading process is stuck on one of the two.
        owners = _wait(
            lambda: (found := hanging_workers(proc.pid)) and len(set(found.values())) == 2 and found,
            300,
            "both grading processes stuck in a hanging forward()",
        )
        (zygote,) = zygotes_under(proc.pid)
        (victim_worker, victim), (survivor_worker, survivor) = sorted(
            owners.items(), key=lambda item: item[1]
        )
        os.kill(victim, signal.SIGKILL)
        _wait(lambda: not alive([victim, victim_worker]), 30, "the killed process and its worker gone")
        # The other worker was not disturbed (it sleeps for good; only its check's wall-clock
        # bound, minutes away, could end it), nor was the zygote.
        assert alive([survivor_worker, zygote]) == {survivor_worker, zygote}
        assert hanging_workers(proc.pid).get(survivor_worker) == survivor
        # The replacement grades ana and carla with the same zygote while the survivor hangs.
        _wait(lambda: {"ana", "carla"} <= set(records(tmp_path / "out")), 300, "ana and carla graded")
        assert alive([survivor_worker]) and zygotes_under(proc.pid) == {zygote}
        os.kill(survivor, signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT)
    finally:
        proc.kill()
        watch.stop()
    assert proc.returncode == 0, stdout + stderr
    assert watch.seen == {zygote}, watch.seen
    done = records(tmp_path / "out")
    assert {done[learner]["error"] for learner in ("a-hangs", "b-hangs")} == {"crashed"}, done
    assert done["ana"]["status"] == done["carla"]["status"] == "graded", done
    assert results(tmp_path / "out")["ana"]["score"] == 100
    assert not alive([zygote])


def test_a_grading_process_whose_shared_zygote_died_still_grades(tmp_path):
    """In this process, as a grading process sees it: a zygote another process started (here,
    ours), adopted through an attached socket. Once it is killed, sandboxes fall back to a
    zygote of their own, and the answers stay right."""
    from autograder.sandbox.client import start_shared_zygote, start_warm_pool
    from autograder.sandbox.pool import AttachedPool, WarmPool

    (tmp_path / "m.py").write_text("x = 3\n")
    shared = start_shared_zygote(tmp_path)
    assert shared is not None
    previous = WarmPool._instance
    try:
        client = shared.attach()
        assert client is not None
        start_warm_pool((client, shared.pid))
        adopted = WarmPool._instance
        assert isinstance(adopted, AttachedPool) and adopted.alive()
        with Sandbox(tmp_path) as box:
            assert box.getattr(box.module("m"), "x") == 3
            # Forked by the shared zygote: the worker's supervisor is its child.
            assert _ppid(_ppid(box.worker_pid)) == shared.pid
        os.kill(shared.pid, signal.SIGKILL)
        shared.proc.wait()
        _wait(lambda: not adopted.alive(), 10, "the adopted pool noticing its zygote died")
        with Sandbox(tmp_path) as box:
            assert box.getattr(box.module("m"), "x") == 3
        fallback = WarmPool._instance
        assert fallback is not adopted and not isinstance(fallback, AttachedPool) and fallback.alive()
        fallback.close()
    finally:
        WarmPool._instance = previous
        shared.close()


def test_the_zygote_serves_each_client_on_its_own_and_exits_when_all_are_gone(tmp_path):
    """Closing one client's socket leaves the zygote serving the others; it exits once the
    socket it was started with and every attached one are closed."""
    from autograder.sandbox.client import start_shared_zygote
    from autograder.sandbox.pool import AttachedPool

    shared = start_shared_zygote(tmp_path)
    assert shared is not None
    try:
        first, second = (
            AttachedPool(shared.attach(), shared.pid, 120),
            AttachedPool(shared.attach(), shared.pid, 120),
        )
        first.wait_ready()
        second.wait_ready()
        first.close()
        # A bad request on the second is answered there, and the zygote goes on.
        with pytest.raises(Exception, match="file descriptors"):
            second.spawn({"cwd": str(tmp_path)}, [])
        assert second.alive()
        shared.sock.close()  # the parent's end: the zygote still serves `second`
        for _ in range(2):
            with pytest.raises(Exception, match="file descriptors"):
                second.spawn({"cwd": str(tmp_path)}, [])
        assert shared.proc.poll() is None and second.alive()
        second.close()
        assert shared.proc.wait(timeout=30) == 0
    finally:
        shared.close()
