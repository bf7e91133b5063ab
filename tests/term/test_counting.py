"""Which submission counts (term/counting.py), on hand-computed attempts: latest and best, a
late one with its penalty, one after the late period, a never-graded one that counts, a deadline
moved earlier than the last attempt, ties, no attempts, no deadline."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from autograder.core import roster
from autograder.core.manifest import load_course
from autograder.term.counting import Attempt, Counted, counting
from autograder.term.deadlines import Due, due_dates
from autograder.term.policy import ON_TIME, REFUSED, Lateness, LatePolicy

T = datetime(2026, 12, 20, 22, 59, tzinfo=UTC)  # the due date
GRACE = timedelta(minutes=10)
MIN, H, D = timedelta(minutes=1), timedelta(hours=1), timedelta(days=1)
POLICY = LatePolicy(accepted=True, period=3 * D, per="day", percent=10, floor=50)
DUE = Due("01", T, T + 3 * D, POLICY, False)


def attempt(at: timedelta, points: float | None, commit: str = "") -> Attempt:
    return Attempt("ana", "01", T + at, commit or f"c{at.total_seconds():+.0f}", points, 100.0)


EARLY = attempt(-2 * D, 60)
ON_TIME_ATTEMPT = attempt(-H, 80)
LATE = attempt(D, 100)  # 1 day late, 23 h 50 min after the grace: 1 started day, 90 %
TOO_LATE = attempt(5 * D, 100)  # after the late period: never counts
ATTEMPTS = [TOO_LATE, EARLY, LATE, ON_TIME_ATTEMPT]  # in no particular order


def test_latest_is_the_last_accepted_with_its_penalty():
    assert counting(ATTEMPTS, DUE, "latest", GRACE) == Counted(LATE, Lateness(D, 1, 0.9, True), 90.0)


def test_best_is_the_highest_penalised_grade():
    assert counting(ATTEMPTS, DUE, "best", GRACE) == Counted(LATE, Lateness(D, 1, 0.9, True), 90.0)
    weaker_late = attempt(D, 85)  # 76.5 after the penalty: the on-time 80 is better
    assert counting([EARLY, ON_TIME_ATTEMPT, weaker_late], DUE, "best", GRACE) == Counted(
        ON_TIME_ATTEMPT, ON_TIME, 80.0
    )
    # latest takes the late one all the same
    assert counting([EARLY, ON_TIME_ATTEMPT, weaker_late], DUE, "latest", GRACE).grade == 76.5


def test_best_ties_go_to_the_earlier_attempt():
    tie_late = attempt(D, 88.89)  # 80.001, exported as 80.00: the same grade as the on-time 80
    assert counting([tie_late, ON_TIME_ATTEMPT], DUE, "best", GRACE).attempt == ON_TIME_ATTEMPT
    same = attempt(-H, 80, commit="other")
    assert counting([ON_TIME_ATTEMPT, same], DUE, "best", GRACE).attempt == ON_TIME_ATTEMPT


def test_latest_ties_at_one_instant_go_to_the_one_listed_last():
    first, second = attempt(-H, 50, "first"), attempt(-H, 70, "second")
    assert counting([first, second], DUE, "latest", GRACE).attempt == second
    assert counting([second, first], DUE, "latest", GRACE).attempt == first


def test_a_never_graded_attempt_that_counts_is_returned_for_grading():
    ungraded_late = attempt(D, None)
    counted = counting([EARLY, ungraded_late, ON_TIME_ATTEMPT], DUE, "latest", GRACE)
    assert counted == Counted(ungraded_late, Lateness(D, 1, 0.9, True), None)
    # best cannot compare it: it is handed back first, whatever the others scored
    assert counting([EARLY, ungraded_late, ON_TIME_ATTEMPT], DUE, "best", GRACE).attempt == ungraded_late
    # graded then, and counted again
    graded = attempt(D, 70)
    assert counting([EARLY, graded, ON_TIME_ATTEMPT], DUE, "best", GRACE).attempt == ON_TIME_ATTEMPT
    # an ungraded attempt that cannot count is no obstacle
    assert counting([EARLY, ON_TIME_ATTEMPT, attempt(5 * D, None)], DUE, "best", GRACE).grade == 80.0


def test_a_deadline_moved_earlier_than_the_last_attempt():
    moved = Due("01", T - 30 * MIN, T - 30 * MIN, REFUSED, False)
    # only what was submitted by T - 30 min + grace counts now: the on-time attempt (T - 1 h)
    assert counting(ATTEMPTS, moved, "latest", GRACE) == Counted(ON_TIME_ATTEMPT, ON_TIME, 80.0)
    # and if it was never graded (the late one was the counting one before), it is graded now
    never_graded = attempt(-H, None)
    assert counting([EARLY, never_graded, LATE], moved, "latest", GRACE) == Counted(
        never_graded, ON_TIME, None
    )
    # moved before every attempt: nothing counts
    before_all = Due("01", T - 3 * D, T - 3 * D, REFUSED, False)
    assert counting(ATTEMPTS, before_all, "latest", GRACE) is None


def test_no_attempts_and_no_accepted_attempt():
    assert counting([], DUE, "latest", GRACE) is None
    assert counting([], None, "best", GRACE) is None
    assert counting([TOO_LATE], DUE, "best", GRACE) is None


def test_no_deadline_counts_every_attempt_in_full():
    assert counting(ATTEMPTS, None, "latest", GRACE) == Counted(TOO_LATE, ON_TIME, 100.0)
    assert counting([EARLY, ON_TIME_ATTEMPT], None, "best", GRACE) == Counted(ON_TIME_ATTEMPT, ON_TIME, 80.0)


def test_an_unknown_rule_is_refused():
    with pytest.raises(ValueError, match="unknown counting rule 'first'"):
        counting(ATTEMPTS, DUE, "first", GRACE)


def test_the_readme_worked_example(tmp_path):
    # The README's example (its instructor section), end to end from course.yml and roster.yml text.
    course_yml = tmp_path / "course.yml"
    course_yml.write_text(
        "course: C\nlanguage: es\ntimezone: Europe/Madrid\n"
        "term:\n  counting: latest\n  grace: 10m\n"
        "  late: {period: 3d, penalty: {per: day, percent: 10}, floor: 50}\n"
        'lessons:\n  - {id: "03", slug: tres, section: {es: A, en: A}, title: {es: T, en: T}, minutes: 1, xp: 1,\n'
        '     files: [a.py], graders: lesson03, todos: [], checks: [], due: "2026-12-20 23:59"}\n',
        encoding="utf-8",
    )
    roster_yml = tmp_path / "roster.yml"
    roster_yml.write_text(
        'version: 1\nlearners:\n  - id: ana\n  - id: bea\nextensions:\n  - {learner: ana, lesson: "03", extra: 2d}\n',
        encoding="utf-8",
    )
    course, learners = load_course(course_yml), roster.load(roster_yml)
    madrid = ZoneInfo("Europe/Madrid")

    def at(day: int, hour: int, minute: int) -> datetime:
        return datetime(2026, 12, day, hour, minute, tzinfo=madrid)

    grace = course.term.grace
    bea = [
        Attempt("bea", "03", at(20, 23, 50), "b1", 75, 100),
        Attempt("bea", "03", at(22, 10, 30), "b2", 87.5, 100),
    ]
    bea_due = due_dates(course, learners, "bea")["03"]
    latest = counting(bea, bea_due, "latest", grace)
    assert (latest.attempt.commit, latest.lateness.units, latest.lateness.factor, latest.grade) == (
        "b2",
        2,
        0.8,
        70.0,
    )
    assert counting(bea, bea_due, "best", grace).grade == 75.0
    ana = [
        Attempt("ana", "03", at(22, 10, 30), "a1", 87.5, 100),
        Attempt("ana", "03", at(26, 0, 30), "a2", 100, 100),
    ]
    ana_due = due_dates(course, learners, "ana")["03"]
    assert ana_due.late_until == at(25, 23, 59)
    assert counting(ana, ana_due, "latest", grace) == Counted(ana[0], ON_TIME, 87.5)
