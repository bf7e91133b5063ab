"""Hidden checks of the KV cache (TODOs kv-cache and cache-alignment).

cached_attention runs on lesson 03's reference attention, forward_cached and generate on
lesson 04's reference GPT, both built in the worker with weights the grader draws. Expected
values come from the float64 reference here: the full forward pass of the same GPT (the
cache must not change a single logit beyond atol 1e-5) and an explicit cached attention.

Each TODO's checks leave the other's code out of the verdict:
- kv-cache judges the keys and values cached_attention returns (the mask plays no part in
  them), the cache's contents with the value weights of every layer but the last at 0 (so no
  layer's input depends on a mask), and the logits and tokens of forward_cached and generate
  with the real weights when the learner's mask is right, else with every layer's values at 0
  (each attention output is then its bias, whatever the mask);
- cache-alignment judges the output of cached_attention against the reference attention over
  the keys and values it returned itself (so a slip in TODO [kv-cache] plays no part), in the
  reference attention and in every layer of the GPT;
- generate with the cache is tried past block_size only where the learner's crop_context gives
  the reference crop (TODO [crop-context]).
Where tensors are made, the meta device (shapes without data) shows one born on the CPU.
"""

from __future__ import annotations

import pytest
import torch

from autograder.core.results import Block, message
from autograder.engine.checks import fail
from autograder.engine.feedback import ATOL, RTOL, compare, heatmap
from autograder.engine.grader_helpers import config_text, generator, tokens
from autograder.sandbox.client import StudentError

from . import reference as ref
from .harness import (
    ATTN_CFG,
    CACHE_HINTS,
    CROP_HINTS,
    DEVICE_HINTS,
    GPT_CFG,
    WorkerAttention,
    WorkerGPT,
    alignment_agrees,
    cache_feeds,
    close,
    crop_agrees,
    draw_seed,
    expect_logits,
    function,
    generate_sampled,
    given_kv,
    hinted,
    judge_sampled,
    learner_crop,
    raised_in,
)

B = 2


def _diagnose(actual: torch.Tensor, candidates) -> list:
    """The message of the first (candidate, key) whose candidate `actual` matches; a candidate
    may be a callable, computed only when the ones before it did not match."""
    for candidate, key in candidates:
        value = candidate() if callable(candidate) else candidate
        if value is not None and close(actual, value):
            return [message(key)]
    return []


# ---------------------------------------------------------------- cached_attention


def _attention_called(attn: WorkerAttention, x: torch.Tensor, past: int, device: str = "cpu"):
    called = message(
        "lesson06.called_cached_attention",
        cfg=config_text(attn.cfg),
        shape=tuple(x.shape),
        past=past,
        past_shape=(x.shape[0], attn.n_head, past, attn.cfg["n_embd"] // attn.n_head),
    )
    return called if device == "cpu" else message("lesson06.called_on_device", called=called, device=device)


def cached(
    submission, attn: WorkerAttention, x, past_k, past_v, own: str, hints=CACHE_HINTS, device: str = "cpu"
):
    """The learner's cached_attention(attn, x, past_k, past_v) as (y, k, v), checked to be three tensors."""
    past = 0 if past_k is None else past_k.shape[2]
    called = _attention_called(attn, x, past, device)
    with hinted(*hints, own=own, called=called):
        result = submission.call(function(submission, "cached_attention"), attn.handle, x, past_k, past_v)
    if not (
        isinstance(result, (tuple, list))
        and len(result) == 3
        and all(isinstance(t, torch.Tensor) for t in result)
    ):
        got = type(result).__name__ + (f"[{len(result)}]" if isinstance(result, (tuple, list)) else "")
        fail(called, message("lesson06.not_a_triple", got=got))
    return tuple(result), called


def _expect_kv(
    got: torch.Tensor, expected: torch.Tensor, which: str, called, x, past_k, past_v, attn
) -> None:
    S, new = expected.shape[2], x.shape[1]
    if got.device.type != "cpu":
        fail(
            called,
            message(
                "lesson06.not_a_tensor",
                what=message("lesson06.what_kv", which=which),
                got=f"Tensor(device={got.device.type})",
            ),
        )
    if tuple(got.shape) != tuple(expected.shape):
        hint = None
        if tuple(got.shape) == (*expected.shape[:2], new, expected.shape[3]):
            hint = message("lesson06.diag_cache_not_grown")
        elif (
            got.dim() == 4
            and tuple(got.shape[2:]) == (new, expected.shape[3])
            and got.shape[1] != expected.shape[1]
        ):
            hint = message("lesson06.hint_cat_dim")
        fail(
            called,
            message(
                "lesson06.kv_shape", which=which, got=tuple(got.shape), expected=tuple(expected.shape), S=S
            ),
            hint,
        )
    problem = compare(
        got, expected.float(), what=message("lesson06.what_kv", which=which), atol=ATOL, rtol=RTOL
    )
    if problem:
        diagnoses = []
        if past_k is not None:
            _, k_rev, v_rev = attn.expected(x, past_k, past_v, order="new_first")
            other = past_v if which == "k" else past_k
            diagnoses = [
                (k_rev if which == "k" else v_rev, "lesson06.diag_cache_order"),
                (
                    torch.cat((other, attn.expected(x, None, None)[1 if which == "k" else 2].float()), dim=2),
                    "lesson06.diag_cache_swapped",
                ),
            ]
        fail(called, problem, *_diagnose(got, diagnoses))


@pytest.mark.check("cache-attention")
def test_cache_attention(submission, check_seed):
    """One new token with an empty cache and after cached ones, B = 2 and B = 1: the keys and
    values returned are the cached ones followed by the new token's (they do not depend on the
    mask, which TODO [cache-alignment] checks)."""
    gen = generator(check_seed)
    attn = WorkerAttention(submission, gen)
    C = ATTN_CFG["n_embd"]
    for batch, past in ((B, 0), (B, 5), (1, 3)):
        x = torch.randn(batch, 1, C, generator=gen)
        past_k = past_v = None
        if past:
            _, past_k, past_v = attn.past(batch, past, gen)
        (y, k, v), called = cached(submission, attn, x, past_k, past_v, own="kv-cache")
        _, exp_k, exp_v = attn.expected(x, past_k, past_v)
        _expect_kv(k, exp_k, "k", called, x, past_k, past_v, attn)
        _expect_kv(v, exp_v, "v", called, x, past_k, past_v, attn)


# ---------------------------------------------------------------- forward_cached


class Cached:
    """A learner's KVCache in the worker, fed through the learner's forward_cached."""

    def __init__(self, submission, model: WorkerGPT) -> None:
        self.sub, self.model = submission, model
        self.handle = submission.call(function(submission, "KVCache"), model.cfg["n_layer"])
        self.fed: list[int] = []

    def feed(self, idx_new: torch.Tensor, called) -> torch.Tensor:
        with hinted(*CACHE_HINTS, own="kv-cache", called=called):
            out = self.sub.call(function(self.sub, "forward_cached"), self.model.handle, idx_new, self.handle)
        self.fed.append(idx_new.shape[1])
        return expect_logits(out, (idx_new.shape[0], idx_new.shape[1], self.model.cfg["vocab_size"]), called)


def _feed_called(model: WorkerGPT, idx: torch.Tensor, chunks: list[int]):
    return message(
        "lesson06.called_forward_cached",
        model=model.text,
        shape=tuple(idx.shape),
        chunks=" + ".join(str(c) for c in chunks),
    )


def _cache_on_meta(submission, gen) -> None:
    """forward_cached on a GPT moved to the meta device, a prefill of 3 tokens and then one:
    the positions that reach wpe must be on idx_new's device, and so must the logits."""
    model = WorkerGPT(submission, gen)
    submission.call(model.handle, "meta", method="to")
    method = model.attach("forward_cached")
    cache = submission.call(function(submission, "KVCache"), model.cfg["n_layer"])
    for T in (3, 1):
        idx = torch.empty(1, T, dtype=torch.long, device="meta")
        called = message("lesson06.called_forward_cached_meta", model=model.text, T=T)
        try:
            with hinted(*DEVICE_HINTS, *CACHE_HINTS, own="kv-cache", called=called):
                traced = submission.call_traced(
                    model.handle, model.handle, idx, cache, method=method, capture=("transformer.wpe",)
                )
        except StudentError as err:
            if raised_in(err) == "cache-alignment":
                return  # the mask is not made on x's device: TODO [cache-alignment]'s checks say so
            raise
        for seen in traced["captured"]:
            if isinstance(seen, torch.Tensor) and seen.device.type != "meta":
                fail(called, message("lesson06.positions_wrong_device", got=seen.device.type, device="meta"))
        out = traced["value"]
        if not isinstance(out, torch.Tensor) or out.device.type != "meta":
            got = f"Tensor(device={out.device.type})" if isinstance(out, torch.Tensor) else type(out).__name__
            fail(called, message("lesson06.not_a_tensor", what=message("lesson06.what_logits_meta"), got=got))
        if tuple(out.shape) != (1, T, model.cfg["vocab_size"]):
            fail(
                called,
                message(
                    "lesson06.shape_wrong",
                    what=message("lesson06.what_logits"),
                    got=tuple(out.shape),
                    expected=(1, T, model.cfg["vocab_size"]),
                ),
            )


@pytest.mark.check("cache-state")
def test_cache_state(submission, check_seed):
    """After four single tokens (B = 1) the cache holds, per layer, their keys and values in
    order. The value weights of every layer but the last are 0, so no layer's keys depend on
    a mask (TODO [cache-alignment]); the last layer's values vary from token to token. Then
    forward_cached on the meta device: positions made where idx_new is."""
    gen = generator(check_seed)
    n_layer = GPT_CFG["n_layer"]
    model = WorkerGPT(submission, gen, blind=tuple(range(n_layer - 1)), why="lesson06.model_blind_state")
    idx = tokens(1, 4, GPT_CFG["vocab_size"], gen)
    chunks = [1, 1, 1, 1]
    called = _feed_called(model, idx, chunks)
    cache = Cached(submission, model)
    for t in range(4):
        cache.feed(idx[:, t : t + 1], called)
    length = submission.getattr(cache.handle, "length")
    if length != 4:
        fail(called, message("lesson06.cache_length", got=repr(length), expected=4))
    _, exp_keys, exp_values = ref.walk(model.trusted, idx, chunks)
    _, rev_keys, rev_values = ref.walk(model.trusted, idx, chunks, order="new_first")
    _, zero_keys, zero_values = ref.walk(model.trusted, idx, chunks, positions="zero")
    for name, expected, reversed_, zero in (
        ("keys", exp_keys, rev_keys, zero_keys),
        ("values", exp_values, rev_values, zero_values),
    ):
        got = submission.getattr(cache.handle, name)
        if not isinstance(got, list) or len(got) != len(expected):
            fail(
                called,
                message(
                    "lesson06.cache_layers",
                    name=name,
                    n_layer=len(expected),
                    got=type(got).__name__ + (f"[{len(got)}]" if isinstance(got, (list, tuple)) else ""),
                ),
            )
        for layer, (g, e, r, z) in enumerate(zip(got, expected, reversed_, zero)):
            what = message("lesson06.what_cache_entry", name=name, layer=layer)
            if not isinstance(g, torch.Tensor) or g.device.type != "cpu":
                got_text = (
                    f"Tensor(device={g.device.type})" if isinstance(g, torch.Tensor) else type(g).__name__
                )
                fail(called, message("lesson06.not_a_tensor", what=what, got=got_text))
            if tuple(g.shape) == (*e.shape[:2], 1, e.shape[3]):
                fail(
                    called,
                    message(
                        "lesson06.kv_shape",
                        which=f"cache.{name}[{layer}]",
                        got=tuple(g.shape),
                        expected=tuple(e.shape),
                        S=4,
                    ),
                    message("lesson06.diag_cache_not_grown"),
                )
            problem = compare(g, e.float(), what=what, atol=ATOL, rtol=RTOL)
            if problem:
                fail(
                    called,
                    problem,
                    *_diagnose(g, [(r, "lesson06.diag_cache_order"), (z, "lesson06.diag_positions_zero")]),
                )
    _cache_on_meta(submission, gen)


def _variant(model: WorkerGPT, idx, chunks, index: int, **options):
    """A callable for _diagnose: chunk `index`'s logits under a recognisable bug."""
    return lambda: ref.walk(
        model.trusted, idx[:, : sum(chunks[: index + 1])], chunks[: index + 1], **options
    )[0][index]


def _cache_model(submission, gen) -> WorkerGPT:
    """The GPT for the kv-cache checks of logits and tokens: the real weights when the
    learner's mask is right, else every layer's values at 0 (then the mask changes nothing)."""
    right = alignment_agrees(submission, gen)
    return WorkerGPT(submission, gen, blind=() if right else tuple(range(GPT_CFG["n_layer"])))


@pytest.mark.check("cache-one-token")
def test_cache_one_token(submission, check_seed):
    """block_size tokens fed one at a time: every step's logits equal the full forward's."""
    gen = generator(check_seed)
    model = _cache_model(submission, gen)
    bs = GPT_CFG["block_size"]
    idx = tokens(B, bs, GPT_CFG["vocab_size"], gen)
    chunks = [1] * bs
    called = _feed_called(model, idx, chunks)
    full = model.full_logits(idx)
    cache = Cached(submission, model)
    for t in range(bs):
        logits = cache.feed(idx[:, t : t + 1], called)
        problem = compare(
            logits,
            full[:, t : t + 1].float(),
            what=message("lesson06.what_step_logits", t=t),
            atol=ATOL,
            rtol=RTOL,
        )
        if problem:
            fail(
                called,
                message("lesson06.one_token_wrong", t=t),
                problem,
                *_diagnose(
                    logits,
                    [
                        (_variant(model, idx, chunks, t, **options), key)
                        for key, options in (
                            ("lesson06.diag_positions_zero", {"positions": "zero"}),
                            ("lesson06.diag_ignores_past", {"order": "no_past"}),
                        )
                    ],
                ),
            )


@pytest.mark.check("cache-generate")
def test_cache_generate(submission, check_seed):
    """generate with the cache: the same tokens as the full forward with the same generator
    seed (temperature 1, so sample_next's own TODOs play no part), from a prompt that never
    needs cropping, past block_size (the cache must be rebuilt), from a prompt longer than
    block_size, from one token (B = 1) and from exactly block_size; and the cache is reused:
    after the prefill, each step feeds the model one token while the cache has room. The cases
    that crop run only where crop_context gives the reference crop (TODO [crop-context])."""
    gen = generator(check_seed)
    model = _cache_model(submission, gen)
    bs, V = GPT_CFG["block_size"], GPT_CFG["vocab_size"]
    for batch, T, steps in ((B, 4, bs - 4), (B, 3, bs + 2), (B, bs + 3, 4), (1, 1, bs + 1), (B, bs, 2)):
        idx = tokens(batch, T, V, gen)
        window = None
        if not crop_agrees(submission, batch, range(T, T + steps), bs, V, gen):
            # Judged with the learner's own crop of the prompt, where nothing else is cropped.
            window = learner_crop(submission, idx, bs) if T + steps - 1 <= bs else None
            if window is None:
                continue
        seed = draw_seed(gen)
        fed: list[int] = []
        out, called = generate_sampled(
            submission,
            model,
            idx,
            steps,
            use_cache=True,
            seed=seed,
            hints=CACHE_HINTS + CROP_HINTS,
            own="kv-cache",
            fed=fed,
        )
        judge_sampled(
            model,
            idx,
            out,
            seed,
            called,
            extra=(message("lesson06.cache_generate_hint", bs=bs),),
            window=window,
        )
        expected = cache_feeds(T if window is None else window.shape[1], steps, bs)
        if fed != expected:
            growing = [min(T + s, bs) for s in range(steps)]
            diagnosis = message("lesson06.diag_cache_rebuilt") if fed == growing else None
            fail(
                called,
                message("lesson06.cache_not_reused", got=str(fed), expected=str(expected), bs=bs),
                diagnosis,
                message("lesson06.cache_generate_hint", bs=bs),
            )


# ---------------------------------------------------------------- TODO [cache-alignment]


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
    diagnoses = _diagnose(
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
