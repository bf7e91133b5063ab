"""Checks of split (TODO [split]): the order of the text is kept, train first, and val holds
val_fraction of the tokens (rounded either way).

The reference is asked only about the grader's own sizes and fractions (never about a
learner's values), and the sizes a known mistake gives are asked for every case, so the
learner release answers every call from its recording."""

from __future__ import annotations

import pytest
import torch

from autograder.core.results import message
from autograder.engine import recording
from autograder.engine.checks import describe_student_error, fail
from autograder.engine.grader_helpers import generator
from autograder.sandbox.client import StudentError

from .harness import distinct_data, function, has_values, show, type_name

ref = recording.reference_of(__package__)

# (n, val_fraction); None: the default, 0.1. Each exact n * fraction is also checked by
# ref.val_sizes, so both usual roundings (int(n * (1 - f)) for train, int(n * f) for val) pass.
ORDER_CASES = ((40, 0.25), (37, 0.3))
# (9, 0.1): val_fraction * n = 0.9, so val may be empty (rounded down): data[-0:] bites there.
SIZE_CASES = ((1000, None), (40, 0.25), (7, 0.5), (200, 0.05), (37, 0.3), (9, 0.1))


def _split_call(data: torch.Tensor, fraction):
    shown = "split(data)" if fraction is None else f"split(data, {fraction})"
    if data.device.type == "meta":
        return message(
            "lesson01.called_split_meta",
            call={
                "es": f"{shown} con data un tensor int64 de {len(data)} valores",
                "en": f"{shown} with data an int64 tensor of {len(data)} values",
            },
        )
    return message(
        "lesson01.called",
        call={
            "es": f"{shown} con data un tensor int64 de {len(data)} valores distintos",
            "en": f"{shown} with data an int64 tensor of {len(data)} distinct values",
        },
    )


def _split(submission, data: torch.Tensor, fraction):
    args = (data,) if fraction is None else (data, fraction)
    called = _split_call(data, fraction)
    result = submission.call(function(submission, "split"), *args)
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        fail(called, message("lesson01.split_not_pair", got=type_name(result)))
    return called, result[0], result[1]


def _splits(submission, check_seed: int, cases):
    """(n, fraction, data, called, train, val) for each case, data drawn fresh each time."""
    gen = generator(check_seed)
    for n, fraction in cases:
        data = distinct_data(n, gen)
        yield (n, fraction, data, *_split(submission, data, fraction))


@pytest.mark.check("split-order")
def test_split_order(submission, check_seed):
    for n, fraction, data, called, train, val in _splits(submission, check_seed, ORDER_CASES):
        sizes = ref.val_sizes(n, fraction)  # asked every time: a failing replay needs it
        for name, part in (("train", train), ("val", val)):
            if not has_values(part):
                fail(called, message("lesson01.split_not_tensor", name=name, got=type_name(part)))
        _expect_pieces_like(data, called, train, val)
        train, val = train.cpu(), val.cpu()
        joined = torch.cat([train, val.to(train.dtype)])
        if torch.equal(joined, data):
            continue
        got = message("lesson01.split_got", train=show(train), val=show(val), data=show(data))
        if len(joined) != n:
            fail(called, got, message("lesson01.split_lost", count=len(joined), n=n))
        if torch.equal(torch.cat([val, train.to(val.dtype)]), data):
            # The pieces are whole but in the wrong places: either the pair is returned the
            # other way round (val has train's size) or train was cut from the end.
            if len(val) in sizes and len(val) != len(train):
                fail(called, got, message("lesson01.split_train_from_end"))
            fail(called, got, message("lesson01.split_swapped"))
        if torch.equal(joined.sort().values, data.sort().values):
            fail(called, got, message("lesson01.split_shuffled"))
        fail(called, got, message("lesson01.split_not_pieces"))
    _expect_split_on_data_device(submission)


def _expect_pieces_like(data: torch.Tensor, called, *parts) -> None:
    """train and val are pieces of data: 1-D, of data's dtype (int64 ids, not floats)."""
    for name, part in zip(("train", "val"), parts):
        if part.ndim != 1:
            fail(called, message("lesson01.split_not_1d", name=name, got=tuple(part.shape)))
        if part.dtype != data.dtype:
            fail(
                called,
                message(
                    "lesson01.split_dtype",
                    name=name,
                    got=str(part.dtype).removeprefix("torch."),
                    expected=str(data.dtype).removeprefix("torch."),
                ),
            )


def _expect_split_on_data_device(submission) -> None:
    """The device contract without a GPU, as batch-shapes judges get_batch: data on the "meta"
    device (shapes, no values). Pieces cut from data stay on its device; values copied out
    through Python (.tolist(), torch.tensor(...)) cannot leave meta, as from a GPU they would
    come back on the CPU."""
    n, fraction = 30, 0.2
    data = torch.empty(n, dtype=torch.int64, device="meta")
    called = _split_call(data, fraction)
    try:
        result = submission.call(function(submission, "split"), data, fraction)
    except StudentError as err:
        if err.todo_pending is not None:
            raise
        fail(called, describe_student_error(err, None, {}), message("lesson01.split_device_error"))
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        fail(called, message("lesson01.split_not_pair", got=type_name(result)))
    for name, part in zip(("train", "val"), result):
        if not isinstance(part, torch.Tensor):
            fail(called, message("lesson01.split_not_tensor", name=name, got=type_name(part)))
        if part.device.type != "meta":
            fail(called, message("lesson01.split_wrong_device", name=name, got=part.device.type))
    _expect_pieces_like(data, called, *result)


@pytest.mark.check("split-fraction")
def test_split_fraction(submission, check_seed):
    for n, fraction, _data, called, train, val in _splits(submission, check_seed, SIZE_CASES):
        judge_fraction(n, fraction, called, train, val)


def judge_fraction(n: int, fraction: float | None, called, train, val) -> None:
    """Fails unless len(val) is fraction * n (default 0.1) rounded either way, naming the
    mistake a wrong size comes from."""
    f = 0.1 if fraction is None else fraction
    # What a known mistake gives, asked every time: the recording holds them all.
    sizes, inverted, default = ref.val_sizes(n, f), ref.val_sizes(n, 1 - f), ref.val_sizes(n, 0.1)
    n_train, n_val = _length(train, called, "train"), _length(val, called, "val")
    if n_train + n_val != n:
        fail(called, message("lesson01.split_lost", count=n_train + n_val, n=n))
    if n_val in sizes:
        return
    expected = ", ".join(str(s) for s in sizes)
    hint = None
    if n_val == n and n_train == 0 and min(sizes) == 0:
        hint = message("lesson01.split_val_negative_zero", n=n, f=f, exact=f"{n * f:g}")
    elif n_val in inverted:
        hint = message("lesson01.split_inverted", f=f)
    elif fraction is not None and n_val in default:
        hint = message("lesson01.split_ignores_fraction", f=f)
    elif fraction is None:
        hint = message("lesson01.split_default")
    fail(
        called,
        message(
            "lesson01.split_sizes",
            train=n_train,
            val=n_val,
            n=n,
            f=f,
            exact=f"{n * f:g}",
            expected=expected,
        ),
        hint,
    )


def _length(part, called, name: str) -> int:
    if isinstance(part, torch.Tensor) and part.ndim >= 1:
        return int(part.shape[0])
    if isinstance(part, (list, tuple)):
        return len(part)
    fail(called, message("lesson01.split_not_tensor", name=name, got=type_name(part)))
