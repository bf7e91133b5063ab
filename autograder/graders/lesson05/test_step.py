"""Hidden checks of train_step: zeroing (TODO [zero-grad]), clipping (TODO [grad-clip]) and
what it returns.

Each check runs the learner's train_step on lesson 04's reference GPT in float64, with a plain
SGD optimizer of lr 1 made by the grader: the change of the weights is then exactly the
gradient that reached optimizer.step(), and it is compared with the gradient computed here."""

from __future__ import annotations

import pytest

from autograder.core.results import message
from autograder.engine import recording
from autograder.engine.checks import fail
from autograder.engine.grader_helpers import generator

from .harness import (
    CFG,
    B,
    Step,
    T,
    Trainer,
    along,
    close,
    expect_finite_update,
    expect_float,
    fmt,
    norm,
    random_batch,
    random_state,
    relative_gap,
)

ref = recording.reference_of(__package__)

ref = recording.reference_of(__package__)


def _setup(submission, check_seed: int):
    trainer = Trainer(submission)
    trainer.needs_reference_model()
    gen = generator(check_seed)
    state = random_state(CFG, gen)
    return trainer, gen, state


# ---------------------------------------------------------------- TODO [zero-grad]


@pytest.mark.check("zero-grad")
def test_zero_grad(submission, check_seed):
    """Two train_steps in a row: the second update follows the second batch's gradient alone.

    Judged by direction only, with a grad_clip above both norms: how the gradient is scaled
    (clipping, another TODO) does not change which gradient it is."""
    trainer, gen, state = _setup(submission, check_seed)
    (xa, ya), (xb, yb) = random_batch(CFG, B, T, gen), random_batch(CFG, B, T, gen)
    step = Step(trainer, CFG, state)
    ga = ref.gradient(CFG, state, xa, ya)
    clip = 1.5 * norm(ga)
    _, after, first = step.run(xa, ya, clip)
    called = [step.called(xa, clip), message("lesson05.clip_not_involved")]
    expect_finite_update(first, *called)
    if norm(first) == 0:
        fail(*called, message("lesson05.no_update"))
    if not along(first, ga):
        fail(*called, message("lesson05.update_not_gradient"))
    if recording.eager():
        _record_after_clipping_mistakes(state, step.names, ga, clip, xb, yb)
    # At the weights the learner's first step left (a recording answers it when they are the
    # right ones, or those a known clipping mistake leaves).
    gb = ref.gradient(CFG, after, xb, yb)
    clip = 1.5 * max(norm(gb), norm(ga + gb))
    _, _, second = step.run(xb, yb, clip)
    called = [step.called(xb, clip, again=True), message("lesson05.clip_not_involved")]
    expect_finite_update(second, *called)
    if along(second, gb):
        return
    if along(second, ga + gb):
        fail(*called, message("lesson05.grads_accumulated"))
    if norm(second) == 0:
        fail(*called, message("lesson05.no_update"))
    fail(*called, message("lesson05.update_not_gradient"))


def _record_after_clipping_mistakes(state, names, ga, clip, x, y) -> None:
    """While recording: the second batch's gradient at the weights the first step leaves when
    the learner's clipping rescales every gradient to grad_clip, or clips to 1.0 whatever
    grad_clip is (SGD of lr 1: the weights minus the scaled gradient), so that a replay judges
    this check for those learners too."""
    total = norm(ga)
    tied = {key: owner for key, _, owner in ref.state_layout(CFG) if owner is not None}
    for scale in (clip / (total + 1e-6), min(1.0, 1.0 / (total + 1e-6))):
        moved, offset = dict(state), 0
        for name in names:
            size = state[name].numel()
            moved[name] = state[name] - scale * ga[offset : offset + size].double().reshape(state[name].shape)
            offset += size
        for key, owner in tied.items():
            moved[key] = moved[owner]
        ref.gradient(CFG, moved, x, y)


# ---------------------------------------------------------------- TODO [grad-clip]


def _judge_clip(submission, check_seed: int, factor: float, suspects: tuple[str, ...]) -> None:
    """One train_step with grad_clip = factor * (the gradient's norm) (for factor < 1, at most
    half the largest component, so that clamping each component, a different bug from not
    clipping at all, changes the gradient), its update judged against the right one and, to
    say what went wrong, against each clipping mistake in `suspects`."""
    trainer, gen, state = _setup(submission, check_seed)
    x, y = random_batch(CFG, B, T, gen)
    case = ref.clip_case(CFG, state, x, y, factor, suspects)
    clip, expected = case["clip"], case["expected"]
    # One step on a fresh model: its gradients start as None, and zero_grad is made a no-op, so
    # where the learner zeroes them (TODO [zero-grad]) does not change what reaches step().
    step = Step(trainer, CFG, state, zeroing=False)
    _, _, update = step.run(x, y, clip)
    called = step.called(x, clip)
    expect_finite_update(update, called)
    if close(update, expected):
        return
    parts = [
        called,
        message(
            "lesson05.clip_norms",
            got=fmt(norm(update)),
            expected=fmt(norm(expected)),
            total=fmt(case["total"]),
            clip=fmt(clip),
        ),
    ]
    if norm(update) == 0 and clip > 0:
        fail(*parts, message("lesson05.no_update"))
    for how in suspects:
        if close(update, case["suspects"][how]):
            fail(*parts, message(f"lesson05.diag_clip_{how}"))
    fail(*parts, message("lesson05.clip_hint"))


@pytest.mark.check("grad-clip-norm")
def test_grad_clip_norm(submission, check_seed):
    """A gradient whose norm is above grad_clip reaches step() with norm grad_clip, same direction."""
    _judge_clip(submission, check_seed, 0.4, ("value", "per_parameter", "none"))


@pytest.mark.check("grad-clip-below")
def test_grad_clip_below(submission, check_seed):
    """A gradient whose norm is below grad_clip reaches step() untouched."""
    _judge_clip(submission, check_seed, 2.5, ("always",))


@pytest.mark.check("grad-clip-off")
def test_grad_clip_off(submission, check_seed):
    """grad_clip = 0 means no clipping: the gradient reaches step() untouched."""
    _judge_clip(submission, check_seed, 0.0, ("to_zero",))


# ---------------------------------------------------------------- what it returns


@pytest.mark.check("step-loss")
def test_step_loss(submission, check_seed):
    """train_step returns the batch's loss before the update, as a Python float."""
    trainer, gen, state = _setup(submission, check_seed)
    x, y = random_batch(CFG, B, T, gen)
    before = ref.loss_at(CFG, state, x, y)
    step = Step(trainer, CFG, state, zeroing=False)
    value, after, _ = step.run(x, y, 1.0)
    if recording.eager():
        # Recorded for practice grading: the loss a learner returns after their update.
        ref.loss_at(CFG, after, x, y)
    called = step.called(x, 1.0)
    got = expect_float(value, called, message("lesson05.what_step_loss"))
    if relative_gap(got, before) <= 1e-7:
        return
    diagnosis = None
    after_loss = recording.for_diagnosis(ref.loss_at, CFG, after, x, y)
    if after_loss is not None and relative_gap(got, after_loss) <= 1e-7:
        diagnosis = message("lesson05.diag_loss_after_update")
    fail(called, message("lesson05.step_loss_wrong", got=fmt(got), expected=fmt(before)), diagnosis)
