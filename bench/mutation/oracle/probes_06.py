"""Lesson 06 (generate.py) probes: sample_next, crop_context, the KV cache (cached_attention,
forward_cached) and generate, on the lesson-04 GPT and lesson-03 attention found under the
same root.

Probe space:
- sample_next on logits (64, V) for V = 7 and V = 1000: temperature in {0, 0 as an int, 0.3,
  0.7, 1 as an int, 1.5, 3}; top_k in {None, 1, 3, 50, V - 1, V, V + 5}; logits with ties for
  top-k; a torch.Generator with seeds 0, 1, 2, and generator=None under torch.manual_seed.
  Outputs: the indices (values, dtype, shape), the generator's next draw (greedy must not
  draw), the logits left untouched.
- crop_context: T in {3, 8, 13} against block_size 8, and block_size 1.
- cached_attention with an attention of (n_embd 12, n_head 3, block_size 10, dropout 0.2):
  no past and T = 4; past 3 and T = 1; past 3 and T = 4 (the alignment trap); past 5 and
  T = 2; eval, and train under a fixed torch seed. Outputs: y, and k and v of every token.
  On the meta device: the mask it builds must follow x.
- forward_cached on GPTs (11, 10, 2, 3, 12, dropout 0.1) and (11, 10, 3, 2, 10, 0.1) as
  (vocab, block_size, n_layer, n_head, n_embd, dropout): a prefill of 4, then 1, then 3, then 2
  tokens (to block_size), then one more (the provided assert); eval and train under a fixed
  seed. Outputs: logits, the cache's length and its keys and values after each call, and (eval)
  whether the logits agree with the full forward pass's (atol 1e-5).
- generate on GPTs (11, 8, 2, 3, 12, dropout 0.1) and (11, 8, 3, 2, 10, 0.1) left in train
  mode: prompts (2, 3), (2, 4), (2, 5) and (1, 10) (longer than block_size), max_new_tokens in
  {0, 1, 6, 7, 9, 12} (past block_size, so the cache is rebuilt), temperature {0, 0.3, 1, 1.5},
  top_k {None, 1, 3, 5, V}, use_cache True and False, a seeded torch.Generator and
  generator=None under torch.manual_seed. Outputs: the tokens, the prompt untouched, the
  model's mode afterwards, the generator's next draw, the input shape of every forward_cached
  call and every full forward call, and whether the cache gives the same tokens as
  use_cache=False with the same generator.
"""

from __future__ import annotations

import sys

import torch

from bench.mutation.oracle.probe import patch
from bench.mutation.oracle.probing import SEEDS, capture_inputs, gen, load_modules, next_draw


def load(folder):
    lesson = load_modules(folder, ["generate"])
    lesson.model = sys.modules["model"]
    lesson.attention = sys.modules["attention"]
    return lesson


def _logits(v, seed, kind="normal"):
    g = gen(seed + 500)
    if kind == "ties":
        return torch.randint(0, 4, (64, v), generator=g).float()
    return torch.randn(64, v, generator=g) * 2


def probe_sample(v, temperature, top_k, seed, use_generator, kind, lesson, out):
    logits = _logits(v, seed, kind)
    before = logits.clone()
    if use_generator:
        g = gen(seed)
        idx = lesson.generate.sample_next(logits, temperature=temperature, top_k=top_k, generator=g)
        out["next-draw"] = next_draw(g)
    else:
        torch.manual_seed(seed + 40)
        idx = lesson.generate.sample_next(logits, temperature=temperature, top_k=top_k)
        out["next-draw"] = next_draw()
    out["idx"] = idx
    out["logits untouched"] = torch.equal(logits, before)


def probe_sample_defaults(lesson, out):
    g = gen(3)
    out["idx"] = lesson.generate.sample_next(_logits(7, 3), generator=g)
    out["next-draw"] = next_draw(g)


def probe_crop(lesson, out):
    for t in (3, 8, 13):
        idx = torch.arange(2 * t).view(2, t) + 100
        out[f"T={t}"] = lesson.generate.crop_context(idx, 8)
        out[f"T={t} block_size=1"] = lesson.generate.crop_context(idx, 1)


def _attention(lesson, seed):
    cfg = lesson.attention.AttentionConfig(n_embd=12, n_head=3, block_size=10, dropout=0.2)
    torch.manual_seed(seed)
    return lesson.attention.CausalSelfAttention(cfg)


def probe_cached_attention(past, t, train, seed, lesson, out):
    attn = _attention(lesson, seed)
    attn.train(train)
    x = torch.randn(2, t, 12, generator=gen(seed + 1))
    if past:
        past_k = torch.randn(2, 3, past, 4, generator=gen(seed + 2))
        past_v = torch.randn(2, 3, past, 4, generator=gen(seed + 3))
    else:
        past_k = past_v = None
    torch.manual_seed(seed + 4)
    y, k, v = lesson.generate.cached_attention(attn, x, past_k, past_v)
    out["y"] = y
    out["k"] = k
    out["v"] = v


def probe_cached_attention_meta(lesson, out):
    attn = _attention(lesson, 0).to("meta").eval()
    x = torch.zeros(2, 2, 12, device="meta")
    past = torch.zeros(2, 3, 3, 4, device="meta")
    y, k, v = lesson.generate.cached_attention(attn, x, past, past)
    out["shapes"] = [tuple(y.shape), tuple(k.shape), tuple(v.shape)]
    out["devices"] = [y.device.type, k.device.type, v.device.type]


# (n_layer, n_head, n_embd): n_head > n_layer, and n_head < n_layer with n_embd not a power of 2.
SHAPES = {"L=2 nh=3": (2, 3, 12), "L=3 nh=2": (3, 2, 10)}


def _gpt(lesson, block_size, seed, shape="L=2 nh=3"):
    n_layer, n_head, n_embd = SHAPES[shape]
    torch.manual_seed(seed)
    cfg = lesson.model.GPTConfig(
        vocab_size=11, block_size=block_size, n_layer=n_layer, n_head=n_head, n_embd=n_embd, dropout=0.1
    )
    return lesson.model.GPT(cfg)


def probe_forward_cached(train, shape, lesson, out):
    model = _gpt(lesson, 10, 5, shape)
    model.train(train)
    cache = lesson.generate.KVCache(len(model.transformer.h))
    out["empty length"] = cache.length
    idx = torch.randint(11, (2, 11), generator=gen(6))
    start = 0
    for i, t in enumerate((4, 1, 3, 2, 1)):
        torch.manual_seed(60 + i)
        logits = lesson.generate.forward_cached(model, idx[:, start : start + t], cache)
        start += t
        out[f"call {i} logits"] = logits
        out[f"call {i} length"] = cache.length
        out[f"call {i} keys"] = list(cache.keys)
        out[f"call {i} values"] = list(cache.values)
        if not train:
            # The cache's promise, said plainly: the same logits as the full forward pass.
            full = model(idx[:, :start])[0][:, -t:]
            out[f"call {i} agrees with the full forward"] = bool(
                torch.allclose(logits, full, atol=1e-5, rtol=1e-4)
            )


def probe_forward_cached_meta(lesson, out):
    model = _gpt(lesson, 10, 5).to("meta").eval()
    cache = lesson.generate.KVCache(len(model.transformer.h))
    idx = torch.zeros(2, 3, dtype=torch.long, device="meta")
    logits = lesson.generate.forward_cached(model, idx, cache)
    out["logits"] = [tuple(logits.shape), logits.device.type]
    logits = lesson.generate.forward_cached(model, idx[:, :1], cache)
    out["logits after"] = [tuple(logits.shape), logits.device.type]


def probe_generate(prompt_shape, n, temperature, top_k, use_cache, seed, use_generator, shape, lesson, out):
    model = _gpt(lesson, 8, seed, shape)
    model.train()
    calls = []
    original = lesson.generate.forward_cached

    def counted(model_, idx_new, cache):
        calls.append((tuple(idx_new.shape), cache.length))
        return original(model_, idx_new, cache)

    patch(lesson.generate, "forward_cached", counted)
    full = capture_inputs(model)
    prompt = torch.randint(11, prompt_shape, generator=gen(seed + 7))
    before = prompt.clone()
    kwargs = dict(temperature=temperature, top_k=top_k, use_cache=use_cache)
    if use_generator:
        g = gen(seed + 8)
        result = lesson.generate.generate(model, prompt, n, generator=g, **kwargs)
        out["next-draw"] = next_draw(g)
    else:
        torch.manual_seed(seed + 9)
        result = lesson.generate.generate(model, prompt, n, **kwargs)
        out["next-draw"] = next_draw()
    out["tokens"] = result
    out["prompt untouched"] = torch.equal(prompt, before)
    out["training after"] = model.training
    out["forward_cached calls (shape, cache length)"] = calls
    out["full forward inputs"] = [tuple(x.shape) for x in full]
    if use_cache and use_generator:
        # With and without the cache, the same tokens for the same generator.
        again = lesson.generate.generate(
            model, prompt, n, generator=gen(seed + 8), **{**kwargs, "use_cache": False}
        )
        out["same tokens without the cache"] = torch.equal(again, result)


def _bind(fn, *args):
    return lambda lesson, out: fn(*args, lesson, out)


def probes():
    for temperature in (0, 0.0, 0.3, 0.7, 1, 1.5, 3.0):
        for seed in SEEDS[:2]:
            yield (
                f"sample_next V=7 temperature={temperature!r} seed={seed}",
                _bind(probe_sample, 7, temperature, None, seed, True, "normal"),
            )
    for v, ks in ((7, (1, 3, 6, 7, 12)), (1000, (1, 50, 999, 1000, 1005))):
        for k in ks:
            for temperature in (0.3, 1.5):
                yield (
                    f"sample_next V={v} top_k={k} temperature={temperature}",
                    _bind(probe_sample, v, temperature, k, 2, True, "normal"),
                )
    yield "sample_next greedy with top_k", _bind(probe_sample, 1000, 0.0, 5, 1, True, "normal")
    yield "sample_next ties top_k=3", _bind(probe_sample, 12, 1.0, 3, 0, True, "ties")
    yield "sample_next ties top_k=1", _bind(probe_sample, 12, 0.45, 1, 1, True, "ties")
    for temperature, k in ((0.3, None), (1.0, 50), (0.0, None), (2.0, 999)):
        yield (
            f"sample_next generator=None temperature={temperature} top_k={k}",
            _bind(probe_sample, 1000, temperature, k, 0, False, "normal"),
        )
    yield "sample_next defaults", probe_sample_defaults
    yield "crop_context", probe_crop
    for past, t in ((0, 4), (3, 1), (3, 4), (5, 2)):
        for train in (False, True):
            yield (
                f"cached_attention past={past} T={t} {'train' if train else 'eval'}",
                _bind(probe_cached_attention, past, t, train, 0),
            )
    yield "cached_attention past=3 T=4 seed=1", _bind(probe_cached_attention, 3, 4, False, 1)
    yield "cached_attention on meta", probe_cached_attention_meta
    for shape in SHAPES:
        yield f"forward_cached eval {shape}", _bind(probe_forward_cached, False, shape)
    yield "forward_cached train", _bind(probe_forward_cached, True, "L=2 nh=3")
    yield "forward_cached on meta", probe_forward_cached_meta
    cases = [
        # (prompt shape, max_new_tokens, temperature, top_k, seed, use_generator, model shape)
        ((2, 3), 12, 1.0, None, 0, True, "L=2 nh=3"),
        ((2, 3), 12, 0.0, None, 1, True, "L=2 nh=3"),
        ((2, 3), 12, 0.3, 5, 2, True, "L=2 nh=3"),
        ((1, 10), 4, 1.5, 11, 0, True, "L=2 nh=3"),
        ((2, 3), 1, 1.0, 1, 1, True, "L=2 nh=3"),
        ((2, 3), 0, 1.0, None, 2, True, "L=2 nh=3"),
        ((2, 3), 9, 1.0, None, 3, False, "L=2 nh=3"),
        ((2, 5), 6, 0.3, None, 4, False, "L=2 nh=3"),
        ((2, 4), 7, 1.5, 3, 5, True, "L=3 nh=2"),
    ]
    for prompt, n, temperature, k, seed, use_gen, shape in cases:
        for use_cache in (True, False):
            name = (
                f"generate {shape} prompt={prompt} n={n} temperature={temperature} top_k={k} "
                f"{'cache' if use_cache else 'no cache'} {'seed=' + str(seed) if use_gen else 'generator=None'}"
            )
            yield name, _bind(probe_generate, prompt, n, temperature, k, use_cache, seed, use_gen, shape)
