"""The lesson folders in the learner's exercises/: which are there, which the learner named,
and which of their files grading reads (a digest of those says whether anything changed)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from autograder.core.files import CACHE_DIRS, walk_files
from autograder.core.manifest import Course, Lesson
from autograder.learner.terminal import t

# The files of a lesson folder that grading reads (the learner's code, quiz answers, practice
# tests): a change to one of them is worth a new grading, a change to a README is not.
GRADED_SUFFIXES = (".py", ".yml", ".yaml")
HINTS_FILE = "pistas.yml"  # the lesson's hints (autograder/learner/hints.py): learner text, never graded


class LearnerError(Exception):
    """Bad input from the learner, already phrased in their language (exit 2)."""


def exercises_dir(course: Course) -> Path:
    return course.root / "exercises"


def lesson_dir(course: Course, lesson: Lesson) -> Path:
    return exercises_dir(course) / lesson.folder


def present_lessons(course: Course) -> list[Lesson]:
    """The lessons whose folder exists in exercises/, in course order."""
    return [lesson for lesson in course.lessons if lesson_dir(course, lesson).is_dir()]


def resolve_lessons(course: Course, keys: Iterable[str], lang: str) -> list[Lesson]:
    """The named lessons (each must have its folder), else every present one; in course order."""
    keys = list(keys)
    if not keys:
        lessons = present_lessons(course)
        if not lessons:
            raise LearnerError(
                t(
                    "no_lessons_present",
                    lang,
                    folder=shown(course, exercises_dir(course)),
                    example=f"exercises/{course.lessons[0].folder}/",
                )
            )
        return lessons
    wanted = {course.lesson(key).id for key in keys}  # ManifestError names an unknown lesson
    lessons = [lesson for lesson in course.lessons if lesson.id in wanted]
    for lesson in lessons:
        if not lesson_dir(course, lesson).is_dir():
            raise LearnerError(
                t(
                    "lesson_folder_missing",
                    lang,
                    id=lesson.id,
                    folder=shown(course, lesson_dir(course, lesson)),
                )
            )
    return lessons


def is_graded_input(path: Path) -> bool:
    """Whether a file of a lesson folder is read by grading (see GRADED_SUFFIXES)."""
    return (
        path.suffix in GRADED_SUFFIXES
        and path.name != HINTS_FILE
        and not any(part in CACHE_DIRS for part in path.parts)
    )


def lesson_digest(folder: Path) -> str:
    """A digest of the graded inputs of a lesson folder: equal digests, equal grading input."""
    digest = hashlib.sha256()
    for name in walk_files(folder):
        rel, path = Path(name), folder / name
        if is_graded_input(rel) and path.is_file():
            digest.update(name.encode() + b"\0")
            try:
                digest.update(path.read_bytes())
            except OSError:
                digest.update(b"<unreadable>")
            digest.update(b"\0")
    return digest.hexdigest()


def shown(course: Course, path: Path) -> str:
    """A path as the learner reads it: relative to the course root, posix."""
    try:
        return path.relative_to(course.root).as_posix()
    except ValueError:
        return str(path)
