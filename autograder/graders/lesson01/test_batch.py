"""Hidden checks of get_batch: the windows' starts (TODO [batch-offsets]) and x, y with y
shifted by one (TODO [targets-shift]).

data always holds distinct values, so each row of x or y says where in data it starts. The
starts are judged by properties, never against one random stream: every valid start comes out
(the last one, len(data) - block_size - 1, included), none past it, and the batch depends on
the generator it is given and on nothing else.
"""

from __future__ import annotations

import pytest
import torch

from autograder.checks import fail
from autograder.results import message

from . import reference as ref
from .harness import as_rows, batch_call, get_batch, positions, show

# ---------------------------------------------------------------- TODO [batch-offsets]

# Few valid starts and many rows: every start comes out unless the code cannot draw it
# (each of 4 starts is missed by 3 x 48 rows with probability (3/4)^144 < 1e-17).
RANGE_T, RANGE_STARTS, RANGE_B, RANGE_CALLS = 6, 4, 48, 3


def _starts(x, y, data, B: int, T: int, called) -> list[int]:
    """The start of each row's window: where x[b] or y[b] starts, whichever is first (so
    that a mistake in how x and y are sliced, TODO [targets-shift], does not move it)."""
    rows_x, rows_y = as_rows(x, B, T), as_rows(y, B, T)
    if rows_x is None or rows_y is None:
        bad, name = (x, "x") if rows_x is None else (y, "y")
        fail(called, message("lesson01.starts_unjudgeable_shape", name=name, got=tuple(bad.shape), B=B, T=T))
    where = positions(data)
    starts = []
    for b in range(B):
        sx = ref.window_start(rows_x[b], data, where)
        sy = ref.window_start(rows_y[b], data, where)
        if sx is None or sy is None:
            name, row = ("x", rows_x[b]) if sx is None else ("y", rows_y[b])
            fail(called, message("lesson01.starts_unjudgeable_row", name=name, b=b, row=show(row), T=T))
        starts.append(min(sx, sy))
    return starts


@pytest.mark.check("batch-range")
def test_batch_range(submission, check_seed):
    gen = torch.Generator().manual_seed(check_seed)
    T, B = RANGE_T, RANGE_B
    n = T + RANGE_STARTS
    data = ref.distinct_data(n, gen)
    last = n - T - 1
    seen: set[int] = set()
    seed = check_seed % 10_000  # short enough to read in a message
    for k in range(RANGE_CALLS):
        called, x, y = get_batch(submission, data, T, B, seed + k)
        starts = _starts(x, y, data, B, T, called)
        past = [s for s in starts if s > last]
        if past:
            fail(called, message("lesson01.start_past_end", start=past[0], n=n, T=T, last=last))
        seen.update(starts)
    missing = sorted(set(range(last + 1)) - seen)
    if missing:
        hint = None
        if max(seen) == last - 1:
            hint = message("lesson01.last_window_off_by_one", high=n - T)
        elif len(seen) == 1:
            hint = message("lesson01.starts_constant", start=next(iter(seen)))
        seeds = f"{seed}..{seed + RANGE_CALLS - 1}"
        fail(message("lesson01.called_many", call=batch_call(n, T, B, seeds), calls=RANGE_CALLS),
             message("lesson01.starts_missing", missing=show(missing), seen=show(sorted(seen)), last=last, n=n, T=T),
             hint)
    # The tightest case: len(data) = block_size + 1 leaves exactly one window, at 0.
    T, B = 5, 3
    data = ref.distinct_data(T + 1, gen)
    called, x, y = get_batch(submission, data, T, B, seed)
    starts = _starts(x, y, data, B, T, called)
    if any(s != 0 for s in starts):
        fail(called, message("lesson01.single_window", starts=show(starts)))


@pytest.mark.check("batch-generator")
def test_batch_generator(submission, check_seed):
    gen = torch.Generator().manual_seed(check_seed)
    n, T, B = 300, 8, 5
    data = ref.distinct_data(n, gen)
    seed = check_seed % 10_000
    # The same seed twice, with torch's global generator in two different states.
    _, x1, y1 = get_batch(submission, data, T, B, seed, global_seed=1)
    _, x2, y2 = get_batch(submission, data, T, B, seed, global_seed=2)
    if not (torch.equal(x1, x2) and torch.equal(y1, y2)):
        fail(message("lesson01.called_twice", call=batch_call(n, T, B, seed)),
             message("lesson01.not_reproducible", x1=show(x1[:2]), x2=show(x2[:2])))
    # Another seed must give another batch (5 starts out of 292 coinciding is ~1e-12).
    _, x3, y3 = get_batch(submission, data, T, B, seed + 1, global_seed=1)
    if torch.equal(x1, x3) and torch.equal(y1, y3):
        fail(message("lesson01.called_other_seed", call=batch_call(n, T, B, seed), other=seed + 1),
             message("lesson01.ignores_generator", x=show(x1[:2])))


# ---------------------------------------------------------------- TODO [targets-shift]

SHAPE_CASES = ((500, 7, 3), (300, 1, 5), (400, 12, 2))  # (len(data), T, B), B != T


@pytest.mark.check("batch-shapes")
def test_batch_shapes(submission, check_seed):
    gen = torch.Generator().manual_seed(check_seed)
    for k, (n, T, B) in enumerate(SHAPE_CASES):
        data = ref.distinct_data(n, gen)
        called, x, y = get_batch(submission, data, T, B, check_seed % 10_000 + k)
        for name, t in (("x", x), ("y", y)):
            if tuple(t.shape) != (B, T):
                hint = message("lesson01.shape_transposed") if tuple(t.shape) == (T, B) else None
                fail(called, message("lesson01.shape_wrong", name=name, got=tuple(t.shape), B=B, T=T), hint)
            if t.dtype != torch.int64:
                fail(called, message("lesson01.dtype_wrong", name=name, got=str(t.dtype).removeprefix("torch.")))
        where = positions(data)
        for b in range(B):
            if ref.window_start(x[b], data, where) is None:
                fail(called, message("lesson01.row_not_window", name="x", b=b, row=show(x[b]), T=T))


@pytest.mark.check("targets-shift")
def test_targets_shift(submission, check_seed):
    gen = torch.Generator().manual_seed(check_seed)
    n, T, B = 600, 8, 6
    data = ref.distinct_data(n, gen)
    where = positions(data)
    for k in range(2):
        called, x, y = get_batch(submission, data, T, B, check_seed % 10_000 + k)
        rows_x, rows_y = as_rows(x, B, T), as_rows(y, B, T)
        if rows_x is None or rows_y is None:
            bad, name = (x, "x") if rows_x is None else (y, "y")
            fail(called, message("lesson01.shape_wrong", name=name, got=tuple(bad.shape), B=B, T=T))
        for b in range(B):
            sx = ref.window_start(rows_x[b], data, where)
            if sx is None:
                fail(called, message("lesson01.row_not_window", name="x", b=b, row=show(rows_x[b]), T=T))
            expected = data[sx + 1:sx + 1 + T]
            row = rows_y[b]
            if len(expected) == T and torch.equal(row.to(torch.int64), expected):
                continue
            got = message("lesson01.targets_wrong", b=b, x=show(rows_x[b]), y=show(row), expected=show(expected))
            sy = ref.window_start(row, data, where)
            if sy is None:
                hint = message("lesson01.targets_not_window", b=b)
            elif sy == sx:
                hint = message("lesson01.targets_not_shifted")
            elif sy == sx - 1:
                hint = message("lesson01.targets_backwards")
            else:
                hint = message("lesson01.targets_shift_by", k=sy - sx)
            fail(called, got, hint)
