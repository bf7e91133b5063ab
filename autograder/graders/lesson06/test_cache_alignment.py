"""Checks of TODO [cache-alignment]: cached_attention's causal mask aligned to the
bottom-right corner of the (T, S) scores, so that new query i sees every cached key and the new
keys up to its own position, and made on x's device.

Each output is judged against the reference attention over the keys and values the learner's
cached_attention returned itself, so a slip in TODO [kv-cache] (how they were put together)
plays no part: chunk-attention on lesson 03's reference attention (a prefill, one token after
a cache, a chunk after a cache; a failure shows which keys each new query really sees);
chunk-logits, in every layer of lesson 04's reference GPT, chunk after chunk, is
test_chunk_logits.py.
"""

from __future__ import annotations

import pytest
import torch

from autograder.core.results import Block, message
from autograder.engine import recording
from autograder.engine.checks import fail
from autograder.engine.feedback import heatmap
from autograder.engine.grader_helpers import generator

from .harness import (
    ALIGN_HINTS,
    ATTN_CFG,
    B,
    WorkerAttention,
    cached,
    given_kv,
    judge_attention,
)

ref = recording.reference_of(__package__)


def _influence(submission, attn: WorkerAttention, x, past_k, past_v, gen) -> torch.Tensor:
    """(T, S): how much output i moves when key/value j alone changes (one batched call).
    Cached tokens j change through their value, new tokens through their input."""
    x, past_k, past_v = x[:1], past_k[:1], past_v[:1]  # one row: the batch carries the perturbations
    P, T = past_k.shape[2], x.shape[1]
    S = P + T
    xb, kb, vb = x.repeat(S + 1, 1, 1), past_k.repeat(S + 1, 1, 1, 1), past_v.repeat(S + 1, 1, 1, 1)
    for j in range(S):
        if j < P:
            vb[j + 1, :, j] += torch.randn(vb.shape[1], vb.shape[3], generator=gen)
        else:
            xb[j + 1, j - P] += torch.randn(x.shape[-1], generator=gen)
    (y, _, _), _ = cached(submission, attn, xb, kb, vb, own="cache-alignment", hints=ALIGN_HINTS)
    if tuple(y.shape) != tuple(xb.shape) or y.device.type != "cpu":
        return None
    return (y[1:] - y[:1]).abs().amax(dim=-1).T  # [i, j]


def _visibility_block(see: torch.Tensor) -> Block:
    lines = ["i\\j " + " ".join(str(j % 10) for j in range(see.shape[1]))]
    for i in range(see.shape[0]):
        lines.append(f"{i:>3} " + " ".join("1" if v else "·" for v in see[i].tolist()))
    return Block("\n".join(lines) + "\n", kind="heatmap")


@pytest.mark.check("chunk-attention")
def test_chunk_attention(submission, check_seed):
    """Several new tokens with an empty cache (prefill), one token after four cached ones, and
    three tokens after five: the output is the reference attention, with the mask aligned to
    the bottom-right corner, over the keys and values cached_attention itself returns (so how
    they were put together, TODO [kv-cache], plays no part). A failure shows which keys each
    new query really sees. Then the same on the meta device: the mask is made where x is."""
    gen = generator(check_seed)
    attn = WorkerAttention(submission, gen)
    C, nh = ATTN_CFG["n_embd"], ATTN_CFG["n_head"]
    for batch, P, T in ((1, 0, 8), (B, 4, 1), (1, 5, 3)):
        x = torch.randn(batch, T, C, generator=gen)
        past_k = past_v = None
        if P:
            _, past_k, past_v = attn.past(batch, P, gen)
        see = ref.visible(T, P + T)  # which keys each new query sees: shown when it is wrong
        result, called = cached(submission, attn, x, past_k, past_v, own="cache-alignment", hints=ALIGN_HINTS)
        expected = given_kv(attn.state, nh, x, result)
        if expected is None:
            continue  # keys and values that cannot be attended to: TODO [kv-cache]'s checks say why
        problems = judge_attention(result[0], expected, attn.state, nh, x, result)
        if problems is None:
            continue
        if not P:
            fail(called, message("lesson06.prefill_wrong"), *problems)
        S = result[1].shape[2]
        parts = [called, message("lesson06.chunk_attention_wrong", P=S - T, T=T, last=S - 1), *problems]
        influence = _influence(submission, attn, x, past_k, past_v, gen) if S == P + T else None
        if influence is not None and torch.isfinite(influence).all():
            moved = influence > 1e-5
            leaks = moved & ~see
            blind = ~moved & see
            parts += [
                message("lesson06.influence_title"),
                heatmap((influence / influence.max().clamp_min(1e-12)).numpy(), leaks=leaks.numpy()),
                message("lesson06.influence_legend", leaks=int(leaks.sum()), blind=int(blind.sum())),
                message("lesson06.visible_title", last=P - 1),
                _visibility_block(see),
            ]
        fail(*parts)
    # The meta device: a mask made without device= is born on the CPU and cannot meet q, k, v.
    meta = WorkerAttention(submission, gen)
    submission.call(meta.handle, "meta", method="to")
    P, T, hs = 5, 3, C // nh
    x = torch.empty(B, T, C, device="meta")
    past = torch.empty(B, nh, P, hs, device="meta")
    (y, _, _), called = cached(
        submission, meta, x, past, past, own="cache-alignment", hints=ALIGN_HINTS, device="meta"
    )
    if y.device.type != "meta" or tuple(y.shape) != (B, T, C):
        fail(
            called,
            message(
                "lesson06.meta_output_wrong",
                got=f"Tensor(shape={tuple(y.shape)}, device={y.device.type})",
                expected=f"Tensor(shape={(B, T, C)}, device=meta)",
            ),
        )
