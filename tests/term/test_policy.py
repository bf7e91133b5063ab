"""The late policy (term/policy.py) on hand-computed cases: on time, within the grace, one
second after it, exactly N units, per hour and per day, the floor, not accepted, after the late
period, an extension moving the period, elapsed time across a DST change, and the grade's
rounding (decimal, half-up, once)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from autograder.term.deadlines import Due
from autograder.term.policy import ON_TIME, REFUSED, Lateness, LatePolicy, lateness, penalised

DUE = datetime(2026, 12, 20, 22, 59, tzinfo=UTC)  # 2026-12-20 23:59 in Europe/Madrid
GRACE = timedelta(minutes=10)
S, M, H, D = timedelta(seconds=1), timedelta(minutes=1), timedelta(hours=1), timedelta(days=1)

PER_DAY = LatePolicy(accepted=True, period=3 * D, per="day", percent=10, floor=50)
PER_HOUR = LatePolicy(accepted=True, period=36 * H, per="hour", percent=5, floor=50)
NO_FLOOR = LatePolicy(accepted=True, period=30 * D, per="day", percent=30, floor=0)


def due_with(policy: LatePolicy, due: datetime = DUE, extended: bool = False) -> Due:
    return Due("01", due, due + policy.period if policy.accepted else due, policy, extended)


@pytest.mark.parametrize(
    "after_due, expected",
    [
        (-2 * D, ON_TIME),
        (0 * S, ON_TIME),
        (GRACE, ON_TIME),  # the grace's last instant is on time
        (GRACE + S, Lateness(GRACE + S, 1, 0.9, True)),  # 1 s after the grace: 1 started day
        (GRACE + D, Lateness(GRACE + D, 1, 0.9, True)),  # exactly 1 day after the grace
        (GRACE + D + S, Lateness(GRACE + D + S, 2, 0.8, True)),
        (GRACE + 2 * D, Lateness(GRACE + 2 * D, 2, 0.8, True)),
        (GRACE + 3 * D, Lateness(GRACE + 3 * D, 3, 0.7, True)),  # the late period's end (+ grace)
        (GRACE + 3 * D + S, Lateness(GRACE + 3 * D + S, 0, 0.0, False)),  # after it: not accepted
    ],
)
def test_per_started_day(after_due, expected):
    assert lateness(due_with(PER_DAY), DUE + after_due, GRACE) == expected


@pytest.mark.parametrize(
    "after_due, units, factor",
    [
        (GRACE + S, 1, 0.95),
        (GRACE + 3 * H, 3, 0.85),  # exactly 3 hours
        (GRACE + 3 * H + S, 4, 0.8),
        (GRACE + 10 * H, 10, 0.5),  # exactly at the floor
        (GRACE + 10 * H + S, 11, 0.5),  # the floor holds
        (GRACE + 36 * H, 36, 0.5),
    ],
)
def test_per_started_hour_down_to_the_floor(after_due, units, factor):
    assert lateness(due_with(PER_HOUR), DUE + after_due, GRACE) == Lateness(after_due, units, factor, True)


def test_without_a_floor_a_late_submission_can_be_worth_nothing_and_still_count():
    assert lateness(due_with(NO_FLOOR), DUE + GRACE + 3 * D, GRACE) == Lateness(GRACE + 3 * D, 3, 0.1, True)
    late = lateness(due_with(NO_FLOOR), DUE + GRACE + 4 * D, GRACE)
    assert late == Lateness(GRACE + 4 * D, 4, 0.0, True)  # 1 - 4 * 30 % < 0: 0, not negative
    assert penalised(80, late) == 0.0


def test_not_accepted_means_nothing_after_due_and_grace():
    refused = due_with(REFUSED)
    assert refused.late_until == DUE
    assert lateness(refused, DUE + GRACE, GRACE) == ON_TIME
    assert lateness(refused, DUE + GRACE + S, GRACE) == Lateness(GRACE + S, 0, 0.0, False)
    assert penalised(100, lateness(refused, DUE + D, GRACE)) == 0.0


def test_without_grace_one_second_is_one_unit():
    assert lateness(due_with(PER_DAY), DUE + S, timedelta(0)) == Lateness(S, 1, 0.9, True)
    assert lateness(due_with(PER_DAY), DUE, timedelta(0)) == ON_TIME


def test_the_grace_shifts_every_unit_boundary():
    # 1 h 5 min late with a 10 min grace: counted from due + grace, that is 55 min: 1 hour.
    assert lateness(due_with(PER_HOUR), DUE + H + 5 * M, GRACE).units == 1
    assert lateness(due_with(PER_HOUR), DUE + H + 11 * M, GRACE).units == 2


def test_an_extension_moves_the_late_period_with_the_due_date():
    extended = due_with(PER_DAY, DUE + 2 * D, extended=True)
    assert extended.late_until == DUE + 5 * D
    assert lateness(extended, DUE + 2 * D + GRACE, GRACE) == ON_TIME
    assert lateness(extended, DUE + 4 * D, GRACE).units == 2  # 2 days after the new due date
    assert lateness(extended, DUE + 5 * D + GRACE, GRACE).accepted
    assert not lateness(extended, DUE + 5 * D + GRACE + S, GRACE).accepted
    # the same submission against the course's due date would not have counted
    assert not lateness(due_with(PER_DAY), DUE + 4 * D, GRACE).accepted


def test_lateness_across_a_dst_change_is_elapsed_time():
    # Due 2026-10-24 23:59 CEST (21:59 UTC); submitted 2026-10-25 03:30 CET (02:30 UTC): the wall
    # clock says 3 h 31 min, but 4 h 31 min elapsed (clocks went back at 03:00): 4 h 21 min after
    # the grace, 5 started hours.
    due = datetime(2026, 10, 24, 21, 59, tzinfo=UTC)
    late = lateness(due_with(PER_HOUR, due), datetime(2026, 10, 25, 2, 30, tzinfo=UTC), GRACE)
    assert (late.late_by, late.units, late.factor) == (4 * H + 31 * M, 5, 0.75)


def test_a_naive_submission_time_is_refused():
    with pytest.raises(ValueError, match="timezone-aware"):
        lateness(due_with(PER_DAY), datetime(2026, 12, 21, 10, 0), GRACE)


@pytest.mark.parametrize(
    "points, late, grade",
    [
        (87.5, ON_TIME, 87.5),
        (87.5, Lateness(D, 3, 0.7, True), 61.25),
        (10.05, Lateness(D, 5, 0.5, True), 5.03),  # 5.025 half-up (binary floats would give 5.02)
        (33.33, Lateness(D, 1, 0.9, True), 30.0),  # 29.997
        (100, Lateness(D, 0, 0.0, False), 0.0),
    ],
)
def test_the_grade_is_rounded_half_up_once(points, late, grade):
    assert penalised(points, late) == grade


def test_factors_are_decimal():
    policy = LatePolicy(accepted=True, period=10 * D, per="day", percent=12.5, floor=0)
    assert lateness(due_with(policy), DUE + GRACE + 3 * D, GRACE).factor == 0.625
    assert lateness(due_with(PER_DAY), DUE + GRACE + 3 * D, GRACE).factor == 0.7  # not 0.7000000000000001
