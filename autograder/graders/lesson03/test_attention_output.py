"""Hidden checks of attention.py's whole output, which belong to no TODO: reference-parity (the
output and its gradient with respect to x equal the float64 reference's for several shapes: a
slip outside the TODOs, or one no TODO's check could name, shows here) and dropout-modes (both
dropouts act in train mode only: attn_drop on the weights after the softmax, exactly once;
resid_drop on the output).
"""

from __future__ import annotations

import pytest
import torch

from autograder.core.results import Feedback, message
from autograder.engine import recording
from autograder.engine.checks import CheckFailure, expect, fail
from autograder.engine.feedback import compare
from autograder.engine.grader_helpers import generator

from .harness import (
    MAIN,
    MAIN_T,
    NARROW,
    ONE_HEAD,
    SMALL,
    LearnerAttention,
    captured_weights,
    dropout_scale_hint,
    dropped_weights,
    exact,
    expect_finite,
    fit_dropout,
    gradient_problem,
    looks_like_weights,
    random_input,
)

ref = recording.reference_of(__package__)


@pytest.mark.check("reference-parity")
def test_reference_parity(submission, check_seed):
    gen = generator(check_seed)
    for cfg, T, B in (
        (MAIN, MAIN_T, 3),
        (MAIN, MAIN["block_size"], 3),
        (SMALL, 5, 1),
        (SMALL, 1, 3),
        (NARROW, NARROW["block_size"], 2),
        (ONE_HEAD, 3, 1),
    ):
        attn = LearnerAttention(submission, cfg, gen)
        x = random_input(cfg, T, gen, B=B)
        diagnoses = [
            (ref.attention_forward(x, attn.sd, cfg["n_head"], mask="none"), message("lesson03.diag_no_mask")),
            (
                ref.attention_forward(x, attn.sd, cfg["n_head"], scale="sqrt_C"),
                message("lesson03.diag_scale_sqrt_C", hs=cfg["n_embd"] // cfg["n_head"], C=cfg["n_embd"]),
            ),
            (ref.attention_forward(x, attn.sd, cfg["n_head"], proj=False), message("lesson03.diag_no_proj")),
            (
                ref.attention_forward(x, attn.sd, cfg["n_head"], softmax_dim=-2),
                message("lesson03.diag_softmax_queries"),
            ),
            (
                ref.attention_forward(x, attn.sd, cfg["n_head"], softmax_dim=1),
                message("lesson03.diag_softmax_heads"),
            ),
            (
                ref.attention_forward(x, attn.sd, cfg["n_head"], softmax_dim=0),
                message("lesson03.diag_softmax_batch"),
            ),
        ]
        try:
            attn.expect_output(
                x,
                ref.attention_forward(x, attn.sd, cfg["n_head"]),
                message("lesson03.what_output"),
                *diagnoses,
            )
        except CheckFailure as failure:
            # This check belongs to no TODO: point at the ones whose checks say where to look.
            raise CheckFailure(failure.feedback + Feedback.of(message("lesson03.parity_hint"))) from None
    _expect_gradient_flow(
        submission, LearnerAttention(submission, MAIN, gen), random_input(MAIN, MAIN_T, gen), gen
    )


def _expect_gradient_flow(submission, attn: LearnerAttention, x: torch.Tensor, gen: torch.Generator) -> None:
    """The output's gradient with respect to x is the reference's: it flows through q, k, v,
    the weights and proj (a .detach() or .data on one of them gives the same output and a
    gradient that is missing that path). Judged only once the output matches the reference."""
    cotangents = [torch.randn(x.shape, generator=gen) for _ in range(2)]
    judged = gradient_problem(submission, attn, x, cotangents)
    if judged is not None:
        fail(*judged)


def _attn_drop_passes(captured: list, n_head: int) -> bool:
    """The weights went through attn_drop exactly once: one (B, nh, T, T) call, or, in a loop
    over heads (the Karpathy-lecture Head modules), one (B, T, T) call per head."""
    tensors = [c for c in captured if isinstance(c, torch.Tensor)]
    if len(tensors) != len(captured):
        return False
    if len(tensors) == 1:
        return True
    return (
        n_head > 1
        and len(tensors) == n_head
        and tensors[0].dim() == 3
        and all(t.shape == tensors[0].shape for t in tensors)
    )


def _expect_attn_drop_gets_weights(captured: list, attn: LearnerAttention, x: torch.Tensor, called) -> None:
    """attn_drop gets the weights (B, nh, T, T) after the softmax, exactly once."""
    expect(
        _attn_drop_passes(captured, attn.n_head),
        called,
        message("lesson03.attn_drop_calls", count=len(captured)),
    )
    seen = captured_weights(captured, attn.n_head)
    B, T, _ = x.shape
    if not looks_like_weights(seen, B, attn.n_head, T):
        fail(
            called,
            message("lesson03.attn_drop_not_weights", got=tuple(seen.shape), expected=(B, attn.n_head, T, T)),
        )


# The dropout probability dropout-modes configures: not 0.5 (nor another round value a constant
# written in place of cfg.dropout is likely to hold), so that nn.Dropout(0.5) is caught.
DROPOUT_P = 0.3
# Elements of the (B, T, C) output dropped (exactly 0) in train mode by resid_drop: with
# 2 x 7 x 24 = 336 elements, p +- 0.15 is more than 5 standard deviations either side.
RESID_SLACK = 0.15


@pytest.mark.check("dropout-modes")
def test_dropout_modes(submission, check_seed):
    """Dropout is judged against the learner's own module with dropout=0 and the same
    weights, so that a bug elsewhere (mask, scale, heads) is not reported as a dropout bug.

    Both dropouts are checked: in eval mode neither acts; in train mode the weights pass
    through attn_drop exactly once (once per head in a loop over heads), each dropped or scaled
    by 1/(1-p) with the configuration's p, and the output through resid_drop (about p of its
    elements are exactly 0, the others scaled by 1/(1-p))."""
    gen = generator(check_seed)
    base = exact(MAIN, MAIN_T)
    p = DROPOUT_P
    cfg = {**base, "dropout": p}
    attn = LearnerAttention(submission, cfg, gen)
    plain = LearnerAttention(submission, base, gen, weights=attn.sd)
    x = random_input(cfg, MAIN_T, gen)
    first, second = attn.forward(x, seed=1), attn.forward(x, seed=2)
    expect_finite(first, attn.called(x))
    reference = plain.forward(x)
    problem = compare(first, reference, what=message("lesson03.what_output_eval"))
    same = (
        bool(((first == second) | (first.isnan() & second.isnan())).all())
        if first.shape == second.shape
        else False
    )
    if problem or not same:
        never = not attn.traced(x)["captured"]  # attn_drop never called: F.dropout, training=True by default
        fail(
            attn.called(x),
            message("lesson03.dropout_in_eval"),
            problem,
            message("lesson03.dropout_functional_hint") if never else None,
        )
    _expect_attn_drop_gets_weights(attn.traced(x)["captured"], attn, x, attn.called(x))
    submission.call(attn.handle, method="train")
    a, b = attn.forward(x, seed=1), attn.forward(x, seed=2)
    expect_finite(a, attn.called(x, train=True))
    expect(not torch.allclose(a, b), attn.called(x, train=True), message("lesson03.dropout_inactive", p=p))
    traced = attn.traced(x, seed=3, capture=("attn_drop", "resid_drop"))
    y = traced["value"]
    inputs = [
        c for c in traced["captured"] if isinstance(c, torch.Tensor) and tuple(c.shape) == tuple(x.shape)
    ]
    dropped = float((y == 0).double().mean()) if y.shape == x.shape else 0.0
    if not p - RESID_SLACK <= dropped <= p + RESID_SLACK:
        fail(
            attn.called(x, train=True),
            message("lesson03.resid_drop_inactive", p=p, expected=f"{p:.0%}", dropped=f"{dropped:.0%}"),
        )
    if len(inputs) == 1:
        # What entered resid_drop, scaled by 1/(1-p) where it was kept: the output is its result.
        kept = y != 0
        expect(
            torch.allclose(y[kept], inputs[0][kept] / (1 - p), atol=1e-5, rtol=1e-5),
            attn.called(x, train=True),
            message("lesson03.resid_drop_not_output"),
        )
    # The weights go through attn_drop in train mode too (a path taken only in eval is no help).
    _expect_attn_drop_gets_weights(attn.traced(x, seed=4)["captured"], attn, x, attn.called(x, train=True))
    _expect_attn_drop_scales(submission, attn, x, p)


def _expect_attn_drop_scales(submission, attn: LearnerAttention, x: torch.Tensor, p: float) -> None:
    """attn_drop drops with the configuration's p: the weights that reach the values in train
    mode (solved from what enters proj, with the reference's values) are each 0 or what entered
    attn_drop scaled by 1/(1-p). Judged only where, in eval mode, the same solve gives back what
    entered attn_drop (the values and the merge are right: else their checks say so)."""
    v = ref.values(x, attn.sd, attn.n_head)
    submission.call(attn.handle, method="eval")
    try:
        evaluated = attn.traced(x, capture=("attn_drop", "proj"))
    finally:
        submission.call(attn.handle, method="train")
    trained = attn.traced(x, seed=5, capture=("attn_drop", "proj"))

    def split(traced):
        tensors = [c for c in traced["captured"] if isinstance(c, torch.Tensor)]
        if len(tensors) < 2:
            return None, None
        weights = captured_weights(tensors[:-1], attn.n_head)
        return weights, dropped_weights(tensors[-1], v, attn.n_head)

    w_eval, d_eval = split(evaluated)
    w_train, d_train = split(trained)
    if any(t is None for t in (w_eval, d_eval, w_train, d_train)) or d_eval.shape != w_eval.shape:
        return
    if not torch.allclose(d_eval, w_eval.double(), atol=1e-4, rtol=1e-4) or d_train.shape != w_train.shape:
        return
    fit = fit_dropout(d_train, w_train, p)
    if fit.stray or not fit.dropped > 0:
        fail(
            attn.called(x, train=True),
            message("lesson03.attn_drop_pattern", p=p, stray=fit.stray, total=w_train.numel()),
            dropout_scale_hint("lesson03.attn_drop_scale", fit),
        )
