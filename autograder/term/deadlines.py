"""Each learner's due dates: course.yml's, with the roster's extensions applied.

    due_dates(course, roster, learner_id) -> {lesson id: Due}   the lessons with a deadline only
    check_extensions(course, roster)                            every extension against course.yml

An extension gives a lesson a new due date (`due`, a wall-clock time in the course's zone) or
adds time to course.yml's (`extra`); the late period moves with it (late_until = the new due +
the period). A lesson's own extension replaces the learner's `all` one for that lesson; `all`
(extra time only: roster.py refuses `all` with a due date) reaches the lessons that have one.
An extension of a lesson that does not exist or has no due date, or whose due date the clocks
skip, is a RosterError naming the roster's line: due_dates checks every extension of the
roster, not only the learner's, so that a typo in one is caught before the first grade of a
cohort is computed (callers may call check_extensions once, up front, for the same effect).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from autograder.core.manifest import Course, LatePolicy, Lesson, WallTimeError, wall_time
from autograder.core.roster import Extension, Roster, RosterError

__all__ = ["Due", "check_extensions", "due_dates"]


@dataclass(frozen=True)
class Due:
    lesson: str
    due: datetime  # timezone-aware (UTC) instant
    late_until: datetime  # due + period (== due when not accepted)
    policy: LatePolicy
    extended: bool  # an extension applied


def due_dates(course: Course, roster: Roster | None, learner_id: str) -> dict[str, Due]:
    """The learner's deadline of every lesson that has one, in the course's order."""
    extensions = _checked(course, roster)
    mine = {e.lesson: e for e in extensions if e.learner == learner_id}
    dates = {}
    for lesson in course.lessons:
        if lesson.due is None:
            continue
        extension = mine.get(lesson.id) or mine.get("all")
        due = _extended(course, lesson, extension) if extension else lesson.due
        policy = course.late_policy(lesson)
        late_until = due + policy.period if policy.accepted else due
        dates[lesson.id] = Due(lesson.id, due, late_until, policy, extension is not None)
    return dates


def check_extensions(course: Course, roster: Roster | None) -> None:
    """RosterError for the first (lowest line) extension course.yml cannot take."""
    _checked(course, roster)


def _checked(course: Course, roster: Roster | None) -> tuple[Extension, ...]:
    if roster is None:
        return ()
    problems = []
    lessons = {lesson.id: lesson for lesson in course.lessons}
    for extension in roster.extensions:
        where = f"{roster.path}:{extension.line}"
        if extension.lesson == "all":
            continue
        lesson = lessons.get(extension.lesson)
        if lesson is None:
            known = ", ".join(lessons)
            problems.append(
                (
                    extension.line,
                    RosterError(
                        "term.roster_unknown_lesson",
                        where=where,
                        lesson=extension.lesson,
                        course="course.yml",
                        known=known,
                    ),
                )
            )
        elif lesson.due is None:
            problems.append(
                (
                    extension.line,
                    RosterError("term.roster_no_due", where=where, lesson=lesson.id, course="course.yml"),
                )
            )
        elif extension.due is not None:
            try:
                wall_time(extension.due, course.timezone)
            except WallTimeError as exc:
                problems.append(
                    (extension.line, RosterError("term.roster_bad_due", where=where, detail=exc.text))
                )
    if problems:
        raise min(problems, key=lambda problem: problem[0])[1]
    return roster.extensions


def _extended(course: Course, lesson: Lesson, extension: Extension) -> datetime:
    assert lesson.due is not None
    if extension.due is not None:
        return wall_time(extension.due, course.timezone)
    assert extension.extra is not None
    return lesson.due + extension.extra
