"""Which of a learner's official submissions of a lesson counts, and the grade it gives.

    counting(attempts, due, rule, grace) -> Counted | None

An Attempt is one official grading of one lesson at THE submission time (DESIGN.md: the grading
service's submitted_at; for grade-all the time it first saw the commit, never a commit date).
  - rule "latest": the last accepted attempt (on time, or late within the period, with its
    penalty). Attempts at the same instant: the one listed last.
  - rule "best": the accepted attempt with the highest penalised grade (compared as exported,
    rounded to 0.01); on a tie, the earlier one (then the one listed first).
  - due None (no deadline): every attempt is on time, factor 1, and the rule still picks.
  - no accepted attempt: None (the lesson has no grade).
An attempt that was never graded (points None) cannot be compared: where it may be the one that
counts (latest: it is the last accepted; best: any accepted one is ungraded) it is returned as
is, with grade None, for the caller to grade it and call again. So moving a deadline or adding
an extension only needs counting() again: an attempt that becomes the counting one gets graded
then, and nothing else is.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from autograder.term.deadlines import Due
from autograder.term.policy import ON_TIME, Lateness, lateness, penalised

__all__ = ["RULES", "Attempt", "Counted", "counting"]

RULES = ("latest", "best")


@dataclass(frozen=True)
class Attempt:
    learner: str
    lesson: str
    submitted_at: datetime  # aware; THE submission time
    commit: str | None
    points: float | None  # None: this submission was never graded for this lesson
    max_points: float


@dataclass(frozen=True)
class Counted:
    attempt: Attempt
    lateness: Lateness
    grade: float | None  # points * factor, rounded; None when attempt.points is None


def counting(attempts: list[Attempt], due: Due | None, rule: str, grace: timedelta) -> Counted | None:
    """The attempt that counts under `rule` and its grade (see the module docstring)."""
    if rule not in RULES:
        raise ValueError(f"unknown counting rule {rule!r}; expected one of {', '.join(RULES)}")
    # Oldest first; sorted() is stable, so attempts at one instant keep the caller's order.
    ordered = sorted(attempts, key=lambda attempt: attempt.submitted_at)
    judged = [
        (attempt, ON_TIME if due is None else lateness(due, attempt.submitted_at, grace))
        for attempt in ordered
    ]
    accepted = [(attempt, late) for attempt, late in judged if late.accepted]
    if not accepted:
        return None
    if rule == "latest":
        return _counted(*accepted[-1])
    ungraded = [(attempt, late) for attempt, late in accepted if attempt.points is None]
    if ungraded:
        return _counted(*ungraded[0])
    best = None
    for attempt, late in accepted:  # strictly greater: a tie keeps the earlier one
        counted = _counted(attempt, late)
        if best is None or counted.grade > best.grade:
            best = counted
    return best


def _counted(attempt: Attempt, late: Lateness) -> Counted:
    grade = None if attempt.points is None else penalised(attempt.points, late)
    return Counted(attempt, late, grade)
