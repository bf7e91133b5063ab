"""Making the recordings the learner release grades with (engine/recording.py): for each lesson
whose graders reach their reference through `recording.reference_of`, grade the marked
solutions and the untouched stubs in record mode at the practice seed, and write
autograder/graders/lessonNN/recording.json + recording.npz with the digests of what they were
made from. Only an instructor's checkout can do it (it needs reference.py and solutions/).

`status` tells whether a lesson's recording is current; `autograder release` regenerates a
stale one before shipping it, and a test fails when a committed one is stale.

Messages are in English (instructor tooling).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from autograder.core.manifest import Course, Lesson
from autograder.core.results import Status
from autograder.engine import recording

__all__ = ["LessonRecord", "graders_folder", "record_lesson", "sources_of", "status"]

# status() values
CURRENT, STALE, MISSING, UNCONVERTED, NO_REFERENCE = (
    "current",
    "stale",
    "missing",
    "unconverted",
    "no-reference",
)


@dataclass
class LessonRecord:
    """What recording one lesson did, for the command to say."""

    lesson: str
    state: str  # "recorded", or a status() value it was skipped for
    line: str  # one line for the instructor
    unrecordable: dict[str, str] = field(default_factory=dict)
    calls: int = 0
    size: int = 0  # bytes of the two files


def graders_folder(lesson: Lesson) -> Path:
    from autograder.engine.grading import graders_root

    return graders_root() / lesson.graders


def sources_of(course: Course, lesson: Lesson, folder: Path | None = None) -> str:
    """The digest of what `lesson`'s recording is made from (engine/recording.sources_digest);
    `folder`: its graders folder (default: the one in use)."""
    from autograder.engine.grading import solutions_dir

    solutions = solutions_dir(course)
    files = []
    for item in [lesson, *(course.lesson(u) for u in lesson.uses)]:
        base = solutions / item.folder if solutions is not None else Path("<no solutions>") / item.folder
        files += [base / name for name in item.files]
    folder = graders_folder(lesson) if folder is None else folder
    return recording.sources_digest(folder, files, [spec.id for spec in lesson.checks])


def status(course: Course, lesson: Lesson, folder: Path | None = None) -> str:
    """CURRENT, STALE (made from other sources), MISSING (converted graders, no recording),
    UNCONVERTED (graders still import reference.py: not recordable, nothing ships) or
    NO_REFERENCE (no reference.py here: a learner's release, which cannot record). `folder`: the
    lesson's graders folder (default: the one in use)."""
    folder = graders_folder(lesson) if folder is None else Path(folder)
    if not (folder / recording.REFERENCE).is_file():
        return NO_REFERENCE
    if not recording.converted(folder):
        return UNCONVERTED
    json_path = folder / recording.JSON_NAME
    if not json_path.is_file() or not (folder / recording.NPZ_NAME).is_file():
        return MISSING
    import json

    try:
        data = json.loads(json_path.read_text(encoding="utf-8"))
        made_from = data.get("sources") if isinstance(data, dict) else None
    except (OSError, UnicodeDecodeError, ValueError):
        return STALE
    if made_from != sources_of(course, lesson, folder) or data.get("graders") != recording.graders_digest(
        folder
    ):
        return STALE
    return CURRENT


def record_lesson(course: Course, lesson: Lesson) -> LessonRecord:
    """Record `lesson` (see the module docstring); a lesson that cannot be recorded is skipped
    with a line that says why and what to do."""
    from autograder.engine.grading import grade, solutions_dir

    folder = graders_folder(lesson)
    state = status(course, lesson)
    if state == NO_REFERENCE:
        return LessonRecord(
            lesson.id,
            state,
            f"lesson {lesson.id}: skipped, {folder}/reference.py not found (recording needs the instructor's checkout)",
        )
    if state == UNCONVERTED:
        return LessonRecord(
            lesson.id,
            state,
            f"lesson {lesson.id}: skipped, its graders still import reference.py directly; "
            "use `ref = recording.reference_of(__package__)` (autograder/engine/recording.py) in every graders file",
        )
    solutions = solutions_dir(course)
    if solutions is None or not (solutions / lesson.folder).is_dir():
        return LessonRecord(
            lesson.id, NO_REFERENCE, f"lesson {lesson.id}: skipped, no solutions/{lesson.folder}"
        )
    stubs = course.root / "exercises" / lesson.folder
    with recording.recording_into(folder) as recorder:
        solved = grade(course, [lesson], solutions / lesson.folder, seed=recording.PRACTICE_SEED).lessons[0]
        if stubs.is_dir():
            grade(course, [lesson], stubs, seed=recording.PRACTICE_SEED)
    broken = [
        check.id
        for check in solved.checks
        if check.status not in (Status.PASSED, Status.SKIPPED) and not check.informational
    ]
    if broken:
        return LessonRecord(
            lesson.id,
            "failed",
            f"lesson {lesson.id}: NOT recorded, the solutions fail {', '.join(broken)} in record mode "
            "(fix the graders first: `autograder grade "
            + lesson.id
            + " --submission solutions/"
            + lesson.folder
            + "`)",
        )
    json_path, npz_path = recorder.save(
        folder,
        lesson=lesson.id,
        graders=recording.graders_digest(folder),
        sources=sources_of(course, lesson),
    )
    size = json_path.stat().st_size + npz_path.stat().st_size
    line = f"lesson {lesson.id}: recorded {len(recorder.calls)} calls, {size / 1024:.0f} KiB ({json_path.parent})"
    if recorder.conflicts:
        line += f"; gave two results for the same arguments: {', '.join(sorted(recorder.conflicts))}"
    return LessonRecord(lesson.id, "recorded", line, dict(recorder.unrecordable), len(recorder.calls), size)
