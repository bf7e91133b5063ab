"""Hidden checks of attention_numpy.py (the NumPy warm-up).

Every expected value and every "what a known mistake gives" comes from `ref` on the checks'
own inputs, made whether or not the check will need it (they are cheap), so that the replay
of the learner release can answer every diagnosis."""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np
import pytest

from autograder.core.results import Figure, message
from autograder.engine import recording
from autograder.engine.checks import describe_student_error, fail
from autograder.engine.feedback import compare, heatmap, leaking_cells
from autograder.engine.grader_helpers import hinted
from autograder.sandbox.client import StudentError

from .harness import mask_grid, raised_in

ref = recording.reference_of(__package__)

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
                elif T > 1 and np.all(mask[past] <= -1e9) and np.all(mask[~past] == 0):
                    hint = "lesson03.np_mask_reversed"
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
        # Added to float64 scores: the values above in float64 (np.where(..., -1e9, 0.0) gives it).
        if mask.dtype != np.float64:
            fail(called, message("lesson03.np_mask_dtype", got=str(mask.dtype)))


@pytest.mark.check("np-softmax")
def test_np_softmax(submission, check_seed):
    softmax = function(submission, "softmax")
    rng = np.random.default_rng(check_seed)
    x = rng.normal(size=(3, 5)) * 2
    # Over each axis: the expected value of one is the wrong-axis diagnosis of the other.
    over = {axis: ref.np_softmax(x, axis=axis) for axis in (-1, 0, 1)}
    # The middle axis of a 3-d array: a softmax that handles only the rows or columns of a matrix
    # (a transpose for axis=0, say) does not pass for it.
    cube = rng.normal(size=(2, 3, 4)) * 2
    cube_called = message(
        "lesson03.called_fn",
        call={
            "es": f"softmax(x, axis=1) con x de forma {cube.shape}",
            "en": f"softmax(x, axis=1) with x of shape {cube.shape}",
        },
    )
    expected_cube = ref.np_softmax(cube, axis=1)
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
        problem = compare(out, over[axis], what=message("lesson03.what_softmax"))
        if problem:
            wrong_axis = over[1 if axis == 0 else 0]
            hint = (
                "lesson03.np_softmax_axis" if out.shape == x.shape and np.allclose(out, wrong_axis) else None
            )
            fail(called, problem, message(hint) if hint else None)
    with keepdims_hint():
        out = as_array(submission.call(softmax, cube, axis=1), cube_called)
    problem = compare(out, expected_cube, what=message("lesson03.what_softmax"))
    if problem:
        fail(cube_called, problem, message("lesson03.np_softmax_axis_general"))


@pytest.mark.check("np-softmax-stable")
def test_np_softmax_stable(submission):
    softmax = function(submission, "softmax")
    x = np.array([[1000.0, 1001.0, 1002.0], [-1000.0, 0.0, 1000.0], [0.0, 0.0, 0.0]])
    called = message(
        "lesson03.called_fn",
        call={"es": f"softmax(x) con x = {STABLE_INPUT}", "en": f"softmax(x) with x = {STABLE_INPUT}"},
    )
    expected, slips = ref.np_softmax(x), ref.np_softmax_slips(x)
    with np.errstate(all="ignore"), keepdims_hint():
        out = as_array(submission.call(softmax, x), called)
    if not np.all(np.isfinite(out)):
        fail(called, message("lesson03.np_softmax_overflow"))
    problem = compare(out, expected, what=message("lesson03.what_softmax"))
    if problem:
        lost_axis = out.shape == x.shape and any(np.allclose(out, slip, atol=1e-6) for slip in slips)
        fail(called, problem, message("lesson03.np_softmax_keepdims") if lost_axis else None)


# (T, d_model, d_k, d_v) of masked_self_attention's inputs: all different within each, so that a
# transposed matrix or one size read for another cannot hide, and across them, so that a size
# written as a constant shows; T = 1 too.
ATTENTION_SIZES = ((5, 6, 4, 3), (3, 2, 7, 4), (1, 3, 2, 5))


def _attention_inputs(seed: int, sizes=ATTENTION_SIZES[0]):
    rng = np.random.default_rng(seed)
    T, d_model, d_k, d_v = sizes
    X = rng.normal(size=(T, d_model))
    W_Q, W_K, W_V = (rng.normal(size=(d_model, d)) for d in (d_k, d_k, d_v))
    return X, W_Q, W_K, W_V


def _call_attention(submission, inputs):
    fn = function(submission, "masked_self_attention")
    X, W_Q, _, W_V = inputs
    called = message(
        "lesson03.called_fn",
        call={
            "es": f"masked_self_attention(X, W_Q, W_K, W_V) con X {X.shape}, W_Q y W_K {W_Q.shape}, W_V {W_V.shape}",
            "en": f"masked_self_attention(X, W_Q, W_K, W_V) with X {X.shape}, W_Q and W_K {W_Q.shape}, W_V {W_V.shape}",
        },
    )
    try:
        result = submission.call(fn, *inputs)
    except StudentError as err:
        # A mask of the wrong shape breaks the sum in masked_self_attention's own line: the cause
        # is TODO [np-mask]'s value (its check says what is wrong), so this check waits on it.
        if raised_in(err) == "np-attention":
            # Likewise a softmax that returns no (T, T) array (None, a list...): TODO [np-softmax]'s.
            waits = (
                "np-mask"
                if not _mask_shape_ok(submission, X.shape[0])
                else "np-softmax"
                if not _softmax_shape_ok(submission, X.shape[0])
                else None
            )
            if waits is not None:
                fail(called, describe_student_error(err, None, {}), waits_on=waits)
        raise
    if not (isinstance(result, tuple) and len(result) == 2):
        fail(called, message("lesson03.np_attention_tuple", got=type(result).__name__))
    return called, as_array(result[0], called), as_array(result[1], called)


def _softmax_shape_ok(submission, T: int) -> bool:
    """Whether the learner's softmax gives a (T, T) float array for a (T, T) input."""
    try:
        out = submission.call(function(submission, "softmax"), _softmax_probe(T), axis=-1)
    except StudentError:
        return False
    return isinstance(out, np.ndarray) and out.shape == (T, T) and np.issubdtype(out.dtype, np.floating)


def _mask_shape_ok(submission, T: int) -> bool:
    try:
        mask = submission.call(function(submission, "causal_mask"), T)
    except StudentError:
        return False
    return isinstance(mask, np.ndarray) and mask.shape == (T, T)


# masked_self_attention's recognisable mistakes: the options of ref.np_attention that make them.
NP_ATTENTION_SLIPS = (
    ({"scale": "none"}, "lesson03.np_scale_none"),
    ({"scale": "dk"}, "lesson03.np_scale_dk"),
    ({"scale": "sqrt_dmodel"}, "lesson03.np_scale_sqrt_dmodel"),
    ({"causal": False}, "lesson03.np_no_mask"),
    ({"axis": 0}, "lesson03.np_weights_axis"),
)


@dataclass(frozen=True)
class AttentionCase:
    """The inputs of one masked_self_attention call and everything the reference says of them:
    its output and weights, the weights of each recognisable slip, the pieces a learner's own
    causal_mask and softmax are judged with."""

    inputs: tuple
    output: np.ndarray
    weights: np.ndarray
    slips: list  # the weights under each NP_ATTENTION_SLIPS entry, in order
    scores: np.ndarray  # Q K^T / sqrt(d_k), unmasked
    values: np.ndarray  # X W_V
    probe: np.ndarray  # a (T, T) input for the learner's softmax alone
    probe_softmax: np.ndarray


def _attention_case(seed: int, sizes=ATTENTION_SIZES[0]) -> AttentionCase:
    inputs = _attention_inputs(seed, sizes)
    X, W_Q, W_K, W_V = inputs
    output, weights = ref.np_attention(*inputs)
    probe = _softmax_probe(X.shape[0])
    return AttentionCase(
        inputs,
        output,
        weights,
        [ref.np_attention(*inputs, **options)[1] for options, _ in NP_ATTENTION_SLIPS],
        ref.np_scores(X, W_Q, W_K),
        ref.np_values(X, W_V),
        probe,
        ref.np_softmax(probe),
    )


def _softmax_probe(T: int) -> np.ndarray:
    return np.random.default_rng(T).normal(size=(T, T)) * 3


@pytest.mark.check("np-attention")
def test_np_attention(submission, check_seed):
    for offset, sizes in enumerate(ATTENTION_SIZES):
        _judge_attention(submission, _attention_case(check_seed + 2 * offset, sizes))


def _judge_attention(submission, case: AttentionCase) -> None:
    called, out, weights = _call_attention(submission, case.inputs)
    expected_out, expected_w = case.output, case.weights
    problem = compare(weights, expected_w, what=message("lesson03.what_weights"))
    if problem:
        # This check judges masked_self_attention itself: with the learner's own causal_mask
        # and softmax (TODOs with checks of their own), is the computation right?
        own = _with_learner_pieces(submission, case)
        if own is not None and _matches(weights, own):
            expected_w = own
            expected_out = own @ case.values
        else:
            hints = [
                message(key)
                for (_options, key), slip in zip(NP_ATTENTION_SLIPS, case.slips)
                if weights.shape == expected_w.shape and np.allclose(weights, slip, atol=1e-6)
            ]
            fail(called, problem, *hints[:1], *_blame_pieces(submission, case))
    problem = compare(out, expected_out, what=message("lesson03.what_output"))
    if problem:
        fail(called, problem, message("lesson03.np_weights_ok_output_wrong"))


def _with_learner_pieces(submission, case: AttentionCase):
    """The weights a right masked_self_attention gives with the learner's own causal_mask and
    softmax (TODOs with checks of their own), as that softmax returns them (its dtype kept): so
    that np-attention judges the composition only. None when those pieces are right (nothing to
    excuse: the mask is causal and the softmax of the masked scores is the reference's, dtype
    included), do not run, or return no (T, T) array."""
    T = case.inputs[0].shape[0]
    try:
        mask = submission.call(function(submission, "causal_mask"), T)
    except StudentError:
        return None
    if not isinstance(mask, np.ndarray) or mask.shape != (T, T):
        return None
    try:
        with np.errstate(all="ignore"):
            scores = case.scores + mask.astype(np.float64)
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
        or not np.issubdtype(weights.dtype, np.floating)
    ):
        return None
    # A causal mask (0 where seen, <= -1e9 where hidden) and a right softmax give exactly the
    # reference's weights, in float64.
    with np.errstate(all="ignore"):
        if (
            is_causal_mask(mask, T)
            and weights.dtype == np.float64
            and np.allclose(weights, case.weights, atol=1e-9, equal_nan=True)
        ):
            return None
    return weights


def _matches(actual, expected) -> bool:
    return (
        actual.shape == expected.shape
        and actual.dtype == expected.dtype
        and bool(np.allclose(actual, expected, atol=1e-6, equal_nan=True))
    )


def _blame_pieces(submission, case: AttentionCase) -> list:
    """Hints naming the learner's causal_mask or softmax when they are wrong themselves."""
    T = case.inputs[0].shape[0]
    hints = []
    try:
        if not is_causal_mask(submission.call(function(submission, "causal_mask"), T), T):
            hints.append(message("lesson03.np_blame_mask"))
        if (
            compare(
                submission.call(function(submission, "softmax"), case.probe, axis=-1),
                case.probe_softmax,
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
    case = _attention_case(check_seed + 1)
    called, _out, weights = _call_attention(submission, case.inputs)
    T = case.inputs[0].shape[0]
    if weights.shape != (T, T):
        fail(called, message("lesson03.np_weights_shape", got=tuple(weights.shape), T=T))
    own = _with_learner_pieces(submission, case)
    if own is not None and _matches(weights, own):
        return  # right, given the learner's own causal_mask and softmax: their checks say what is wrong
    leaks = leaking_cells(weights)
    if leaks.any():
        fail(
            called,
            message("lesson03.future_weights", count=int(leaks.sum())),
            heatmap(weights, leaks=leaks),
            message("lesson03.heatmap_legend"),
            *_blame_pieces(submission, case),
            Figure(weights, leaks=leaks, title=message("lesson03.figure_weights")),
        )
    sums = weights.sum(axis=-1)
    if not np.allclose(sums, 1.0, atol=1e-6):
        fail(
            called,
            message("lesson03.rows_not_normalised", sums=np.array2string(sums, precision=4)),
            *(_blame_pieces(submission, case) or [message("lesson03.np_weights_axis")]),
        )


@pytest.mark.check("np-edges")
def test_np_edges(submission):
    count_edges = function(submission, "count_edges")
    # Larger T first: for T = 1 the causal and full counts coincide, so no hint could tell.
    for T in (5, 10, 64, 1, 2):
        for causal in (True, False):
            judge_edges(submission.call(count_edges, T, causal=causal), T, causal)


def judge_edges(got, T: int, causal: bool) -> None:
    """count_edges(T, causal=causal) returned `got`: fail, naming a recognisable slip, unless
    it is the reference's count as an int."""
    expected = ref.np_edges(T, causal)
    slips = ref.np_edges_slips(T)
    if isinstance(got, bool) or not isinstance(got, int) or got != expected:
        hint = None
        if isinstance(got, bool) or not isinstance(got, numbers.Number):
            pass
        elif got == expected:
            hint = message("lesson03.edges_not_int", type=type(got).__name__)
        elif causal and got == slips["self_loop"]:
            hint = message("lesson03.edges_self_loop")
        elif causal and got == slips["not_causal"]:
            hint = message("lesson03.edges_not_causal")
        elif not causal and got == slips["ignores_causal"]:
            hint = message("lesson03.edges_ignores_causal")
        fail(
            message("lesson03.called_fn", call=f"count_edges({T}, causal={causal})"),
            message("lesson03.edges_wrong", got=repr(got), expected=expected),
            hint,
        )
