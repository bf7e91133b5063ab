"""The term grade of a cohort: which submission counts for each learner and lesson (issue 32).

Owns the plain-data half shared by `grade-all` and `autograder serve --export`: turning what was
recorded (grade-all's observation log and the results it archived per submission; the service's
submissions and results) into autograder/term's Attempts, asking term.counting which one counts
under each learner's due dates (term.due_dates: course.yml's deadlines, the roster's extensions),
and the term grade of each lesson (`Cell`), which gradebook.py writes into grades.csv and
cohort.csv. Nothing here grades: a counting submission that was never graded comes back in
`TermGrades.ungraded`, the caller grades it and asks again.

Submission time is the one definition (DESIGN.md): for grade-all, the first sighting of the
commit in DIR/observations.jsonl (grade-all's own clock, or GitHub's push record); for the
service, its `submitted_at`. Never a commit's date.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone

from autograder.cohort.observations import ObservationLog
from autograder.cohort.store import BatchError, Store
from autograder.core.manifest import Course, Lesson
from autograder.core.results import CourseResult, LessonResult
from autograder.render.results_json import from_json_dict

TERM_FILE = "term.json"  # DIR/term.json: the term grades of the last run, for the instructor


@dataclass(frozen=True)
class Submitted:
    """One submission of a learner as its recorder knows it: what (grade-all's "commit:<sha>" or
    "content:<sha256>"; the service's "service:<id>"), the commit, and its submission time."""

    what: str
    commit: str | None
    submitted_at: datetime  # aware


@dataclass
class Cell:
    """A learner's term grade for one lesson."""

    lesson: str
    # "on_time" | "late" | "none" (no accepted submission) | "no_deadline" | "ungraded" (the
    # counting submission has no result: it could not be checked out or graded)
    status: str
    due: datetime | None = None  # the learner's own due date (extensions applied), aware UTC
    what: str | None = None  # the counting submission
    commit: str | None = None
    submitted_at: datetime | None = None
    points: float | None = None  # earned, before any penalty
    grade: float | None = None  # after the penalty (None: nothing accepted)
    late_by: timedelta = timedelta(0)
    units: int = 0
    factor: float = 1.0
    result: LessonResult | None = field(default=None, repr=False)  # the counting lesson's checks

    @property
    def penalty(self) -> float:
        """Points taken by the late policy (nbgrader's late_submission_penalty)."""
        if self.points is None or self.grade is None:
            return 0.0
        return round(self.points - self.grade, 2)

    def as_json(self) -> dict:
        data = asdict(self)
        data.pop("result")
        for name in ("due", "submitted_at"):
            if data[name] is not None:
                data[name] = data[name].astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        data["late_by"] = int(self.late_by.total_seconds())
        data["penalty"] = self.penalty
        return data


@dataclass
class TermGrades:
    """{learner: {lesson id: Cell}} and what must be graded before they are final."""

    cells: dict[str, dict[str, Cell]] = field(default_factory=dict)
    # {learner: [Submitted]}: counting submissions with no result yet (grade them, then again)
    ungraded: dict[str, list[Submitted]] = field(default_factory=dict)

    def as_json(self) -> dict:
        return {
            learner: {lesson: cell.as_json() for lesson, cell in lessons.items()}
            for learner, lessons in sorted(self.cells.items())
        }


def has_deadlines(course: Course, lessons: list[Lesson]) -> bool:
    """Whether course.yml gives any of `lessons` a due date: the term grade is worked out then."""
    return any(getattr(lesson, "due", None) is not None for lesson in lessons)


def lesson_points(result: LessonResult) -> tuple[float, float]:
    """(earned, maximum) of a lesson's result, as grades.csv counts them."""
    return (
        float(sum(check.score for check in result.checks)),
        float(sum(check.max_score for check in result.checks)),
    )


def parse_result(data: dict | str | None) -> CourseResult | None:
    if data is None:
        return None
    try:
        return from_json_dict(json.loads(data) if isinstance(data, str) else data)
    except (ValueError, TypeError, KeyError):
        return None


def term_grades(
    course: Course,
    lessons: list[Lesson],
    learners: Iterable[str],
    submitted: Callable[[str], list[Submitted]],
    result_of: Callable[[str, Submitted], CourseResult | None],
    due_dates: Callable[[str], dict],
) -> TermGrades:
    """Each learner's term grade for each of `lessons`, under course.yml's term block.

    `submitted(learner)`: their submissions with their times; `result_of(learner, submission)`:
    its recorded result (None: never graded); `due_dates(learner)`: term.due_dates for them.
    A lesson without a due date counts the latest submission, unpenalised."""
    from autograder.term.counting import Attempt, counting

    term = course.term
    grades = TermGrades()
    for learner in learners:
        mine = sorted(submitted(learner), key=lambda s: (s.submitted_at, s.what))
        dues = due_dates(learner)
        results = {s.what: result_of(learner, s) for s in mine}
        row: dict[str, Cell] = {}
        for lesson in lessons:
            by_what = {s.what: s for s in mine}
            attempts = []
            for s in mine:
                result = results[s.what]
                found = next((r for r in result.lessons if r.id == lesson.id), None) if result else None
                points, maximum = lesson_points(found) if found else (None, course_points(lesson))
                # Attempt.commit carries `what`: the one name of a submission on both paths.
                attempts.append(Attempt(learner, lesson.id, s.submitted_at, s.what, points, maximum))
            due = dues.get(lesson.id)
            counted = counting(attempts, due, term.counting, term.grace) if attempts else None
            if counted is None:
                row[lesson.id] = Cell(lesson.id, "none", due=due.due if due else None)
                continue
            sub = by_what[counted.attempt.commit]
            if counted.attempt.points is None:
                grades.ungraded.setdefault(learner, [])
                if sub not in grades.ungraded[learner]:
                    grades.ungraded[learner].append(sub)
            result = results[sub.what]
            late = counted.lateness
            if counted.attempt.points is None:
                status = "ungraded"
            elif due is None:
                status = "no_deadline"
            else:
                status = "late" if late.late_by > timedelta(0) else "on_time"
            row[lesson.id] = Cell(
                lesson.id,
                status,
                due=due.due if due else None,
                what=sub.what,
                commit=sub.commit,
                submitted_at=sub.submitted_at,
                points=counted.attempt.points,
                grade=counted.grade,
                late_by=late.late_by,
                units=late.units,
                factor=late.factor,
                result=next((r for r in result.lessons if r.id == lesson.id), None) if result else None,
            )
        grades.cells[learner] = row
    return grades


def course_points(lesson: Lesson) -> float:
    return float(sum(spec.points for spec in lesson.checks))


# ------------------------------------------------------------------ grade-all's record


def core_roster(args: argparse.Namespace):
    """The roster as core.roster reads it (extensions included), None without --roster; its
    extensions checked against course.yml by the caller (term.deadlines)."""
    from autograder.core import roster as schema

    if args.roster is None:
        return None
    try:
        return schema.load(args.roster)
    except schema.RosterError as exc:
        raise BatchError(exc.text.key, **exc.text.params) from None


def count_term(
    course: Course,
    lessons: list[Lesson],
    learners: list[str],
    store: Store,
    fingerprint: str,
    log: ObservationLog,
    roster,
    at: datetime | None = None,
):
    """The term grades (term_grades.TermGrades) of `learners` from what DIR recorded: their
    submissions and times from the observation log (only those first seen by `at`, with --at),
    the results archived under `fingerprint`, the due dates of course.yml and the roster's
    extensions (`roster`: core.roster's, or None). Grades nothing."""
    from autograder.term.deadlines import due_dates

    def submitted(learner: str) -> list[Submitted]:
        return [Submitted(s.what, s.commit, s.seen) for s in log.submissions(learner, until=at)]

    def result_of(learner: str, sub: Submitted):
        return parse_result(store.read_attempt(learner, sub.what, fingerprint))

    return term_grades(
        course, lessons, learners, submitted, result_of, lambda learner: due_dates(course, roster, learner)
    )
