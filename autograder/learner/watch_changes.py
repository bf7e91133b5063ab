"""What changed while `autograder watch` runs: the file events (watchfiles: inotify, FSEvents,
ReadDirectoryChangesW, debounced; polling with --poll or when the system refuses
notifications), the lessons whose graded files they touch, and which TODOs (or the quiz) a save
edited, placed by engine/blame.py against the lesson's stubs, so that their checks run first.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from autograder.core.manifest import Course, Lesson
from autograder.learner.folders import exercises_dir, is_graded_input, lesson_dir

# An editor's save is a burst of events within a few milliseconds; wait for this much quiet
# before grading, but never group changes for longer than DEBOUNCE_MS. (watchfiles looks every
# QUIET_MS and yields once a look finds nothing new: a save waits one to two of them.)
QUIET_MS = 50
DEBOUNCE_MS = 1600
POLL_DELAY_MS = 300
# How often the watcher hands control back while nothing changes (it yields an empty set).
WAKE_MS = 1000


def iter_changes(
    paths: Iterable[Path],
    *,
    force_polling: bool | None,
    on_fallback: Callable[[Exception], None],
    timeout_ms: int | None = None,
) -> Iterator[set[Path]]:
    """Sets of changed paths under `paths`, one set per debounced burst of changes.

    With `timeout_ms`, an empty set is yielded after that long without changes (so a caller can
    look up between changes). When notifications cannot be set up, `on_fallback(error)` is
    called and polling takes over; with force_polling True, such an error is raised instead.
    """
    import watchfiles

    paths = [str(path) for path in paths]
    options = {
        "debounce": DEBOUNCE_MS,
        "step": QUIET_MS,
        "poll_delay_ms": POLL_DELAY_MS,
        "raise_interrupt": True,
    }
    if timeout_ms is not None:
        options.update(rust_timeout=timeout_ms, yield_on_timeout=True)
    try:
        for changes in watchfiles.watch(*paths, force_polling=force_polling, **options):
            yield {Path(path) for _, path in changes}
        return
    except (OSError, RuntimeError) as exc:  # watchfiles' internal error is a RuntimeError
        if force_polling:
            raise
        on_fallback(exc)
    for changes in watchfiles.watch(*paths, force_polling=True, **options):
        yield {Path(path) for _, path in changes}


def changed_lessons(course: Course, paths: Iterable[Path], lessons: list[Lesson]) -> dict[str, list[str]]:
    """{lesson id: names of its changed graded files} among `lessons`, in course order."""
    root = exercises_dir(course).resolve()
    folders = {lesson.folder: lesson for lesson in lessons}
    found: dict[str, set[str]] = {}
    for path in paths:
        try:
            rel = Path(path).resolve().relative_to(root)
        except (ValueError, OSError):
            continue
        if len(rel.parts) < 2 or rel.parts[0] not in folders:
            continue
        inside = Path(*rel.parts[1:])
        if is_graded_input(inside):
            found.setdefault(folders[rel.parts[0]].id, set()).add(inside.as_posix())
    return {lesson.id: sorted(found[lesson.id]) for lesson in course.lessons if lesson.id in found}


# --- what a save changed -----------------------------------------------------------------------


@dataclass(frozen=True)
class Unit:
    """A part of a lesson judged on its own while the rest is graded: a TODO, or the quiz
    (`todo` None), with the ids of its checks (informational ones left out)."""

    todo: str | None
    checks: tuple[str, ...]


def read_inputs(course: Course, lesson: Lesson) -> dict[str, str]:
    """{name: text} of the lesson's graded files as saved now (missing ones left out)."""
    texts = {}
    for name in lesson.handed_in:
        try:
            texts[name] = (lesson_dir(course, lesson) / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            pass
    return texts


def edited_todos(
    lesson: Lesson, before: dict[str, str], after: dict[str, str], stubs: Path | None
) -> list[str]:
    """The TODOs holding a line that changed from `before` to `after` ({name: text}), in file
    order: the new lines in the saved file, the old ones (a deletion) in the previous one, each
    placed by blame.todo_at against the stub in `stubs`; "quiz" first when the quiz changed."""
    from autograder.engine import blame

    found: list[str] = []
    if lesson.quiz and before.get(lesson.quiz) != after.get(lesson.quiz):
        found.append("quiz")
    for name in lesson.files:
        old, new = before.get(name), after.get(name)
        if old is None or new is None or old == new:
            continue
        todos = {todo.id for todo in lesson.todos if todo.file == name}
        stub = blame.read_text(stubs / name) if stubs is not None else None
        old_rows, new_rows = old.splitlines(), new.splitlines()
        matcher = difflib.SequenceMatcher(None, old_rows, new_rows, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                continue
            places = [(new, n) for n in range(j1, j2)] + [(old, n) for n in range(i1, i2)]
            for text, n in places:
                todo = blame.todo_at(text, n + 1, stub, todos)
                if todo is not None and todo not in found:
                    found.append(todo)
    return found


def units_of(lesson: Lesson, todos: Iterable[str]) -> list[Unit]:
    """The units of `todos` ("quiz": the quiz) that have checks, in that order."""
    units = []
    for todo in todos:
        if todo == "quiz":
            checks = tuple(s.id for s in lesson.checks if s.todo is None and lesson.is_quiz_check(s.id))
            unit = Unit(None, checks)
        else:
            unit = Unit(todo, tuple(s.id for s in lesson.checks if s.todo == todo and not s.informational))
        if unit.checks:
            units.append(unit)
    return units
