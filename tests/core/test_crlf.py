"""A learner on Windows whose git converts line endings (core.autocrlf) has CRLF in every file
of the lesson: their solution must be graded exactly like the same file with LF, their
untouched stubs must still read as pending TODOs, their quiz answers must read the same, and a
failed check must still point at the TODO's line. Real grading runs (real worker processes)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.grading import grade_folder
from support.project import ROOT, SEED
from support.variants import solution_folder

from autograder.core.i18n import feedback_text
from autograder.core.locate import locate
from autograder.core.results import Status
from autograder.engine import quiz

# Lesson 01 reads a text corpus and has a quiz; lesson 03 is the longest single-file lesson.
LESSON_IDS = ["01", "03"]


def _line_endings(data: bytes, crlf: bool) -> bytes:
    lf = data.replace(b"\r\n", b"\n")
    return lf.replace(b"\n", b"\r\n") if crlf else lf


def _copy(src: Path, dest: Path, *, crlf: bool) -> Path:
    """A copy of the lesson folder `src` with every file's line endings made CRLF (what git's
    autocrlf checkout does to text files) or LF (the source itself may be a Windows checkout)."""
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__"))  # text files only
    for path in dest.rglob("*"):
        if path.is_file():
            data = _line_endings(path.read_bytes(), crlf)
            path.write_bytes(data)
            # Every line ends the chosen way: the comparison proves something.
            assert data.count(b"\r\n") == (data.count(b"\n") if crlf else 0)
    return dest


def _source(tree: str, folder: str, tmp_path: Path) -> Path:
    """The whole lesson folder of `tree`: exercises/ as it is, or solved (exercises/ overlaid
    with the marked files of solutions/, which holds only those)."""
    if tree == "exercises":
        return ROOT / tree / folder
    return solution_folder(folder, tmp_path / "solved" / folder)


def _verdicts(result) -> list[tuple[str, str, float, float, str]]:
    return [
        (c.id, c.status.value, c.score, c.max_score, feedback_text(c.feedback, "es")) for c in result.checks
    ]


def _graded_both_ways(course, tmp_path, lesson_id, tree: str):
    """The lesson's folder of `tree` (solutions or exercises) graded with LF and with CRLF."""
    lesson = course.lesson(lesson_id)
    src = _source(tree, lesson.folder, tmp_path)
    return [
        grade_folder(course, lesson, _copy(src, tmp_path / kind / lesson.folder, crlf=kind == "crlf"), SEED)
        for kind in ("lf", "crlf")
    ]


@pytest.mark.parametrize("lesson_id", LESSON_IDS)
def test_a_crlf_solution_is_graded_like_the_lf_one(course, tmp_path, lesson_id):
    lf, crlf = _graded_both_ways(course, tmp_path, lesson_id, "solutions")
    assert lf.score == lf.max_score > 0  # the baseline really is full marks
    assert _verdicts(crlf) == _verdicts(lf)
    assert (crlf.score, crlf.xp, crlf.completed) == (lf.score, lf.xp, lf.completed)


@pytest.mark.parametrize("lesson_id", LESSON_IDS)
def test_crlf_stubs_are_still_pending_todos(course, tmp_path, lesson_id):
    lf, crlf = _graded_both_ways(course, tmp_path, lesson_id, "exercises")
    assert crlf.score == 0 and crlf.xp == 0 and not crlf.completed
    assert _verdicts(crlf) == _verdicts(lf)
    graded = [c for c in crlf.checks if c.status is not Status.SKIPPED]
    assert graded and all(c.status is Status.FAILED for c in graded)
    for check in graded:
        text = feedback_text(check.feedback, "es")
        if check.todo:
            assert "pendiente" in text and f"TODO [{check.todo}]" in text, (check.id, text)


class _Folder:
    """What the quiz reader needs of a submission: its files' bytes."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def read_file(self, name: str, max_bytes: int) -> bytes | None:
        path = self.folder / name
        return path.read_bytes()[: max_bytes + 1] if path.is_file() else None


def test_crlf_quiz_answers_read_the_same(course, tmp_path):
    lesson = course.lesson("01")
    assert lesson.quiz == quiz.QUIZ_FILE
    for kind in ("solutions", "exercises"):
        src = _source(kind, lesson.folder, tmp_path)
        lf = quiz.read_answers(_Folder(_copy(src, tmp_path / kind / "lf", crlf=False)))
        crlf = quiz.read_answers(_Folder(_copy(src, tmp_path / kind / "crlf", crlf=True)))
        assert set(lf) == {"pregunta_1", "pregunta_2", "pregunta_3"}
        assert crlf == lf
    answered = quiz.read_answers(_Folder(tmp_path / "solutions" / "crlf"))
    assert all(str(answered[f"pregunta_{n}"]).strip() in quiz.LETTERS for n in (1, 2, 3))


@pytest.mark.parametrize("lesson_id", LESSON_IDS)
def test_a_failed_check_points_at_the_same_line_with_crlf(course, tmp_path, lesson_id):
    lesson = course.lesson(lesson_id)
    places = {}
    for kind in ("lf", "crlf"):
        repo = tmp_path / kind
        _copy(ROOT / "exercises" / lesson.folder, repo / "exercises" / lesson.folder, crlf=kind == "crlf")
        places[kind] = {check.id: locate(lesson, check.todo, check.id, repo) for check in lesson.checks}
    assert places["crlf"] == places["lf"]
    # Each TODO's check really found its `TODO [id]` line (not the fallback, line 1).
    lines = {}
    for check in lesson.checks:
        name, line = places["crlf"][check.id]
        if check.todo:
            text = (tmp_path / "lf" / name).read_text(encoding="utf-8").splitlines()
            assert f"TODO [{check.todo}]" in text[line - 1], (check.id, line)
            lines[check.todo] = line
    assert len(set(lines.values())) == len(lines) > 1


@pytest.mark.parametrize("kind", ["solutions", "exercises"])
def test_crlf_on_the_portable_worker_path(course, tmp_path, monkeypatch, kind):
    """The path a learner on Windows really gets (forced here with AUTOGRADER_WORKER)."""
    monkeypatch.setenv("AUTOGRADER_WORKER", "portable")
    lesson = course.lesson("01")
    src = _source(kind, lesson.folder, tmp_path)
    lf = grade_folder(course, lesson, _copy(src, tmp_path / "lf" / lesson.folder, crlf=False), SEED)
    crlf = grade_folder(course, lesson, _copy(src, tmp_path / "crlf" / lesson.folder, crlf=True), SEED)
    assert crlf.isolation.get("portable") is True and lf.isolation.get("portable") is True
    assert _verdicts(crlf) == _verdicts(lf)
    assert crlf.score == (crlf.max_score if kind == "solutions" else 0) and crlf.max_score > 0
