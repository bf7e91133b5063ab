"""A learner's own code of a lesson: the lines of their files that the exercise stub does not
hold, each with the file, the line number and the TODO it belongs to.

The stub of each file is the course's exercise (exercises/<lesson>/<file>, as the learner release
hands it out): its regions are the `# TODO [id]` blocks that core/regions.py writes. A learner
replaces those blocks with code; a line-by-line diff against the stub (difflib, on each line's
shape: its names as V and its spacing gone, so re-indenting a given line or renaming its variables
does not make it the learner's) leaves exactly what they wrote, in and around the TODOs, and the
stub's nearest `TODO [id]` tag above a block names its TODO. Blank lines are not code. What is
left is compared as one text per lesson: the lesson's files together.

Learners' files are hostile input: nothing below the learner's folder that is a symlink is
followed (a file or folder behind one counts as missing, and says so), a file is read up to
MAX_BYTES, undecodable bytes are replaced, and a file that does not parse is still compared (its
syntax error is a note of the report, never a reason to skip it).
"""

from __future__ import annotations

import ast
import difflib
import errno
import keyword
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from autograder.cohort.roster import Learner
from autograder.core.manifest import Course, Lesson
from autograder.core.regions import REGION_SUFFIXES, tagged

_NAME = re.compile(r"[^\W\d]\w*")
_SPACE = re.compile(r"\s+")
# Per file: the longest lesson file is ~10 KB; a longer one is cut, and noted. Tokenising costs
# ~1 s per 64 KB of hostile code (a 500 KB file: ~10 s, per lesson and learner).
MAX_BYTES = 64 * 1024


@dataclass(frozen=True)
class Line:
    file: str  # the lesson's file name, e.g. attention.py
    number: int  # 1-based, in the learner's file
    text: str  # as written (indentation kept, newline removed)
    todo: str | None  # the TODO it belongs to, None when no tag precedes it


@dataclass
class OwnCode:
    learner: str
    lesson: str
    lines: list[Line] = field(default_factory=list)
    # (file, what): "missing", "link", "unreadable: <why>", "cut", "syntax: <line>: <msg>"
    notes: list[tuple[str, str]] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n".join(line.text for line in self.lines) + ("\n" if self.lines else "")


def compared_files(lesson: Lesson) -> list[str]:
    """The lesson's files that hold TODO regions (the quiz's answers are alike by nature)."""
    return [name for name in lesson.files if name.endswith(REGION_SUFFIXES)]


def stub_texts(course: Course, lesson: Lesson) -> dict[str, str]:
    """{file: the exercise's text} of the lesson's compared files; a missing stub is '' (then
    every line of the learner's file counts as theirs)."""
    folder = course.root / "exercises" / lesson.folder
    texts = {}
    for name in compared_files(lesson):
        try:
            texts[name] = (folder / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            texts[name] = ""
    return texts


def lesson_folder(learner_folder: Path, lesson: Lesson) -> Path:
    """Where a learner's lesson lives: <folder>/exercises/<lesson> in a clone, else <folder>/<lesson>;
    or, as grade-all takes it in a one-lesson run, a folder holding the lesson's files themselves."""
    exercises = Learner(learner_folder.name, learner_folder).exercises
    folder = exercises / lesson.folder
    if not os.path.lexists(folder) and os.path.lexists(exercises / lesson.files[0]):
        return exercises
    return folder


def own_code(learner: str, learner_folder: Path, lesson: Lesson, stubs: dict[str, str]) -> OwnCode:
    """The learner's own lines of `lesson` (see the module docstring)."""
    own = OwnCode(learner, lesson.id)
    folder = lesson_folder(learner_folder, lesson)
    for name, stub in stubs.items():
        path = folder / name
        text, problem = read_learner_file(learner_folder, path)
        if problem is not None:
            own.notes.append((name, problem))
        if text is None:
            continue
        syntax = syntax_error(text, name)
        if syntax is not None:
            own.notes.append((name, syntax))
        own.lines += own_lines(stub, text, name)
    return own


def own_lines(stub: str, text: str, name: str) -> list[Line]:
    """The lines of `text` the `stub` does not hold, with their TODO (see the module docstring)."""
    stub_rows, rows = stub.splitlines(), text.splitlines()
    matcher = difflib.SequenceMatcher(
        None, [shape(row) for row in stub_rows], [shape(row) for row in rows], autojunk=False
    )
    found = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op not in ("insert", "replace"):
            continue
        todo = _todo_above(stub_rows, i2 if op == "replace" else i1)
        found += [Line(name, j + 1, rows[j], todo) for j in range(j1, j2) if rows[j].strip()]
    return found


def shape(row: str) -> str:
    """A line as the diff sees it: names as V, spacing gone (a given line with a variable renamed,
    or re-indented, is still the stub's line, not the learner's)."""
    return _SPACE.sub("", _NAME.sub(lambda found: found[0] if keyword.iskeyword(found[0]) else "V", row))


def _todo_above(stub_rows: list[str], end: int) -> str | None:
    for row in reversed(stub_rows[:end]):
        todo = tagged(row)
        if todo is not None:
            return todo
    return None


def syntax_error(text: str, name: str) -> str | None:
    """'syntax: <line>: <message>' when a Python file does not parse; compiled to a tree only,
    never run."""
    if not name.endswith(".py"):
        return None
    try:
        compile(text, name, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:
        return f"syntax: {exc.lineno or '?'}: {exc.msg}"
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, absurd nesting
        return f"syntax: ?: {type(exc).__name__}"
    return None


def read_learner_file(boundary: Path, path: Path) -> tuple[str | None, str | None]:
    """(text, problem): the file's text (None when it cannot be read) and what went wrong or was
    cut. Every part of the path below `boundary` must be a real folder or file, not a symlink."""
    try:
        relative = path.relative_to(boundary)
    except ValueError:
        return None, "unreadable: outside the learner's folder"
    current = boundary
    try:
        if stat.S_ISLNK(os.lstat(boundary).st_mode):
            return None, "link"
        for part in relative.parts:
            current = current / part
            mode = os.lstat(current).st_mode
            if stat.S_ISLNK(mode):
                return None, "link"
        if not stat.S_ISREG(mode):
            return None, "unreadable: not a file"
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        fd = os.open(path, flags)
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(MAX_BYTES + 1)
    except FileNotFoundError:
        return None, "missing"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None, "link"
        return None, f"unreadable: {type(exc).__name__}"
    cut = len(data) > MAX_BYTES
    return data[:MAX_BYTES].decode("utf-8", errors="replace"), ("cut" if cut else None)
