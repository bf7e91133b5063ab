"""N long-lived grading processes for `autograder grade-all`.

The engine runs pytest inside its own process, so a process grades one learner at a time; N of
them grade in parallel. Each is started once with multiprocessing's "spawn" (a fresh interpreter
that inherits nothing but what we pass) and grades many learners in turn with the same engine
call as `autograder grade`: a learner costs its checks, not interpreter starts. The grading
processes share one warm pool (a zygote that imported torch once, autograder/sandbox/pool.py),
started here before them: each gets its own socket to it, so one importing torch for the
zygote is paid per run instead of per grading process (~2.6 s of CPU each, on a machine that
often has two cores). If that zygote dies, each grading process starts one of its own.

A learner can cost only its own grade. The learner's code runs in the engine's sandboxed workers
as always; if a grading process dies anyway (killed, out of memory) or runs past the learner's
time limit, the parent records an error for that learner, kills what is left of the process
(its workers follow: they exit when their pipes to it close; the shared zygote only loses that
process's socket) and starts a fresh one for the learners still waiting.

`GradingPool` grades one batch of tasks and stops its processes; `WarmGraders` keeps its
processes warm for a long-running service (`autograder serve`'s workers, autograder/service/
worker.py), each task graded with its own seed, the same engine call and the same rules.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import queue
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from pathlib import Path

SCRATCH_PREFIX = "autograder-batch-"
START_TIMEOUT = 300.0  # seconds for a grading process to import torch and warm its pool up
LOG_NAME = "grading.log"  # a grading process's stderr, in its scratch folder


@dataclass(frozen=True)
class Setup:
    """What every grading process needs, sent once when it starts."""

    course_file: str
    lessons: tuple[str, ...]
    seed: int
    lang: str


@dataclass(frozen=True)
class Task:
    learner: str
    submission: str  # the learner's exercises folder, as `autograder grade --submission` gets it
    boundary: str  # the learner's whole folder: nothing below it that is a symlink is followed
    seed: int | None = None  # this task's own seed (the service draws one per submission), else the run's


@dataclass
class Outcome:
    learner: str
    result_json: str | None = None  # `grade --format json`, when grading finished
    pending: dict[str, dict[str, str]] = field(default_factory=dict)
    seconds: float = 0.0
    error: str | None = None  # "timeout" | "crashed" | "internal"
    detail: str = ""


class PoolError(Exception):
    """Grading processes cannot start at all (the message says why); nothing was graded wrong."""


class GradersClosed(PoolError):
    """WarmGraders was closed (the service stops) while a task was grading: it has no outcome."""


class _Process:
    def __init__(self, ctx, setup: Setup, zygote=None) -> None:
        self.scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-"))
        # Other users must reach it: the sandbox's worker runs as `nobody` under a root grader.
        os.chmod(self.scratch, 0o755)
        self.conn, child_conn = ctx.Pipe()
        # This process's socket to the shared zygote (multiprocessing hands the child a copy of
        # the descriptor); ours is closed at once, so that the zygote sees the child's end close.
        client = zygote.attach() if zygote is not None else None
        shared = (client, zygote.pid) if client is not None else None
        try:
            self.process = ctx.Process(
                target=_serve,
                args=(child_conn, setup, str(self.scratch), os.getpid(), shared),
                name="autograder-grade-all",
                daemon=True,
            )
            self.process.start()
        finally:
            child_conn.close()
            if client is not None:
                client.close()
        self.started = time.monotonic()
        self.ready = False
        self.task: Task | None = None
        self.sent_at = 0.0
        self.running = ""  # "<lesson> <check>": the check it is running for its task, if known

    def send(self, task: Task) -> None:
        self.task, self.sent_at, self.running = task, time.monotonic(), ""
        try:
            self.conn.send(task)
        except (OSError, ValueError):
            pass  # it died: its sentinel says so next

    def deadline(self, learner_timeout: float) -> float | None:
        """When, on the monotonic clock, waiting on this process must end: its task's time
        limit, or its start's; None for a warm process with nothing to do."""
        if self.task is not None:
            return self.sent_at + learner_timeout
        if not self.ready:
            return self.started + START_TIMEOUT
        return None

    def service(self, ready: list, learner_timeout: float) -> tuple[Outcome | None, bool]:
        """Read what this process said: (the outcome of a task it finished, whether it is gone).
        `ready`: what `wait` found ready among its pipe and sentinel."""
        outcome, closed = None, False
        if self.conn in ready or self.process.sentinel in ready:
            try:
                while self.conn.poll():
                    reply = self.conn.recv()
                    if reply[0] == "ready":
                        self.ready = True
                    elif reply[0] == "running" and self.task is not None and reply[1] == self.task.learner:
                        self.running = f"{reply[2]} {reply[3]}"
                    elif reply[0] == "done" and self.task is not None:
                        _, learner, text, pending, seconds = reply
                        outcome, self.task = Outcome(learner, text, pending, seconds), None
                    elif reply[0] == "failed" and self.task is not None:
                        _, learner, detail, seconds = reply
                        outcome, self.task = (
                            Outcome(learner, seconds=seconds, error="internal", detail=detail),
                            None,
                        )
            except (EOFError, OSError):
                closed = True
        now = time.monotonic()
        if closed or not self.process.is_alive():
            self.process.join(timeout=5)
            if self.task is not None:
                detail = _exit_description(self.process.exitcode)
                tail = self.log_tail()
                outcome = Outcome(
                    self.task.learner,
                    seconds=now - self.sent_at,
                    error="crashed",
                    detail=f"{detail}\n{tail}".strip(),
                )
                self.task = None
            return outcome, True
        if self.task is not None and now - self.sent_at >= learner_timeout:
            # The limit, then the check that was running (see batch_store.Record.error_reason).
            outcome = Outcome(
                self.task.learner,
                seconds=now - self.sent_at,
                error="timeout",
                detail=f"{learner_timeout:g}\n{self.running}".strip(),
            )
            self.task = None
            return outcome, True
        if not self.ready and now - self.started >= START_TIMEOUT:
            return None, True
        return outcome, False

    def stop(self) -> None:
        """Kill the grading process (its zygote and workers follow) and remove its scratch."""
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self.conn.close()
        shutil.rmtree(self.scratch, ignore_errors=True)

    def log_tail(self, lines: int = 8) -> str:
        """The last lines the grading process wrote to its stderr (kept in its scratch)."""
        try:
            text = (self.scratch / LOG_NAME).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])


class _SharedZygote:
    """The zygote a set of grading processes share, started with the first of them (before it,
    so that its torch import overlaps theirs); `get()` is None where the warm pool is off."""

    def __init__(self) -> None:
        self._zygote = None
        self._scratch: Path | None = None
        self._lock = threading.Lock()

    def get(self):
        with self._lock:
            if self._zygote is None:
                from autograder.sandbox.client import start_shared_zygote

                # Its home goes in a scratch folder of ours: removed by `close`, or by the next
                # run's remove_stale_scratch if this one is killed.
                self._scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-"))
                self._zygote = start_shared_zygote(self._scratch) or False
            return self._zygote or None

    def close(self) -> None:
        with self._lock:
            if self._zygote:
                self._zygote.close()  # its clients are gone: it exits
            self._zygote = None
            if self._scratch is not None:
                shutil.rmtree(self._scratch, ignore_errors=True)
                self._scratch = None


class GradingPool:
    """`run(tasks)` yields an `Outcome` per task, in the order they finish."""

    def __init__(self, setup: Setup, jobs: int, learner_timeout: float) -> None:
        self.setup, self.jobs, self.learner_timeout = setup, max(1, jobs), learner_timeout
        self._ctx = multiprocessing.get_context("spawn")
        self._procs: list[_Process] = []
        self._zygote = _SharedZygote()  # the grading processes' shared zygote, once `run` starts them
        self.on_start = None  # called with a Task when a process starts grading it

    def run(self, tasks: Iterable[Task]) -> Iterator[Outcome]:
        waiting = deque(tasks)
        failed_starts = 0
        try:
            while waiting or any(p.task for p in self._procs):
                busy = sum(1 for p in self._procs if p.task)
                while len(self._procs) < min(self.jobs, len(waiting) + busy):
                    self._procs.append(_Process(self._ctx, self.setup, self._zygote.get()))
                for proc in self._procs:
                    if proc.ready and proc.task is None and waiting:
                        proc.send(waiting.popleft())
                        if self.on_start is not None:
                            self.on_start(proc.task)
                ready = wait(
                    [p.conn for p in self._procs] + [p.process.sentinel for p in self._procs],
                    timeout=self._next_deadline(),
                )
                for proc in list(self._procs):
                    outcome, gone = proc.service(ready, self.learner_timeout)
                    if outcome is not None:
                        yield outcome
                    if gone:
                        if not proc.ready:
                            failed_starts += 1
                            if failed_starts >= 3:
                                raise PoolError(proc.log_tail() or _exit_description(proc.process.exitcode))
                        proc.stop()
                        self._procs.remove(proc)
        finally:
            self.close()

    def close(self) -> None:
        for proc in self._procs:
            proc.stop()
        self._procs = []
        self._zygote.close()

    def _next_deadline(self) -> float:
        ends = [
            end for end in (proc.deadline(self.learner_timeout) for proc in self._procs) if end is not None
        ]
        return max(0.0, min(ends) - time.monotonic()) if ends else 1.0


class WarmGraders:
    """`size` grading processes started once and kept warm between tasks, for a long-running
    service (`autograder serve`'s workers): `grade(task)` grades one task on a free process and
    blocks the calling thread until its outcome, so `size` threads grade `size` tasks at once.
    The processes share one zygote, as GradingPool's. A process that dies or runs past the time
    limit costs that task only (an error Outcome); a fresh one is started in its place at once,
    so that it is warm before the next task. PoolError when a process cannot start at all;
    GradersClosed for the tasks still grading when `close` stops their processes."""

    def __init__(self, setup: Setup, size: int, learner_timeout: float) -> None:
        self.setup, self.size, self.learner_timeout = setup, max(1, size), learner_timeout
        self._ctx = multiprocessing.get_context("spawn")
        self._zygote = _SharedZygote()
        self._idle: queue.SimpleQueue[_Process] = queue.SimpleQueue()
        self._procs: set[_Process] = set()
        self._lock = threading.Lock()
        self._closed = False

    def start(self) -> None:
        """Start every process now (they warm up meanwhile: the first tasks wait for it)."""
        for _ in range(self.size):
            self._idle.put(self._fresh())

    def grade(self, task: Task) -> Outcome:
        proc = self._idle.get()
        try:
            if not proc.process.is_alive():  # died while idle: that is no task's fault
                proc = self._replace(proc)
            proc = self._when_ready(proc)
            proc.send(task)
            while True:
                ready = wait([proc.conn, proc.process.sentinel], timeout=self._wait(proc))
                outcome, gone = proc.service(ready, self.learner_timeout)
                if gone:
                    proc = self._replace(proc)
                if outcome is not None:
                    return outcome
        finally:
            self._idle.put(proc)

    def close(self) -> None:
        """Stop every process (a task still grading gets no outcome) and the zygote."""
        with self._lock:
            self._closed = True
            procs, self._procs = list(self._procs), set()
        for proc in procs:
            proc.stop()
        self._zygote.close()

    def _fresh(self) -> _Process:
        with self._lock:
            if self._closed:
                raise GradersClosed()
            proc = _Process(self._ctx, self.setup, self._zygote.get())
            self._procs.add(proc)
            return proc

    def _replace(self, proc: _Process) -> _Process:
        proc.stop()
        with self._lock:
            self._procs.discard(proc)
        return self._fresh()

    def _when_ready(self, proc: _Process) -> _Process:
        """`proc` once warm, or up to two fresh ones in its place if it dies starting."""
        failed = 0
        while not proc.ready:
            ready = wait([proc.conn, proc.process.sentinel], timeout=self._wait(proc))
            _, gone = proc.service(ready, self.learner_timeout)
            if gone:
                failed += 1
                why = proc.log_tail() or _exit_description(proc.process.exitcode)
                proc = self._replace(proc)
                if failed >= 3:
                    raise PoolError(why)
        return proc

    def _wait(self, proc: _Process) -> float:
        end = proc.deadline(self.learner_timeout)
        return 1.0 if end is None else max(0.0, end - time.monotonic())


def _exit_description(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


def remove_stale_scratch() -> None:
    """Scratch folders of grading runs whose parent process is gone (killed with SIGKILL)."""
    root = Path(tempfile.gettempdir())
    for path in root.glob(f"{SCRATCH_PREFIX}*"):
        pid = path.name[len(SCRATCH_PREFIX) :].split("-", 1)[0]
        try:
            if not pid.isdigit() or path.stat().st_uid != os.getuid() or int(pid) == os.getpid():
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except OSError:
            continue


# ------------------------------------------------------------------------ the grading process


def _serve(conn, setup: Setup, scratch: str, parent: int, shared_zygote=None) -> None:
    """A grading process: warm up, then grade learner after learner until the parent kills it
    (or dies, or closes its end of the pipe). `shared_zygote`: (socket, pid) of the zygote the
    parent started for all grading processes, or None (then this process starts its own)."""
    _die_with(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when grading stops
    # Warnings and tracebacks go to a log, not over the parent's progress bar; the parent
    # quotes its tail when this process dies.
    log = os.open(os.path.join(scratch, LOG_NAME), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 2)
    os.close(log)
    # Everything the engine creates (sandboxes, the warm pool's home) goes under `scratch`,
    # which the parent removes however this process ends.
    os.environ["TMPDIR"] = scratch
    tempfile.tempdir = scratch
    from autograder.sandbox.isolation import hide_environment

    hide_environment()
    from autograder.sandbox.client import start_warm_pool

    start_warm_pool(shared_zygote)  # the zygote imports torch while this process does (see _warm_up)
    from autograder.core.manifest import load_course
    from autograder.engine.feedback import redact, secrets_from_environ
    from autograder.engine.grading import grade
    from autograder.render.output import render_json

    course = load_course(setup.course_file)
    lessons = [course.lesson(key) for key in setup.lessons]
    secrets = secrets_from_environ(os.environ)
    task = None

    def running(lesson, check_id: str) -> None:
        # The parent learns which check is running, and names it if the learner's time limit
        # stops grading there.
        try:
            conn.send(("running", task.learner, lesson.id, check_id))
        except (OSError, ValueError):
            pass

    _warm_up()
    _freeze_heap()
    conn.send(("ready",))
    graded = 0
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            break
        started = time.monotonic()
        try:
            result = grade(
                course,
                lessons,
                Path(task.submission),
                lang=setup.lang,
                seed=setup.seed if task.seed is None else task.seed,
                boundary=Path(task.boundary),
                on_start=running,
            )
            text = redact(render_json(result, setup.lang), secrets)
            reply = ("done", task.learner, text, pending_todos(result), time.monotonic() - started)
        except Exception:
            detail = redact("".join(traceback.format_exc().splitlines(keepends=True)[-12:]), secrets)
            reply = ("failed", task.learner, detail, time.monotonic() - started)
        try:
            conn.send(reply)
        except (OSError, ValueError):
            break
        graded += 1
        if graded == 1:
            _freeze_heap()  # what grading itself imported (grader modules' dependencies, caches)


def pending_todos(result) -> dict[str, dict[str, str]]:
    """{lesson id: {check id: TODO}} for the checks that stopped at work not started: a TODO
    still raising the stub's NotImplementedError (that TODO, maybe not the check's own), or a
    missing file (the check's own TODO; "" for a check of the lesson as a whole)."""
    found: dict[str, dict[str, str]] = {}
    for lesson in result.lessons:
        for check in lesson.checks:
            first = check.feedback.parts[0] if check.feedback.parts else None
            key = getattr(first, "key", None)
            if key == "engine.todo_pending":
                found.setdefault(lesson.id, {})[check.id] = str(first.params.get("todo", ""))
            elif key == "engine.missing_file":
                found.setdefault(lesson.id, {})[check.id] = check.todo or ""
    return found


def _warm_up() -> None:
    """Import what grading imports here (torch, for the graders' references) and start this
    process's warm pool and one worker, so the first learner does not pay for them (and its
    time limit measures grading only)."""
    import torch  # noqa: F401  (the graders import it in this process anyway)

    from autograder.sandbox.client import Sandbox

    empty = Path(tempfile.mkdtemp())
    try:
        with Sandbox(empty) as box:
            box.ensure_ready()
    except Exception:
        pass  # grading itself will report a worker that cannot start
    finally:
        shutil.rmtree(empty, ignore_errors=True)


def _freeze_heap() -> None:
    """Keep the long-lived objects (torch, pytest, the engine) out of every later garbage
    collection: pytest collects several times per session, and with torch imported each full
    collection costs about 0.1 s, a third of a learner's grading. Only what is alive now is
    frozen; each learner's own objects are collected as usual."""
    gc.collect()
    gc.freeze()


def _die_with(parent: int) -> None:
    """Linux: be killed when the parent dies (even by SIGKILL), instead of grading on alone."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG = 1
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # it died before the line above took effect
        os._exit(1)
