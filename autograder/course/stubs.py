"""Exercise stubs: exercises/NN-slug/ is generated from solutions/NN-slug/, the single source.

A developer tool, not lesson material. In a solution file (Python or YAML) each piece of
code a learner writes is a region named after its todo in course.yml (or `quiz` for quiz
answers):

        ### BEGIN SOLUTION <todo-id>
        #: hint for the learner (Spanish), one or more lines, optional
        #= code the stub keeps instead (optional; e.g. `#= return None`)
        ...solution code...
        ### END SOLUTION

In the exercise the whole region becomes, at the BEGIN marker's indentation,

        # TODO [<todo-id>]: first hint line
        # further hint lines
        <the `#=` lines without their prefix>, or when there are none (Python only):
        raise NotImplementedError("TODO [<todo-id>] pendiente: <the todo's Spanish title>")

Every todo of a lesson needs at least one region, in the file course.yml gives it; a todo
may have several regions. `sync` keeps exercises/ equal to what the solutions generate (a
test fails on drift); `revert_region` lets the project's tests revert one region at a time
to prove that some check of its todo catches it.

`sync` also writes the reference pieces that later lessons are graded against
(autograder/graders/reference/NN-slug/<file>: the solution files of every lesson some lesson
`uses`, without markers). They live with the hidden graders, never in a student release.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from autograder.core.files import CACHE_DIRS, walk_files
from autograder.core.manifest import QUIZ_REGION, Course, Lesson, _shown

__all__ = [
    "Region",
    "StubError",
    "generate_lesson",
    "make_stub",
    "parse_regions",
    "revert_region",
    "strip_markers",
    "sync",
]

# Files that may hold regions (their comment character is #); others are copied verbatim.
REGION_SUFFIXES = (".py", ".yml", ".yaml")

_BEGIN = re.compile(r"^(?P<indent>[ \t]*)###[ \t]*BEGIN[ \t]+SOLUTION(?:[ \t]+(?P<id>\S+))?[ \t]*$")
_END = re.compile(r"^[ \t]*###[ \t]*END[ \t]+SOLUTION[ \t]*$")
# Anything else that looks like a marker is a typo, never a comment to keep.
_MARKER_LIKE = re.compile(r"^[ \t]*###[ \t]*(BEGIN|END)", re.IGNORECASE)


class StubError(ValueError):
    """A solution file's regions are malformed, or don't match course.yml."""


@dataclass
class Region:
    id: str
    file: str
    start_line: int  # 1-based line of `### BEGIN SOLUTION`
    end_line: int  # 1-based line of `### END SOLUTION`
    indent: str  # the BEGIN marker's indentation
    hint: list[str] = field(default_factory=list)  # the `#:` texts, in order
    stub_lines: list[str] = field(default_factory=list)  # the `#=` lines, already indented
    body: list[str] = field(default_factory=list)  # the solution lines, as written

    def stub(self, title: str | None) -> list[str]:
        """The lines that replace the region in the exercise."""
        tag = f"TODO [{self.id}]"
        first = self.hint[0].strip() if self.hint else ""
        lines = [f"{self.indent}# {tag}: {first}" if first else f"{self.indent}# {tag}"]
        lines += [f"{self.indent}# {text}".rstrip() for text in self.hint[1:]]
        if self.stub_lines:
            return lines + self.stub_lines
        message = f"{tag} pendiente: {title}" if title else f"{tag} pendiente"
        # json.dumps gives a double-quoted literal that is also valid Python.
        return lines + [f"{self.indent}raise NotImplementedError({json.dumps(message, ensure_ascii=False)})"]


# --- one file ----------------------------------------------------------------------------------


def parse_regions(text: str, filename: str) -> list[Region]:
    """The solution regions of a file, in order; StubError (file:line) if the markers are malformed."""
    regions: list[Region] = []
    current: Region | None = None
    for number, line in enumerate(_lines(text)[0], start=1):
        begin, end = _BEGIN.match(line), _END.match(line)
        if begin:
            if begin["id"] is None:
                raise StubError(
                    f"{filename}:{number}: `### BEGIN SOLUTION` needs a region id (a todo id or 'quiz')"
                )
            if current is not None:
                raise StubError(
                    f"{filename}:{number}: region {begin['id']!r} begins inside region {current.id!r} "
                    f"(opened at line {current.start_line}); regions cannot nest"
                )
            current = Region(begin["id"], filename, number, 0, begin["indent"])
        elif end:
            if current is None:
                raise StubError(
                    f"{filename}:{number}: `### END SOLUTION` without a `### BEGIN SOLUTION` before it"
                )
            current.end_line = number
            regions.append(current)
            current = None
        elif _MARKER_LIKE.match(line):
            raise StubError(
                f"{filename}:{number}: malformed marker {line.strip()!r}; "
                "expected `### BEGIN SOLUTION <id>` or `### END SOLUTION`"
            )
        elif current is not None:
            stripped = line.lstrip()
            if stripped.startswith("#:"):
                current.hint.append(_after_prefix(stripped))
            elif stripped.startswith("#="):
                rest = _after_prefix(stripped)
                current.stub_lines.append(current.indent + rest if rest else "")
            else:
                current.body.append(line)
    if current is not None:
        raise StubError(
            f"{filename}:{current.start_line}: region {current.id!r} is never closed with `### END SOLUTION`"
        )
    return regions


def make_stub(text: str, filename: str, todo_titles: dict[str, str]) -> str:
    """The exercise version of a solution file: every region replaced by its stub.

    `todo_titles` maps the lesson's todo ids to their Spanish titles (the message of the
    stub's NotImplementedError); a region's id must be one of them or 'quiz'.
    """
    return _render(text, filename, todo_titles, lambda index: True)


def revert_region(text: str, filename: str, region_index: int, todo_titles: dict[str, str]) -> str:
    """The solution with only its `region_index`-th region (0-based) reverted to the stub.

    The other regions keep their solution code, without markers: what a learner who did
    every other TODO would have.
    """
    count = len(parse_regions(text, filename))
    if not 0 <= region_index < count:
        raise StubError(f"{filename} has {count} region(s); there is no region number {region_index}")
    return _render(text, filename, todo_titles, lambda index: index == region_index)


def strip_markers(text: str, filename: str = "<text>") -> str:
    """The solution as a learner's finished file: markers, `#:` and `#=` lines removed."""
    lines, newline = _lines(text)
    return newline.join(_assemble(lines, parse_regions(text, filename), lambda index: False, {})[0])


def _render(text: str, filename: str, todo_titles: dict[str, str], stubbed: Callable[[int], bool]) -> str:
    lines, newline = _lines(text)
    regions = parse_regions(text, filename)
    for region in regions:
        if region.id not in todo_titles and region.id != QUIZ_REGION:
            known = ", ".join(todo_titles) or "(none)"
            raise StubError(
                f"{filename}:{region.start_line}: unknown region id {region.id!r}; "
                f"expected a todo id of the lesson ({known}) or {QUIZ_REGION!r}"
            )
        if not region.stub_lines and not filename.endswith(".py"):
            raise StubError(
                f"{filename}:{region.start_line}: region {region.id!r} needs `#=` lines: outside Python "
                "files the stub cannot raise NotImplementedError, so give its lines with `#= `"
            )
    out, spans = _assemble(lines, regions, stubbed, todo_titles)
    result = newline.join(out)
    _check_syntax(result, filename, spans)
    return result


def _assemble(
    lines: list[str], regions: list[Region], stubbed: Callable[[int], bool], titles: dict[str, str]
) -> tuple[list[str], list[tuple[int, int, Region]]]:
    """The output lines, and for each stubbed region its 1-based (first, last) output lines."""
    out: list[str] = []
    spans = []
    position = 0
    for index, region in enumerate(regions):
        out += lines[position : region.start_line - 1]
        if stubbed(index):
            stub = region.stub(titles.get(region.id))
            spans.append((len(out) + 1, len(out) + len(stub), region))
            out += stub
        else:
            out += region.body
        position = region.end_line
    return out + lines[position:], spans


def _check_syntax(result: str, filename: str, spans: list[tuple[int, int, Region]]) -> None:
    if filename.endswith(".py"):
        try:
            compile(result, filename, "exec", dont_inherit=True)
        except SyntaxError as exc:
            near = next((r for first, last, r in spans if first - 1 <= (exc.lineno or 0) <= last + 1), None)
            where = (
                f" in the stub of region {near.id!r} (solution lines {near.start_line}-{near.end_line})"
                if near
                else ""
            )
            raise StubError(
                f"{filename}:{near.start_line if near else exc.lineno}: the generated stub is not valid "
                f"Python{where}: {exc.msg} at stub line {exc.lineno}"
            ) from None
    elif filename.endswith(REGION_SUFFIXES):  # YAML
        try:
            yaml.safe_load(result)
        except yaml.YAMLError as exc:
            raise StubError(f"{filename}: the generated stub is not valid YAML: {exc}") from None


def _after_prefix(stripped: str) -> str:
    """The text of a `#:` / `#=` line: after the prefix and one optional space, kept as is."""
    rest = stripped[2:]
    return (rest[1:] if rest.startswith(" ") else rest).rstrip()


def _lines(text: str) -> tuple[list[str], str]:
    newline = "\r\n" if "\r\n" in text else "\n"
    return text.replace("\r\n", "\n").split("\n"), newline


# --- a lesson, the course ------------------------------------------------------------------------


def generate_lesson(lesson: Lesson, solutions_dir: Path, exercises_dir: Path) -> dict[str, str]:
    """Every file exercises/<folder>/ must hold: relative path (posix) -> text.

    `solutions_dir` and `exercises_dir` are the course's solutions/ and exercises/ folders.
    Files with regions are stubbed, other text files copied; __pycache__, .pytest_cache and
    *.pyc are skipped. Checks the lesson against course.yml: its files and quiz exist, every
    region belongs to a todo of that file (or is 'quiz'), every todo has a region.
    """
    source = Path(solutions_dir) / lesson.folder
    if not source.is_dir():
        raise StubError(f"{_shown(source)}: solution folder of lesson {lesson.folder} not found")
    if source.resolve() == (Path(exercises_dir) / lesson.folder).resolve():
        raise StubError(
            f"{_shown(source)}: exercises and solutions are the same folder; "
            "stubs would overwrite the solutions"
        )
    titles = {todo.id: todo.title["es"] for todo in lesson.todos}
    files: dict[str, str] = {}
    region_ids: dict[str, set[str]] = {}
    for rel in walk_files(source):
        path = source / rel
        shown = _shown(path)
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            raise StubError(f"{shown}: not UTF-8 text; lesson folders may only hold text files") from None
        if rel.endswith(REGION_SUFFIXES):
            regions = parse_regions(text, shown)
            for region in regions:
                if region.id in titles and lesson.todo(region.id).file != rel:
                    raise StubError(
                        f"{shown}:{region.start_line}: region {region.id!r} is in {rel}, but course.yml "
                        f"puts todo {region.id!r} in {lesson.todo(region.id).file}"
                    )
            region_ids[rel] = {region.id for region in regions}
            if regions:
                text = make_stub(text, shown, titles)
        files[rel] = text
    for name in lesson.handed_in:
        if name not in files:
            raise StubError(
                f"{_shown(source / name)}: not found, but course.yml lists it for lesson {lesson.folder}"
            )
    for todo in lesson.todos:
        if todo.id not in region_ids.get(todo.file, set()):
            raise StubError(
                f"{_shown(source / todo.file)}: todo {todo.id!r} of course.yml has no "
                f"`### BEGIN SOLUTION {todo.id}` region in this file"
            )
    return files


def sync(course: Course, check_only: bool) -> list[str]:
    """Compare (check_only) or bring exercises/ in line with the solutions; the drift found.

    With check_only=False, missing and differing files are written and extra files removed
    (cache folders are left alone). Exercise folders of lessons that are not in course.yml
    are reported, never removed.
    """
    solutions_dir, exercises_dir = course.root / "solutions", course.root / "exercises"
    if not solutions_dir.is_dir():
        raise StubError(
            f"{_shown(solutions_dir)}: not found; the stubs are generated from the solutions, "
            "which only the course's own repository has"
        )
    # The reference pieces first: the graders of a later lesson need them even while another
    # lesson's solution is still being written.
    drift: list[str] = _sync_references(course, solutions_dir, check_only)
    generated = {lesson.folder: generate_lesson(lesson, solutions_dir, exercises_dir) for lesson in course.lessons}
    drift += _sync_stub_copies(course, generated, check_only)
    for lesson in course.lessons:
        expected = generated[lesson.folder]
        drift += _sync_folder(exercises_dir / lesson.folder, f"exercises/{lesson.folder}", expected, check_only)
    folders = {lesson.folder for lesson in course.lessons}
    if exercises_dir.is_dir():
        for extra in sorted(exercises_dir.iterdir()):
            if extra.is_dir() and extra.name not in folders and extra.name not in CACHE_DIRS:
                drift.append(
                    f"exercises/{extra.name}/ is not a lesson of course.yml (remove it or add the lesson)"
                )
    return drift


REFERENCE_DIR = Path("autograder") / "graders" / "reference"


def reference_pieces(course: Course, solutions_dir: Path) -> dict[str, str]:
    """{path under the reference folder: text} for the files of every lesson that a later
    lesson `uses`: the solution files without region markers."""
    used = {u for lesson in course.lessons for u in lesson.uses}
    pieces = {}
    for lesson in course.lessons:
        if lesson.id in used:
            for name in lesson.files:
                source = solutions_dir / lesson.folder / name
                if not source.is_file():
                    raise StubError(f"{_shown(source)}: not found, but course.yml lists it for lesson {lesson.folder}")
                pieces[f"{lesson.folder}/{name}"] = strip_markers(source.read_text(encoding="utf-8"), _shown(source))
    return pieces


# The graders' copy of each lesson file's stub: in a learner's repository exercises/ holds the
# learner's own code, and autograder/engine/blame.py needs the stub to tell given code from a TODO's.
STUB_COPIES_DIR = Path("autograder") / "graders" / "stubs"


def _sync_stub_copies(course: Course, generated: dict[str, dict[str, str]], check_only: bool) -> list[str]:
    target = course.root / STUB_COPIES_DIR
    if not target.parent.is_dir():
        return []
    copies = {f"{lesson.folder}/{name}": generated[lesson.folder][name]
              for lesson in course.lessons for name in lesson.files
              if name.endswith(".py") and name in generated[lesson.folder]}
    return _sync_folder(target, STUB_COPIES_DIR.as_posix(), copies, check_only)


def _sync_references(course: Course, solutions_dir: Path, check_only: bool) -> list[str]:
    # Only in the course's own repository (the one holding the graders), never in a copy of
    # exercises/ and solutions/ alone.
    target = course.root / REFERENCE_DIR
    if not target.parent.is_dir():
        return []
    return _sync_folder(target, REFERENCE_DIR.as_posix(), reference_pieces(course, solutions_dir), check_only)


def _sync_folder(target: Path, label: str, expected: dict[str, str], check_only: bool) -> list[str]:
    """Make `target` hold exactly `expected` ({relative path: text}); the drift found, each
    line naming the file as `label/rel`. With check_only nothing is written."""
    present = set(walk_files(target)) if target.is_dir() else set()
    drift = []
    for rel, text in expected.items():
        path = target / rel
        if rel not in present:
            drift.append(f"{label}/{rel} is missing")
        elif path.read_bytes() != text.encode("utf-8"):
            drift.append(f"{label}/{rel} differs from what `autograder stubs` generates")
        else:
            continue
        if not check_only:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "w", encoding="utf-8", newline="") as fh:
                fh.write(text)
    for rel in sorted(present - expected.keys()):
        drift.append(f"{label}/{rel} should not exist")
        if not check_only:
            (target / rel).unlink()
    if not check_only and target.is_dir():
        _remove_empty_dirs(target)
    return drift


def _remove_empty_dirs(folder: Path) -> None:
    for dirpath, _, _ in os.walk(folder, topdown=False):
        path = Path(dirpath)
        inside_cache = any(part in CACHE_DIRS for part in path.relative_to(folder).parts)
        if path != folder and not inside_cache and not any(path.iterdir()):
            path.rmdir()
