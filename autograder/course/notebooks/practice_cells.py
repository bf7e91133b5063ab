"""The practice tests in a lesson's notebook: each test file of exercises/NN-slug/ as a collapsed
`%%writefile` cell (with the notebook's docstring in place of its own), the collapsed cell that
defines `comprobar` (practice.py's code, copied as text with the texts it prints in the
notebook's language) and the visible cell that calls it on the learner's cells.
"""

from __future__ import annotations

import ast
import functools
import json
from pathlib import Path

import nbformat

from autograder.core import i18n, regions
from autograder.core.manifest import Course, Lesson
from autograder.course.notebooks.cells import cell_slug, code_cell, markdown_cell

PRACTICE_TESTS = "test_*.py"
PRACTICE_TEXTS = "notebooks.practice."  # the catalog's texts that comprobar() prints
# practice.py is copied into each notebook as text, never imported here: it runs in the
# learner's kernel (and importing it through this package would tie build to the package's
# command line, which imports build).
PRACTICE_RUNNER = Path(__file__).with_name("practice.py")


def practice_tests(course: Course, lesson: Lesson) -> list[Path]:
    return sorted((course.root / "exercises" / lesson.folder).glob(PRACTICE_TESTS))


def practice_cells(course: Course, lesson: Lesson, t, lang: str) -> list[nbformat.NotebookNode]:
    """The practice tests as `%%writefile` cells (collapsed, readable), the cell that defines
    `comprobar` (collapsed: practice.py's code) and the visible cell that calls it."""
    tests = practice_tests(course, lesson)
    if not tests:
        return []
    first_todo = lesson.todos[0].id if lesson.todos else "..."
    cells = [markdown_cell("practice", t("practice_title") + "\n\n" + t("practice_intro", todo=first_todo))]
    for path in tests:
        text = _practice_docstring(
            path.read_text(encoding="utf-8"), t("practice_tests_doc", lesson=lesson.id)
        )
        # Written to a file, never run in the kernel: it imports the lesson's files from disk.
        cells.append(
            code_cell(
                f"practice-{cell_slug(path.name)}",
                f"%%writefile {path.name}\n" + text.strip("\n"),
                locked=True,
                collapsed=True,
            )
        )
    # What comprobar() prints, in the notebook's language (the learner's kernel has no catalog).
    keys = sorted(key for key in i18n.catalog(lang) if key.startswith(PRACTICE_TEXTS))
    texts = {key.removeprefix(PRACTICE_TEXTS): i18n.catalog(lang)[key] for key in keys}
    uses = [(used.id, used.folder) for used in (course.lesson(u) for u in lesson.uses)]
    call = (
        "comprobar = PracticeTests(\n"
        f"    {json.dumps(lesson.id)},\n"
        f"    files={json.dumps(list(lesson.files))},\n"
        f"    tests={json.dumps([path.name for path in tests])},\n"
        f"    uses={json.dumps(uses)},\n"
        f"    todos={json.dumps([todo.id for todo in lesson.todos])},\n"
        f"    pending={json.dumps(regions.PENDING_PATTERN)},\n"
        "    texts={\n"
        + "".join(
            f"        {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)},\n" for k, v in texts.items()
        )
        + "    },\n)"
    )
    runner = "\n".join([t("practice_runner_comment"), _practice_source(), "", call])
    cells.append(code_cell("practice-runner", runner, locked=True, collapsed=True))
    cells.append(code_cell("practice-run", t("practice_run_comment") + "\ncomprobar()", locked=True))
    return cells


@functools.cache
def _practice_source() -> str:
    """practice.py's code, without its module docstring (written for maintainers)."""
    text = PRACTICE_RUNNER.read_text(encoding="utf-8")
    docstring = ast.parse(text).body[0]
    return "\n".join(text.split("\n")[docstring.end_lineno :]).strip("\n")


def _practice_docstring(text: str, docstring: str) -> str:
    """A practice test file with the notebook's docstring in place of its own (which tells how
    to run it from the repository)."""
    body = ast.parse(text).body
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(getattr(body[0], "value", None), ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        text = "\n".join(text.split("\n")[body[0].end_lineno :])
    return f'"""{docstring}\n"""\n\n' + text.lstrip("\n")
