"""Hidden checks of estimate_loss (TODO [eval-mode]): the mean loss with dropout off, without
gradients, and the model left in the mode it was in."""

from __future__ import annotations

import pytest
import torch

from autograder.core.results import message
from autograder.engine import recording
from autograder.engine.checks import fail
from autograder.engine.feedback import fmt_pair
from autograder.engine.grader_helpers import generator
from autograder.sandbox.client import StudentError

from .harness import (
    CFG,
    DROPOUT_CFG,
    MODE_PATHS,
    B,
    T,
    Trainer,
    cfg_text,
    expect_float,
    fmt,
    model_text,
    random_state,
    relative_gap,
)

ref = recording.reference_of(__package__)

N_BATCHES = 4  # not B (3) nor T (5): a mean over the wrong count shows
INFERENCE_ERROR = "Inference tensors cannot be saved for backward"


def _setup(
    submission,
    check_seed: int,
    cfg: dict,
    n_batches: int = N_BATCHES,
    shape: tuple = (B, T),
    *,
    values: bool = False,
):
    trainer = Trainer(submission)
    trainer.needs_reference_model(values=values)
    gen = generator(check_seed)
    state = random_state(cfg, gen)
    xs = torch.randint(cfg["vocab_size"], (n_batches, *shape), generator=gen)
    ys = torch.randint(cfg["vocab_size"], (n_batches, *shape), generator=gen)
    return trainer, state, xs, ys


def _called(cfg: dict, train: bool, xs: torch.Tensor):
    return message(
        "lesson05.called_estimate",
        model=model_text(),
        cfg=cfg_text(cfg),
        count=xs.shape[0],
        shape=tuple(xs.shape[1:]),
        mode="train" if train else "eval",
    )


def _estimate(trainer: Trainer, model, xs: torch.Tensor, ys: torch.Tensor, called, seed: int | None = None):
    """estimate_loss(model, batches) with batches a one-pass iterator over the pairs (xs[i],
    ys[i]), as train() passes a generator; fails when it left autograd switched off for
    everyone (and switches it back on, so that the next checks are not affected)."""
    try:
        value = trainer.call("estimate_loss", model, trainer.one_pass(xs, ys), seed=seed)
    except StudentError as err:
        if err.todo_pending is None and err.is_a("TypeError") and "len()" in err.message:
            fail(called, message("lesson05.estimate_len"))
        raise
    enabled = trainer.sub.call(trainer.sub.getattr(trainer.torch, "is_grad_enabled"))
    if enabled is not True:
        trainer.sub.call(trainer.sub.getattr(trainer.torch, "set_grad_enabled"), True)
        fail(called, message("lesson05.grad_left_disabled"))
    return value


def _as_float(value, called) -> float:
    """estimate_loss's number: a Python float, by the course's contract (nanoGPT's
    estimate_loss returns tensors; the message says so)."""
    if isinstance(value, torch.Tensor):
        fail(called, message("lesson05.estimate_tensor", shape=tuple(value.shape)))
    return expect_float(value, called, message("lesson05.what_estimate"))


@pytest.mark.check("eval-loss")
def test_eval_loss(submission, check_seed):
    """The mean of the batches' losses, with dropout (0.5 here) switched off."""
    judge_eval_loss(*_setup(submission, check_seed, DROPOUT_CFG, values=True))


def judge_eval_loss(trainer: Trainer, state: dict, xs: torch.Tensor, ys: torch.Tensor) -> None:
    """estimate_loss on a training model with dropout 0.5 and the batches (xs[i], ys[i]): the
    mean of their losses with dropout off."""
    model = trainer.gpt(DROPOUT_CFG, state, train=True)
    called = _called(DROPOUT_CFG, True, xs)
    got = _as_float(_estimate(trainer, model, xs, ys, called, seed=1), called)
    each = [ref.loss_at(DROPOUT_CFG, state, xs[i], ys[i]) for i in range(len(xs))]
    expected = sum(each) / len(each)
    if relative_gap(got, expected) <= 1e-7:
        return
    parts = [
        called,
        message(
            "lesson05.estimate_wrong",
            got=fmt_pair(got, expected)[0],
            expected=fmt_pair(got, expected)[1],
            losses=", ".join(fmt(v) for v in each),
        ),
    ]
    for value, key in (
        (sum(each), "lesson05.diag_estimate_sum"),
        (each[-1], "lesson05.diag_estimate_last"),
        (each[0], "lesson05.diag_estimate_first"),
    ):
        if relative_gap(got, value) <= 1e-7:
            fail(*parts, message(key))
    trainer.sub.call(model, method="train")
    again = _estimate(trainer, model, xs, ys, called, seed=2)
    if again != got:
        fail(
            *parts,
            message(
                "lesson05.diag_estimate_dropout", other=fmt(again) if isinstance(again, float) else again
            ),
        )
    fail(*parts)


@pytest.mark.check("eval-no-grad")
def test_eval_no_grad(submission, check_seed):
    """No autograd graph while estimating, and no .grad left behind.

    The first model's weights are inference tensors (made under torch.inference_mode): any
    forward that builds a graph on them fails, and one under torch.no_grad runs."""
    trainer, state, xs, ys = _setup(submission, check_seed, CFG)
    called = _called(CFG, True, xs)
    model = trainer.gpt(CFG, state, inference=True)
    try:
        got = _estimate(trainer, model, xs, ys, called)
    except StudentError as err:
        if INFERENCE_ERROR in err.message:
            fail(called, message("lesson05.estimate_with_grad"))
        raise
    _as_float(got, called)
    model = trainer.gpt(CFG, state)
    _estimate(trainer, model, xs, ys, called)
    left = trainer.grad_norm(model)
    if left != 0:
        fail(called, message("lesson05.estimate_left_grads", norm=fmt(left)))


@pytest.mark.check("eval-restores-mode")
def test_eval_restores_mode(submission, check_seed):
    """After estimate_loss the model (and every submodule) is back in the mode it was in:
    train if it was training, eval if it already was in eval."""
    trainer, state, xs, ys = _setup(submission, check_seed, DROPOUT_CFG)
    for train in (True, False):
        model = trainer.gpt(DROPOUT_CFG, state, train=train)
        called = _called(DROPOUT_CFG, train, xs)
        _estimate(trainer, model, xs, ys, called)
        modes = trainer.modes(model)
        wrong = [path or "model" for path in MODE_PATHS if modes[path] is not train]
        if not wrong:
            continue
        listing = ", ".join(f"{path or 'model'}.training = {modes[path]}" for path in MODE_PATHS)
        if len(wrong) < len(MODE_PATHS):
            fail(
                called,
                message("lesson05.mode_partly", modes=listing),
                message("lesson05.diag_mode_attribute"),
            )
        fail(
            called,
            message("lesson05.mode_left_eval" if train else "lesson05.mode_forced_train", modes=listing),
        )
