"""Hidden checks of train_step: zeroing (TODO [zero-grad]), clipping (TODO [grad-clip]) and
what it returns.

Each check runs the learner's train_step on lesson 04's reference GPT in float64, with a plain
SGD optimizer of lr 1 made by the grader: the change of the weights is then exactly the
gradient that reached optimizer.step(), and it is compared with the gradient computed here."""

from __future__ import annotations

import pytest

from autograder.core.results import message
from autograder.engine.checks import fail
from autograder.engine.grader_helpers import generator

from . import reference as ref
from .harness import CFG, B, Step, T, Trainer, expect_finite_update, expect_float, fmt, relative_gap


def _setup(submission, check_seed: int):
    gen = generator(check_seed)
    state = ref.random_state(CFG, gen)
    return Trainer(submission), gen, state


# ---------------------------------------------------------------- TODO [zero-grad]


@pytest.mark.check("zero-grad")
def test_zero_grad(submission, check_seed):
    """Two train_steps in a row: the second update follows the second batch's gradient alone.

    Judged by direction only, with a grad_clip above both norms: how the gradient is scaled
    (clipping, another TODO) does not change which gradient it is."""
    trainer, gen, state = _setup(submission, check_seed)
    (xa, ya), (xb, yb) = ref.random_batch(CFG, B, T, gen), ref.random_batch(CFG, B, T, gen)
    step = Step(trainer, CFG, state)
    _, grads_a = ref.loss_and_grads(CFG, state, xa, ya)
    ga = ref.flat(grads_a, step.names)
    clip = 1.5 * ref.norm(ga)
    _, after, first = step.run(xa, ya, clip)
    called = [step.called(xa, clip), message("lesson05.clip_not_involved")]
    expect_finite_update(first, *called)
    if ref.norm(first) == 0:
        fail(*called, message("lesson05.no_update"))
    if not ref.along(first, ga):
        fail(*called, message("lesson05.update_not_gradient"))
    _, grads_b = ref.loss_and_grads(CFG, after, xb, yb)
    gb = ref.flat(grads_b, step.names)
    clip = 1.5 * max(ref.norm(gb), ref.norm(ga + gb))
    _, _, second = step.run(xb, yb, clip)
    called = [step.called(xb, clip, again=True), message("lesson05.clip_not_involved")]
    expect_finite_update(second, *called)
    if ref.along(second, gb):
        return
    if ref.along(second, ga + gb):
        fail(*called, message("lesson05.grads_accumulated"))
    if ref.norm(second) == 0:
        fail(*called, message("lesson05.no_update"))
    fail(*called, message("lesson05.update_not_gradient"))


# ---------------------------------------------------------------- TODO [grad-clip]


def _clip_case(submission, check_seed: int, factor: float):
    """One train_step with grad_clip = factor * (the gradient's norm) (for factor < 1, at most
    half the largest component); returns what the check needs to judge the update."""
    trainer, gen, state = _setup(submission, check_seed)
    x, y = ref.random_batch(CFG, B, T, gen)
    # One step on a fresh model: its gradients start as None, and zero_grad is made a no-op, so
    # where the learner zeroes them (TODO [zero-grad]) does not change what reaches step().
    step = Step(trainer, CFG, state, zeroing=False)
    _, grads = ref.loss_and_grads(CFG, state, x, y)
    g = ref.flat(grads, step.names)
    total = ref.norm(g)
    clip = factor * total
    if factor < 1:
        # Also below the largest component, so that clamping each component (a different
        # bug from not clipping at all) changes the gradient and can be told apart.
        clip = min(clip, 0.5 * float(g.abs().max()))
    _, _, update = step.run(x, y, clip)
    called = step.called(x, clip)
    expect_finite_update(update, called)
    return called, update, grads, step.names, clip, total


def _judge_clip(called, update, grads, names, clip, total, suspects):
    expected = ref.clipped(grads, names, clip, "global" if clip > 0 else "none")
    if ref.close(update, expected):
        return
    parts = [
        called,
        message(
            "lesson05.clip_norms",
            got=fmt(ref.norm(update)),
            expected=fmt(ref.norm(expected)),
            total=fmt(total),
            clip=fmt(clip),
        ),
    ]
    if ref.norm(update) == 0 and clip > 0:
        fail(*parts, message("lesson05.no_update"))
    for how in suspects:
        if ref.close(update, ref.clipped(grads, names, clip, how)):
            fail(*parts, message(f"lesson05.diag_clip_{how}"))
    fail(*parts, message("lesson05.clip_hint"))


@pytest.mark.check("grad-clip-norm")
def test_grad_clip_norm(submission, check_seed):
    """A gradient whose norm is above grad_clip reaches step() with norm grad_clip, same direction."""
    case = _clip_case(submission, check_seed, 0.4)
    _judge_clip(*case, suspects=("value", "per_parameter", "none"))


@pytest.mark.check("grad-clip-below")
def test_grad_clip_below(submission, check_seed):
    """A gradient whose norm is below grad_clip reaches step() untouched."""
    case = _clip_case(submission, check_seed, 2.5)
    _judge_clip(*case, suspects=("always",))


@pytest.mark.check("grad-clip-off")
def test_grad_clip_off(submission, check_seed):
    """grad_clip = 0 means no clipping: the gradient reaches step() untouched."""
    case = _clip_case(submission, check_seed, 0.0)
    _judge_clip(*case, suspects=("to_zero",))


# ---------------------------------------------------------------- what it returns


@pytest.mark.check("step-loss")
def test_step_loss(submission, check_seed):
    """train_step returns the batch's loss before the update, as a Python float."""
    trainer, gen, state = _setup(submission, check_seed)
    x, y = ref.random_batch(CFG, B, T, gen)
    before = ref.loss_at(CFG, state, x, y)
    step = Step(trainer, CFG, state, zeroing=False)
    value, after, _ = step.run(x, y, 1.0)
    called = step.called(x, 1.0)
    got = expect_float(value, called, message("lesson05.what_step_loss"))
    if relative_gap(got, before) <= 1e-7:
        return
    diagnosis = None
    if relative_gap(got, ref.loss_at(CFG, after, x, y)) <= 1e-7:
        diagnosis = message("lesson05.diag_loss_after_update")
    fail(called, message("lesson05.step_loss_wrong", got=fmt(got), expected=fmt(before)), diagnosis)
