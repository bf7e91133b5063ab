"""Practice mode: without the hidden graders (a student release graded without the
instructor's token) a lesson is graded with its own practice tests, inside the sandbox, and
the result says so. Real worker processes, the real lesson-03 practice tests."""

from __future__ import annotations

import shutil
import time

import pytest
from support.grading import write_submission
from support.project import ROOT, SEED
from support.variants import solution_files

from autograder.core.i18n import feedback_text
from autograder.core.results import Status
from autograder.engine import practice
from autograder.engine.grading import grade
from autograder.render.output import render_markdown, render_text, to_json_dict
from autograder.render.results_json import from_json_dict


@pytest.fixture
def no_graders(monkeypatch, tmp_path):
    monkeypatch.setenv("AUTOGRADER_GRADERS", str(tmp_path / "no-graders-here"))


def _stub_folder(lesson, tmp_path):
    folder = tmp_path / "stub"
    shutil.copytree(ROOT / "exercises" / lesson.folder, folder)
    return folder


def _solution_folder(lesson, tmp_path):
    files = solution_files(lesson)
    files["test_practica.py"] = (ROOT / "exercises" / lesson.folder / "test_practica.py").read_text(
        encoding="utf-8"
    )
    return write_submission(tmp_path / "solution", files)


def test_stub_fails_every_practice_test_naming_its_todo(course, lesson03, tmp_path, no_graders):
    result = grade(course, [lesson03], _stub_folder(lesson03, tmp_path), seed=SEED)
    lesson = result.lessons[0]
    assert lesson.mode == "practice" and result.practice
    assert lesson.checks and all(c.status is Status.FAILED for c in lesson.checks)
    assert lesson.score == 0 and lesson.max_score == len(lesson.checks) and lesson.xp == 0
    by_name = {c.id: c for c in lesson.checks}
    assert by_name["test_np_mascara_forma_y_valores"].todo == "np-mask"
    text = feedback_text(by_name["test_np_mascara_forma_y_valores"].feedback, "es")
    assert "TODO [np-mask] pendiente" in text and "Prueba de práctica" in text
    # Tests without a marker still report, attributed to no TODO.
    assert by_name["test_una_cabeza_coincide_con_numpy"].todo is None


def test_solution_passes_practice_and_earns_the_lesson_labelled_practice(
    course, lesson03, tmp_path, no_graders
):
    result = grade(course, [lesson03], _solution_folder(lesson03, tmp_path), seed=SEED)
    lesson = result.lessons[0]
    assert [c.id for c in lesson.checks if c.status is not Status.PASSED] == []
    assert lesson.completed and lesson.xp == lesson03.xp
    data = to_json_dict(result, "es")
    assert data["practice"] is True and data["lessons"][0]["mode"] == "practice"
    assert data["lessons"][0]["scale"] == "tests"
    assert from_json_dict(data).lessons[0].scale == "tests"  # kept through results.json
    assert "Nota de práctica" in render_text(result, "es", color=False)
    assert "nota de práctica" in render_markdown(result, "es")
    assert "Practice grade" in render_text(result, "en", color=False)
    # One scale: practice tests passed, never "points" (a lesson graded by the hidden graders
    # is out of its course.yml points, 100; a practice grade is not).
    n = len(lesson.checks)
    text = render_text(result, "es", color=False)
    assert f"{n}/{n} pruebas de práctica" in text and "puntos" not in text.split("Total:")[1].split("\n")[0]
    assert f"{n}/{n} practice tests" in render_text(result, "en", color=False)
    assert f"{n}/{n} pruebas de práctica" in render_markdown(result, "es")


def test_a_wrong_answer_fails_with_the_assertion_and_trace(course, lesson03, tmp_path, no_graders):
    folder = _solution_folder(lesson03, tmp_path)
    path = folder / "attention_numpy.py"
    path.write_text(
        path.read_text(encoding="utf-8").replace("T * (T + 1) // 2 if causal", "T * T if causal"),
        encoding="utf-8",
    )
    source = path.read_text(encoding="utf-8")
    assert "T * T if causal" in source, "the planted bug must have applied"
    lesson = grade(course, [lesson03], folder, seed=SEED).lessons[0]
    failing = [c for c in lesson.checks if c.status is not Status.PASSED]
    assert failing, "a wrong count_edges must fail a practice test"
    assert {c.todo for c in failing} == {"np-edges"}
    assert not lesson.completed and lesson.xp == 0


def test_a_hang_in_practice_is_stopped_and_reported(course, lesson03, tmp_path, no_graders, monkeypatch):
    monkeypatch.setattr(practice, "PRACTICE_TIMEOUT", 4.0)
    folder = _solution_folder(lesson03, tmp_path)
    (folder / "attention_numpy.py").write_text("while True:\n    pass\n", encoding="utf-8")
    started = time.monotonic()
    lesson = grade(course, [lesson03], folder, seed=SEED).lessons[0]
    assert time.monotonic() - started < 60
    assert lesson.mode == "practice" and lesson.score == 0
    assert [c.status for c in lesson.checks] == [Status.ERROR]
    assert "Tiempo agotado" in feedback_text(lesson.checks[0].feedback, "es")


def test_a_syntax_error_is_a_failed_collection_not_a_crash(course, lesson03, tmp_path, no_graders):
    folder = _solution_folder(lesson03, tmp_path)
    (folder / "attention.py").write_text("def broken(:\n", encoding="utf-8")
    lesson = grade(course, [lesson03], folder, seed=SEED).lessons[0]
    assert lesson.score == 0 and not lesson.completed
    # The learner's file does not load: one line with its path and line (engine/learner_errors.py).
    failed = [c for c in lesson.checks if c.status is Status.FAILED]
    assert failed and feedback_text(failed[0].feedback, "es") == (
        "Error de sintaxis en exercises/03-atencion-causal/attention.py:1: invalid syntax"
    )


def test_without_graders_nor_practice_tests_every_check_is_an_error(course, lesson03, tmp_path, no_graders):
    files = solution_files(lesson03)
    lesson = grade(course, [lesson03], write_submission(tmp_path / "bare", files), seed=SEED).lessons[0]
    assert lesson.mode == "hidden" and all(c.status is Status.ERROR for c in lesson.checks)


def test_a_practice_test_that_skipped_itself_never_completes_the_lesson(tmp_path, no_graders):
    """The learner release: lesson 06 finished but lessons 03 and 04 still stubs, so the
    practice tests that need the learner's GPT skip themselves. What they would have caught
    (a wrong `pos`, say) must not earn "completada" and its XP."""
    from support.learner_course import make_course

    from autograder.core.manifest import load_course

    root = make_course(tmp_path / "course", {"03": "stub", "04": "stub", "06": "solved"})
    course = load_course(root / "course.yml")
    lesson06 = course.lesson("06")
    result = grade(course, [lesson06], seed=SEED).lessons[0]
    assert result.mode == "practice"
    not_run = [c for c in result.checks if "no se pudo ejecutar" in feedback_text(c.feedback, "es")]
    assert not_run, "lesson 06's GPT-dependent practice tests skip while lessons 03 and 04 are stubs"
    assert all(c.status is Status.FAILED and (c.score, c.max_score) == (0.0, 1.0) for c in not_run)
    assert all("Skipped:" not in feedback_text(c.feedback, "es") for c in not_run)
    assert "necesita tu GPT" in feedback_text(not_run[0].feedback, "es")
    assert not result.completed and result.xp == 0
    assert result.max_score == len(result.checks)  # one scale: every practice test is worth 1
