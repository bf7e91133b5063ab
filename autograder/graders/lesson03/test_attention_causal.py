"""Hidden checks of TODO [mask] in attention.py (CausalSelfAttention in PyTorch): the causal mask
is a buffer that follows the module and stays out of its state_dict; no output and no gradient
depends on a later position; the attention weights are causal; and a sequence shorter than
block_size gives the same first outputs (the mask cropped to T, made on x's device).

A leak in the output counts against the mask only when the attention weights show it (see
harness.mask_explains): positions mixed by the heads' split or merge are their checks' business.
"""

from __future__ import annotations

import pytest
import torch

from autograder.core.results import message
from autograder.engine import recording
from autograder.engine.checks import expect, fail
from autograder.engine.feedback import ATOL, RTOL, compare, heatmap, leaking_cells
from autograder.engine.grader_helpers import generator, scaled_heatmap

from .harness import (
    MAIN,
    MAIN_T,
    SMALL,
    LearnerAttention,
    attention_heatmap,
    columns_sum_to_one,
    expect_finite,
    expect_forward_on_meta,
    mask_crop_hint,
    mask_explains,
    random_input,
    reversed_mask_hint,
    softmax_elsewhere,
    vjp_or_none,
)

ref = recording.reference_of(__package__)


def _leak_is_the_masks(attn: LearnerAttention, x: torch.Tensor) -> bool:
    """Whether a leak in the output (or its change with T) shows in the attention weights: a
    right mask with positions mixed elsewhere (the heads' split or merge, the softmax's dim)
    is other checks' business, so a [mask] check does not fail for it."""
    return mask_explains(attn.weights(x, required=False))


@pytest.mark.check("mask-buffer")
def test_mask_buffer(submission, check_seed):
    attn = LearnerAttention(submission, MAIN, generator(check_seed))
    bs = MAIN["block_size"]
    buffers = dict(
        submission.request("call", target=attn.handle, method="named_buffers", options={"materialize": True})
    )
    if "mask" not in buffers:
        fail(message("lesson03.mask_not_buffer", names=", ".join(buffers) or "—"))
    mask = buffers["mask"]
    if tuple(mask.shape) != (1, 1, bs, bs):
        fail(message("lesson03.mask_shape", got=tuple(mask.shape), bs=bs))
    m = mask[0, 0].double()
    lower = ref.causal_keep(bs)
    # Either a keep-mask (1/True where j <= i) or an additive one (0 where j <= i, very negative above).
    keep = (m != 0) if mask.dtype == torch.bool or bool(((m == 0) | (m == 1)).all()) else (m == 0)
    if not torch.equal(keep, lower):
        # 1 where j > i (LLMs-from-scratch's mask marks what to hide): the course's marks what is seen.
        marks_future = torch.equal(keep, ~lower)
        upper = torch.equal(keep, lower.T)  # torch.triu where torch.tril was meant
        fail(
            message("lesson03.mask_pattern"),
            heatmap(keep.double().numpy()[:8, :8]),
            message("lesson03.mask_pattern_legend"),
            message("lesson03.mask_marks_future") if marks_future else None,
            message("lesson03.mask_is_triu") if upper else None,
        )
    state = submission.call(attn.handle, method="state_dict")
    if any(key == "mask" or key.endswith(".mask") for key in state):
        fail(message("lesson03.mask_persistent"))
    moved = submission.call(attn.handle, "meta", method="to")
    buffers = dict(
        submission.request("call", target=moved, method="named_buffers", options={"materialize": True})
    )
    if "mask" not in buffers or buffers["mask"].device.type != "meta":
        fail(message("lesson03.mask_not_moved"))


def _influence(attn: LearnerAttention, x: torch.Tensor, gen: torch.Generator) -> torch.Tensor | None:
    """(T, T): how much output i moves when input j alone changes (one batched forward); None
    when the output is NaN because the softmax ran over the heads or the batch while the mask put
    -inf exactly where j > i (harness.softmax_elsewhere): nothing of the mask's to judge there."""
    T = x.shape[1]
    batch = x[:1].repeat(T + 1, 1, 1)
    for j in range(T):
        batch[j + 1, j] += torch.randn(x.shape[-1], generator=gen)
    y = attn.forward(batch)
    expect(
        y.shape == batch.shape,
        attn.called(batch),
        message("lesson03.shape_wrong", got=tuple(y.shape), expected=tuple(batch.shape)),
    )
    if not torch.isfinite(y).all() and softmax_elsewhere(attn.weights(x, required=False)):
        return None
    expect_finite(y, attn.called(batch))
    return (y[1:] - y[:1]).abs().amax(dim=-1).T  # [i, j]: change of output i when x_j moves


@pytest.mark.check("future-leak")
def test_future_leak(submission, check_seed):
    gen = generator(check_seed)
    attn = LearnerAttention(submission, MAIN, gen)
    x = random_input(MAIN, MAIN_T, gen, B=1)
    _expect_no_forward_leak(attn, x, gen)


def _expect_no_forward_leak(attn: LearnerAttention, x: torch.Tensor, gen: torch.Generator) -> None:
    influence = _influence(attn, x, gen)
    if influence is None:
        return
    leaks = leaking_cells(influence.numpy(), tol=1e-6)
    if leaks.any():
        if not _leak_is_the_masks(attn, x):
            return  # causal weights: the positions are mixed elsewhere (see heads-split, heads-merge)
        first = leaks.nonzero()
        fail(
            attn.called(x),
            message("lesson03.future_leak", i=int(first[0][0]), j=int(first[1][0]), count=int(leaks.sum())),
            *scaled_heatmap(
                influence,
                leaks=leaks,
                title=message("lesson03.influence_title"),
                legend=message("lesson03.heatmap_legend"),
                figure_title=message("lesson03.figure_influence"),
            ),
        )
    _expect_past_flows(influence, 1e-6, attn.called(x))


def _expect_past_flows(matrix: torch.Tensor, tol: float, called) -> None:
    """Not leaking is only half the story: output i must also depend on some input j < i.

    Without this, an output that ignores its input (zeros, proj(x) alone) would pass as causal.
    """
    T = matrix.shape[0]
    starved = [i for i in range(1, T) if not bool((matrix[i, :i] > tol).any())]
    if starved:
        fail(
            called,
            message("lesson03.no_past_flow", i=starved[0], count=len(starved)),
            *scaled_heatmap(matrix, legend=message("lesson03.heatmap_legend")),
        )


@pytest.mark.check("future-leak-grad")
def test_future_leak_grad(submission, check_seed):
    gen = generator(check_seed)
    attn = LearnerAttention(submission, MAIN, gen)
    x = random_input(MAIN, MAIN_T, gen, B=1)
    T = x.shape[1]
    cotangents = []
    for i in range(T):
        v = torch.zeros_like(x)
        v[:, i] = torch.randn(x.shape[-1], generator=gen)
        cotangents.append(v)
    with mask_crop_hint(MAIN, T):
        grads = vjp_or_none(submission, attn, x, cotangents)
    if grads is None:
        # No gradient reaches x at all (reference-parity's business, not the mask's): judge
        # the causality on the outputs instead, so that this check still rests on evidence.
        return _expect_no_forward_leak(attn, x, gen)
    # g[i, j] = |d <out_i, v> / d x_j|
    g = torch.stack([grad[0].abs().amax(dim=-1) for grad in grads])
    if not torch.isfinite(g).all() and softmax_elsewhere(attn.weights(x, required=False)):
        return  # the softmax over the heads or the batch made the NaN, not the mask (see _influence)
    expect_finite(g, attn.called(x))
    if not bool((g > 0).any()):
        return _expect_no_forward_leak(attn, x, gen)  # x cut from the graph: as above
    leaks = leaking_cells(g.numpy(), tol=0.0)
    if leaks.any():
        if not _leak_is_the_masks(attn, x):
            return  # causal weights: the positions are mixed elsewhere (see heads-split, heads-merge)
        first = leaks.nonzero()
        fail(
            attn.called(x),
            message("lesson03.grad_leak", i=int(first[0][0]), j=int(first[1][0])),
            *scaled_heatmap(
                g,
                leaks=leaks,
                title=message("lesson03.grad_title"),
                legend=message("lesson03.heatmap_legend"),
                figure_title=message("lesson03.figure_grad"),
            ),
        )
    _expect_past_flows(g, 0.0, attn.called(x))


@pytest.mark.check("weights-causal")
def test_weights_causal(submission, check_seed):
    gen = generator(check_seed)
    attn = LearnerAttention(submission, MAIN, gen)
    x = random_input(MAIN, MAIN_T, gen)
    w = attn.weights(x, attn.traced(x))
    expected_shape = (x.shape[0], MAIN["n_head"], MAIN_T, MAIN_T)
    expect(
        tuple(w.shape) == expected_shape,
        attn.called(x),
        message("lesson03.weights_shape", got=tuple(w.shape), expected=expected_shape),
    )
    if softmax_elsewhere(w):
        return  # -inf exactly where j > i, the softmax over the heads or the batch: reference-parity's
    if not torch.isfinite(w).all():
        fail(
            attn.called(x),
            message("lesson03.weights_nan"),
            *attention_heatmap(w.nan_to_num(nan=float("nan"))),
        )
    leaks = leaking_cells(w.double().numpy())
    if leaks.any():
        fail(
            attn.called(x),
            message("lesson03.future_weights", count=int(leaks.sum())),
            *attention_heatmap(w),
            message("lesson03.heatmap_legend"),
            reversed_mask_hint(w),
        )
    sums = w.double().sum(dim=-1)
    # Rows that do not sum to 1 while the columns do: a softmax over the queries, outside the
    # TODOs (reference-parity); the mask itself did its job.
    if not torch.allclose(sums, torch.ones_like(sums), atol=1e-5) and not columns_sum_to_one(w):
        worst = float((sums - 1).abs().max())
        fail(
            attn.called(x),
            message("lesson03.rows_not_normalised", sums=f"max |suma - 1| = {worst:.3g}"),
            message("lesson03.softmax_dim_hint"),
        )


@pytest.mark.check("short-sequences")
def test_short_sequences(submission, check_seed):
    """The mask cropped to the real T: for T = block_size, a few tokens and T = 1, forward
    runs, the weights are finite and causal, and the first T outputs do not depend on the
    sequence's length (a causal model gives token t the same output whatever follows it);
    and forward runs on the meta device (no tensor made without device=...).

    Judged against the learner's own output for the full sequence, not the reference, so
    that a scaling bug (another TODO) does not fail this check; and a change with the length
    fails it only when the weights show the mask is to blame (see mask_explains): a scale that
    depends on T, or positions mixed by the heads' split or merge, are other checks' business."""
    gen = generator(check_seed)
    for cfg, lengths in ((MAIN, (4, 1)), (SMALL, (3, 1))):
        judge_lengths(submission, cfg, lengths, gen)
    # The mask, and whatever forward builds for it, on x's device (checked on "meta").
    attn = LearnerAttention(submission, MAIN, gen)
    expect_forward_on_meta(submission, submission.call(attn.handle, "meta", method="to"), attn)


def judge_lengths(submission, cfg: dict, lengths, gen: torch.Generator) -> None:
    """short-sequences for one configuration: forward at T = block_size, then at each of
    `lengths`, gives finite causal weights and the same first T outputs (see the check)."""
    attn = LearnerAttention(submission, cfg, gen)
    bs = cfg["block_size"]
    x = random_input(cfg, bs, gen)
    full, full_w = None, None
    for T in (bs, *lengths):
        xt = x[:, :T]
        traced = attn.traced(xt)
        y = traced["value"]
        expect(
            tuple(y.shape) == tuple(xt.shape),
            attn.called(xt),
            message("lesson03.shape_wrong", got=tuple(y.shape), expected=tuple(xt.shape)),
        )
        w = attn.weights(xt, traced, required=False)
        if softmax_elsewhere(w):
            continue  # -inf exactly where j > i at this length; the softmax's dimension is not the mask's
        if w is not None and tuple(w.shape[-2:]) == (T, T):
            if not torch.isfinite(w).all():
                fail(
                    attn.called(xt),
                    message("lesson03.weights_nan"),
                    *attention_heatmap(w.nan_to_num(nan=float("nan"))),
                )
            leaks = leaking_cells(w.double().numpy())
            if leaks.any():
                fail(
                    attn.called(xt),
                    message("lesson03.future_weights", count=int(leaks.sum())),
                    *attention_heatmap(w),
                    message("lesson03.heatmap_legend"),
                    reversed_mask_hint(w),
                )
        expect_finite(y, attn.called(xt))
        if full is None:
            full, full_w = y, w
            # An output that ignores its input is trivially the same for every length.
            other = attn.forward(random_input(cfg, bs, gen))
            expect(not torch.allclose(other, full), attn.called(xt), message("lesson03.output_ignores_input"))
            continue
        problem = compare(y, full[:, :T], what=message("lesson03.what_prefix", T=T), atol=ATOL, rtol=RTOL)
        if problem and (mask_explains(w) or mask_explains(full_w)):
            fail(attn.called(xt), message("lesson03.prefix_changed", T=T, bs=bs), problem)
