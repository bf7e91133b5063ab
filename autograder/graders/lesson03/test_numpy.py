"""Hidden checks of attention_numpy.py (the NumPy warm-up)."""

from __future__ import annotations

import math
import numbers

import numpy as np
import pytest

from autograder.core.results import Figure, message
from autograder.engine.checks import fail
from autograder.engine.feedback import compare, heatmap, leaking_cells
from autograder.engine.grader_helpers import hinted
from autograder.sandbox.client import StudentError

from . import reference as ref
from .harness import mask_grid

FILE = "attention_numpy"
STABLE_INPUT = "[[1000, 1001, 1002], [-1000, 0, 1000], [0, 0, 0]]"


def function(sub, name):
    return sub.getattr(sub.module(FILE), name)


def as_array(value, called):
    if not isinstance(value, np.ndarray):
        fail(called, message("lesson03.np_not_array", got=type(value).__name__))
    return value


def is_causal_mask(mask, T: int) -> bool:
    """An additive causal mask: 0 where j <= i, <= -1e9 (or -inf) where j > i."""
    if not isinstance(mask, np.ndarray) or mask.shape != (T, T):
        return False
    visible = np.tri(T, dtype=bool)
    with np.errstate(all="ignore"):
        return bool(np.all(mask[visible] == 0) and np.all(mask[~visible] <= -1e9))


def keepdims_hint():
    """A learner's broadcasting error inside softmax is almost always a missing keepdims=True."""
    return hinted(
        lambda err: (
            message("lesson03.np_softmax_keepdims") if "could not be broadcast" in err.message else None
        )
    )


@pytest.mark.check("np-mask")
def test_np_mask(submission):
    causal_mask = function(submission, "causal_mask")
    # Larger T first: a 1x1 mask cannot show which mistake was made.
    for T in (4, 7, 1):
        called = message("lesson03.called_fn", call=f"causal_mask({T})")
        mask = as_array(submission.call(causal_mask, T), called)
        if mask.shape != (T, T):
            fail(called, message("lesson03.np_mask_shape", got=tuple(mask.shape), T=T))
        visible = np.tri(T, dtype=bool)
        past = np.tri(T, k=-1, dtype=bool)
        with np.errstate(all="ignore"):
            if np.any(mask[visible] != 0):
                if np.all(mask[visible] == 1):
                    hint = "lesson03.np_mask_multiplicative"
                elif T > 1 and np.all(np.diag(mask) <= -1e9) and np.all(mask[past] == 0):
                    hint = "lesson03.np_mask_diagonal"
                else:
                    hint = "lesson03.np_mask_visible"
                fail(called, message(hint), mask_grid(mask), message("lesson03.mask_grid_legend"))
            if np.any(mask[~visible] > -1e9):
                fail(
                    called,
                    message("lesson03.np_mask_future"),
                    mask_grid(mask),
                    message("lesson03.mask_grid_legend"),
                )


@pytest.mark.check("np-softmax")
def test_np_softmax(submission, check_seed):
    softmax = function(submission, "softmax")
    rng = np.random.default_rng(check_seed)
    x = rng.normal(size=(3, 5)) * 2
    for axis in (-1, 0):
        called = message(
            "lesson03.called_fn",
            call={
                "es": f"softmax(x, axis={axis}) con x de forma {x.shape}",
                "en": f"softmax(x, axis={axis}) with x of shape {x.shape}",
            },
        )
        with keepdims_hint():
            out = as_array(submission.call(softmax, x, axis=axis), called)
        problem = compare(out, ref.np_softmax(x, axis=axis), what=message("lesson03.what_softmax"))
        if problem:
            wrong_axis = ref.np_softmax(x, axis=1 if axis == 0 else 0)
            hint = (
                "lesson03.np_softmax_axis" if out.shape == x.shape and np.allclose(out, wrong_axis) else None
            )
            fail(called, problem, message(hint) if hint else None)


@pytest.mark.check("np-softmax-stable")
def test_np_softmax_stable(submission):
    softmax = function(submission, "softmax")
    x = np.array([[1000.0, 1001.0, 1002.0], [-1000.0, 0.0, 1000.0], [0.0, 0.0, 0.0]])
    called = message(
        "lesson03.called_fn",
        call={"es": f"softmax(x) con x = {STABLE_INPUT}", "en": f"softmax(x) with x = {STABLE_INPUT}"},
    )
    with np.errstate(all="ignore"), keepdims_hint():
        out = as_array(submission.call(softmax, x), called)
    if not np.all(np.isfinite(out)):
        fail(called, message("lesson03.np_softmax_overflow"))
    problem = compare(out, ref.np_softmax(x), what=message("lesson03.what_softmax"))
    if problem:
        fail(called, problem, message("lesson03.np_softmax_keepdims") if _lost_axis(out, x) else None)


def _lost_axis(out, x) -> bool:
    """Whether `out` is what a softmax gives when its max or its sum drops keepdims=True (on a
    square input that broadcasts instead of failing)."""
    z = x - x.max(axis=-1, keepdims=True)
    e = np.exp(z)
    candidates = [e / e.sum(axis=-1)]
    if x.shape[0] == x.shape[-1]:
        e2 = np.exp(x - x.max(axis=-1))
        candidates += [e2 / e2.sum(axis=-1, keepdims=True), e2 / e2.sum(axis=-1)]
    return out.shape == x.shape and any(np.allclose(out, c, atol=1e-6) for c in candidates)


def _attention_inputs(seed: int):
    rng = np.random.default_rng(seed)
    T, d_model, d_k, d_v = 5, 6, 4, 3  # all different, so a transposed matrix cannot hide
    X = rng.normal(size=(T, d_model))
    W_Q, W_K, W_V = (rng.normal(size=(d_model, d)) for d in (d_k, d_k, d_v))
    return X, W_Q, W_K, W_V


def _call_attention(submission, inputs):
    fn = function(submission, "masked_self_attention")
    called = message(
        "lesson03.called_fn",
        call={
            "es": "masked_self_attention(X, W_Q, W_K, W_V) con X (5, 6), W_Q y W_K (6, 4), W_V (6, 3)",
            "en": "masked_self_attention(X, W_Q, W_K, W_V) with X (5, 6), W_Q and W_K (6, 4), W_V (6, 3)",
        },
    )
    result = submission.call(fn, *inputs)
    if not (isinstance(result, tuple) and len(result) == 2):
        fail(called, message("lesson03.np_attention_tuple", got=type(result).__name__))
    return called, as_array(result[0], called), as_array(result[1], called)


@pytest.mark.check("np-attention")
def test_np_attention(submission, check_seed):
    inputs = _attention_inputs(check_seed)
    called, out, weights = _call_attention(submission, inputs)
    expected_out, expected_w = ref.np_attention(*inputs)
    problem = compare(weights, expected_w, what=message("lesson03.what_weights"))
    if problem:
        # This check judges masked_self_attention itself: with the learner's own causal_mask
        # (a TODO with a check of its own), is the computation right?
        own = _with_learner_pieces(submission, inputs)
        if own is not None and _matches(weights, own):
            expected_w = own
            expected_out = own @ (inputs[0] @ inputs[3])
        else:
            variants = [
                ({"scale": scale}, f"lesson03.np_scale_{scale}") for scale in ("none", "dk", "sqrt_dmodel")
            ]
            variants += [
                ({"causal": False}, "lesson03.np_no_mask"),
                ({"axis": 0}, "lesson03.np_weights_axis"),
            ]
            hints = [
                message(key)
                for options, key in variants
                if weights.shape == expected_w.shape
                and np.allclose(weights, ref.np_attention(*inputs, **options)[1], atol=1e-6)
            ]
            fail(called, problem, *hints[:1], *_blame_pieces(submission, inputs[0].shape[0]))
    problem = compare(out, expected_out, what=message("lesson03.what_output"))
    if problem:
        fail(called, problem, message("lesson03.np_weights_ok_output_wrong"))


def _with_learner_pieces(submission, inputs):
    """The weights a right masked_self_attention gives with the learner's own causal_mask and
    softmax (TODOs with checks of their own): so that np-attention judges the composition only.
    None when those pieces are right (nothing to excuse), do not run, or return no (T, T) array."""
    X, W_Q, W_K, _ = inputs
    T = X.shape[0]
    try:
        mask = submission.call(function(submission, "causal_mask"), T)
    except StudentError:
        return None
    if not isinstance(mask, np.ndarray) or mask.shape != (T, T):
        return None
    Q, K = X @ W_Q, X @ W_K
    try:
        with np.errstate(all="ignore"):
            scores = Q @ K.T / math.sqrt(Q.shape[1]) + mask.astype(np.float64)
    except (TypeError, ValueError):  # not a numeric mask
        return None
    try:
        with np.errstate(all="ignore"):
            weights = submission.call(function(submission, "softmax"), scores, axis=-1)
    except StudentError:
        return None
    if (
        not isinstance(weights, np.ndarray)
        or weights.shape != (T, T)
        or not np.issubdtype(weights.dtype, np.number)
    ):
        return None
    with np.errstate(all="ignore"):
        if is_causal_mask(mask, T) and np.allclose(
            weights, ref.np_softmax(scores), atol=1e-9, equal_nan=True
        ):
            return None
    return weights.astype(np.float64)


def _matches(actual, expected) -> bool:
    return (
        actual.shape == expected.shape
        and np.issubdtype(actual.dtype, np.number)
        and bool(np.allclose(actual, expected, atol=1e-6, equal_nan=True))
    )


def _blame_pieces(submission, T: int) -> list:
    """Hints naming the learner's causal_mask or softmax when they are wrong themselves."""
    hints = []
    try:
        if not is_causal_mask(submission.call(function(submission, "causal_mask"), T), T):
            hints.append(message("lesson03.np_blame_mask"))
        probe = np.random.default_rng(T).normal(size=(T, T)) * 3
        if (
            compare(
                submission.call(function(submission, "softmax"), probe, axis=-1),
                ref.np_softmax(probe),
                what="",
            )
            is not None
        ):
            hints.append(message("lesson03.np_blame_softmax"))
    except StudentError:
        pass
    return hints


@pytest.mark.check("np-attention-causal")
def test_np_attention_causal(submission, check_seed):
    inputs = _attention_inputs(check_seed + 1)
    called, _out, weights = _call_attention(submission, inputs)
    T = inputs[0].shape[0]
    if weights.shape != (T, T):
        fail(called, message("lesson03.np_weights_shape", got=tuple(weights.shape), T=T))
    own = _with_learner_pieces(submission, inputs)
    if own is not None and _matches(weights, own):
        return  # right, given the learner's own causal_mask and softmax: their checks say what is wrong
    leaks = leaking_cells(weights)
    if leaks.any():
        fail(
            called,
            message("lesson03.future_weights", count=int(leaks.sum())),
            heatmap(weights, leaks=leaks),
            message("lesson03.heatmap_legend"),
            *_blame_pieces(submission, T),
            Figure(weights, leaks=leaks, title=message("lesson03.figure_weights")),
        )
    sums = weights.sum(axis=-1)
    if not np.allclose(sums, 1.0, atol=1e-6):
        fail(
            called,
            message("lesson03.rows_not_normalised", sums=np.array2string(sums, precision=4)),
            *(_blame_pieces(submission, T) or [message("lesson03.np_weights_axis")]),
        )


@pytest.mark.check("np-edges")
def test_np_edges(submission):
    count_edges = function(submission, "count_edges")
    # Larger T first: for T = 1 the causal and full counts coincide, so no hint could tell.
    for T in (5, 10, 64, 1, 2):
        for causal in (True, False):
            got = submission.call(count_edges, T, causal=causal)
            expected = ref.np_edges(T, causal)
            if isinstance(got, bool) or not isinstance(got, int) or got != expected:
                hint = None
                if isinstance(got, bool) or not isinstance(got, numbers.Number):
                    pass
                elif got == expected:
                    hint = message("lesson03.edges_not_int", type=type(got).__name__)
                elif causal and got == T * (T - 1) // 2:
                    hint = message("lesson03.edges_self_loop")
                elif causal and got == T * T:
                    hint = message("lesson03.edges_not_causal")
                elif not causal and got == T * (T + 1) // 2:
                    hint = message("lesson03.edges_ignores_causal")
                fail(
                    message("lesson03.called_fn", call=f"count_edges({T}, causal={causal})"),
                    message("lesson03.edges_wrong", got=repr(got), expected=expected),
                    hint,
                )
