"""Hidden checks of train_step: zeroing (TODO [zero-grad]), clipping (TODO [grad-clip]) and
what it returns.

Each check runs the learner's train_step on lesson 04's reference GPT in float64, with a plain
SGD optimizer of lr 1 made by the grader (the change of the weights is then exactly the
gradient that reached optimizer.step()) and, in a second test of the same check, with the
learner's own two-group AdamW from configure_optimizer (the gradient that reached step() read
from its state); either is compared with the gradient computed here.

Blame: a clipping check whose step went wrong first asks whether the gradient was already wrong
before the clipping (harness.wrong_before_clipping); then it waits on TODO [zero-grad] instead
of blaming the clipping."""

from __future__ import annotations

import pytest
import torch

from autograder.core.results import message
from autograder.engine import recording
from autograder.engine.checks import fail
from autograder.engine.feedback import fmt_pair
from autograder.engine.grader_helpers import generator

from .harness import (
    CFG,
    LR,
    B,
    OwnStep,
    Step,
    T,
    Trainer,
    along,
    before_clipping_text,
    close,
    expect_finite_update,
    expect_float,
    fmt,
    norm,
    random_batch,
    random_state,
    relative_gap,
    weights_moved_without_step,
    wrong_before_clipping,
)

ref = recording.reference_of(__package__)

SCALE_RTOL = 1e-6  # a right step's update is the gradient to float64 rounding


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

    Judged by direction, with a grad_clip above both norms: how the clipping scales the gradient
    (another TODO) does not change which gradient it is. A first update of the right direction
    and the wrong size is this TODO's only where the size is the same without any clipping
    (_expect_unscaled)."""
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
        moved = weights_moved_without_step(trainer, CFG, state, xa, ya)
        fail(
            *called,
            message("lesson05.update_not_gradient"),
            message("lesson05.weights_moved") if moved else None,
        )
    _expect_unscaled(trainer, state, xa, ya, ga, first, called)
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


@pytest.mark.check("zero-grad")
def test_zero_grad_own_optimizer(submission, check_seed):
    """The same two steps with the learner's own optimizer (AdamW with their two groups; its
    learning_rate 0, so that both gradients are taken at the same weights and a recording can
    answer them): the gradient that reached the second step() is the second batch's alone in
    every group. Zeroing one group's gradients only, say, is seen here and not with SGD's one
    group."""
    trainer, gen, state = _setup(submission, check_seed)
    (xa, ya), (xb, yb) = random_batch(CFG, B, T, gen), random_batch(CFG, B, T, gen)
    own = OwnStep.of(trainer, CFG, state, learning_rate=0.0, zeroing=True)
    if own is None:
        return  # no usable optimizer yet: TODO [weight-decay-groups]'s checks say why
    ga_all = ref.gradient(CFG, state, xa, ya)
    clip = 1.5 * norm(ga_all)
    after, first = own.run(xa, ya, clip)
    if not own.keep_stepped():
        return  # its tensors got no gradient: not the model's parameters, or judged with SGD
    ga = own.held_only(ga_all)
    called = [own.called(xa, clip), message("lesson05.clip_not_involved")]
    expect_finite_update(first, *called)
    if norm(first) == 0:
        fail(*called, message("lesson05.no_update"))
    if not along(first, ga):
        fail(*called, message("lesson05.update_not_gradient"))
    # At the weights the learner's optimizer left: the same ones with learning_rate 0. Where
    # it ignores learning_rate, practice grading has no recorded gradient for the weights it
    # moved to, and leaves this second step to the official grade (the SGD test judged it).
    gb_all = recording.for_diagnosis(ref.gradient, CFG, after, xb, yb)
    if gb_all is None:
        return
    gb = own.held_only(gb_all)
    clip = 1.5 * max(norm(gb_all), norm(ga_all + gb_all))
    _, second = own.run(xb, yb, clip)
    called = [own.called(xb, clip, again=True), message("lesson05.clip_not_involved")]
    expect_finite_update(second, *called)
    if along(second, gb):
        return
    summed = [
        name
        for name in own.held
        if close(second[own.slices[name]], (ga + gb)[own.slices[name]])
        and not close(second[own.slices[name]], gb[own.slices[name]])
    ]
    if summed and len(summed) == len(own.held):
        fail(*called, message("lesson05.grads_accumulated"))
    if summed:
        groups = sorted({own.group_of[name] for name in summed})
        fail(
            *called,
            message(
                "lesson05.grads_accumulated_some",
                names=", ".join(summed[:5]) + (" …" if len(summed) > 5 else ""),
                groups=", ".join(str(index) for index in groups),
            ),
        )
    if norm(second) == 0:
        fail(*called, message("lesson05.no_update"))
    fail(*called, message("lesson05.update_not_gradient"))


def _expect_unscaled(trainer, state, xa, ya, ga, first, called) -> None:
    """The first update goes along the gradient; its size is the clipping's business unless the
    gradient was already scaled before the clipping (the same with grad_clip = 0 and with a
    grad_clip far above its norm): a loss split into parts whose gradients are summed
    without dividing each part's loss, say."""
    if abs(norm(first) / norm(ga) - 1.0) <= SCALE_RTOL:
        return
    found = wrong_before_clipping(trainer, CFG, state, xa, ya, ga)
    if found is not None and found["scale"] is not None:
        fail(*called, message("lesson05.gradient_scaled", scale=fmt(found["scale"])))


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
    clip = case["clip"]
    # One step on a fresh model: its gradients start as None, and zero_grad is made a no-op, so
    # where the learner zeroes them (TODO [zero-grad]) does not change what reaches step().
    step = Step(trainer, CFG, state, zeroing=False)
    _, _, update = step.run(x, y, clip)
    called = step.called(x, clip)
    if recording.eager():
        ref.gradient(CFG, state, x, y)  # what a failing learner's blame asks (below)
    _judge_reached(trainer, state, x, y, case, update, called, suspects)


def _judge_reached(trainer, state, x, y, case: dict, reached, called, suspects, own=None) -> None:
    """The gradient that reached optimizer.step() against the right clipped one; when it is
    wrong, first whether it was already wrong before the clipping (then the check waits on
    TODO [zero-grad]), else what clipping mistake it matches. With `own` (the learner's
    optimizer, an OwnStep), only the parameters it holds are compared."""
    view = (lambda v: v) if own is None else own.held_only
    clip, expected = case["clip"], view(case["expected"])
    expect_finite_update(reached, called)
    if close(reached, expected):
        return
    before = recording.for_diagnosis(ref.gradient, CFG, state, x, y)
    found = None if before is None else wrong_before_clipping(trainer, CFG, state, x, y, before)
    if found is not None:
        fail(called, before_clipping_text(found), waits_on="zero-grad")
    got, want = fmt_pair(norm(reached), norm(expected))
    key = (
        "lesson05.clip_direction"
        if relative_gap(norm(reached), norm(expected)) <= 1e-6
        else "lesson05.clip_norms"
    )
    parts = [called, message(key, got=got, expected=want, total=fmt(case["total"]), clip=fmt(clip))]
    if norm(reached) == 0 and clip > 0:
        fail(*parts, message("lesson05.no_update"))
    for how in suspects:
        if close(reached, view(case["suspects"][how])):
            fail(*parts, message(f"lesson05.diag_clip_{how}"))
    if own is not None and before is not None:
        for index in sorted(set(own.group_of.values())):
            names = [name for name in own.held if own.group_of[name] == index]
            if close(reached, view(_clipped_subset(before, own.parts(names), clip))):
                fail(*parts, message("lesson05.diag_clip_one_group", index=index))
    fail(*parts, message("lesson05.clip_hint"))


def _clipped_subset(g: torch.Tensor, parts: dict, clip: float) -> torch.Tensor:
    """g with only the `parts` (name -> slice) clipped to norm `clip`, by their own norm (what
    clipping one of the optimizer's groups gives)."""
    g = g.double()
    inside = torch.zeros_like(g, dtype=torch.bool)
    for piece in parts.values():
        inside[piece] = True
    total = float(g[inside].norm())
    out = g.clone()
    out[inside] = g[inside] * min(1.0, clip / (total + 1e-6))
    return out


@pytest.mark.check("grad-clip-norm")
def test_grad_clip_norm(submission, check_seed):
    """A gradient whose norm is above grad_clip reaches step() with norm grad_clip, same direction."""
    _judge_clip(submission, check_seed, 0.4, ("value", "per_parameter", "none", "twice"))


@pytest.mark.check("grad-clip-norm")
def test_grad_clip_own_optimizer(submission, check_seed):
    """The same clipping with the learner's own optimizer (AdamW, two groups): the norm is the
    one of every gradient of the model together, whichever group holds each parameter."""
    trainer, gen, state = _setup(submission, check_seed)
    x, y = random_batch(CFG, B, T, gen)
    suspects = ("value", "per_parameter", "none", "twice")
    case = ref.clip_case(CFG, state, x, y, 0.4, suspects)
    own = OwnStep.of(trainer, CFG, state, learning_rate=LR, zeroing=False)
    if own is None:
        return  # no usable optimizer yet: TODO [weight-decay-groups]'s checks say why
    _, reached = own.run(x, y, case["clip"])
    if not own.keep_stepped():
        return  # its tensors got no gradient: not the model's parameters, or judged with SGD
    _judge_reached(trainer, state, x, y, case, reached, own.called(x, case["clip"]), suspects, own)


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
        # Recorded for practice grading: the loss a learner returns after their update, and
        # the gradient a failing learner's blame asks for.
        ref.loss_at(CFG, after, x, y)
        ref.gradient(CFG, state, x, y)
    called = step.called(x, 1.0)
    got = expect_float(value, called, message("lesson05.what_step_loss"))
    if relative_gap(got, before) <= 1e-7:
        return
    shown, expected = fmt_pair(got, before)
    wrong = message("lesson05.step_loss_wrong", got=shown, expected=expected)
    gradient = recording.for_diagnosis(ref.gradient, CFG, state, x, y)
    found = None if gradient is None else wrong_before_clipping(trainer, CFG, state, x, y, gradient)
    if found is not None and found["weights_moved"]:
        # The loss was taken at weights the code before the forward changed: TODO [zero-grad]'s.
        fail(called, wrong, message("lesson05.loss_at_moved_weights"), waits_on="zero-grad")
    diagnosis = None
    after_loss = recording.for_diagnosis(ref.loss_at, CFG, after, x, y)
    if after_loss is not None and relative_gap(got, after_loss) <= 1e-7:
        diagnosis = message("lesson05.diag_loss_after_update")
    fail(called, wrong, diagnosis)
