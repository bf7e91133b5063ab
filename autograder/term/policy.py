"""The late policy applied to one submission: how late it is, whether it is accepted, and the
factor its grade is multiplied by.

    lateness(due, submitted_at, grace) -> Lateness
    penalised(points, lateness) -> float     the grade: points * factor, rounded half-up to 0.01

The arithmetic (course.schema.json's `term` documents it for the instructor):
  - at or before due + grace: on time, factor 1;
  - after due.late_until + grace, or at all when the policy does not accept late submissions:
    not accepted, factor 0 (the submission does not count: counting.py passes over it);
  - else late: units = the started hours or days counted from due + grace (1 second into a unit
    is the whole unit; a day is 24 hours of elapsed time); factor = max(floor/100,
    1 - units * percent/100, 0).
The grace shifts every boundary by the same amount (Actions' queueing delays every submission
alike): a push queued over the end of an hour pays for that hour only. Arithmetic is decimal, so
that 3 days at 10 % is 0.7 and not 0.7000000000000001; the grade is rounded once, at the end.
XP is never penalised: only the points of the lesson's grade go through here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import TYPE_CHECKING

from autograder.core.manifest import REFUSED, LatePolicy

if TYPE_CHECKING:
    from autograder.term.deadlines import Due

__all__ = ["ON_TIME", "REFUSED", "LatePolicy", "Lateness", "lateness", "penalised"]


@dataclass(frozen=True)
class Lateness:
    late_by: timedelta  # submitted_at - due; 0 when on time (grace included)
    units: int  # started hours/days penalised (0 on time, and when not accepted)
    factor: float  # 1.0 on time; 0 <= factor <= 1 late (0 only with floor 0); 0.0 not accepted
    accepted: bool  # False: after the late period (+ grace), or late where nothing late counts


ON_TIME = Lateness(timedelta(0), 0, 1.0, True)


def lateness(due: Due, submitted_at: datetime, grace: timedelta) -> Lateness:
    """How late `submitted_at` is for `due` and what it costs (see the module docstring)."""
    if submitted_at.tzinfo is None or submitted_at.utcoffset() is None:
        raise ValueError(f"submitted_at must be timezone-aware, got {submitted_at!r}")
    late_by = submitted_at - due.due
    if late_by <= grace:
        return ON_TIME
    policy = due.policy
    if not policy.accepted or policy.unit is None or submitted_at > due.late_until + grace:
        return Lateness(late_by, 0, 0.0, False)
    units = -(-(late_by - grace) // policy.unit)  # ceil: every started unit counts whole
    return Lateness(late_by, units, float(_factor(policy, units)), True)


def _factor(policy: LatePolicy, units: int) -> Decimal:
    kept = 1 - units * Decimal(repr(policy.percent)) / 100
    return max(Decimal(repr(policy.floor)) / 100, kept, Decimal(0))


def penalised(points: float, late: Lateness) -> float:
    """The lesson's grade for `points` earned by a submission this late: points * factor,
    rounded half-up to 2 decimals (0.0 when not accepted)."""
    if not late.accepted:
        return 0.0
    exact = Decimal(repr(float(points))) * Decimal(repr(late.factor))
    return float(exact.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))
