"""The behaviour check of the whole file: train() makes a tiny GPT learn one batch by heart.

A fixed seed and a generous bound, not a timing: with every piece right, 60 steps take the
loss from about ln(13) = 2.56 to about 0.3 on the reference GPT."""

from __future__ import annotations

import math

import pytest

from autograder.core.results import message
from autograder.engine import recording
from autograder.engine.checks import fail
from autograder.engine.grader_helpers import config_text, generator
from autograder.sandbox.client import StudentError

from .harness import CFG, Trainer, cfg_text, fmt, model_text, random_batch

ref = recording.reference_of(__package__)

STEPS = 60
SETTINGS = {
    "steps": STEPS,
    "learning_rate": 1e-2,
    "min_lr": 1e-3,
    "warmup_steps": 5,
    "weight_decay": 0.1,
    "grad_clip": 1.0,
    "eval_every": 20,
    "eval_batches": 2,
}
BOUND = 1.2  # the last loss must be below this and below half the first


@pytest.mark.check("overfit")
def test_overfit(submission, check_seed):
    trainer = Trainer(submission)
    trainer.needs_reference_model()
    gen = generator(check_seed)
    x, y = random_batch(CFG, 4, CFG["block_size"], gen)
    model = trainer.gpt(CFG, ref.initial_state(CFG, check_seed), double=False)
    batches = trainer.batch_source((x, y), (x, y))
    called = message(
        "lesson05.called_train",
        model=model_text(),
        cfg=cfg_text(CFG),
        shape=tuple(x.shape),
        settings=config_text(SETTINGS),
    )
    try:
        losses = trainer.call("train", model, batches, seed=check_seed, **SETTINGS)
    except StudentError as err:
        if err.todo_pending is None and not trainer.grad_enabled():
            # The learner's estimate_loss switched autograd off for good (its checks say so):
            # the crash in the next backward() is that TODO's, wherever the line that raised.
            fail(called, message("lesson05.train_grad_off"), waits_on="eval-mode")
        raise
    if not isinstance(losses, (list, tuple)) or len(losses) != STEPS:
        got = len(losses) if isinstance(losses, (list, tuple)) else type(losses).__name__
        fail(called, message("lesson05.train_losses_shape", got=got, steps=STEPS))
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in losses):
        fail(called, message("lesson05.train_losses_bad"))
    first, last = losses[0], losses[-1]
    if last < BOUND and last < 0.5 * first:
        return
    marks = ", ".join(f"{i}: {fmt(losses[i])}" for i in (0, 10, 20, 30, 40, 50, STEPS - 1))
    fail(
        called,
        message("lesson05.no_overfit", first=fmt(first), last=fmt(last), bound=BOUND, losses=marks),
        message("lesson05.overfit_hint"),
    )
