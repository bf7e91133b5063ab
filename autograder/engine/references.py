"""What the engine derives from the course's marked solutions (solutions/NN-slug/, with their
`### BEGIN SOLUTION` regions; core/regions.py): the REFERENCE pieces later lessons are graded
against (a used lesson's files without markers) and the STUBS of a lesson's files (what
exercises/ holds before the learner writes anything, for engine/blame.py). Nothing of either
is committed: both are made in memory from the one source, then written into this user's
private folder (<temp>/autograder-derived-<uid>, mode 0700, one subfolder per contents) because
the worker's folder takes files by path and the learner's watch compares with a folder.

Reference pieces are our own code, never a learner's: `load()` imports them in the trusted
process for the graders that compute expected values with them (lesson 05 trains lesson 04's
reference GPT). The files import each other by plain name (`from attention import
CausalSelfAttention`), as the learner's files do: `load()` imports them all together under
those names, then takes the names back out of sys.modules so nothing else in this process (the
project's own tests import by the same names) ever sees them by accident.

Where the solutions are: the course's own solutions/ (an instructor's checkout), else the one
beside the hidden graders in use (autograder/graders/ of a checkout named by
$AUTOGRADER_GRADERS); a learner's release has neither, and needs neither (practice mode uses the
learner's own files). Blame there compares with the stubs the release ships beside each lesson's
graders (<graders>/lessonNN/stubs/, recording.STUBS_FOLDER: exercises/ as generated), since the
learner's exercises/ is the very folder being graded.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import shutil
import stat
import sys
import tempfile
import threading
from pathlib import Path
from types import ModuleType

from autograder.core import regions
from autograder.core.manifest import Course, Lesson
from autograder.engine.recording import STUBS_FOLDER

__all__ = [
    "graded_stubs",
    "load",
    "reference_files",
    "shipped_stubs",
    "solutions_dir",
    "stub_folder",
    "stub_texts",
    "use",
]

_lock = threading.Lock()
_cache: dict[Path, dict[str, ModuleType]] = {}
_current: tuple[Course, Path] | None = None  # what load() reads: set by the grading run
_graded: tuple[Course, Path | None, Path | None] | None = None  # (course, solutions, graders root)


def solutions_dir(course: Course, graders: Path) -> Path | None:
    """The marked solutions of `course`: its own solutions/, else the one of the checkout that
    holds the graders folder `graders` (<checkout>/autograder/graders); None when neither is."""
    checkout = Path(graders).resolve().parents
    beside = [checkout[1] / "solutions"] if len(checkout) > 1 and checkout[0].name == "autograder" else []
    for candidate in (course.root / "solutions", *beside):
        if candidate.is_dir():
            return candidate
    return None


def use(course: Course, solutions: Path | None, graders: Path | None = None) -> None:
    """Say which course and solutions `load()` serves, and which graders folder (the root holding
    lessonNN/) `graded_stubs` may fall back to (the grading run sets it before its graders run)."""
    global _current, _graded
    _current = (course, solutions) if solutions is not None else None
    _graded = (course, solutions, graders)


def reference_files(course: Course, lesson: Lesson, solutions: Path | None) -> dict[str, Path]:
    """{file name: path} of the reference pieces of the lessons `lesson` uses. A piece whose
    solution file is missing gets a path that does not exist, so the sandbox lists it as missing
    (an instructor's setup problem the result names)."""
    used = [course.lesson(u) for u in lesson.uses]
    if not used:
        return {}
    texts = _reference_texts(used, solutions)
    folder = _written("reference", texts)
    return {name: folder / item.folder / name for item in used for name in item.files}


def stub_texts(lesson: Lesson, solutions: Path | None) -> dict[str, str] | None:
    """{file name: stub} of the lesson's Python files, made from their marked solutions; None
    when the solutions are not there."""
    if solutions is None or not (solutions / lesson.folder).is_dir():
        return None
    titles = {todo.id: todo.title["es"] for todo in lesson.todos}
    stubs = {}
    for name in lesson.files:
        source = solutions / lesson.folder / name
        if name.endswith(".py") and source.is_file():
            stubs[name] = regions.make_stub(source.read_text(encoding="utf-8"), str(source), titles)
    return stubs


def stub_folder(
    course: Course, lesson: Lesson, submission: Path, solutions: Path | None, graders: Path | None = None
) -> Path | None:
    """A folder holding the lesson's untouched stubs (its files by name), for blame and watch:
    made from the solutions, else the ones the release ships in the lesson's graders folder
    `graders`, else the course's exercises/ when it is not the folder being graded (a learner's
    repository holds their own code there); None when none exists."""
    made = _stub_folder(lesson, solutions) or shipped_stubs(graders)
    if made is not None:
        return made
    exercises = course.root / "exercises" / lesson.folder
    try:
        if exercises.is_dir() and exercises.resolve() != Path(submission).resolve():
            return exercises
    except OSError:
        pass
    return None


def graded_stubs(folder: str) -> Path | None:
    """The untouched stubs of the lesson in `folder` (e.g. "06-generar") of the course being
    graded, for a grader that asks engine/blame.py itself: made from the marked solutions, else
    the ones a release ships with the graders; None without either."""
    if _graded is None:
        return None
    course, solutions, graders = _graded
    lesson = next((item for item in course.lessons if item.folder == folder), None)
    if lesson is None:
        return None
    return _stub_folder(lesson, solutions) or shipped_stubs(
        Path(graders) / lesson.graders if graders is not None else None
    )


def shipped_stubs(graders: Path | None) -> Path | None:
    """The stubs a learner release ships in the lesson's graders folder `graders`; None when
    they are not there (an instructor's checkout makes them from the solutions instead)."""
    if graders is None:
        return None
    folder = Path(graders) / STUBS_FOLDER
    return folder if folder.is_dir() else None


def _stub_folder(lesson: Lesson, solutions: Path | None) -> Path | None:
    try:
        stubs = stub_texts(lesson, solutions)
    except regions.RegionError:
        return None  # a solution being written: no stubs, blame claims by markers alone
    if not stubs:
        return None
    return (
        _written("stubs", {f"{lesson.folder}/{name}": text for name, text in stubs.items()}) / lesson.folder
    )


def load() -> dict[str, ModuleType]:
    """{module name: module} for every reference piece of the course being graded, e.g.
    load()["model"].GPT."""
    if _current is None:
        raise FileNotFoundError(
            "no reference pieces: no marked solutions for this grading run "
            "(solutions/ of the course, or beside the hidden graders)"
        )
    course, solutions = _current
    used = [course.lesson(u) for u in sorted({u for lesson in course.lessons for u in lesson.uses})]
    root = _written("reference", _reference_texts(used, solutions))
    with _lock:
        if root not in _cache:
            _cache[root] = _import_all(root)
        return _cache[root]


def _reference_texts(used: list[Lesson], solutions: Path | None) -> dict[str, str]:
    texts = {}
    for item in used:
        for name in item.files:
            source = solutions / item.folder / name if solutions is not None else None
            if source is not None and source.is_file():
                texts[f"{item.folder}/{name}"] = regions.strip_markers(
                    source.read_text(encoding="utf-8"), str(source)
                )
    return texts


def _written(kind: str, files: dict[str, str]) -> Path:
    """A folder of this user's private space holding exactly `files` ({relative path: text}).
    Named after its contents, so every process (a forked one of engine/split.py, grade-all's)
    shares it, nothing is written twice, and nothing is left to clean up but old contents."""
    digest = hashlib.sha256()
    for rel in sorted(files):
        digest.update(f"{rel}\0{files[rel]}\0".encode())
    folder = _private_root() / kind / digest.hexdigest()[:20]
    if not folder.is_dir():
        folder.parent.mkdir(mode=0o700, exist_ok=True)
        partial = Path(tempfile.mkdtemp(dir=folder.parent))
        for rel, text in files.items():
            (partial / rel).parent.mkdir(parents=True, exist_ok=True)
            with open(partial / rel, "w", encoding="utf-8", newline="") as fh:
                fh.write(text)
        try:
            os.replace(partial, folder)
        except OSError:  # another process wrote the same folder first
            shutil.rmtree(partial, ignore_errors=True)
            if not folder.is_dir():
                raise
    return folder


def _private_root() -> Path:
    """<temp>/autograder-derived-<uid>, made 0700; refused when it is anyone else's or open to
    others (the folder holds reference solutions). Windows' temp folder is the user's own."""
    uid = os.getuid() if hasattr(os, "getuid") else None
    root = Path(tempfile.gettempdir()) / f"autograder-derived-{uid if uid is not None else 'user'}"
    try:
        root.mkdir(mode=0o700)
    except FileExistsError:
        pass
    info = os.lstat(root)
    private = uid is None or (info.st_uid == uid and not info.st_mode & 0o077)
    if not stat.S_ISDIR(info.st_mode) or not private:
        raise PermissionError(f"{root}: not a private folder of this user; remove it and grade again")
    return root


def _import_all(root: Path) -> dict[str, ModuleType]:
    folders = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    names = sorted({f.stem for folder in folders for f in folder.glob("*.py")})
    if not names:
        raise FileNotFoundError(f"no reference pieces under {root} (no marked solutions of the lessons used)")
    saved_path = list(sys.path)
    saved = {name: sys.modules.pop(name) for name in names if name in sys.modules}
    sys.path[:0] = [str(folder) for folder in folders]
    try:
        return {name: importlib.import_module(name) for name in names}
    finally:
        sys.path[:] = saved_path
        for name in names:
            sys.modules.pop(name, None)
        sys.modules.update(saved)
