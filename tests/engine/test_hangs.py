"""A learner's code that never ends (engine/hangs.py): the worker's stack is sampled before it is
killed and the message names the learner's file, line and TODO; learner-side grading holds that
code back after one timeout, official grading gives each later check a short first budget, and
the practice tests keep the outcomes of the tests that ended before the hang. Real worker
processes, real loops, small budgets (tests/support/looping.py)."""

from __future__ import annotations

import time

import pytest
from support.grading import write_submission
from support.looping import loop_in_mask, timeouts_bound, with_timeouts
from support.project import ROOT, SEED
from support.variants import solution_files

from autograder.core.i18n import feedback_text
from autograder.core.results import Status
from autograder.engine import hangs, practice
from autograder.engine.grading import grade
from autograder.sandbox.client import Sandbox
from autograder.sandbox.stack_dump import stack_in_dump

BUDGET = 3.0  # each check's CPU seconds here; official short budgets are a quarter of it


def _text(check, lang: str = "es") -> str:
    return feedback_text(check.feedback, lang)


def _no_engine_words(checks) -> None:
    """Nothing of the engine's machinery reaches the learner: no temporary path, no frame of
    the worker, pytest or torch."""
    for check in checks:
        for lang in ("es", "en"):
            text = _text(check, lang)
            for needle in ("/tmp/", "autograder-", "worker/main.py", "site-packages", "_pytest", "torch/"):
                assert needle not in text, (check.id, text)


@pytest.fixture(scope="module")
def looping_lesson03(course, tmp_path_factory):
    lesson = with_timeouts(course.lesson("03"), BUDGET)
    files = solution_files(lesson)
    files["attention.py"], line = loop_in_mask(files["attention.py"])
    folder = write_submission(tmp_path_factory.mktemp("looping") / "03", files)
    return lesson, folder, line


# ------------------------------------------------------------------ the sample itself


def test_a_sample_of_a_real_loop_names_the_learners_frame_innermost_first(tmp_path):
    folder = tmp_path / "loop"
    folder.mkdir()
    (folder / "loop.py").write_text(
        "def spin():\n    n = 0\n    while True:\n        n += 1\n\n\ndef outer():\n    spin()\n",
        encoding="utf-8",
    )
    with Sandbox(folder) as box:
        box.ensure_ready()  # a worker's start is not a check's time (as in grading)
        box.begin_check(1.0)
        function = box.getattr(box.module("loop"), "outer")
        with pytest.raises(Exception):
            box.call(function)
        assert box.stopped is not None and not box.stopped.wall
        mine = [f for f in box.stopped.frames if f["filename"] == str(box.root / "loop.py")]
        assert [f["name"] for f in mine] == ["spin", "outer"]
        assert mine[0]["lineno"] in (3, 4) and mine[1]["lineno"] == 8
        place = hangs.locate(box.stopped.frames, box.root, ["loop.py"], [], None)
        assert (place.file, place.function, place.todo) == ("loop.py", "spin", None)
        assert place.calls[-1][0] == "loop.py" and place.calls[0][2] == "outer"


def test_the_dump_reader_takes_the_serving_thread_and_ignores_output_around_it():
    dump = (
        "learner output\n"
        "Thread 0x00007f0000000001 (most recent call first):\n"
        '  File "/x/threading.py", line 10 in run\n'
        "\n"
        "Current thread 0x00007f0000000002 (most recent call first):\n"
        '  File "/tmp/s/attention.py", line 88 in forward\n'
        '  File "/w/main.py", line 5 in serve\n'
        "more output"
    )
    frames = stack_in_dump(dump)
    assert [(f["filename"], f["lineno"], f["name"]) for f in frames] == [
        ("/tmp/s/attention.py", 88, "forward"),
        ("/w/main.py", 5, "serve"),
    ]
    assert stack_in_dump("nothing of faulthandler here\n") is None


# ------------------------------------------------------------------ learner-side: one timeout


def test_learner_side_a_loop_costs_one_timeout_and_names_the_line_and_todo(course, looping_lesson03):
    lesson, folder, line = looping_lesson03
    started = time.monotonic()
    result = grade(course, [lesson], folder, seed=SEED, hang_policy="learner").lessons[0]
    elapsed = time.monotonic() - started
    print(f"learner-side grading of a looping lesson 03: {elapsed:.1f} s")
    assert elapsed < timeouts_bound(BUDGET, 2)
    timed_out = [c for c in result.checks if "Tiempo agotado" in _text(c)]
    assert len(timed_out) == 1, [(c.id, _text(c)[:80]) for c in timed_out]
    stopped = timed_out[0]
    where = f"attention.py:{line}"
    assert f"seguía en {where} (en forward), dentro de TODO [mask]" in _text(stopped)
    assert f"was still at {where} (in forward), inside TODO [mask]" in _text(stopped, "en")
    assert (stopped.raised_in.todo, stopped.raised_in.file, stopped.raised_in.line) == (
        "mask",
        "attention.py",
        line,
    )
    waiting = [c for c in result.checks if "en espera de la misma causa" in _text(c)]
    # Every other check that imports attention.py waits; those of attention_numpy.py and the quiz run.
    numpy_and_quiz = [c for c in result.checks if c.id.startswith(("np-", "quiz-"))]
    assert numpy_and_quiz and all(c.status is Status.PASSED for c in numpy_and_quiz)
    assert len(waiting) >= 10 and all(c.status is Status.ERROR for c in waiting)
    assert all(where in _text(c) and c.raised_in == stopped.raised_in for c in waiting)
    assert all(stopped.id in _text(c) for c in waiting)
    assert all(c.duration < BUDGET for c in waiting)  # never run: no worker, no budget spent
    _no_engine_words(result.checks)


# ------------------------------------------------------------------ official: short budgets


def test_official_a_loop_only_some_inputs_reach_costs_only_the_checks_that_reach_it(course, looping_lesson03):
    """The loop is in the explicit path only: the fused path's checks pass with full marks; the
    checks that reach the loop after the first are stopped at their short budget, at the same
    place, and say so."""
    lesson, folder, line = looping_lesson03
    started = time.monotonic()
    result = grade(course, [lesson], folder, seed=SEED).lessons[0]  # official is the default
    elapsed = time.monotonic() - started
    print(f"official grading of a looping lesson 03: {elapsed:.1f} s")
    by_id = {c.id: c for c in result.checks}
    for fused in ("fused-parity", "fused-sdpa", "fused-dropout"):
        assert by_id[fused].status is Status.PASSED, (fused, _text(by_id[fused]))
    full = [c for c in result.checks if "Tiempo agotado" in _text(c)]
    short = [c for c in result.checks if "en el mismo código en que la comprobación" in _text(c)]
    assert len(full) == 1 and len(short) >= 5, [(c.id, _text(c)[:60]) for c in result.checks]
    seconds = f"{hangs.short_budget(BUDGET):g}"
    for check in short:
        assert check.status is Status.ERROR and check.score == 0
        assert f"tras {seconds} s de CPU" in _text(check) and full[0].id in _text(check)
        assert check.raised_in is not None and (check.raised_in.file, check.raised_in.todo) == (
            "attention.py",
            "mask",
        )
    # Each short budget is a quarter of a full one: the whole run stays far below one full
    # budget per looping check.
    assert elapsed < timeouts_bound(BUDGET, 1) + len(short) * (hangs.short_budget(BUDGET) * 4 + 20)
    _no_engine_words(result.checks)


def test_official_a_slow_check_elsewhere_keeps_its_whole_budget(tmp_path):
    """After a hang, a check whose short budget runs out somewhere else (not the code that hung)
    gets the rest of its own budget: being slow there is not the same cause."""
    folder = tmp_path / "slow"
    folder.mkdir()
    (folder / "code.py").write_text(
        "import time\n\n\ndef busy(seconds):\n    end = time.process_time() + seconds\n"
        "    while time.process_time() < end:\n        pass\n    return 'done'\n",
        encoding="utf-8",
    )
    with Sandbox(folder) as box:
        hang = hangs.Place("code.py", 99, "elsewhere", None)
        checked = []

        def keep_going(frames):
            place = hangs.locate(frames, box.root, ["code.py"], [], None)
            checked.append(place)
            return not hang.same_code(place)

        box.ensure_ready()
        box.begin_check(4.0, first=0.5, keep_going=keep_going)
        assert box.call(box.getattr(box.module("code"), "busy"), 1.5) == "done"
        assert [p.function for p in checked] == ["busy"] and box.stopped is None


# ------------------------------------------------------------------ informational checks


def test_an_informational_check_gets_a_small_budget_and_the_others_lose_nothing(course, tmp_path):
    """Lesson 04 with the learner's own lesson-03 attention looping: the checks graded against the
    reference attention all pass; `own-pieces` (informational, 60 s in course.yml) stops at its
    small budget and says where their own attention was."""
    lesson03, lesson04 = course.lesson("03"), course.lesson("04")
    assert next(c for c in lesson04.checks if c.informational).timeout > hangs.INFORMATIONAL_BUDGET_S
    own = solution_files(lesson03)
    own["attention.py"], line = loop_in_mask(own["attention.py"])
    write_submission(tmp_path / "exercises" / lesson03.folder, own)
    write_submission(tmp_path / "exercises" / lesson04.folder, solution_files(lesson04))
    result = grade(course, [lesson04], tmp_path / "exercises", seed=SEED).lessons[0]
    by_id = {c.id: c for c in result.checks}
    own_pieces = by_id["own-pieces"]
    assert own_pieces.status is Status.ERROR and own_pieces.informational
    text = _text(own_pieces)
    assert f"seguía en attention.py:{line} (en forward)" in text
    assert f"{hangs.INFORMATIONAL_BUDGET_S:g} s de CPU como máximo" in text
    assert all(c.status in (Status.PASSED, Status.SKIPPED) for c in result.checks if c is not own_pieces)
    assert result.completed  # an informational check never counts
    _no_engine_words(result.checks)


# ------------------------------------------------------------------ practice tests


def test_practice_keeps_the_tests_that_passed_before_a_hang(course, tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOGRADER_GRADERS", str(tmp_path / "no-graders-here"))
    monkeypatch.setattr(practice, "PRACTICE_TIMEOUT", BUDGET)
    lesson = course.lesson("03")
    files = solution_files(lesson)
    files["attention.py"], line = loop_in_mask(files["attention.py"])
    files["test_practica.py"] = (ROOT / "exercises" / lesson.folder / "test_practica.py").read_text(
        encoding="utf-8"
    )
    folder = write_submission(tmp_path / "practice", files)
    started = time.monotonic()
    result = grade(course, [lesson], folder, seed=SEED, hang_policy="learner").lessons[0]
    print(f"practice tests of a looping lesson 03: {time.monotonic() - started:.1f} s")
    assert result.mode == "practice"
    passed = [c for c in result.checks if c.status is Status.PASSED]
    # The numpy tests and the mask buffer's run before any forward pass: kept.
    assert len(passed) >= 5 and {"np-mask", "np-softmax", "np-attention"} <= {c.todo for c in passed}
    stopped = [c for c in result.checks if "Tiempo agotado" in _text(c)]
    waiting = [c for c in result.checks if "en espera de la misma causa" in _text(c)]
    assert len(stopped) == 1 and waiting
    assert f"attention.py:{line}" in _text(stopped[0]) and "TODO [mask]" in _text(stopped[0])
    assert all(stopped[0].id in _text(c) for c in waiting)
    assert result.max_score == len(result.checks) and result.score == len(passed)
    _no_engine_words(result.checks)
