"""Hidden checks of the KV cache (TODOs kv-cache and cache-alignment).

cached_attention runs on lesson 03's reference attention, forward_cached and generate on
lesson 04's reference GPT, both built in the worker with weights the grader draws. Expected
values come from the float64 reference here: the full forward pass of the same GPT (the
cache must not change a single logit beyond atol 1e-5) and an explicit cached attention.
The kv-cache checks feed ONE new token at a time, where a causal mask has nothing to hide;
the cache-alignment checks feed several new tokens after a non-empty cache, where the mask
must be aligned to the bottom-right corner (is_causal=True aligns it to the top-left).
"""

from __future__ import annotations

import pytest
import torch

from autograder.checks import fail
from autograder.feedback import compare, heatmap
from autograder.results import Block, message

from . import reference as ref
from .harness import (
    ATOL,
    ATTN_CFG,
    CACHE_HINTS,
    CROP_HINTS,
    GPT_CFG,
    RTOL,
    WorkerAttention,
    WorkerGPT,
    draw_seed,
    expect_logits,
    function,
    generate_sampled,
    generator,
    hinted,
    judge_sampled,
    tokens,
)

B = 2


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return tuple(a.shape) == tuple(b.shape) and bool(torch.allclose(a.double(), b.double(), atol=1e-4, rtol=1e-4))


def _diagnose(actual: torch.Tensor, candidates) -> list:
    """The message of the first (candidate, key) whose candidate `actual` matches; a candidate
    may be a callable, computed only when the ones before it did not match."""
    for candidate, key in candidates:
        value = candidate() if callable(candidate) else candidate
        if value is not None and _close(actual, value):
            return [message(key)]
    return []


# ---------------------------------------------------------------- cached_attention


def _attention_called(attn: WorkerAttention, x: torch.Tensor, past: int):
    return message("lesson06.called_cached_attention", cfg=", ".join(f"{k}={v}" for k, v in attn.cfg.items()),
                   shape=tuple(x.shape), past=past, past_shape=(x.shape[0], attn.n_head, past,
                                                                 attn.cfg["n_embd"] // attn.n_head))


def cached(submission, attn: WorkerAttention, x, past_k, past_v) -> tuple:
    """The learner's cached_attention(attn, x, past_k, past_v) as (y, k, v), checked to be three tensors."""
    past = 0 if past_k is None else past_k.shape[2]
    called = _attention_called(attn, x, past)
    with hinted(*CACHE_HINTS):
        result = submission.call(function(submission, "cached_attention"), attn.handle, x, past_k, past_v)
    if not (isinstance(result, (tuple, list)) and len(result) == 3 and all(isinstance(t, torch.Tensor) for t in result)):
        got = type(result).__name__ + (f"[{len(result)}]" if isinstance(result, (tuple, list)) else "")
        fail(called, message("lesson06.not_a_triple", got=got))
    return tuple(result), called


def _expect_kv(got: torch.Tensor, expected: torch.Tensor, which: str, called, x, past_k, past_v, attn) -> None:
    S, new = expected.shape[2], x.shape[1]
    if tuple(got.shape) != tuple(expected.shape):
        hint = None
        if tuple(got.shape) == (*expected.shape[:2], new, expected.shape[3]):
            hint = message("lesson06.diag_cache_not_grown")
        fail(called, message("lesson06.kv_shape", which=which, got=tuple(got.shape), expected=tuple(expected.shape),
                             S=S), hint)
    problem = compare(got, expected.float(), what=message("lesson06.what_kv", which=which), atol=ATOL, rtol=RTOL)
    if problem:
        _, k_rev, v_rev = attn.expected(x, past_k, past_v, order="new_first")
        reversed_ = k_rev if which == "k" else v_rev
        fail(called, problem, *_diagnose(got, [(reversed_, "lesson06.diag_cache_order")]))


@pytest.mark.check("cache-attention")
def test_cache_attention(submission, check_seed):
    """One new token: with an empty cache, and after five cached tokens (y, k and v)."""
    gen = generator(check_seed)
    attn = WorkerAttention(submission, gen)
    C = ATTN_CFG["n_embd"]
    for past in (0, 5):
        x = torch.randn(B, 1, C, generator=gen)
        past_k = past_v = None
        if past:
            _, past_k, past_v = attn.past(B, past, gen)
        (y, k, v), called = cached(submission, attn, x, past_k, past_v)
        exp_y, exp_k, exp_v = attn.expected(x, past_k, past_v)
        _expect_kv(k, exp_k, "k", called, x, past_k, past_v, attn)
        _expect_kv(v, exp_v, "v", called, x, past_k, past_v, attn)
        problem = compare(y, exp_y.float(), what=message("lesson06.what_attention_out"), atol=ATOL, rtol=RTOL)
        if problem:
            diagnoses = [(lambda: attn.expected(x, past_k, past_v, align="top_left")[0] if past else None,
                          "lesson06.diag_top_left_one"),
                         (lambda: attn.expected(x, past_k, past_v, order="no_past")[0] if past else None,
                          "lesson06.diag_ignores_past")]
            fail(called, problem, *_diagnose(y, diagnoses))


# ---------------------------------------------------------------- forward_cached


class Cached:
    """A learner's KVCache in the worker, fed through the learner's forward_cached."""

    def __init__(self, submission, model: WorkerGPT) -> None:
        self.sub, self.model = submission, model
        self.handle = submission.call(function(submission, "KVCache"), model.cfg["n_layer"])
        self.fed: list[int] = []

    def feed(self, idx_new: torch.Tensor, called) -> torch.Tensor:
        with hinted(*CACHE_HINTS):
            out = self.sub.call(function(self.sub, "forward_cached"), self.model.handle, idx_new, self.handle)
        self.fed.append(idx_new.shape[1])
        return expect_logits(out, (idx_new.shape[0], idx_new.shape[1], self.model.cfg["vocab_size"]), called)


def _feed_called(model: WorkerGPT, idx: torch.Tensor, chunks: list[int]):
    return message("lesson06.called_forward_cached", model=model.text, shape=tuple(idx.shape),
                   chunks=" + ".join(str(c) for c in chunks))


@pytest.mark.check("cache-state")
def test_cache_state(submission, check_seed):
    """After four single tokens the cache holds, per layer, their keys and values in order."""
    gen = generator(check_seed)
    model = WorkerGPT(submission, gen)
    idx = tokens(B, 4, GPT_CFG["vocab_size"], gen)
    chunks = [1, 1, 1, 1]
    called = _feed_called(model, idx, chunks)
    cache = Cached(submission, model)
    for t in range(4):
        cache.feed(idx[:, t:t + 1], called)
    length = submission.getattr(cache.handle, "length")
    if length != 4:
        fail(called, message("lesson06.cache_length", got=repr(length), expected=4))
    _, exp_keys, exp_values = ref.walk(model.trusted, idx, chunks)
    _, rev_keys, rev_values = ref.walk(model.trusted, idx, chunks, order="new_first")
    _, zero_keys, zero_values = ref.walk(model.trusted, idx, chunks, positions="zero")
    _, left_keys, left_values = ref.walk(model.trusted, idx, chunks, align="top_left")
    for name, expected, reversed_, zero, left in (("keys", exp_keys, rev_keys, zero_keys, left_keys),
                                                  ("values", exp_values, rev_values, zero_values, left_values)):
        got = submission.getattr(cache.handle, name)
        if not isinstance(got, list) or len(got) != len(expected):
            fail(called, message("lesson06.cache_layers", name=name, n_layer=len(expected),
                                 got=type(got).__name__ + (f"[{len(got)}]" if isinstance(got, (list, tuple)) else "")))
        for layer, (g, e, r, z, lt) in enumerate(zip(got, expected, reversed_, zero, left)):
            what = message("lesson06.what_cache_entry", name=name, layer=layer)
            if not isinstance(g, torch.Tensor):
                fail(called, message("lesson06.not_a_tensor", what=what, got=type(g).__name__))
            if tuple(g.shape) == (*e.shape[:2], 1, e.shape[3]):
                fail(called, message("lesson06.kv_shape", which=f"cache.{name}[{layer}]", got=tuple(g.shape),
                                     expected=tuple(e.shape), S=4), message("lesson06.diag_cache_not_grown"))
            problem = compare(g, e.float(), what=what, atol=ATOL, rtol=RTOL)
            if problem:
                fail(called, problem, *_diagnose(g, [(r, "lesson06.diag_cache_order"),
                                                     (z, "lesson06.diag_positions_zero"),
                                                     (lt, "lesson06.diag_top_left_model")]))


def _variant(model: WorkerGPT, idx, chunks, index: int, **options):
    """A callable for _diagnose: chunk `index`'s logits under a recognisable bug."""
    return lambda: ref.walk(model.trusted, idx[:, :sum(chunks[:index + 1])], chunks[:index + 1], **options)[0][index]


@pytest.mark.check("cache-one-token")
def test_cache_one_token(submission, check_seed):
    """block_size tokens fed one at a time: every step's logits equal the full forward's."""
    gen = generator(check_seed)
    model = WorkerGPT(submission, gen)
    bs = GPT_CFG["block_size"]
    idx = tokens(B, bs, GPT_CFG["vocab_size"], gen)
    chunks = [1] * bs
    called = _feed_called(model, idx, chunks)
    full = model.full_logits(idx)
    cache = Cached(submission, model)
    for t in range(bs):
        logits = cache.feed(idx[:, t:t + 1], called)
        problem = compare(logits, full[:, t:t + 1].float(), what=message("lesson06.what_step_logits", t=t),
                          atol=ATOL, rtol=RTOL)
        if problem:
            fail(called, message("lesson06.one_token_wrong", t=t), problem,
                 *_diagnose(logits, [(_variant(model, idx, chunks, t, **options), key) for key, options in (
                     ("lesson06.diag_positions_zero", {"positions": "zero"}),
                     ("lesson06.diag_top_left_model", {"align": "top_left"}),
                     ("lesson06.diag_ignores_past", {"order": "no_past"}))]))


@pytest.mark.check("cache-generate")
def test_cache_generate(submission, check_seed):
    """generate with the cache: the same tokens as the full forward with the same generator
    seed (temperature 1, so sample_next's own TODOs play no part), past block_size (the cache
    must be rebuilt) and from a prompt longer than block_size."""
    gen = generator(check_seed)
    model = WorkerGPT(submission, gen)
    bs = GPT_CFG["block_size"]
    for T, steps in ((3, bs + 2), (bs + 3, 4)):
        idx = tokens(B, T, GPT_CFG["vocab_size"], gen)
        seed = draw_seed(gen)
        out, called = generate_sampled(submission, model, idx, steps, use_cache=True, seed=seed,
                                       hints=CACHE_HINTS + CROP_HINTS)
        judge_sampled(model, idx, out, seed, called, extra=(message("lesson06.cache_generate_hint", bs=bs),))


# ---------------------------------------------------------------- TODO [cache-alignment]


def _influence(submission, attn: WorkerAttention, x, past_k, past_v, gen) -> torch.Tensor:
    """(T, S): how much output i moves when key/value j alone changes (one batched call).
    Cached tokens j change through their value, new tokens through their input."""
    P, T = past_k.shape[2], x.shape[1]
    S = P + T
    xb, kb, vb = x.repeat(S + 1, 1, 1), past_k.repeat(S + 1, 1, 1, 1), past_v.repeat(S + 1, 1, 1, 1)
    for j in range(S):
        if j < P:
            vb[j + 1, :, j] += torch.randn(vb.shape[1], vb.shape[3], generator=gen)
        else:
            xb[j + 1, j - P] += torch.randn(x.shape[-1], generator=gen)
    (y, _, _), _ = cached(submission, attn, xb, kb, vb)
    if tuple(y.shape) != tuple(xb.shape):
        return None
    return (y[1:] - y[:1]).abs().amax(dim=-1).T  # [i, j]


def _visibility_block(see: torch.Tensor) -> Block:
    lines = ["i\\j " + " ".join(str(j % 10) for j in range(see.shape[1]))]
    for i in range(see.shape[0]):
        lines.append(f"{i:>3} " + " ".join("1" if v else "·" for v in see[i].tolist()))
    return Block("\n".join(lines) + "\n", kind="heatmap")


@pytest.mark.check("chunk-attention")
def test_chunk_attention(submission, check_seed):
    """Several new tokens: a prefill (empty cache), then three tokens after five cached ones.
    A failure shows which keys each new query really sees."""
    gen = generator(check_seed)
    attn = WorkerAttention(submission, gen)
    C, P, T = ATTN_CFG["n_embd"], 5, 3
    x_all = torch.randn(1, P + T, C, generator=gen)
    (y, _, _), called = cached(submission, attn, x_all, None, None)
    exp_y, _, _ = attn.expected(x_all, None, None)
    problem = compare(y, exp_y.float(), what=message("lesson06.what_attention_out"), atol=ATOL, rtol=RTOL)
    if problem:
        fail(called, message("lesson06.prefill_wrong"), problem,
             *_diagnose(y, [(lambda: attn.expected(x_all, None, None, align="none")[0], "lesson06.diag_no_mask")]))
    _, past_k, past_v = ref.project(attn.state, x_all[:, :P], attn.n_head)
    past_k, past_v = past_k.float(), past_v.float()
    x = x_all[:, P:]
    (y, _, _), called = cached(submission, attn, x, past_k, past_v)
    exp_y, _, _ = attn.expected(x, past_k, past_v)
    problem = compare(y, exp_y.float(), what=message("lesson06.what_attention_out"), atol=ATOL, rtol=RTOL)
    if not problem:
        return
    see = ref.visible(T, P + T)
    parts = [called, message("lesson06.chunk_attention_wrong", P=P, T=T, last=P + T - 1), problem]
    parts += _diagnose(y, [(lambda: attn.expected(x, past_k, past_v, align="top_left")[0], "lesson06.diag_top_left"),
                           (lambda: attn.expected(x, past_k, past_v, align="none")[0], "lesson06.diag_no_mask"),
                           (lambda: attn.expected(x, past_k, past_v, order="new_first")[0], "lesson06.diag_cache_order"),
                           (lambda: attn.expected(x, past_k, past_v, order="no_past")[0], "lesson06.diag_ignores_past")])
    influence = _influence(submission, attn, x, past_k, past_v, gen)
    if influence is not None and torch.isfinite(influence).all():
        moved = influence > 1e-5
        leaks = moved & ~see
        blind = ~moved & see
        parts += [message("lesson06.influence_title"),
                  heatmap((influence / influence.max().clamp_min(1e-12)).numpy(), leaks=leaks.numpy()),
                  message("lesson06.influence_legend", leaks=int(leaks.sum()), blind=int(blind.sum())),
                  message("lesson06.visible_title", last=P - 1), _visibility_block(see)]
    fail(*parts)


@pytest.mark.check("chunk-logits")
def test_chunk_logits(submission, check_seed):
    """forward_cached with chunks of 4, 3 and 3 tokens: the logits of the full forward."""
    gen = generator(check_seed)
    model = WorkerGPT(submission, gen)
    bs = GPT_CFG["block_size"]
    idx = tokens(B, bs, GPT_CFG["vocab_size"], gen)
    chunks = [4, 3, 3]
    called = _feed_called(model, idx, chunks)
    full = model.full_logits(idx)
    cache = Cached(submission, model)
    start = 0
    for size in chunks:
        logits = cache.feed(idx[:, start:start + size], called)
        problem = compare(logits, full[:, start:start + size].float(),
                          what=message("lesson06.what_chunk_logits", first=start, last=start + size - 1),
                          atol=ATOL, rtol=RTOL)
        if problem:
            index = len(cache.fed) - 1
            head = (message("lesson06.prefill_wrong") if start == 0 else
                    message("lesson06.chunk_wrong", first=start, last=start + size - 1, P=start))
            fail(called, head, problem, *_diagnose(logits, [(_variant(model, idx, chunks, index, **options), key)
                                                            for key, options in (
                ("lesson06.diag_top_left", {"align": "top_left"}),
                ("lesson06.diag_no_mask", {"align": "none"}),
                ("lesson06.diag_cache_order", {"order": "new_first"}),
                ("lesson06.diag_positions_zero", {"positions": "zero"}),
                ("lesson06.diag_ignores_past", {"order": "no_past"}))]))
        start += size
