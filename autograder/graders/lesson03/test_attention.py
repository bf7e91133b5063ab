"""Hidden checks of attention.py (CausalSelfAttention in PyTorch)."""

from __future__ import annotations

import math

import torch
import pytest

from autograder.checks import expect, fail
from autograder.feedback import compare, heatmap, leaking_cells
from autograder.results import message

from . import reference as ref
from .harness import (ATOL, MAIN, MAIN_T, RTOL, SDPA, SMALL, LearnerAttention, attention_heatmap,
                      diagnose, generator, random_input)


def _weights(traced: dict, attn: LearnerAttention, x: torch.Tensor) -> torch.Tensor:
    captured = traced["captured"]
    if len(captured) != 1:
        fail(attn.called(x), message("lesson03.attn_drop_calls", count=len(captured)))
    return captured[0]


# ---------------------------------------------------------------- TODO [mask]

@pytest.mark.check("mask-buffer")
def test_mask_buffer(submission, check_seed):
    attn = LearnerAttention(submission, MAIN, generator(check_seed))
    bs = MAIN["block_size"]
    buffers = dict(submission.request("call", target=attn.handle, method="named_buffers",
                                      options={"materialize": True}))
    if "mask" not in buffers:
        fail(message("lesson03.mask_not_buffer", names=", ".join(buffers) or "—"))
    mask = buffers["mask"]
    if tuple(mask.shape) != (1, 1, bs, bs):
        fail(message("lesson03.mask_shape", got=tuple(mask.shape), bs=bs))
    m = mask[0, 0].double()
    lower = torch.ones(bs, bs).tril().bool()
    # Either a keep-mask (1/True where j <= i) or an additive one (0 where j <= i, very negative above).
    keep = (m != 0) if mask.dtype == torch.bool or bool(((m == 0) | (m == 1)).all()) else (m == 0)
    if not torch.equal(keep, lower):
        fail(message("lesson03.mask_pattern"), heatmap(keep.double().numpy()[:8, :8]),
             message("lesson03.mask_pattern_legend"))
    state = submission.call(attn.handle, method="state_dict")
    if any(key == "mask" or key.endswith(".mask") for key in state):
        fail(message("lesson03.mask_persistent"))
    moved = submission.call(attn.handle, "meta", method="to")
    buffers = dict(submission.request("call", target=moved, method="named_buffers",
                                      options={"materialize": True}))
    if "mask" not in buffers or buffers["mask"].device.type != "meta":
        fail(message("lesson03.mask_not_moved"))


def _influence(attn: LearnerAttention, x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """(T, T): how much output i moves when input j alone changes (one batched forward)."""
    T = x.shape[1]
    batch = x[:1].repeat(T + 1, 1, 1)
    for j in range(T):
        batch[j + 1, j] += torch.randn(x.shape[-1], generator=gen)
    y = attn.forward(batch)
    expect(y.shape == batch.shape, attn.called(batch),
           message("lesson03.shape_wrong", got=tuple(y.shape), expected=tuple(batch.shape)))
    return (y[1:] - y[:1]).abs().amax(dim=-1).T  # [i, j]: change of output i when x_j moves


@pytest.mark.check("future-leak")
def test_future_leak(submission, check_seed):
    gen = generator(check_seed)
    attn = LearnerAttention(submission, MAIN, gen)
    x = random_input(MAIN, MAIN_T, gen, B=1)
    influence = _influence(attn, x, gen)
    leaks = leaking_cells(influence.numpy(), tol=1e-6)
    if leaks.any():
        first = leaks.nonzero()
        fail(attn.called(x), message("lesson03.future_leak", i=int(first[0][0]), j=int(first[1][0]),
                                      count=int(leaks.sum())),
             message("lesson03.influence_title"), heatmap((influence / influence.max().clamp_min(1e-12)).numpy(), leaks=leaks),
             message("lesson03.heatmap_legend"))


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
    grads = submission.vjp(attn.handle, x, cotangents)
    # g[i, j] = |d <out_i, v> / d x_j|
    g = torch.stack([grad[0].abs().amax(dim=-1) for grad in grads])
    leaks = leaking_cells(g.numpy(), tol=0.0)
    if leaks.any():
        first = leaks.nonzero()
        fail(attn.called(x), message("lesson03.grad_leak", i=int(first[0][0]), j=int(first[1][0])),
             message("lesson03.grad_title"), heatmap((g / g.max().clamp_min(1e-12)).numpy(), leaks=leaks),
             message("lesson03.heatmap_legend"))


@pytest.mark.check("weights-causal")
def test_weights_causal(submission, check_seed):
    gen = generator(check_seed)
    attn = LearnerAttention(submission, MAIN, gen)
    x = random_input(MAIN, MAIN_T, gen)
    w = _weights(attn.traced(x), attn, x)
    expected_shape = (x.shape[0], MAIN["n_head"], MAIN_T, MAIN_T)
    expect(tuple(w.shape) == expected_shape, attn.called(x),
           message("lesson03.weights_shape", got=tuple(w.shape), expected=expected_shape))
    if not torch.isfinite(w).all():
        fail(attn.called(x), message("lesson03.weights_nan"), *attention_heatmap(w.nan_to_num(nan=float("nan"))))
    leaks = leaking_cells(w.double().numpy())
    if leaks.any():
        fail(attn.called(x), message("lesson03.future_weights", count=int(leaks.sum())),
             *attention_heatmap(w), message("lesson03.heatmap_legend"))
    sums = w.double().sum(dim=-1)
    if not torch.allclose(sums, torch.ones_like(sums), atol=1e-5):
        worst = float((sums - 1).abs().max())
        fail(attn.called(x), message("lesson03.rows_not_normalised", sums=f"max |suma - 1| = {worst:.3g}"),
             message("lesson03.softmax_dim_hint"))


@pytest.mark.check("short-sequences")
def test_short_sequences(submission, check_seed):
    gen = generator(check_seed)
    for cfg, T in ((MAIN, 1), (MAIN, 4), (SMALL, 1), (SMALL, SMALL["block_size"])):
        attn = LearnerAttention(submission, cfg, gen)
        x = random_input(cfg, T, gen)
        attn.expect_output(x, ref.attention_forward(x, attn.sd, cfg["n_head"]),
                           message("lesson03.what_output"))


# ---------------------------------------------------------------- TODO [head-reshape]

@pytest.mark.check("shapes")
def test_shapes(submission, check_seed):
    gen = generator(check_seed)
    for cfg, T in ((MAIN, MAIN_T), (SMALL, 3)):
        attn = LearnerAttention(submission, cfg, gen)
        x = random_input(cfg, T, gen, B=3)
        y = attn.forward(x)
        expect(tuple(y.shape) == tuple(x.shape), attn.called(x),
               message("lesson03.shape_wrong", got=tuple(y.shape), expected=tuple(x.shape)))
        expect(y.dtype == torch.float32, attn.called(x),
               message("lesson03.dtype_wrong", got=str(y.dtype), expected="torch.float32"))
    submission.call(attn.handle, method="double")
    y = attn.forward(x.double())
    expect(y.dtype == torch.float64, message("lesson03.dtype_double", got=str(y.dtype)))


def _weight_variants(x, attn, masks=("causal", "none"), scales=ref.SCALES):
    for scale in scales:
        for mask in masks:
            yield (scale, mask), ref.attention_weights(x, attn.sd, attn.n_head, scale=scale, mask=mask)


@pytest.mark.check("heads-split")
def test_heads_split(submission, check_seed):
    gen = generator(check_seed)
    attn = LearnerAttention(submission, MAIN, gen)
    x = random_input(MAIN, MAIN_T, gen)
    w = _weights(attn.traced(x), attn, x)
    expected_shape = (x.shape[0], MAIN["n_head"], MAIN_T, MAIN_T)
    expect(tuple(w.shape) == expected_shape, attn.called(x),
           message("lesson03.weights_shape", got=tuple(w.shape), expected=expected_shape))
    # Judge only how heads are formed: a scale or mask bug is another check's business.
    for _variant, expected in _weight_variants(x, attn):
        if torch.allclose(w.double(), expected, atol=1e-4, rtol=1e-4):
            return
    correct = ref.attention_weights(x, attn.sd, attn.n_head)
    problem = compare(w, correct.float(), what=message("lesson03.what_weights"), atol=ATOL, rtol=RTOL)
    diagnoses = [
        (ref.attention_weights(x, attn.sd, attn.n_head, split="interleaved"), message("lesson03.diag_interleaved")),
    ]
    swapped = {**attn.sd, "qkv.weight": attn.sd["qkv.weight"][[*range(24, 48), *range(24), *range(48, 72)]],
               "qkv.bias": attn.sd["qkv.bias"][[*range(24, 48), *range(24), *range(48, 72)]]}
    diagnoses.append((ref.attention_weights(x, swapped, attn.n_head), message("lesson03.diag_qk_swapped")))
    fail(attn.called(x), problem, *diagnose(w, diagnoses), message("lesson03.heads_hint"))


# ---------------------------------------------------------------- TODO [scaling]

@pytest.mark.check("scaling")
def test_scaling(submission, check_seed):
    gen = generator(check_seed)
    attn = LearnerAttention(submission, MAIN, gen)
    x = random_input(MAIN, MAIN_T, gen)
    w = _weights(attn.traced(x), attn, x)
    for _variant, expected in _weight_variants(x, attn, scales=("sqrt_hs",)):
        if w.shape == expected.shape and torch.allclose(w.double(), expected, atol=ATOL, rtol=RTOL):
            return
    hs = MAIN["n_embd"] // MAIN["n_head"]
    diagnoses = []
    for scale in ref.SCALES[1:]:
        for mask in ("causal", "none"):
            diagnoses.append((ref.attention_weights(x, attn.sd, attn.n_head, scale=scale, mask=mask),
                              message(f"lesson03.diag_scale_{scale}", hs=hs, C=MAIN["n_embd"])))
    correct = ref.attention_weights(x, attn.sd, attn.n_head)
    fail(attn.called(x), compare(w, correct.float(), what=message("lesson03.what_weights")),
         *diagnose(w, diagnoses))


# ---------------------------------------------------------------- TODO [contiguous-view]

@pytest.mark.check("heads-merge")
def test_heads_merge(submission, check_seed):
    gen = generator(check_seed)
    attn = LearnerAttention(submission, MAIN, gen)
    x = random_input(MAIN, MAIN_T, gen)
    traced = attn.traced(x)
    w, y = _weights(traced, attn, x), traced["value"]
    # Rebuild the output from the learner's own weights: only the merge and projection remain.
    v = ref.values(x, attn.sd, attn.n_head)
    expected = ref.merge_and_project(w.double(), v, attn.sd)
    problem = compare(y, expected.float(), what=message("lesson03.what_output"), atol=1e-4, rtol=1e-4)
    if problem:
        wrong = ref.merge_and_project(w.double(), v, attn.sd, merge="no_transpose")
        fail(attn.called(x), problem, *diagnose(y, [(wrong, message("lesson03.diag_no_transpose"))]),
             message("lesson03.merge_hint"))


@pytest.mark.check("reference-parity")
def test_reference_parity(submission, check_seed):
    gen = generator(check_seed)
    for cfg, T in ((MAIN, MAIN_T), (MAIN, MAIN["block_size"]), (SMALL, 5)):
        attn = LearnerAttention(submission, cfg, gen)
        x = random_input(cfg, T, gen, B=3)
        diagnoses = [(ref.attention_forward(x, attn.sd, cfg["n_head"], mask="none"), message("lesson03.diag_no_mask")),
                     (ref.attention_forward(x, attn.sd, cfg["n_head"], scale="sqrt_C"),
                      message("lesson03.diag_scale_sqrt_C", hs=cfg["n_embd"] // cfg["n_head"], C=cfg["n_embd"]))]
        attn.expect_output(x, ref.attention_forward(x, attn.sd, cfg["n_head"]),
                           message("lesson03.what_output"), *diagnoses)


@pytest.mark.check("dropout-modes")
def test_dropout_modes(submission, check_seed):
    gen = generator(check_seed)
    cfg = {**MAIN, "dropout": 0.5}
    attn = LearnerAttention(submission, cfg, gen)
    x = random_input(cfg, MAIN_T, gen)
    expected = ref.attention_forward(x, attn.sd, cfg["n_head"])
    first, second = attn.forward(x, seed=1), attn.forward(x, seed=2)
    problem = compare(first, expected.float(), what=message("lesson03.what_output_eval"))
    if problem or not torch.equal(first, second):
        fail(attn.called(x), message("lesson03.dropout_in_eval"), problem)
    submission.call(attn.handle, method="train")
    a, b = attn.forward(x, seed=1), attn.forward(x, seed=2)
    expect(not torch.allclose(a, b), attn.called(x), message("lesson03.dropout_inactive"))


# ---------------------------------------------------------------- TODO [fused]

SDPA_PARAMETERS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale")


def sdpa_arguments(spied_call: dict) -> dict:
    """A spied scaled_dot_product_attention call's arguments by name, positional ones included."""
    return {**dict(zip(SDPA_PARAMETERS, spied_call["args"])), **spied_call["kwargs"]}


@pytest.mark.check("fused-parity")
def test_fused_parity(submission, check_seed):
    gen = generator(check_seed)
    for cfg, T in ((MAIN, MAIN_T), (SMALL, 1), (SMALL, SMALL["block_size"])):
        attn = LearnerAttention(submission, cfg, gen, fused=True)
        x = random_input(cfg, T, gen)
        attn.expect_output(x, ref.attention_forward(x, attn.sd, cfg["n_head"]), message("lesson03.what_output"),
                           (ref.attention_forward(x, attn.sd, cfg["n_head"], mask="none"),
                            message("lesson03.diag_fused_not_causal")))


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


@pytest.mark.check("fused-dropout")
def test_fused_dropout(submission, check_seed):
    gen = generator(check_seed)
    cfg = {**MAIN, "dropout": 0.5}
    attn = LearnerAttention(submission, cfg, gen, fused=True)
    x = random_input(cfg, MAIN_T, gen)
    traced = attn.traced(x, spy=True, seed=1)
    again = attn.traced(x, spy=True, seed=2)
    p_eval = [sdpa_arguments(c).get("dropout_p", 0.0) for c in traced["spied"]]
    if any(p not in (0, 0.0, None) for p in p_eval) or not torch.equal(traced["value"], again["value"]):
        fail(attn.called(x), message("lesson03.fused_dropout_eval", p=p_eval[0] if p_eval else "?"))
    submission.call(attn.handle, method="train")
    train = attn.traced(x, spy=True, seed=3)
    p_train = [sdpa_arguments(c).get("dropout_p", 0.0) for c in train["spied"]]
    if not p_train or not math.isclose(float(p_train[0] or 0.0), cfg["dropout"]):
        fail(attn.called(x), message("lesson03.fused_dropout_train", p=p_train[0] if p_train else "?",
                                      expected=cfg["dropout"]))
