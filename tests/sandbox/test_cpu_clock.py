"""Checks are limited in the worker's CPU time, so machine load does not change verdicts
(autograder/sandbox/cpu_clock.py): a worker that gets a fraction of a core still passes, an infinite
loop is stopped at its CPU budget, a sleeping worker at the wall-clock bound, and gradings
under a CPU hog on every core (the whole course on its solutions, and buggy variants of the
lessons whose checks once hit their time limits under load: 04 and 06) get the verdicts of an
idle machine."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time

import pytest
from support.grading import failed
from support.project import ROOT, SEED
from support.variants import solution_files

from autograder.core.i18n import feedback_text
from autograder.core.results import Status
from autograder.sandbox import cpu_clock
from autograder.sandbox.client import BudgetSpent, Sandbox, WorkerDied

pytestmark = pytest.mark.skipif(not cpu_clock.measurable(), reason="CPU budgets need Linux's /proc")

BURNER = r'''
import time


def burn(seconds):
    """Spend `seconds` of this process's CPU time, however long that takes on the clock."""
    end = time.process_time() + seconds
    n = 0
    while time.process_time() < end:
        n += 1
    return n > 0


def spin():
    while True:
        pass


def doze():
    time.sleep(600)
'''


@contextlib.contextmanager
def cpu_hogs(count: int, cpus: set[int] | None = None):
    """`count` busy-looping processes (on `cpus` only, when given) for the duration."""
    code = "import os, sys\n"
    if cpus is not None:
        code += f"os.sched_setaffinity(0, {sorted(cpus)!r})\n"
    code += "while True:\n    pass\n"
    # Each in its own session: where the kernel groups the scheduling by session (autogroup),
    # hogs sharing one session would together weigh no more than one process.
    hogs = [subprocess.Popen([sys.executable, "-c", code], start_new_session=True) for _ in range(count)]
    try:
        time.sleep(0.3)  # every hog is spinning before the measured work starts
        assert all(hog.poll() is None for hog in hogs)
        yield hogs
    finally:
        for hog in hogs:
            hog.kill()
        for hog in hogs:
            hog.wait()


@pytest.fixture(scope="module")
def box(tmp_path_factory):
    folder = tmp_path_factory.mktemp("burner")
    (folder / "burner.py").write_text(BURNER)
    with Sandbox(folder) as sandbox:
        sandbox.ensure_ready()
        yield sandbox


def call_within(box: Sandbox, name: str, budget: float, *args):
    box.ensure_ready()
    fn = box.getattr(box.module("burner"), name)
    box.begin_check(budget)
    started = time.monotonic()
    try:
        return box.call(fn, *args), time.monotonic() - started
    finally:
        box.end_check()


def test_cpu_seconds_reads_a_process_time_and_not_its_sleep():
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(1.0)
        slept, spun = cpu_clock.cpu_seconds(sleeper.pid), cpu_clock.cpu_seconds(spinner.pid)
        assert slept is not None and spun is not None
        assert slept < 0.3 < spun <= 1.2
    finally:
        for proc in (sleeper, spinner):
            proc.kill()
            proc.wait()
    assert cpu_clock.cpu_seconds(spinner.pid) is None  # gone
    assert cpu_clock.cpu_seconds(2**22 + 17) is None


def test_the_wall_clock_bound_is_far_above_the_budget():
    assert cpu_clock.wall_bound(10) == 10 * cpu_clock.WALL_FACTOR + cpu_clock.WALL_SLACK_S
    assert cpu_clock.wall_bound(1) >= 4


def test_a_worker_on_a_quarter_of_a_core_still_finishes_its_budget(box):
    """Three hogs share the worker's only core: 1.5 s of CPU takes about 6 s on the clock, far
    beyond what a 2 s wall-clock limit allowed, and inside a 2 s CPU budget."""
    with cpu_hogs(3, cpus={0}):
        os.sched_setaffinity(box.worker_pid, {0})
        try:
            done, elapsed = call_within(box, "burn", 2.0, 1.5)
        finally:
            os.sched_setaffinity(box.worker_pid, os.sched_getaffinity(0))
    assert done is True
    assert elapsed > 2.0, f"the hogs did not slow the worker ({elapsed:.1f} s): the test proves nothing"


def test_an_infinite_loop_is_stopped_at_its_cpu_budget(box):
    pid = box.worker_pid
    with pytest.raises(BudgetSpent) as info:
        call_within(box, "spin", 1.0)
    text = feedback_text(info.value.feedback, "es")
    assert "Tiempo agotado" in text and "1 s de CPU" in text
    assert "1 s of CPU" in feedback_text(info.value.feedback, "en")
    assert not os.path.exists(f"/proc/{pid}")
    assert call_within(box, "burn", 5.0, 0.2)[0] is True  # a fresh worker, a fresh budget


def test_a_sleeping_worker_is_stopped_at_the_wall_clock_bound(box, monkeypatch):
    monkeypatch.setattr(cpu_clock, "WALL_SLACK_S", 1.0)  # 0.5 s of CPU -> a 3 s bound (+1 s)
    pid = box.worker_pid
    with pytest.raises(WorkerDied) as info:
        started = time.monotonic()
        call_within(box, "doze", 0.5)
    assert not isinstance(info.value, BudgetSpent)  # it spent no CPU: the clock stopped it
    assert 2.5 < time.monotonic() - started < 30
    assert "Tiempo agotado" in feedback_text(info.value.feedback, "es")
    assert not os.path.exists(f"/proc/{pid}")


def test_a_replaced_worker_counts_from_its_ready_not_its_start(box):
    """A worker killed mid-check is replaced; importing torch again is not the check's time."""
    box.ensure_ready()
    box.begin_check(1.5)
    try:
        box.kill()
        box.ensure_ready()  # ~2 s of CPU importing torch, outside the budget
        fn = box.getattr(box.module("burner"), "burn")
        assert box.call(fn, 0.5) is True
    finally:
        box.end_check()


# ------------------------------------------------------------ whole lessons under load


def verdicts(result) -> dict[str, tuple[str, float]]:
    return {c.id: (c.status.value, c.score) for c in result.checks if c.id != "gpu-parity"}


@pytest.mark.parametrize("lesson_id, variant_name", [("06", "cache-new-keys-first"), ("04", "post-norm")])
def test_a_buggy_lesson_graded_under_a_hog_on_every_core_gets_the_verdicts_of_an_idle_machine(
    course, grade_files, lesson_id, variant_name
):
    import importlib

    lesson = course.lesson(lesson_id)
    catalog = importlib.import_module(f"lessons.lesson{lesson_id}_variants")
    buggy = next(v for v in catalog.BUGGY if v.name == variant_name).apply(solution_files(lesson))
    idle = grade_files(buggy, lesson=lesson)
    assert failed(idle), "the buggy variant must fail somewhere for the comparison to mean anything"
    cores = len(os.sched_getaffinity(0))
    with cpu_hogs(2 * cores):
        loaded = grade_files(buggy, lesson=lesson)
    assert verdicts(loaded) == verdicts(idle)
    assert all(c.status is not Status.ERROR for c in loaded.checks)


# The flagship and the lesson that trains a model: the checks that spend the most CPU, so the
# ones a wall-clock limit would cut first. (Every hogged second is taken from the rest of the
# suite, so not the whole course: each lesson's budgets come from the same cpu_clock code.)
UNDER_LOAD = ("03", "05")


def test_the_heaviest_lessons_graded_under_a_hog_on_every_core_get_full_marks(course):
    """The solutions of UNDER_LOAD, graded as one run with two busy-looping processes per core:
    every check passes (a wall-clock limit lost points here for correct code)."""
    from autograder.engine.grading import grade

    cores = len(os.sched_getaffinity(0))
    with cpu_hogs(2 * cores):
        result = grade(course, [course.lesson(key) for key in UNDER_LOAD], ROOT / "solutions", seed=SEED)
    assert [lesson.id for lesson in result.lessons] == list(UNDER_LOAD)
    for lesson in result.lessons:
        problems = {c.id: feedback_text(c.feedback, "es") for c in failed(lesson)}
        assert not problems and lesson.score == lesson.max_score, (lesson.id, problems)
        assert lesson.completed
