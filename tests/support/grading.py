"""Grading a learner's files with the real engine (real worker processes), as the tests do."""

from __future__ import annotations

from pathlib import Path

from autograder.core.results import LessonResult, Status
from autograder.engine.grading import grade
from support.project import SEED


def write_submission(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def grade_folder(course, lesson, folder: Path, seed: int = SEED) -> LessonResult:
    """Grade one lesson's folder with the real engine (real worker processes)."""
    return grade(course, [lesson], folder, seed=seed).lessons[0]


def failed(result: LessonResult) -> list:
    return [c for c in result.checks if c.status in (Status.FAILED, Status.ERROR)]
