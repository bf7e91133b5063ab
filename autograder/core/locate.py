"""Where a check points in the learner's files: the line of its TODO's `TODO [id]` comment (the
stub's first hint line, which learners usually keep), or of its question in the quiz file.

The grading workflow's annotations (autograder/github/steps.py) and the learner's next step
(autograder/learner/steps.py) point at the same line, so both ask here.
"""

from __future__ import annotations

from pathlib import Path

from autograder.core.manifest import Lesson
from autograder.core.regions import tag


def marker(lesson: Lesson, todo: str | None, check_id: str) -> tuple[str, str | None]:
    """The file a failed check points at (posix, relative to the repository root) and the text
    its line holds: `TODO [id]` for a TODO of the lesson, `pregunta_N:` for a quiz check, None
    for a lesson-wide check (the lesson's last file, no particular line)."""
    folder = Path("exercises") / lesson.folder
    todos = {t.id: t for t in lesson.todos}
    if todo in todos:
        name, needle = todos[todo].file, tag(todo)
    elif lesson.is_quiz_check(check_id):
        name, needle = lesson.quiz, f"pregunta_{check_id.split('-', 1)[1]}:"
    else:
        name, needle = lesson.files[-1], None
    return (folder / name).as_posix(), needle


def read_rows(repo: Path, path: str) -> list[str] | None:
    """The lines of a learner's file (undecodable bytes replaced); None when it cannot be read."""
    try:
        return (Path(repo) / path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None


def first_row(rows: list[str], needle: str) -> int | None:
    """The number (from 1) of the first line holding `needle`; None when none does."""
    return next((number for number, row in enumerate(rows, start=1) if needle in row), None)


def locate(lesson: Lesson, todo: str | None, check_id: str, repo: Path) -> tuple[str, int]:
    """Where a failed check points in the learner's repository `repo`: its marker's file (see
    marker) and the marker's line, else line 1."""
    path, needle = marker(lesson, todo, check_id)
    if needle is None:
        return path, 1
    return path, first_row(read_rows(repo, path) or [], needle) or 1
