"""Hidden checks of attention_numpy.py (the NumPy warm-up)."""

from __future__ import annotations

import numpy as np
import pytest

from autograder.checks import expect, fail
from autograder.feedback import compare, heatmap, leaking_cells
from autograder.results import message

from . import reference as ref
from .harness import mask_grid

FILE = "attention_numpy"


def function(sub, name):
    return sub.getattr(sub.module(FILE), name)


def as_array(value, called):
    if not isinstance(value, np.ndarray):
        fail(called, message("lesson03.np_not_array", got=type(value).__name__))
    return value


@pytest.mark.check("np-mask")
def test_np_mask(submission):
    causal_mask = function(submission, "causal_mask")
    for T in (1, 4, 7):
        called = message("lesson03.called_fn", call=f"causal_mask({T})")
        mask = as_array(submission.call(causal_mask, T), called)
        if mask.shape != (T, T):
            fail(called, message("lesson03.np_mask_shape", got=tuple(mask.shape), T=T))
        visible = np.tri(T, dtype=bool)
        if np.any(mask[visible] != 0):
            hint = "lesson03.np_mask_multiplicative" if np.all(mask[visible] == 1) else "lesson03.np_mask_visible"
            fail(called, message(hint), mask_grid(mask), message("lesson03.mask_grid_legend"))
        if np.any(mask[~visible] > -1e9):
            hint = ("lesson03.np_mask_diagonal" if T > 1 and np.all(np.diag(mask) <= -1e9)
                    else "lesson03.np_mask_future")
            fail(called, message(hint), mask_grid(mask), message("lesson03.mask_grid_legend"))


@pytest.mark.check("np-softmax")
def test_np_softmax(submission, check_seed):
    softmax = function(submission, "softmax")
    rng = np.random.default_rng(check_seed)
    x = rng.normal(size=(3, 5)) * 2
    for axis in (-1, 0):
        called = message("lesson03.called_fn", call=f"softmax(x, axis={axis}) con x de forma {x.shape}")
        out = as_array(submission.call(softmax, x, axis=axis), called)
        problem = compare(out, ref.np_softmax(x, axis=axis), what=message("lesson03.what_softmax"))
        if problem:
            wrong_axis = ref.np_softmax(x, axis=1 if axis == 0 else 0)
            hint = ("lesson03.np_softmax_axis" if out.shape == x.shape and np.allclose(out, wrong_axis)
                    else None)
            fail(called, problem, message(hint) if hint else None)


@pytest.mark.check("np-softmax-stable")
def test_np_softmax_stable(submission):
    softmax = function(submission, "softmax")
    x = np.array([[1000.0, 1001.0, 1002.0], [-1000.0, 0.0, 1000.0], [0.0, 0.0, 0.0]])
    called = message("lesson03.called_fn", call="softmax(x) con x = [[1000, 1001, 1002], [-1000, 0, 1000], [0, 0, 0]]")
    with np.errstate(all="ignore"):
        out = as_array(submission.call(softmax, x), called)
    if not np.all(np.isfinite(out)):
        fail(called, message("lesson03.np_softmax_overflow"))
    problem = compare(out, ref.np_softmax(x), what=message("lesson03.what_softmax"))
    if problem:
        fail(called, problem)


def _attention_inputs(seed: int):
    rng = np.random.default_rng(seed)
    T, d_model, d_k, d_v = 5, 6, 4, 3  # all different, so a transposed matrix cannot hide
    X = rng.normal(size=(T, d_model))
    W_Q, W_K, W_V = (rng.normal(size=(d_model, d)) for d in (d_k, d_k, d_v))
    return X, W_Q, W_K, W_V


def _call_attention(submission, inputs):
    fn = function(submission, "masked_self_attention")
    called = message("lesson03.called_fn",
                     call="masked_self_attention(X, W_Q, W_K, W_V) con X (5, 6), W_Q y W_K (6, 4), W_V (6, 3)")
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
        hints = [message(f"lesson03.np_scale_{scale}")
                 for scale in ("none", "dk", "sqrt_dmodel")
                 if weights.shape == expected_w.shape
                 and np.allclose(weights, ref.np_attention(*inputs, scale=scale)[1], atol=1e-6)]
        fail(called, problem, *hints[:1])
    problem = compare(out, expected_out, what=message("lesson03.what_output"))
    if problem:
        fail(called, problem, message("lesson03.np_weights_ok_output_wrong"))


@pytest.mark.check("np-attention-causal")
def test_np_attention_causal(submission, check_seed):
    inputs = _attention_inputs(check_seed + 1)
    called, _out, weights = _call_attention(submission, inputs)
    T = inputs[0].shape[0]
    if weights.shape != (T, T):
        fail(called, message("lesson03.np_weights_shape", got=tuple(weights.shape), T=T))
    leaks = leaking_cells(weights)
    if leaks.any():
        fail(called, message("lesson03.future_weights", count=int(leaks.sum())),
             heatmap(weights, leaks=leaks), message("lesson03.heatmap_legend"))
    sums = weights.sum(axis=-1)
    expect(np.allclose(sums, 1.0, atol=1e-6), called,
           message("lesson03.rows_not_normalised", sums=np.array2string(sums, precision=4)))


@pytest.mark.check("np-edges")
def test_np_edges(submission):
    count_edges = function(submission, "count_edges")
    for T in (1, 2, 5, 10, 64):
        for causal in (True, False):
            got = submission.call(count_edges, T, causal=causal)
            expected = ref.np_edges(T, causal)
            if isinstance(got, bool) or not isinstance(got, int) or got != expected:
                hint = None
                if causal and got == T * (T - 1) // 2:
                    hint = message("lesson03.edges_self_loop")
                elif causal and got == T * T:
                    hint = message("lesson03.edges_not_causal")
                fail(message("lesson03.called_fn", call=f"count_edges({T}, causal={causal})"),
                     message("lesson03.edges_wrong", got=repr(got), expected=expected), hint)
