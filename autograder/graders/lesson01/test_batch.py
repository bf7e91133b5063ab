"""Checks of get_batch: the windows' starts (TODO [batch-offsets]) and x, y with y
shifted by one (TODO [targets-shift]).

data always holds distinct values, so each row of x or y says where in data it starts. The
starts are judged by properties, never against one random stream: every valid start comes out
(the last one, len(data) - block_size - 1, included), none past it, and the batch depends on
the generator it is given and on nothing else.

None of these checks asks the reference anything: they need no recording, and the learner
release runs them as they are. test_official_batch.py adds randomized edge ranges to
batch-range and batch-shapes in official grading only.
"""

from __future__ import annotations

import functools

import pytest
import torch

from autograder.core.results import message
from autograder.engine.checks import describe_student_error, fail
from autograder.engine.grader_helpers import generator, worker_generator
from autograder.sandbox.client import StudentError

from .harness import (
    RETRIES,
    RETRY_SEED_STEP,
    as_rows,
    batch_call,
    distinct_data,
    fail_if_undefined,
    function,
    get_batch,
    get_batch_whole,
    past_end_start,
    positions,
    rows_of_starts,
    short_rows,
    show,
    type_name,
    window_start,
)

# ---------------------------------------------------------------- TODO [batch-offsets]

# Few valid starts and many rows: every start comes out unless the code cannot draw it
# (each of 4 starts is missed by 3 x 48 rows with probability (3/4)^144 < 1e-17).
RANGE_T, RANGE_STARTS, RANGE_B, RANGE_CALLS = 6, 4, 48, 3
# When a call breaks with rows of different lengths, one-row calls say whose the break is:
# each of the 4 starts is missed by 96 of them with probability (3/4)^96 < 1e-11.
PROBE_CALLS = 96


def _starts(x, y, data, B: int, T: int, called) -> tuple[list[int], bool | None]:
    """(the start of each row's window, whether every y row is its x row shifted by one; None
    when y is not (B, T)).

    A row's start is where x[b] starts, or where y[b] starts when y[b] is a window one token
    before x[b] (x and y swapped): how y is sliced (TODO [targets-shift]) does not move it, and
    a y of the wrong shape is left to the checks of that TODO."""
    rows_x, rows_y = as_rows(x, B, T), as_rows(y, B, T)
    if rows_x is None:
        count = rows_of_starts(x, data, B, T)
        if count is not None:  # one row per start, so ix has `count` starts
            fail(called, message("lesson01.starts_count", got=count, B=B, T=T))
        start = past_end_start(x, data, T)
        if start is not None:  # the start's fault, not how x is built
            n = len(data)
            fail(called, message("lesson01.start_past_end", start=start, n=n, T=T, last=n - T - 1))
        # How x is built is TODO [targets-shift]'s: the starts cannot be read off it.
        fail(
            called,
            message("lesson01.starts_unjudgeable_shape", name="x", got=tuple(x.shape), B=B, T=T),
            waits_on="targets-shift",
        )
    where = positions(data)
    starts, shifted = [], True
    for b in range(B):
        sx = window_start(rows_x[b], data, where)
        if sx is None:
            fail(
                called,
                message("lesson01.starts_unjudgeable_row", name="x", b=b, row=show(rows_x[b]), T=T),
                waits_on="targets-shift",
            )
        sy = window_start(rows_y[b], data, where) if rows_y is not None else None
        shifted = shifted and sy == sx + 1
        starts.append(sy if sy is not None and sy == sx - 1 else sx)
    return starts, (shifted if rows_y is not None else None)


class _Draws:
    """What the get_batch calls of one check showed: the starts of every batch, those of the
    batches that came out whole (x and y both (B, T)), whether their y was x shifted by one,
    and the first break (rows of different lengths) of the calls that did not come out."""

    def __init__(self, submission, data: torch.Tensor, T: int) -> None:
        self.submission, self.data, self.T = submission, data, T
        self.seen: set[int] = set()
        self.seen_whole: set[int] = set()
        self.whole = 0
        self.shift_right = True
        self.broke: StudentError | None = None
        self.broke_called = None

    def draw(self, B: int, seed: int):
        """(called, starts) of one call, or (called, None) when it broke."""
        called = message("lesson01.called", call=batch_call(len(self.data), self.T, B, seed))
        try:
            called, x, y = get_batch(
                self.submission, self.data, self.T, B, seed, hints=False, judging="batch-offsets"
            )
        except StudentError as err:
            if not short_rows(err):
                raise
            if self.broke is None:
                self.broke, self.broke_called = err, called
            return called, None
        starts, shifted = _starts(x, y, self.data, B, self.T, called)
        self.seen.update(starts)
        if shifted is not None:  # a row of one call cannot break torch.stack, but can be short
            self.seen_whole.update(starts)
            self.whole += 1
            self.shift_right = self.shift_right and shifted
        return called, starts

    def blame_break(self, last: int) -> None:
        """After a break: fail when it is the starts' (every valid start came out whole anyway,
        or y is sliced right), otherwise let the learner's error through as it is: it was raised
        in the code of TODO [targets-shift], and this check says it waits on that TODO."""
        n = len(self.data)
        # A y of the right length at one start only (one token too long elsewhere) says nothing.
        if self.seen_whole >= set(range(last + 1)) or (len(self.seen_whole) >= 2 and self.shift_right):
            fail(
                self.broke_called,
                describe_student_error(self.broke, None, {}),
                message("lesson01.starts_break_rows", n=n, T=self.T, last=last, high=n - self.T),
            )
        raise self.broke


@pytest.mark.check("batch-range")
def test_batch_range(submission, check_seed):
    gen = generator(check_seed)
    seed = check_seed % 10_000  # short enough to read in a message
    draws = judge_range(submission, distinct_data(RANGE_T + RANGE_STARTS, gen), RANGE_T, RANGE_B, seed)
    # The tightest case: len(data) = block_size + 1 leaves exactly one window, at 0.
    T, B = 5, 3
    tight = _Draws(submission, distinct_data(T + 1, gen), T)
    called, starts = tight.draw(B, seed)
    if starts is None:
        # How y is sliced was seen above, on the longer data.
        tight.seen_whole, tight.shift_right = draws.seen_whole, draws.shift_right
        tight.blame_break(0)
    if any(s != 0 for s in starts):
        fail(called, message("lesson01.single_window", starts=show(starts)))


def judge_range(submission, data: torch.Tensor, T: int, B: int, seed: int) -> _Draws:
    """RANGE_CALLS batches of B rows from data (few valid starts, many rows): fails unless
    every valid start comes out and none past the last; the draws seen, for a later case."""
    n = len(data)
    last = n - T - 1
    draws = _Draws(submission, data, T)
    for k in range(RANGE_CALLS):
        called, starts = draws.draw(B, seed + k)
        if starts is None:
            break
        past = [s for s in starts if s > last]
        if past:
            fail(called, message("lesson01.start_past_end", start=past[0], n=n, T=T, last=last))
    if draws.broke is not None:
        # Which starts break it, and whether y is sliced right: one row at a time.
        for j in range(PROBE_CALLS):
            draws.draw(1, seed + 100 + j)
        draws.blame_break(last)
    seen = draws.seen
    missing = sorted(set(range(last + 1)) - seen)
    if missing:
        hint = None
        if max(seen) == last - 1:
            hint = message("lesson01.last_window_off_by_one", high=n - T)
        elif len(seen) == 1:
            hint = message("lesson01.starts_constant", start=next(iter(seen)))
        seeds = f"{seed}..{seed + RANGE_CALLS - 1}"
        fail(
            message("lesson01.called_many", call=batch_call(n, T, B, seeds), calls=RANGE_CALLS),
            message(
                "lesson01.starts_missing", missing=show(missing), seen=show(sorted(seen)), last=last, n=n, T=T
            ),
            hint,
        )
    return draws


@pytest.mark.check("batch-generator")
def test_batch_generator(submission, check_seed):
    gen = generator(check_seed)
    n, T, B = 300, 8, 5
    data = distinct_data(n, gen)
    seed = check_seed % 10_000
    # The same seed twice, with torch's global generator in two different states. A seed whose
    # batch breaks with rows of different lengths (a start past the end: batch-range's
    # business) is traded for another; a break on every seed is let through as it is.
    for k in range(RETRIES):
        try:
            batch = functools.partial(get_batch, submission, data, T, B, hints=False, judging="batch-offsets")
            _, x1, y1 = batch(seed, global_seed=1)
            _, x2, y2 = batch(seed, global_seed=2)
            _, x3, y3 = batch(seed + 1, global_seed=1)
            break
        except StudentError as err:
            if not short_rows(err) or k == RETRIES - 1:
                raise
            seed += RETRY_SEED_STEP
    if not (torch.equal(x1, x2) and torch.equal(y1, y2)):
        fail(
            message("lesson01.called_twice", call=batch_call(n, T, B, seed)),
            message("lesson01.not_reproducible", x1=show(x1[:2]), x2=show(x2[:2])),
        )
    # Another seed must give another batch (5 starts out of 292 coinciding is ~1e-12).
    if torch.equal(x1, x3) and torch.equal(y1, y3):
        fail(
            message("lesson01.called_other_seed", call=batch_call(n, T, B, seed), other=seed + 1),
            message("lesson01.ignores_generator", x=show(x1[:2])),
        )
    _expect_global_without_generator(submission, data, T, B, check_seed)


def _expect_global_without_generator(submission, data: torch.Tensor, T: int, B: int, check_seed: int) -> None:
    """generator=None draws from torch's global generator (the contract): the same global seed
    gives the same batch, and another global seed another batch (a generator of get_batch's
    own, torch.Generator() with its default seed, gives the same batch whatever the seed)."""
    n = len(data)
    base = 1 + check_seed % 1000
    for k in range(RETRIES):
        seeds = (base + 2 * k * RETRY_SEED_STEP, base + (2 * k + 1) * RETRY_SEED_STEP)
        try:
            batch = functools.partial(
                get_batch, submission, data, T, B, None, hints=False, judging="batch-offsets"
            )
            _, x1, y1 = batch(global_seed=seeds[0])
            _, x2, y2 = batch(global_seed=seeds[0])
            _, x3, y3 = batch(global_seed=seeds[1])
            break
        except StudentError as err:
            if not short_rows(err) or k == RETRIES - 1:
                raise
    if not (torch.equal(x1, x2) and torch.equal(y1, y2)):
        fail(
            message("lesson01.called_none_twice", call=batch_call(n, T, B, None), seed=seeds[0]),
            message("lesson01.none_not_reproducible", x1=show(x1[:2]), x2=show(x2[:2])),
        )
    if torch.equal(x1, x3) and torch.equal(y1, y3):
        fail(
            message(
                "lesson01.called_none_seeds", call=batch_call(n, T, B, None), seed=seeds[0], other=seeds[1]
            ),
            message("lesson01.none_ignores_global", x=show(x1[:2])),
        )


# ---------------------------------------------------------------- TODO [targets-shift]

SHAPE_CASES = ((500, 7, 3), (300, 1, 5), (400, 12, 2), (60, 4, 1))  # (len(data), T, B), B != T; B = 1, T = 1


@pytest.mark.check("batch-shapes")
def test_batch_shapes(submission, check_seed):
    judge_shapes(submission, generator(check_seed), SHAPE_CASES, check_seed % 10_000)
    _expect_batch_on_data_device(submission, check_seed)


def judge_shapes(submission, gen, cases, seed: int) -> None:
    """For each (len(data), T, B): fails unless x and y are (B, T) int64 and each row of x is a
    window of data."""
    for k, (n, T, B) in enumerate(cases):
        data = distinct_data(n, gen)
        called, x, y = get_batch_whole(submission, data, T, B, seed + k)
        _expect_rows_per_start(called, x, y, data, B, T)
        for name, t in (("x", x), ("y", y)):
            if tuple(t.shape) != (B, T):
                hint = message("lesson01.shape_transposed") if tuple(t.shape) == (T, B) else None
                fail(called, message("lesson01.shape_wrong", name=name, got=tuple(t.shape), B=B, T=T), hint)
            if t.dtype != torch.int64:
                fail(
                    called,
                    message("lesson01.dtype_wrong", name=name, got=str(t.dtype).removeprefix("torch.")),
                )
        where = positions(data)
        for b in range(B):
            if window_start(x[b], data, where) is None:
                fail(called, message("lesson01.row_not_window", name="x", b=b, row=show(x[b]), T=T))


def _expect_rows_per_start(called, x, y, data: torch.Tensor, B: int, T: int) -> None:
    """x and y with k != B rows, each a window of data: the rows were cut one per start, and
    there are k starts. How many starts ix holds is TODO [batch-offsets]'s (batch-range says
    so); this TODO's checks wait on it."""
    count = rows_of_starts(x, data, B, T)
    if count is not None and tuple(y.shape) == tuple(x.shape):
        fail(
            called,
            message("lesson01.shape_wrong", name="x", got=tuple(x.shape), B=B, T=T),
            message("lesson01.rows_follow_starts", got=count, B=B),
            waits_on="batch-offsets",
        )


def _expect_batch_on_data_device(submission, check_seed: int) -> None:
    """The device contract without a GPU: data on the "meta" device (shapes, no values). x and y
    cut from data (slices, torch.stack, an index matrix) stay on its device; rows copied out
    through Python (.tolist(), torch.tensor(...), filling a torch.zeros made on the CPU) cannot
    leave meta, as on a GPU they would come back on the CPU, away from the model."""
    n, T, B = 40, 6, 3
    data = torch.empty(n, dtype=torch.int64, device="meta")
    seed = check_seed % 10_000
    # A seed whose batch breaks with rows of different lengths (a start past the end, which
    # fails on the CPU as well: TODO [batch-offsets]) is traded for another, as the CPU cases
    # above do; a break on every seed says nothing about devices.
    for k in range(RETRIES):
        called = message("lesson01.called_meta", call=batch_call(n, T, B, seed))
        try:
            result = submission.call_traced(
                function(submission, "get_batch"), data, T, B, worker_generator(submission, seed)
            )["value"]
            break
        except StudentError as err:
            if err.todo_pending is not None:
                raise
            fail_if_undefined(err, called, "targets-shift")
            if short_rows(err):
                if k == RETRIES - 1:
                    fail(
                        called,
                        describe_student_error(err, None, {}),
                        message("lesson01.hint_short_row", n=n, T=T, last=n - T - 1),
                        waits_on="batch-offsets",
                    )
                seed += RETRY_SEED_STEP
                continue
            fail(called, describe_student_error(err, None, {}), message("lesson01.batch_device_error"))
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        fail(called, message("lesson01.batch_not_pair", got=type_name(result)))
    for name, value in zip("xy", result):
        if not isinstance(value, torch.Tensor):
            fail(called, message("lesson01.batch_not_tensor", name=name, got=type_name(value)))
        if value.device.type != "meta":
            fail(called, message("lesson01.batch_wrong_device", name=name, got=value.device.type))


@pytest.mark.check("targets-shift")
def test_targets_shift(submission, check_seed):
    gen = generator(check_seed)
    n, T, B = 600, 8, 6
    data = distinct_data(n, gen)
    where = positions(data)
    for k in range(2):
        called, x, y = get_batch_whole(submission, data, T, B, check_seed % 10_000 + k)
        _expect_rows_per_start(called, x, y, data, B, T)
        rows_x, rows_y = as_rows(x, B, T), as_rows(y, B, T)
        if rows_x is None or rows_y is None:
            bad, name = (x, "x") if rows_x is None else (y, "y")
            fail(called, message("lesson01.shape_wrong", name=name, got=tuple(bad.shape), B=B, T=T))
        for b in range(B):
            sx = window_start(rows_x[b], data, where)
            if sx is None:
                fail(called, message("lesson01.row_not_window", name="x", b=b, row=show(rows_x[b]), T=T))
            # The window one token further, cut short at the end of data (a start past the
            # last valid one leaves y a token short: batch-range says so).
            expected = data.narrow(0, sx + 1, min(T, len(data) - sx - 1))
            row = rows_y[b]
            if len(expected) == T and torch.equal(row.to(torch.int64), expected):
                continue
            got = message(
                "lesson01.targets_wrong", b=b, x=show(rows_x[b]), y=show(row), expected=show(expected)
            )
            sy = window_start(row, data, where)
            if sy is None:
                hint = message("lesson01.targets_not_window", b=b)
            elif sy == sx:
                hint = message("lesson01.targets_not_shifted")
            elif sy == sx - 1:
                hint = message("lesson01.targets_backwards")
            else:
                hint = message("lesson01.targets_shift_by", k=sy - sx)
            fail(called, got, hint)
