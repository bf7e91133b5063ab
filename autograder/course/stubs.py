"""Exercise stubs: the files of exercises/NN-slug/ that hold TODOs are generated from
solutions/NN-slug/, the single source of the code a learner writes.

A developer tool, not lesson material. The regions' grammar (the markers, the stub a region
becomes, the tag and the pending message) is autograder/core/regions.py; this module applies
it to whole lessons and the course.

solutions/ holds only files with `### BEGIN SOLUTION` regions (rustlings' shape); everything
else of a lesson (README, hints, practice tests, quiz-free data) lives once, in exercises/. The
finished lesson folder is exercises/ overlaid with solutions/ (`lesson_files`).

Every todo of a lesson needs at least one region, in the file course.yml gives it; a todo
may have several regions. `sync` keeps exercises/ equal to what the solutions generate (a
test fails on drift); `revert_region` lets the project's tests revert one region at a time
to prove that some check of its todo catches it.

Nothing else is generated into the repository: the engine makes the stubs it compares a
learner's file with, and the reference pieces later lessons are graded against, from the
solutions itself (autograder/engine/references.py).
"""

from __future__ import annotations

from pathlib import Path

from autograder.core.files import CACHE_DIRS, display_path, walk_files
from autograder.core.manifest import Course, Lesson
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
    "lesson_files",
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
    The solution files (each must hold regions) are stubbed; the exercise folder's other files
    are its own and kept as they are; __pycache__, .pytest_cache and *.pyc are skipped. Checks
    the lesson against course.yml: its files and quiz exist among the solutions, every region
    belongs to a todo of that file (or is 'quiz'), every todo has a region.
    """
    source = Path(solutions_dir) / lesson.folder
    if not source.is_dir():
        raise StubError(f"{display_path(source)}: solution folder of lesson {lesson.folder} not found")
    target = Path(exercises_dir) / lesson.folder
    if source.resolve() == target.resolve():
        raise StubError(
            f"{display_path(source)}: exercises and solutions are the same folder; "
            "stubs would overwrite the solutions"
        )
    titles = {todo.id: todo.title["es"] for todo in lesson.todos}
    stubs: dict[str, str] = {}
    region_ids: dict[str, set[str]] = {}
    for rel in walk_files(source):
        path = source / rel
        shown = display_path(path)
        text = _read_text(path)
        regions = parse_regions(text, shown) if rel.endswith(REGION_SUFFIXES) else []
        if not regions:
            raise StubError(
                f"{shown}: has no `### BEGIN SOLUTION` region; solutions/ holds only files with "
                f"regions: move it to {display_path(target / rel)} (the lesson's other files live there only)"
            )
        for region in regions:
            if region.id in titles and lesson.todo(region.id).file != rel:
                raise StubError(
                    f"{shown}:{region.start_line}: region {region.id!r} is in {rel}, but course.yml "
                    f"puts todo {region.id!r} in {lesson.todo(region.id).file}"
                )
        region_ids[rel] = {region.id for region in regions}
        stubs[rel] = make_stub(text, shown, titles)
    for name in lesson.handed_in:
        if name not in stubs:
            raise StubError(
                f"{display_path(source / name)}: not found, but course.yml lists it for lesson {lesson.folder}"
            )
    for todo in lesson.todos:
        if todo.id not in region_ids.get(todo.file, set()):
            raise StubError(
                f"{display_path(source / todo.file)}: todo {todo.id!r} of course.yml has no "
                f"`### BEGIN SOLUTION {todo.id}` region in this file"
            )
    own = {rel: _read_text(target / rel) for rel in _walk(target) if rel not in stubs}
    return {rel: (stubs[rel] if rel in stubs else own[rel]) for rel in sorted(own.keys() | stubs.keys())}


def lesson_files(root: Path, folder: str) -> dict[str, Path]:
    """The finished lesson `folder` (e.g. "03-atencion-causal") of the course at `root`:
    {relative path (posix): file}, exercises/<folder>/'s files overlaid with solutions/<folder>/'s
    marked ones (caches skipped). What a whole solved lesson folder used to be."""
    files = {rel: Path(root) / "exercises" / folder / rel for rel in _walk(Path(root) / "exercises" / folder)}
    files.update(
        {rel: Path(root) / "solutions" / folder / rel for rel in _walk(Path(root) / "solutions" / folder)}
    )
    return dict(sorted(files.items()))


def _walk(folder: Path) -> list[str]:
    return walk_files(folder) if folder.is_dir() else []


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise StubError(
            f"{display_path(path)}: not UTF-8 text; lesson folders may only hold text files"
        ) from None


def sync(course: Course, check_only: bool) -> list[str]:
    """Compare (check_only) or bring exercises/ in line with the solutions; the drift found.

    With check_only=False, missing and differing stubs are written. An exercise file no
    solution generates is the lesson's own (README, hints, practice tests, data) and is never
    removed. Exercise folders of lessons that are not in course.yml are reported, never removed.
    """
    solutions_dir, exercises_dir = course.root / "solutions", course.root / "exercises"
    if not solutions_dir.is_dir():
        raise StubError(
            f"{display_path(solutions_dir)}: not found; the stubs are generated from the solutions, "
            "which only the course's own repository has"
        )
    generated = {
        lesson.folder: generate_lesson(lesson, solutions_dir, exercises_dir) for lesson in course.lessons
    }
    drift: list[str] = []
    for lesson in course.lessons:
        expected = generated[lesson.folder]
        drift += _sync_folder(
            exercises_dir / lesson.folder, f"exercises/{lesson.folder}", expected, check_only
        )
    folders = {lesson.folder for lesson in course.lessons}
    if exercises_dir.is_dir():
        for extra in sorted(exercises_dir.iterdir()):
            if extra.is_dir() and extra.name not in folders and extra.name not in CACHE_DIRS:
                drift.append(
                    f"exercises/{extra.name}/ is not a lesson of course.yml (remove it or add the lesson)"
                )
    return drift


def _sync_folder(target: Path, label: str, expected: dict[str, str], check_only: bool) -> list[str]:
    """Write into `target` each of `expected` ({relative path: text}) that is missing or
    differs; the drift found, each line naming the file as `label/rel`. With check_only
    nothing is written. Nothing is ever removed: a file of exercises/ that no solution
    generates is the lesson's own."""
    drift = []
    for rel, text in expected.items():
        path = target / rel
        if not path.is_file():
            drift.append(f"{label}/{rel} is missing")
        elif path.read_bytes() != text.encode("utf-8"):
            drift.append(f"{label}/{rel} differs from what `autograder stubs` generates")
        else:
            continue
        if not check_only:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "w", encoding="utf-8", newline="") as fh:
                fh.write(text)
    return drift
