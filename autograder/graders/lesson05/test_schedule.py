"""Hidden checks of get_lr (TODO [lr-schedule]): warmup, cosine decay, and after max_steps."""

from __future__ import annotations

import random

import pytest

from autograder.core.results import Block, message
from autograder.engine import recording
from autograder.engine.checks import fail
from autograder.engine.feedback import fmt_pair

from .harness import Trainer, expect_float, fmt

ref = recording.reference_of(__package__)

RTOL = 1e-6  # a schedule computed in float32 (torch.cos on a tensor) is still right


def _schedules(seed: int) -> list[dict]:
    """Two schedules drawn from the check's seed, in which no argument has the same value, nor
    a value a learner might write in its place (nanoGPT's 6e-4, min_lr = max_lr / 10, a warmup
    of 10 or 100): a constant where an argument is meant fails with one of them at least. The
    second has the edges: a one-step warmup (step 0 is already max_lr, the cosine starts at
    step 1) and a short decay of an odd number of steps."""
    rng = random.Random(seed)
    max_lr = float(f"{rng.uniform(7e-4, 4.6e-3):.4g}")
    warmup = rng.choice((4, 5, 6, 7, 8, 9, 11, 12, 13))
    first = {
        "max_lr": max_lr,
        "min_lr": float(f"{max_lr * rng.uniform(0.04, 0.08):.4g}"),
        "warmup_steps": warmup,
        "max_steps": warmup + rng.randint(21, 41),
    }
    max_lr = float(f"{max_lr * rng.uniform(1.6, 2.8):.4g}")
    second = {
        "max_lr": max_lr,
        "min_lr": float(f"{max_lr * rng.uniform(0.14, 0.3):.4g}"),
        "warmup_steps": 1,
        "max_steps": 1 + 2 * rng.randint(3, 7) + 1,
    }
    return [first, second]


def _call_text(step: int, s: dict) -> str:
    return (
        f"get_lr({step}, max_lr={fmt(s['max_lr'])}, min_lr={fmt(s['min_lr'])}, "
        f"warmup_steps={s['warmup_steps']}, max_steps={s['max_steps']})"
    )


def _near(got: float, expected: float) -> bool:
    return abs(got - expected) <= RTOL * abs(expected) + 1e-15


def _judge(submission, runs: list[tuple[dict, list[int]]], bugs: tuple[str, ...], what_key: str) -> None:
    """get_lr at each (schedule, its steps) of `runs`, against the reference; the first schedule
    with a wrong value fails the check."""
    trainer = Trainer(submission)
    for s, steps in runs:
        _judge_one(trainer, s, steps, bugs, what_key)


def _judge_one(trainer: Trainer, s: dict, steps: list[int], bugs: tuple[str, ...], what_key: str) -> None:
    lrs = ref.lr_table(steps, s["max_lr"], s["min_lr"], s["warmup_steps"], s["max_steps"], bugs)
    expected = dict(zip(steps, lrs["right"]))
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
    # Each row's two numbers with the digits that tell them apart (a row marked wrong never
    # shows the same number twice).
    shown = {step: fmt_pair(got[step], expected[step]) for step in rows}
    table = "\n".join(
        f"{step:6d}  {shown[step][0]:>12}  {shown[step][1]:>12}" + ("  <-" if step in wrong else "")
        for step in rows
    )
    diagnosis = None
    for bug in bugs:
        if all(_near(got[step], value) for step, value in zip(steps, lrs[bug])):
            diagnosis = message(f"lesson05.diag_lr_{bug}", warmup=s["warmup_steps"], max_steps=s["max_steps"])
            break
    got_first, expected_first = fmt_pair(got[first], expected[first])
    fail(
        message(what_key, wrong=len(wrong), total=len(steps)),
        message("lesson05.lr_first_wrong", call=_call_text(first, s), got=got_first, expected=expected_first),
        message("lesson05.lr_table_title"),
        Block(table + "\n"),
        diagnosis,
    )


@pytest.mark.check("lr-warmup")
def test_lr_warmup(submission, check_seed):
    _judge(
        submission,
        [(s, list(range(s["warmup_steps"]))) for s in _schedules(check_seed)],
        ("warmup_no_plus_one", "warmup_over_warmup_plus_one", "warmup_from_min"),
        "lesson05.lr_warmup_wrong",
    )


@pytest.mark.check("lr-cosine")
def test_lr_cosine(submission, check_seed):
    _judge(
        submission,
        [(s, list(range(s["warmup_steps"], s["max_steps"]))) for s in _schedules(check_seed)],
        ("warmup_inclusive", "no_half", "linear", "no_min_lr", "ratio_from_zero", "quarter_cosine"),
        "lesson05.lr_cosine_wrong",
    )


@pytest.mark.check("lr-after-max")
def test_lr_after_max(submission, check_seed):
    _judge(
        submission,
        [
            (s, [s["max_steps"], s["max_steps"] + 1, s["max_steps"] + 5, 2 * s["max_steps"]])
            for s in _schedules(check_seed)
        ],
        ("continues_after_max", "zero_after_max", "max_after_max"),
        "lesson05.lr_after_wrong",
    )
