"""Exercise stubs: exercises/NN-slug/ is generated from solutions/NN-slug/, the single source.

A developer tool, not lesson material. The regions' grammar (the markers, the stub a region
becomes, the tag and the pending message) is autograder/core/regions.py; this module applies
it to whole lessons and the course.

Every todo of a lesson needs at least one region, in the file course.yml gives it; a todo
may have several regions. `sync` keeps exercises/ equal to what the solutions generate (a
test fails on drift); `revert_region` lets the project's tests revert one region at a time
to prove that some check of its todo catches it.

Nothing else is generated into the repository: the engine makes the stubs it compares a
learner's file with, and the reference pieces later lessons are graded against, from the
solutions itself (autograder/engine/references.py).
"""

from __future__ import annotations

import os
from pathlib import Path

from autograder.core.files import CACHE_DIRS, walk_files
from autograder.core.manifest import Course, Lesson, _shown
from autograder.core.regions import (
    REGION_SUFFIXES,
    Region,
    RegionError,
    make_stub,
    parse_regions,
    revert_region,
    strip_markers,
)

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

# The grammar's error, under the name this module's callers have always caught.
StubError = RegionError


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
    generated = {lesson.folder: generate_lesson(lesson, solutions_dir, exercises_dir) for lesson in course.lessons}
    drift: list[str] = []
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
