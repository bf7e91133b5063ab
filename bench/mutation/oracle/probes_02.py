"""Lesson 02 (bigram.py) probes: the bigram model, token + position embeddings, generate.

Probe space:
- BigramLanguageModel(V) built under seeds 0, 1, 2 for V in {7, 65}; idx (B, T) with B, T, V all
  different, T = 1 and B = 1. Outputs: logits (values, dtype, shape); loss with targets (value,
  dtype, shape) and None without; the table's gradient after loss.backward() (a reduction other
  than the mean shows); that idx and targets are left as they were.
- TokenPositionEmbedding(V, C, block_size) with V, C, block_size all different: T < block_size,
  T = 1 and T = block_size, B = 3; outputs x and the gradients of both tables; T > block_size
  (the provided assert); the module on the meta device with idx on meta: the device of the
  positions handed to position_embedding_table (torch.arange without device= shows as cpu).
- generate(model, idx, n, generator): the bigram model and a model whose logits depend on every
  earlier position (a cumulative sum of embeddings, so the last position differs from the
  others); n in {0, 1, 7}; a torch.Generator with seeds 0, 1, 2, and generator=None under
  torch.manual_seed. Outputs: the result (values, dtype, shape), idx untouched, the generator's
  next draw, how many times the model was called and the length of each call's input.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from bench.mutation.oracle.probing import SEEDS, capture_inputs, gen, load_modules, next_draw


def load(folder):
    return load_modules(folder, ["bigram"])


def _idx(b, t, v, seed):
    return torch.randint(v, (b, t), generator=gen(seed + 100))


def probe_bigram(v, b, t, seed, lesson, out):
    torch.manual_seed(seed)
    model = lesson.bigram.BigramLanguageModel(v)
    idx, targets = _idx(b, t, v, seed), _idx(b, t, v, seed + 7)
    idx0, targets0 = idx.clone(), targets.clone()
    logits, loss = model(idx)
    out["logits"] = logits
    out["loss-without-targets"] = loss
    logits, loss = model(idx, targets)
    out["logits-with-targets"] = logits
    out["loss"] = loss
    loss.backward()
    out["table-grad"] = model.token_embedding_table.weight.grad
    out["idx-untouched"] = torch.equal(idx, idx0) and torch.equal(targets, targets0)
    logits, loss = model(idx, targets=None)
    out["loss-targets-None"] = loss


class ContextModel(nn.Module):
    """Logits that depend on the whole prefix: position t's logits are the cumulative sum of the
    embeddings of tokens 0..t, so taking any position but the last changes the samples."""

    def __init__(self, v):
        super().__init__()
        self.emb = nn.Embedding(v, v)

    def forward(self, idx, targets=None):
        return self.emb(idx).cumsum(dim=1) * 0.7, None


def probe_generate(kind, v, n, seed, use_generator, lesson, out):
    torch.manual_seed(seed)
    model = lesson.bigram.BigramLanguageModel(v) if kind == "bigram" else ContextModel(v)
    calls = capture_inputs(model)
    idx = _idx(2, 3, v, seed)
    idx0 = idx.clone()
    if use_generator:
        g = gen(seed)
        result = lesson.bigram.generate(model, idx, n, generator=g)
        out["next-draw"] = next_draw(g)
    else:
        torch.manual_seed(seed + 11)
        result = lesson.bigram.generate(model, idx, n)
        out["next-draw"] = next_draw()
    out["result"] = result
    out["idx-untouched"] = idx
    out["idx-is-idx"] = torch.equal(idx, idx0)
    out["calls"] = [tuple(c.shape) for c in calls]


def probe_positions(v, c, block_size, b, t, seed, lesson, out):
    torch.manual_seed(seed)
    emb = lesson.bigram.TokenPositionEmbedding(v, c, block_size)
    idx = _idx(b, t, v, seed)
    x = emb(idx)
    out["x"] = x
    (x * torch.linspace(-1, 1, x.numel()).view_as(x)).sum().backward()
    out["token-grad"] = emb.token_embedding_table.weight.grad
    out["position-grad"] = emb.position_embedding_table.weight.grad


def probe_positions_too_long(lesson, out):
    emb = lesson.bigram.TokenPositionEmbedding(9, 6, 4)
    out["x"] = emb(_idx(2, 5, 9, 0))


def probe_positions_meta(lesson, out):
    emb = lesson.bigram.TokenPositionEmbedding(9, 6, 5).to("meta")
    seen = capture_inputs(emb.position_embedding_table)
    x = emb(torch.zeros(2, 4, dtype=torch.long, device="meta"))
    out["x"] = x
    out["positions-device"] = [s.device.type for s in seen]
    out["positions-shape"] = [tuple(s.shape) for s in seen]


def _bind(fn, *args):
    return lambda lesson, out: fn(*args, lesson, out)


def probes():
    for seed in SEEDS:
        yield f"bigram V=7 B=3 T=5 seed={seed}", _bind(probe_bigram, 7, 3, 5, seed)
    yield "bigram V=65 B=2 T=1", _bind(probe_bigram, 65, 2, 1, 0)
    yield "bigram V=11 B=1 T=4", _bind(probe_bigram, 11, 1, 4, 1)
    # (V, C, block_size, B, T): every size different; T < block_size, T = 1, T = block_size.
    for v, c, bs, b, t in [(11, 6, 8, 3, 5), (11, 6, 8, 3, 1), (11, 6, 8, 3, 8), (5, 9, 7, 2, 4)]:
        for seed in SEEDS[:2]:
            yield (
                f"positions V={v} C={c} block_size={bs} B={b} T={t} seed={seed}",
                _bind(probe_positions, v, c, bs, b, t, seed),
            )
    yield "positions T > block_size", probe_positions_too_long
    yield "positions on the meta device", probe_positions_meta
    for kind in ("bigram", "context"):
        for n in (0, 1, 7):
            for seed in SEEDS:
                yield f"generate {kind} n={n} seed={seed}", _bind(probe_generate, kind, 13, n, seed, True)
        yield f"generate {kind} n=6 generator=None", _bind(probe_generate, kind, 13, 6, 4, False)
