"""Hidden checks of TODO [cache-alignment]: cached_attention's causal mask aligned to the
bottom-right corner of the (T, S) scores, so that new query i sees every cached key and the new
keys up to its own position, and made on x's device.

Each output is judged against the reference attention over the keys and values the learner's
cached_attention returned itself, so a slip in TODO [kv-cache] (how they were put together)
plays no part: chunk-attention on lesson 03's reference attention (a prefill, one token after
a cache, a chunk after a cache; a failure shows which keys each new query really sees), and
chunk-logits in every layer of lesson 04's reference GPT, chunk after chunk.
"""

from __future__ import annotations

import pytest
import torch

from autograder.core.results import Block, message
from autograder.engine.checks import fail
from autograder.engine.feedback import ATOL, RTOL, compare, heatmap
from autograder.engine.grader_helpers import generator, tokens

from . import reference as ref
from .harness import (
    ATTN_CFG,
    CACHE_HINTS,
    DEVICE_HINTS,
    GPT_CFG,
    B,
    WorkerAttention,
    WorkerGPT,
    cached,
    diagnose,
    function,
    given_kv,
    hinted,
)


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


ALIGN_HINTS = DEVICE_HINTS + tuple(h for h in CACHE_HINTS if "attn_mask" in h[0] or "dimension 3" in h[0])


def _judge_attention(y, expected, state, n_head, x, result, prefix: str = ""):
    """The compare() problem of y against `expected` (the reference over the learner's own keys
    and values) with the diagnoses of a recognisable mask, or None when y is right."""
    if y.device.type != "cpu" or tuple(y.shape) != tuple(expected.shape):
        return [
            message(
                "lesson06.shape_wrong",
                what=message("lesson06.what_attention_out"),
                got=tuple(y.shape),
                expected=tuple(expected.shape),
            )
        ]
    problem = compare(y, expected.float(), what=message("lesson06.what_attention_out"), atol=ATOL, rtol=RTOL)
    if not problem:
        return None
    diagnoses = diagnose(
        y,
        [
            (lambda: given_kv(state, n_head, x, result, prefix, align="top_left"), "lesson06.diag_top_left"),
            (lambda: given_kv(state, n_head, x, result, prefix, align="none"), "lesson06.diag_no_mask"),
            (
                lambda: given_kv(state, n_head, x, result, prefix, align="no_self"),
                "lesson06.diag_mask_hides_self",
            ),
            (
                lambda: given_kv(state, n_head, x, result, prefix, align="one_ahead"),
                "lesson06.diag_mask_one_ahead",
            ),
        ],
    )
    return [problem, *diagnoses]


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
        result, called = cached(submission, attn, x, past_k, past_v, own="cache-alignment", hints=ALIGN_HINTS)
        expected = given_kv(attn.state, nh, x, result)
        if expected is None:
            continue  # keys and values that cannot be attended to: TODO [kv-cache]'s checks say why
        problems = _judge_attention(result[0], expected, attn.state, nh, x, result)
        if problems is None:
            continue
        if not P:
            fail(called, message("lesson06.prefill_wrong"), *problems)
        S = result[1].shape[2]
        parts = [called, message("lesson06.chunk_attention_wrong", P=S - T, T=T, last=S - 1), *problems]
        influence = _influence(submission, attn, x, past_k, past_v, gen) if S == P + T else None
        if influence is not None and torch.isfinite(influence).all():
            see = ref.visible(T, P + T)
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


@pytest.mark.check("chunk-logits")
def test_chunk_logits(submission, check_seed):
    """Chunks of 4, 3 and 3 tokens through every layer of the GPT (B = 2): in each layer, the
    learner's cached_attention on that layer's attention, with the reference cache and the
    reference input, gives the reference attention over the keys and values it returns itself
    (the positions and the concatenation, TODO [kv-cache], play no part)."""
    gen = generator(check_seed)
    model = WorkerGPT(submission, gen)
    bs, n_layer, nh = GPT_CFG["block_size"], GPT_CFG["n_layer"], GPT_CFG["n_head"]
    idx = tokens(B, bs, GPT_CFG["vocab_size"], gen)
    chunks = [4, 3, 3]
    tr = model.trusted.transformer
    handles = [model.attention(i) for i in range(n_layer)]
    keys, values = [None] * n_layer, [None] * n_layer
    start = 0
    with torch.no_grad():
        for size in chunks:
            x = tr.wte(idx[:, start : start + size]) + tr.wpe(torch.arange(start, start + size))
            for i, block in enumerate(tr.h):
                prefix = f"transformer.h.{i}.attn."
                h = block.ln_1(x).float()
                called = message(
                    "lesson06.called_chunk_layer",
                    model=model.text,
                    layer=i,
                    first=start,
                    last=start + size - 1,
                    P=start,
                )
                past_k = None if keys[i] is None else keys[i].float()
                past_v = None if values[i] is None else values[i].float()
                with hinted(*ALIGN_HINTS, own="cache-alignment", called=called):
                    result = submission.call(
                        function(submission, "cached_attention"), handles[i], h, past_k, past_v
                    )
                expected = given_kv(model.state, nh, h, result, prefix)
                if expected is not None:
                    problems = _judge_attention(result[0], expected, model.state, nh, h, result, prefix)
                    if problems is not None:
                        head = (
                            message("lesson06.prefill_wrong")
                            if start == 0
                            else message(
                                "lesson06.chunk_layer_wrong",
                                layer=i,
                                first=start,
                                last=start + size - 1,
                                P=start,
                            )
                        )
                        fail(called, head, *problems)
                a, keys[i], values[i] = ref.attend(
                    model.state, h.double(), keys[i], values[i], nh, prefix=prefix
                )
                x = x + a
                x = x + block.mlp(block.ln_2(x))
            start += size
