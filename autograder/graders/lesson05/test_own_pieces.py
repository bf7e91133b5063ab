"""The informational check: does the learner's train.py train THEIR OWN GPT (their lesson-04
model with their lesson-03 attention)? It never subtracts points; when something does not fit
it says which lesson's piece to look at."""

from __future__ import annotations

import math

import pytest

from autograder.core.results import message
from autograder.engine import recording
from autograder.engine.checks import describe_student_error, fail
from autograder.engine.grader_helpers import generator, innermost_learner_file
from autograder.sandbox.client import StudentError

from .harness import CFG, Trainer, cfg_text, fmt, random_batch

LESSON_OF = {"attention.py": "03", "model.py": "04", "train.py": "05"}
STEPS, LR = 30, 1e-2


def _learns(losses: list) -> bool:
    return all(isinstance(v, float) and math.isfinite(v) for v in losses) and losses[-1] < 0.7 * losses[0]


def _train(box, x, y, seed: int) -> list:
    """STEPS train_steps of the learner's on the GPT found in `box`, on one batch."""
    trainer = Trainer(box)
    models = box.module("model")
    config = box.call(box.getattr(models, "GPTConfig"), **CFG)
    model = box.call_traced(box.getattr(models, "GPT"), config, seed=seed)["value"]
    optimizer = trainer.call("configure_optimizer", model, learning_rate=LR)
    losses = []
    for _ in range(STEPS):
        loss = trainer.call("train_step", model, optimizer, x, y)
        losses.append(
            float(loss) if isinstance(loss, (int, float)) and not isinstance(loss, bool) else math.nan
        )
    return losses


def _innermost_file(err: StudentError) -> str:
    """The learner's file where the error surfaced (the innermost frame in their files)."""
    return innermost_learner_file(err, among=LESSON_OF) or "train.py"


def _reference_learns(submission, x, y, seed: int) -> bool | None:
    """Whether the learner's train.py trains lesson 04's REFERENCE GPT on the same batch. In
    practice grading no reference GPT ships: the learner's own stands in where it gives the
    reference's loss (then it is the same question), else None (it cannot be told)."""
    if recording.mode() == "replay" and not Trainer(submission).model_like_reference():
        return None
    try:
        return _learns(_train(submission, x, y, seed))
    except StudentError:
        return False


@pytest.mark.check("own-pieces")
def test_own_pieces(own_submission, submission, check_seed):
    # T < block_size: a lesson-03 mask that is not cropped to T shows up too.
    x, y = random_batch(CFG, 4, CFG["block_size"] - 2, generator(check_seed))
    called = message("lesson05.called_own", cfg=cfg_text(CFG), steps=STEPS, lr=LR, shape=tuple(x.shape))
    informational = message("lesson05.own_informational")
    try:
        losses = _train(own_submission, x, y, check_seed)
    except StudentError as err:
        name = _innermost_file(err)
        if err.todo_pending is not None:
            fail(
                message("lesson05.own_pending", file=name, lesson=LESSON_OF[name], todo=err.todo_pending),
                informational,
            )
        error = describe_student_error(err, None, {})
        if name != "train.py":
            fail(
                called,
                message("lesson05.own_raised", file=name, lesson=LESSON_OF[name]),
                error,
                informational,
            )
        # Raised in train.py: its fault, unless it trains the reference GPT without trouble.
        if _reference_learns(submission, x, y, check_seed) is True:
            fail(
                called,
                message("lesson05.own_raised_pieces"),
                error,
                message("lesson05.own_pieces_at_fault"),
                informational,
            )
        fail(called, message("lesson05.own_raised", file=name, lesson=LESSON_OF[name]), error, informational)
    if _learns(losses):
        return
    summary = message("lesson05.own_losses", first=fmt(losses[0]), last=fmt(losses[-1]))
    learns = _reference_learns(submission, x, y, check_seed)
    if learns is None:
        fail(called, summary, message("lesson05.own_practice"), informational)
    if learns:
        init = None
        if math.isfinite(losses[0]) and abs(losses[0] - math.log(CFG["vocab_size"])) > 1.0:
            init = message(
                "lesson05.own_init_far", first=fmt(losses[0]), ln_v=fmt(math.log(CFG["vocab_size"]))
            )
        fail(called, summary, message("lesson05.own_pieces_at_fault"), init, informational)
    fail(called, summary, message("lesson05.own_train_at_fault"), informational)
