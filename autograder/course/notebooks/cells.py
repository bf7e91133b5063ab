"""nbgrader's cells as the notebooks build them: markdown and code cells with fixed ids (the same
sources always build the same notebook) and nbgrader's metadata (solution, locked, grade and
points); a lesson file as code cells, solution cells where a piece holds a region
(sources.split_module cuts the pieces); and the checks' cells: one autograder test cell per
check of course.yml, worth its points, whose only code is hidden and asks
kernel.run_check for the check's outcome.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat

from autograder.core import i18n
from autograder.core.manifest import Lesson
from autograder.course.notebooks.sources import header_line, split_module
from autograder.course.stubs import parse_regions

CHECKS_CELL = "checks"  # the markdown cell above the test cells, with the lesson's total points


def check_cells(lesson: Lesson, t, lang: str) -> list[nbformat.NotebookNode]:
    """The checks' heading, then one autograder test cell per check of course.yml, worth its
    points: a visible comment, and hidden code that asks kernel.run_check for its outcome."""
    total = sum(check.points for check in lesson.checks)
    checks = [check_cell(lesson, check, t, lang) for check in lesson.checks]
    return [markdown_cell(CHECKS_CELL, checks_text(total, t)), *checks]


def checks_text(total: float, t) -> str:
    return t("checks_title") + "\n\n" + t("checks_intro", points=_points(total))


def check_cell(lesson: Lesson, check, t, lang: str, skipped: str | None = None) -> nbformat.NotebookNode:
    """A check's test cell: nbgrader's grade_id is the check's id (the cell's own id adds
    "check-", as cell ids share a namespace with the lesson's other cells)."""
    todo = f" · TODO [{check.todo}]" if check.todo else ""
    if skipped is not None:
        reason = " ".join(skipped.split()).rstrip(".") + "."  # one comment line
        comment, points = t("check_comment_skipped", check=check.id, todo=todo, reason=reason), 0
    elif check.informational:
        comment, points = t("check_comment_informational", check=check.id), check.points
    else:
        comment, points = (
            t("check_comment", check=check.id, todo=todo, points=_points(check.points)),
            check.points,
        )
    call = (
        f"autograder.course.notebooks.kernel.run_check({json.dumps(lesson.id)}, {json.dumps(check.id)}, "
        f"lang={json.dumps(lang)})"
    )
    code = f"{comment}\n### BEGIN HIDDEN TESTS\nimport autograder.course.notebooks.kernel\n{call}\n### END HIDDEN TESTS"
    return code_cell(f"check-{check.id}", code, grade=True, locked=True, points=points, grade_id=check.id)


def file_cells(name: str, text: str) -> list[nbformat.NotebookNode]:
    """A lesson file as code cells: solution cells where a piece holds a region."""
    regions = parse_regions(text, name)
    if name.endswith(".py"):
        pieces = split_module(text, name, [(r.start_line, r.end_line) for r in regions])
    else:
        pieces = [text.strip("\n")]
    cells = []
    for part, piece in enumerate(pieces, start=1):
        source = header_line(name, part, len(pieces)) + "\n" + piece
        solution = bool(parse_regions(piece, name))
        cells.append(
            code_cell(f"code-{cell_slug(name)}-{part}", source, solution=solution, locked=not solution)
        )
    return cells


def catalog_text(lang: str, key: str, **params) -> str:
    """A text of the notebooks' catalog (messages/<lang>/notebooks.yml)."""
    return i18n.translate(f"notebooks.{key}", lang, **params)


def markdown_cell(cell_id: str, text: str) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_markdown_cell(text.strip("\n"))
    cell.id = cell_id
    cell.metadata = {"nbgrader": _nbgrader(cell_id, locked=True)}
    return cell


def code_cell(
    cell_id: str,
    source: str,
    *,
    solution: bool = False,
    grade: bool = False,
    locked: bool = False,
    points: float | None = None,
    collapsed: bool = False,
    grade_id: str | None = None,
) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source)
    cell.id = cell_id  # fixed ids: the same sources always build the same notebook
    cell.metadata = {
        "nbgrader": _nbgrader(
            grade_id or cell_id, solution=solution, grade=grade, locked=locked, points=points
        )
    }
    if collapsed:
        cell.metadata["jupyter"] = {"source_hidden": True}  # long and not to edit: shown on a click
    return cell


def _nbgrader(
    grade_id: str,
    *,
    solution: bool = False,
    grade: bool = False,
    locked: bool = False,
    points: float | None = None,
) -> dict:
    meta = {
        "grade": grade,
        "grade_id": grade_id,
        "locked": locked,
        "schema_version": 3,
        "solution": solution,
        "task": False,
    }
    if grade:
        meta["points"] = _points(points)
    return meta


def _points(points: float) -> int | float:
    return int(points) if float(points).is_integer() else float(points)


def cell_slug(name: str) -> str:
    """A file name as part of an nbgrader cell id (letters, digits, _ and - only)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", Path(name).stem)
