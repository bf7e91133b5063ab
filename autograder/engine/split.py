"""Grade several lessons in two trusted processes at once, on a machine with two cores or more.

A lesson's grading is a ping-pong between the trusted process (pytest, the graders, the
feedback) and its worker (the learner's code): one core at a time. `autograder grade` and
`autograder check` on the whole course therefore leave a second core idle for most of the run.
Here the trusted process, once it has imported torch (while the zygote imports it too), forks
one copy of itself; both take lessons from one queue (a pipe of lesson indices, one byte read
per lesson, so a slow lesson never holds up the others) and each grades what it took exactly as
`grading.grade` would, with its own socket to the same zygote. The copy sends each lesson's
result back as soon as it is done; the parent returns them in the course's order.

Nothing about a lesson's grade depends on which process graded it: the same seed, the same
folders (resolved from the whole list of lessons), CPU-time limits in the worker. If the copy
dies or fails, the parent grades the lessons it had not reported: no lesson is ever lost.

Only where it pays and is safe: Linux with the warm pool (fork after torch's import, as the
zygote itself does; no thread of ours runs at that point except, maybe, the progress display,
which the copy never touches), more than one lesson, two usable cores, and no live callbacks
(`watch` shows checks as they finish, one lesson at a time). AUTOGRADER_SPLIT=0 turns it off,
AUTOGRADER_SPLIT=1 on even with one core.
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import signal
import sys
import traceback
from collections.abc import Iterable
from multiprocessing.connection import Pipe
from pathlib import Path

from autograder.core import i18n
from autograder.core.manifest import Course, Lesson
from autograder.core.results import CourseResult, LessonResult
from autograder.engine import grading
from autograder.engine.hangs import POLICY_OFFICIAL
from autograder.sandbox.client import share_warm_pool, start_warm_pool

ENV_SWITCH = "AUTOGRADER_SPLIT"


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def enabled() -> bool:
    """Linux with fork, and AUTOGRADER_SPLIT: 0/off never, 1/on always (the tests, whatever
    the machine), unset: when two cores are usable."""
    if not (sys.platform.startswith("linux") and hasattr(os, "fork")):
        return False
    switch = os.environ.get(ENV_SWITCH, "").strip().lower()
    if switch in ("0", "false", "no", "off"):
        return False
    return switch in ("1", "true", "yes", "on") or usable_cores() >= 2


def grade(
    course: Course,
    lessons: Iterable[Lesson],
    submission: Path | None = None,
    *,
    lang: str | None = None,
    seed: int | None = None,
    on_lesson=None,
    boundary: Path | None = None,
    hang_policy: str = POLICY_OFFICIAL,
    **live,
) -> CourseResult:
    """`grading.grade` with the same arguments and result, in two processes where that pays;
    `on_lesson` is called as each lesson is done, in the order they finish. `live`:
    grading.grade's first, on_start, on_check, on_worker; any of them given means one process."""
    lessons = list(lessons)
    lang = lang or course.language
    # Drawn here, not in each process: both must grade with the same seed.
    seed = seed if seed is not None else random.SystemRandom().randrange(2**31)
    plain = dict(lang=lang, seed=seed, on_lesson=on_lesson, boundary=boundary, hang_policy=hang_policy)
    # Results come back by lesson id, and the queue holds one byte per lesson.
    distinct = len({lesson.id for lesson in lessons}) == len(lessons) <= 255
    showing = any(value is not None for value in live.values())  # watch: checks as they finish
    if len(lessons) < 2 or not distinct or showing or not enabled():
        return grading.grade(course, lessons, submission, **plain, **live)
    start_warm_pool()  # the CLI has started it already: this only makes sure
    _import_torch()
    shared = share_warm_pool()
    if shared is None:
        return grading.grade(course, lessons, submission, **plain)
    return _Split(course, lessons, submission, plain, shared).run()


def _import_torch() -> None:
    """What every lesson's graders import, imported once before the fork so that the copy
    shares it instead of importing it again (the zygote imports torch meanwhile, on the other
    core). One intra-op thread, as pytest_plugin.py sets anyway: no thread pool exists at the fork."""
    import pytest  # noqa: F401
    import torch

    torch.set_num_threads(1)


class _Split:
    def __init__(self, course: Course, lessons: list[Lesson], submission, plain: dict, shared) -> None:
        self.course, self.lessons, self.submission, self.plain = course, lessons, submission, plain
        self.sock, self.zygote = shared
        self.done: dict[int, LessonResult] = {}
        self.results = None  # the copy's end of the results pipe, once forked
        self.copy_over = False
        self.interrupted = False

    def run(self) -> CourseResult:
        queue_r, queue_w = os.pipe()
        os.write(queue_w, bytes(range(len(self.lessons))))  # < 256 lessons: one byte each
        os.close(queue_w)  # both processes read to the end of the queue
        results_r, results_w = Pipe(duplex=False)
        try:
            pid = os.fork()
        except OSError:  # no process to spare (a pids limit): grade every lesson here
            for end in (results_r, results_w):
                end.close()
            os.close(queue_r)
            self.sock.close()
            return grading.grade(self.course, self.lessons, self.submission, **self.plain)
        if pid == 0:  # the copy: never returns
            results_r.close()
            self._copy(queue_r, results_w)
        results_w.close()
        self.sock.close()
        self.results = results_r
        try:
            grading.grade(
                self.course,
                self.lessons,
                self.submission,
                take=lambda: _take(queue_r),
                **{**self.plain, "on_lesson": self._ours},
            )
            while not self.copy_over:
                self._receive(block=True)
            if self.interrupted:
                raise KeyboardInterrupt
            left = [i for i in range(len(self.lessons)) if i not in self.done]
            if left:  # the copy died or failed: grade what it took here
                pending = iter(left)
                grading.grade(
                    self.course,
                    self.lessons,
                    self.submission,
                    take=lambda: next(pending, None),
                    **{**self.plain, "on_lesson": self._ours},
                )
        finally:
            os.close(queue_r)
            results_r.close()
            _reap(pid, kill=not self.copy_over)
        ordered = [self.done[i] for i in range(len(self.lessons))]
        return CourseResult(
            course=self.course.name, language=self.plain["lang"], seed=self.plain["seed"], lessons=ordered
        )

    def _index(self, result: LessonResult) -> int:
        return next(i for i, lesson in enumerate(self.lessons) if lesson.id == result.id)

    def _ours(self, result: LessonResult) -> None:
        self._record(result)
        while self._receive(block=False):
            pass

    def _record(self, result: LessonResult) -> None:
        self.done[self._index(result)] = result
        if self.plain["on_lesson"] is not None:
            self.plain["on_lesson"](result)

    def _receive(self, *, block: bool) -> bool:
        """Take one message of the copy's if there is one (or wait for it); False when none."""
        if self.copy_over or not (block or self.results.poll(0)):
            return False
        try:
            kind, payload = self.results.recv()
        except (EOFError, OSError):
            kind, payload = "gone", None
        if kind == "lesson":
            self._record(payload)
            return True
        self.copy_over = True
        self.interrupted = kind == "interrupted"
        if kind == "failed":
            # A grader or engine error in the copy: the parent grades its lessons again, where
            # the same error (if it is one) reaches the caller as it would without the split.
            print(
                i18n.translate("engine.split_copy_failed", self.plain["lang"], detail=payload),
                file=sys.stderr,
            )
        return False

    def _copy(self, queue_r: int, results_w) -> None:
        code = 0
        try:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            start_warm_pool((self.sock, self.zygote))
            # Nothing of the copy's reaches the terminal: the parent owns stdout (the JSON result)
            # and stderr (its progress display, whose lock a thread may hold at the fork).
            sink = io.StringIO()
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                grading.grade(
                    self.course,
                    self.lessons,
                    self.submission,
                    take=lambda: _take(queue_r),
                    **{**self.plain, "on_lesson": lambda result: results_w.send(("lesson", result))},
                )
            results_w.send(("over", None))
        except KeyboardInterrupt:
            _send(results_w, ("interrupted", None))
        except BaseException:  # noqa: BLE001 - reported to the parent, which grades the rest
            _send(results_w, ("failed", "".join(traceback.format_exc().splitlines(keepends=True)[-12:])))
            code = 1
        finally:
            # Never the parent's atexit handlers (they would close its zygote) nor its buffers.
            os._exit(code)


def _take(queue_r: int) -> int | None:
    """The next lesson's index from the shared queue; None when it is empty."""
    byte = os.read(queue_r, 1)
    return byte[0] if byte else None


def _send(conn, message) -> None:
    with contextlib.suppress(OSError, ValueError):
        conn.send(message)


def _reap(pid: int, *, kill: bool) -> None:
    """Wait for the copy, which exits right after its last message; one the parent leaves
    before that (an error, Ctrl-C) is killed first (its workers exit when their pipes to it
    close)."""
    with contextlib.suppress(ProcessLookupError, ChildProcessError):
        if kill:
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
