"""Hidden checks of get_lr (TODO [lr-schedule]): warmup, cosine decay, and after max_steps."""

from __future__ import annotations

import random

import pytest

from autograder.core.results import Block, message
from autograder.engine import recording
from autograder.engine.checks import fail

from .harness import Trainer, expect_float, fmt

ref = recording.reference_of(__package__)

RTOL = 1e-6  # a schedule computed in float32 (torch.cos on a tensor) is still right


def _schedule(seed: int) -> dict:
    """A schedule drawn from the check's seed, with every key number different."""
    rng = random.Random(seed)
    max_lr = rng.choice((6e-4, 1e-3, 3e-3, 5e-3))
    warmup = rng.randint(5, 12)
    return {
        "max_lr": max_lr,
        "min_lr": round(max_lr * rng.choice((0.05, 0.1, 0.2)), 12),
        "warmup_steps": warmup,
        "max_steps": warmup + 2 * rng.randint(12, 20),
    }


def _call_text(step: int, s: dict) -> str:
    return (
        f"get_lr({step}, max_lr={fmt(s['max_lr'])}, min_lr={fmt(s['min_lr'])}, "
        f"warmup_steps={s['warmup_steps']}, max_steps={s['max_steps']})"
    )


def _near(got: float, expected: float) -> bool:
    return abs(got - expected) <= RTOL * abs(expected) + 1e-15


def _judge(submission, s: dict, steps: list[int], bugs: tuple[str, ...], what_key: str) -> None:
    lrs = ref.lr_table(steps, s["max_lr"], s["min_lr"], s["warmup_steps"], s["max_steps"], bugs)
    expected = dict(zip(steps, lrs["right"]))
    trainer = Trainer(submission)
    got = {}
    for step in steps:
        value = trainer.call(
            "get_lr",
            step,
            max_lr=s["max_lr"],
            min_lr=s["min_lr"],
            warmup_steps=s["warmup_steps"],
            max_steps=s["max_steps"],
        )
        got[step] = expect_float(
            value, message("lesson05.called_fn", call=_call_text(step, s)), message("lesson05.what_lr")
        )
    wrong = [step for step in steps if not _near(got[step], expected[step])]
    if not wrong:
        return
    first = wrong[0]
    rows = sorted(set(wrong[:4]) | {steps[0], steps[-1]})
    table = "\n".join(
        f"{step:6d}  {fmt(got[step]):>12}  {fmt(expected[step]):>12}" + ("  <-" if step in wrong else "")
        for step in rows
    )
    diagnosis = None
    for bug in bugs:
        if all(_near(got[step], value) for step, value in zip(steps, lrs[bug])):
            diagnosis = message(f"lesson05.diag_lr_{bug}", warmup=s["warmup_steps"], max_steps=s["max_steps"])
            break
    fail(
        message(what_key, wrong=len(wrong), total=len(steps)),
        message(
            "lesson05.lr_first_wrong",
            call=_call_text(first, s),
            got=fmt(got[first]),
            expected=fmt(expected[first]),
        ),
        message("lesson05.lr_table_title"),
        Block(table + "\n"),
        diagnosis,
    )


@pytest.mark.check("lr-warmup")
def test_lr_warmup(submission, check_seed):
    s = _schedule(check_seed)
    _judge(
        submission,
        s,
        list(range(s["warmup_steps"])),
        ("warmup_no_plus_one", "warmup_over_warmup_plus_one", "warmup_from_min"),
        "lesson05.lr_warmup_wrong",
    )


@pytest.mark.check("lr-cosine")
def test_lr_cosine(submission, check_seed):
    s = _schedule(check_seed)
    _judge(
        submission,
        s,
        list(range(s["warmup_steps"], s["max_steps"])),
        ("warmup_inclusive", "no_half", "linear", "no_min_lr", "ratio_from_zero", "quarter_cosine"),
        "lesson05.lr_cosine_wrong",
    )


@pytest.mark.check("lr-after-max")
def test_lr_after_max(submission, check_seed):
    s = _schedule(check_seed)
    end = s["max_steps"]
    _judge(
        submission,
        s,
        [end, end + 1, end + 5, 2 * end],
        ("continues_after_max", "zero_after_max", "max_after_max"),
        "lesson05.lr_after_wrong",
    )
