"""`Pendientes` names every TODO left to write: a check meets only the first stub on its way, so
the TODOs behind it are named too (render.labels.pending_line, the terminal's summary line).
Real gradings of lesson 03 with the real engine."""

from __future__ import annotations

import re

from support.grading import grade_folder, write_submission
from support.project import ROOT
from support.variants import solution_files

from autograder.core.regions import parse_regions, revert_region
from autograder.core.results import CourseResult
from autograder.course.stubs import strip_markers
from autograder.render.terminal import render_text


def _summary(course, lesson, folder, lang: str = "es") -> str:
    """The terminal's Pendientes line of a lesson's grading, unwrapped."""
    result = grade_folder(course, lesson, folder)
    text = render_text(CourseResult(course.name, lang, 0, [result]), lang, color=False, width=1000)
    word = {"es": "Pendiente", "en": "Pending"}[lang]
    lines = [line.strip() for line in text.splitlines() if line.strip().startswith(f"✘ {word}")]
    assert len(lines) == 1, text
    return lines[0]


def _named(line: str) -> list[str]:
    return re.findall(r"TODO \[([^\]]+)\]", line)


def test_an_untouched_lesson_names_all_its_todos(course, lesson03, tmp_path):
    stub = write_submission(
        tmp_path / "stub",
        {p.name: p.read_text(encoding="utf-8") for p in (ROOT / "exercises" / lesson03.folder).glob("*.py")},
    )
    line = _summary(course, lesson03, stub)
    # The checks stop at five of them; the four behind are named as not checkable yet.
    assert sorted(_named(line)) == sorted(todo.id for todo in lesson03.todos), line
    first, _, behind = line.partition("; y detrás, sin poder comprobarse aún, ")
    assert first.startswith("✘ Pendientes: TODO [np-mask]") and behind, line
    assert set(_named(behind)) == {"head-reshape", "scaling", "contiguous-view", "fused"}, line
    assert "dependen 20 comprobaciones" in line


def test_one_todo_left_is_named_alone(course, lesson03, tmp_path):
    # Only the fused path is still the stub: its checks stop at it, and every other TODO passes.
    titles = {todo.id: todo.title["es"] for todo in lesson03.todos}
    original = (ROOT / "solutions" / lesson03.folder / "attention.py").read_text(encoding="utf-8")
    index = next(
        i for i, region in enumerate(parse_regions(original, "attention.py")) if region.id == "fused"
    )
    files = solution_files(lesson03)
    files["attention.py"] = strip_markers(
        revert_region(original, "attention.py", index, titles), "attention.py"
    )
    line = _summary(course, lesson03, write_submission(tmp_path / "sub", files))
    assert _named(line) == ["fused"], line
    assert line.startswith(f"✘ Pendiente: TODO [fused] ({titles['fused']})") and "detrás" not in line, line
