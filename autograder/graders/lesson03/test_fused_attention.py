"""Hidden checks of TODO [fused] in attention.py: the fused path (fused=True) gives the reference
output through torch's scaled_dot_product_attention, called causal (is_causal=True or a mask
made on x's device), with dropout_p = the module's dropout in train mode only, and a gradient
that reaches x the reference's way. The bugs the fused path shares with the explicit one (heads
split or merged wrongly, no projection) are their own checks' business, so fused-parity excuses
a difference only where the learner's explicit path gives exactly the same (output or gradient,
same weights and input): a mistake of the fused path alone is never excused.
"""

from __future__ import annotations

import math

import pytest
import torch

from autograder.core.results import message
from autograder.engine import recording
from autograder.engine.checks import CheckFailure, expect, fail
from autograder.engine.feedback import ATOL, RTOL, compare
from autograder.engine.grader_helpers import generator
from autograder.sandbox.client import StudentError

from .harness import (
    MAIN,
    MAIN_T,
    NARROW,
    SMALL,
    LearnerAttention,
    diagnose,
    dropout_scale_hint,
    dropped_weights,
    each,
    expect_forward_on_meta,
    fit_dropout,
    gradient_problem,
    random_input,
    vjp_or_none,
)

ref = recording.reference_of(__package__)

SDPA_PARAMETERS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale")


def sdpa_arguments(spied_call: dict) -> dict:
    """A spied scaled_dot_product_attention call's arguments by name, positional ones included."""
    return {**dict(zip(SDPA_PARAMETERS, spied_call["args"])), **spied_call["kwargs"]}


@pytest.mark.check("fused-parity")
def test_fused_parity(submission, check_seed):
    """The fused path gives the reference's output, for several shapes, and its gradient with
    respect to x. Where it does not, but gives exactly what the learner's explicit path gives
    with the same weights and input, the difference lies in code both paths share (q, k, v cut
    into heads, the heads merged, proj: their own checks and reference-parity say so), not in
    this TODO; a mistake of the fused path alone is never excused."""
    gen = generator(check_seed)
    for cfg, T, B in ((MAIN, MAIN_T, 2), (SMALL, 1, 2), (SMALL, SMALL["block_size"], 1), (NARROW, 4, 2)):
        attn = LearnerAttention(submission, cfg, gen, fused=True)
        x = random_input(cfg, T, gen, B=B)
        n_head = cfg["n_head"]
        hs = cfg["n_embd"] // n_head
        expected = ref.attention_forward(x, attn.sd, n_head)
        # What the fused path's own recognisable bugs give (not causal; q scaled before SDPA).
        diagnoses = each(
            [
                lambda: (
                    ref.attention_forward(x, attn.sd, n_head, mask="none"),
                    message("lesson03.diag_fused_not_causal"),
                ),
                lambda: (
                    ref.attention_forward(x, attn.sd, n_head, scale="hs"),
                    message("lesson03.diag_fused_scaled_twice", hs=hs),
                ),
            ]
        )
        y = attn.forward(x)
        problem = compare(y, expected.to(y.dtype), what=message("lesson03.what_output"), atol=ATOL, rtol=RTOL)
        if problem is None or _explicit_gives(submission, attn, x, y):
            continue
        fail(attn.called(x), problem, *diagnose(y, list(diagnoses)))
    attn = LearnerAttention(submission, MAIN, gen, fused=True)
    x = random_input(MAIN, MAIN_T, gen)
    cotangents = [torch.randn(x.shape, generator=gen) for _ in range(2)]
    judged = gradient_problem(submission, attn, x, cotangents)
    if judged is not None and not _explicit_gradient_agrees(submission, attn, x, cotangents):
        fail(*judged)


def _explicit(submission, attn: LearnerAttention) -> LearnerAttention:
    return LearnerAttention(submission, attn.cfg, None, weights=attn.sd)


def _explicit_gives(submission, attn: LearnerAttention, x: torch.Tensor, y: torch.Tensor) -> bool:
    """Whether the learner's explicit path, with the fused module's weights, gives `y` for x."""
    try:
        explicit = _explicit(submission, attn).forward(x)
    except (StudentError, CheckFailure):
        return False
    return explicit.shape == y.shape and compare(explicit, y, what="", atol=ATOL, rtol=RTOL) is None


def _explicit_gradient_agrees(submission, attn: LearnerAttention, x: torch.Tensor, cotangents: list) -> bool:
    """Whether the explicit path's vector-Jacobian products equal the fused path's (a path cut
    from autograd in code both share, e.g. k.detach() where the heads are cut)."""
    try:
        fused = vjp_or_none(submission, attn, x, cotangents)
        explicit = vjp_or_none(submission, _explicit(submission, attn), x, cotangents)
    except (StudentError, CheckFailure):
        return False
    if fused is None or explicit is None:
        return fused is None and explicit is None
    return compare(torch.stack(fused), torch.stack(explicit), what="", atol=1e-4, rtol=1e-4) is None


@pytest.mark.check("fused-sdpa")
def test_fused_sdpa(submission, check_seed):
    gen = generator(check_seed)
    attn = LearnerAttention(submission, MAIN, gen, fused=True)
    x = random_input(MAIN, MAIN_T, gen)
    spied = attn.traced(x, spy=True)["spied"]
    if not spied:
        fail(attn.called(x), message("lesson03.sdpa_not_called"))
    call = sdpa_arguments(spied[0])
    causal = call.get("is_causal") is True or isinstance(call.get("attn_mask"), dict)
    expect(causal, attn.called(x), message("lesson03.sdpa_not_causal"))
    # A mask made in the fused path (attn_mask=...) must be born on x's device too.
    expect_forward_on_meta(submission, submission.call(attn.handle, "meta", method="to"), attn)


# The dropout probabilities fused-dropout configures: neither is a value a constant written in
# place of self.dropout is likely to hold (0.1, 0.2, 0.5), and they differ from each other.
FUSED_P = (0.3, 0.6)


@pytest.mark.check("fused-dropout")
def test_fused_dropout(submission, check_seed):
    """dropout_p follows the module's dropout: 0 in eval; in train mode the configuration's p
    (two configurations, so that a constant cannot match both); and the weights the fused path
    really used in train mode are the reference's, each dropped or scaled by 1/(1 - p) once."""
    gen = generator(check_seed)
    x = random_input(MAIN, MAIN_T, gen)
    for p in FUSED_P:
        cfg = {**MAIN, "dropout": p}
        attn = LearnerAttention(submission, cfg, gen, fused=True)
        traced = attn.traced(x, spy=True, seed=1)
        again = attn.traced(x, spy=True, seed=2)
        p_eval = [sdpa_arguments(c).get("dropout_p", 0.0) for c in traced["spied"]]
        if any(q not in (0, 0.0, None) for q in p_eval) or not torch.equal(traced["value"], again["value"]):
            fail(attn.called(x), message("lesson03.fused_dropout_eval", p=p_eval[0] if p_eval else "?"))
        submission.call(attn.handle, method="train")
        train = attn.traced(x, spy=True, seed=3, capture=("proj",))
        p_train = [sdpa_arguments(c).get("dropout_p", 0.0) for c in train["spied"]]
        if not p_train:
            fail(attn.called(x, train=True), message("lesson03.sdpa_not_called"))
        if not isinstance(p_train[0], (int, float)) or not math.isclose(float(p_train[0] or 0.0), p):
            fail(
                attn.called(x, train=True),
                message("lesson03.fused_dropout_train", p=p_train[0], expected=p),
            )
        if p == FUSED_P[0]:
            _expect_dropped_once(attn, x, traced["value"], train, p)


def _expect_dropped_once(attn: LearnerAttention, x: torch.Tensor, y_eval, train: dict, p: float) -> None:
    """In train mode the heads' output (what enters proj) is D @ v with D the reference's weights,
    each 0 or scaled by 1/(1 - p): a dropout after scaled_dot_product_attention, a second one, or
    another p shows in D. Judged only where the eval output is the reference's (else the heads
    or their merge differ: other checks say so) and nothing else entered proj."""
    n_head = attn.n_head
    expected = ref.attention_forward(x, attn.sd, n_head)
    v, w = ref.values(x, attn.sd, n_head), ref.attention_weights(x, attn.sd, n_head)
    inputs = [c for c in train["captured"] if isinstance(c, torch.Tensor)]
    if (
        compare(y_eval, expected.to(y_eval.dtype), what="", atol=ATOL, rtol=RTOL) is not None
        or len(inputs) != 1
    ):
        return
    dropped = dropped_weights(inputs[0], v, n_head)
    if dropped is None or dropped.shape != w.shape:
        return
    fit = fit_dropout(dropped, w, p)
    called = attn.called(x, train=True)
    if fit.stray or not fit.dropped > 0:
        fail(
            called,
            message("lesson03.fused_dropout_pattern", p=p, stray=fit.stray, total=w.numel()),
            dropout_scale_hint("lesson03.fused_dropout_scale", fit),
        )
