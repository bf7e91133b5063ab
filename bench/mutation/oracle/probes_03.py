"""Lesson 03 (attention_numpy.py, attention.py) probes: the NumPy warm-up and the PyTorch
CausalSelfAttention, explicit and fused.

Probe space, NumPy:
- causal_mask(T), T in {1, 2, 5, 9}: shape, dtype, the allowed entries (j <= i) exactly, and
  for each future entry whether it is <= -1e9 (-1e9 and -inf both pass, as the spec allows).
- softmax over shapes (4,), (3, 5), (2, 3, 4) and axes -1, 0, 1, -2; inputs around 1e3 (overflow),
  rows partly -inf, float32 (its dtype is kept) and int inputs; the input left untouched.
- masked_self_attention with (T, d_model, d_k, d_v) all different, T = 1, float64 and float32,
  seeds 0, 1, 2: output and weights; inputs untouched.
- count_edges(T, causal) for T in {0, 1, 2, 7, 10, 64}, both causal values and the default,
  and T as a numpy int: the value and its Python type.

Probe space, PyTorch (B, T, C, n_head, hs all different wherever the config allows):
- configs (n_embd, n_head, block_size, dropout): (12, 3, 8, 0), (20, 4, 7, 0.25) with
  n_embd not a power of 2, (6, 1, 5, 0) one head, (16, 8, 9, 0.1) with hs = 2; the lesson's
  AttentionConfig and a plain object with the four attributes; T < block_size, T = 1,
  T = block_size; seeds 0 and 1.
- for each: eval mode explicit and fused (weights loaded from the explicit module), and with
  dropout > 0 train mode under a fixed torch seed, explicit and fused. Outputs: y (values, dtype,
  shape); the weights as they enter attn_drop and as they leave it; how many times attn_drop,
  resid_drop and F.scaled_dot_product_attention are called; the gradients of x and of every
  parameter for a fixed random projection of y; the attributes n_head and fused.
- the mask: buffer names, state_dict keys (non-persistent), its shape and values; after
  .to("meta"), its device and a forward pass on meta (a mask that does not follow .to fails).
- float64 (module.double()): y's dtype and values, both paths.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch
import torch.nn.functional as F

from bench.mutation.oracle.probing import SEEDS, capture_inputs, count_calls, gen, load_modules


def load(folder):
    return load_modules(folder, ["attention_numpy", "attention"])


# --- NumPy ---------------------------------------------------------------------------------------


def probe_np_mask(t, lesson, out):
    m = lesson.attention_numpy.causal_mask(t)
    m = np.asarray(m)
    out["shape"] = m.shape
    out["dtype"] = str(m.dtype)
    allowed = np.tril(np.ones((t, t), dtype=bool))
    out["allowed"] = m[allowed]
    with np.errstate(invalid="ignore"):
        out["future-masked"] = m[~allowed] <= -1e9
    out["any-nan"] = bool(np.isnan(m).any()) if m.dtype.kind == "f" else False


def probe_np_softmax(shape, axis, kind, seed, lesson, out):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape) * 3
    if kind == "large":
        x = x * 50 + 1000.0
    elif kind == "neg-inf":
        x.reshape(-1)[::3] = -np.inf
        x.reshape(-1)[1] = 2.0  # never a whole row of -inf on the last axis
    elif kind == "float32":
        x = x.astype(np.float32)
    elif kind == "int":
        x = np.round(x).astype(np.int64)
    x0 = x.copy()
    with np.errstate(all="ignore"):
        y = lesson.attention_numpy.softmax(x, axis=axis)
    out["y"] = np.asarray(y)
    out["x-untouched"] = np.array_equal(x, x0)


def probe_np_softmax_default_axis(lesson, out):
    x = np.random.default_rng(3).normal(size=(3, 4))
    out["y"] = np.asarray(lesson.attention_numpy.softmax(x))


def probe_np_attention(t, d_model, d_k, d_v, dtype, seed, lesson, out):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(t, d_model)).astype(dtype)
    W = [
        rng.normal(size=s).astype(dtype) / np.sqrt(d_model)
        for s in ((d_model, d_k), (d_model, d_k), (d_model, d_v))
    ]
    copies = [a.copy() for a in (X, *W)]
    output, weights = lesson.attention_numpy.masked_self_attention(X, *W)
    out["output"] = np.asarray(output)
    out["weights"] = np.asarray(weights)
    out["inputs-untouched"] = all(np.array_equal(a, b) for a, b in zip((X, *W), copies))


def probe_np_edges(lesson, out):
    edges = lesson.attention_numpy.count_edges
    for t in (0, 1, 2, 7, 10, 64):
        out[f"causal T={t}"] = edges(t, causal=True)
        out[f"full T={t}"] = edges(t, causal=False)
        out[f"default T={t}"] = edges(t)
    out["numpy T"] = edges(np.int64(6))
    out["numpy T full"] = edges(np.int64(6), False)


# --- PyTorch -------------------------------------------------------------------------------------

CONFIGS = {
    # name: (n_embd, n_head, block_size, dropout)
    "C=12 nh=3 bs=8": (12, 3, 8, 0.0),
    "C=20 nh=4 bs=7 p=0.25": (20, 4, 7, 0.25),
    "C=6 nh=1 bs=5": (6, 1, 5, 0.0),
    "C=16 nh=8 bs=9 p=0.1": (16, 8, 9, 0.1),
}


def _cfg(lesson, n_embd, n_head, block_size, dropout, plain=False):
    if plain:
        return SimpleNamespace(n_embd=n_embd, n_head=n_head, block_size=block_size, dropout=dropout)
    return lesson.attention.AttentionConfig(
        n_embd=n_embd, n_head=n_head, block_size=block_size, dropout=dropout
    )


def _pair(lesson, cfg, seed):
    """The explicit module built under `seed` and a fused one with the same weights."""
    CSA = lesson.attention.CausalSelfAttention
    torch.manual_seed(seed)
    explicit = CSA(cfg)
    torch.manual_seed(seed + 1000)
    fused = CSA(cfg, fused=True)
    fused.load_state_dict(explicit.state_dict())
    return explicit, fused


def _drive(module, x, w, tag, out, train_seed=None):
    """One forward pass (train mode under train_seed when given) and its gradients."""
    module.zero_grad(set_to_none=True)
    module.train(train_seed is not None)
    into, leaving = capture_inputs(module.attn_drop), []
    module.attn_drop.register_forward_hook(lambda _m, _a, o: leaving.append(o.detach().clone()))
    resid = capture_inputs(module.resid_drop)
    sdpa = count_calls(F, "scaled_dot_product_attention")
    x = x.detach().clone().requires_grad_(True)
    if train_seed is not None:
        torch.manual_seed(train_seed)
    y = module(x)
    out[f"{tag} y"] = y
    out[f"{tag} weights into attn_drop"] = into
    out[f"{tag} weights out of attn_drop"] = leaving
    out[f"{tag} resid_drop calls"] = len(resid)
    out[f"{tag} sdpa calls"] = len(sdpa)
    (y * w).sum().backward()
    out[f"{tag} x.grad"] = x.grad
    for name, p in module.named_parameters():
        out[f"{tag} {name}.grad"] = p.grad
    module._forward_pre_hooks.clear()
    module.attn_drop._forward_pre_hooks.clear()
    module.attn_drop._forward_hooks.clear()
    module.resid_drop._forward_pre_hooks.clear()


def probe_attention(config, b, t, seed, plain, lesson, out):
    n_embd, n_head, block_size, dropout = CONFIGS[config]
    cfg = _cfg(lesson, n_embd, n_head, block_size, dropout, plain)
    explicit, fused = _pair(lesson, cfg, seed)
    out["n_head"] = explicit.n_head
    out["fused"] = [explicit.fused, fused.fused]
    x = torch.randn(b, t, n_embd, generator=gen(seed + 10))
    w = torch.randn(b, t, n_embd, generator=gen(seed + 20))
    _drive(explicit, x, w, "eval explicit", out)
    _drive(fused, x, w, "eval fused", out)
    if dropout > 0:
        _drive(explicit, x, w, "train explicit", out, train_seed=seed + 30)
        _drive(fused, x, w, "train fused", out, train_seed=seed + 30)
        # eval after train: dropout off again, the same y as before.
        explicit.eval()
        out["eval again y"] = explicit(x)


def probe_mask_buffer(lesson, out):
    cfg = _cfg(lesson, 12, 3, 6, 0.0)
    torch.manual_seed(0)
    m = lesson.attention.CausalSelfAttention(cfg)
    out["buffers"] = sorted(name for name, _ in m.named_buffers())
    out["state_dict keys"] = sorted(m.state_dict().keys())
    out["mask shape"] = tuple(m.mask.shape)
    out["mask values"] = m.mask.to(torch.float64)
    m.to("meta")
    out["mask device after to(meta)"] = m.mask.device.type
    y = m(torch.zeros(2, 4, 12, device="meta"))
    out["meta forward"] = [y.device.type, tuple(y.shape), str(y.dtype)]


def probe_mask_buffer_fused_meta(lesson, out):
    cfg = _cfg(lesson, 12, 3, 6, 0.0)
    m = lesson.attention.CausalSelfAttention(cfg, fused=True).to("meta")
    y = m(torch.zeros(2, 4, 12, device="meta"))
    out["meta forward"] = [y.device.type, tuple(y.shape), str(y.dtype)]


def probe_float64(fused, lesson, out):
    cfg = _cfg(lesson, 12, 3, 8, 0.0)
    torch.manual_seed(5)
    m = lesson.attention.CausalSelfAttention(cfg, fused=fused).double().eval()
    x = torch.randn(3, 6, 12, generator=gen(6), dtype=torch.float64)
    out["y"] = m(x)


def _bind(fn, *args):
    return lambda lesson, out: fn(*args, lesson, out)


def probes():
    for t in (1, 2, 5, 9):
        yield f"np causal_mask T={t}", _bind(probe_np_mask, t)
    for shape, axis in [
        ((4,), -1),
        ((3, 5), -1),
        ((3, 5), 0),
        ((2, 3, 4), 1),
        ((2, 3, 4), -2),
        ((2, 3, 4), -1),
    ]:
        yield f"np softmax {shape} axis={axis}", _bind(probe_np_softmax, shape, axis, "normal", 0)
    for kind in ("large", "neg-inf", "float32", "int"):
        yield f"np softmax {kind}", _bind(probe_np_softmax, (3, 5), -1, kind, 1)
        yield f"np softmax {kind} axis=0", _bind(probe_np_softmax, (4, 3), 0, kind, 2)
    yield "np softmax default axis", probe_np_softmax_default_axis
    for t, d_model, d_k, d_v in [(5, 7, 3, 4), (1, 6, 2, 5), (8, 4, 6, 3)]:
        for seed in SEEDS:
            yield (
                f"np attention T={t} d_model={d_model} d_k={d_k} d_v={d_v} seed={seed}",
                _bind(probe_np_attention, t, d_model, d_k, d_v, np.float64, seed),
            )
    yield "np attention float32", _bind(probe_np_attention, 6, 5, 3, 2, np.float32, 0)
    yield "np count_edges", probe_np_edges
    # (config, B, T): T < block_size, T = 1, T = block_size; B, T, C, nh, hs all different.
    cases = [
        ("C=12 nh=3 bs=8", 2, 5),
        ("C=12 nh=3 bs=8", 2, 1),
        ("C=12 nh=3 bs=8", 2, 8),
        ("C=20 nh=4 bs=7 p=0.25", 3, 6),
        ("C=20 nh=4 bs=7 p=0.25", 3, 1),
        ("C=20 nh=4 bs=7 p=0.25", 2, 7),
        ("C=6 nh=1 bs=5", 3, 4),
        ("C=16 nh=8 bs=9 p=0.1", 3, 5),
    ]
    for config, b, t in cases:
        for seed in SEEDS[:2]:
            yield (
                f"attention {config} B={b} T={t} seed={seed}",
                _bind(probe_attention, config, b, t, seed, False),
            )
    yield (
        "attention plain config C=20 nh=4 bs=7 p=0.25 B=2 T=3",
        _bind(probe_attention, "C=20 nh=4 bs=7 p=0.25", 2, 3, 2, True),
    )
    yield "mask buffer", probe_mask_buffer
    yield "fused on meta", probe_mask_buffer_fused_meta
    yield "float64 explicit", _bind(probe_float64, False)
    yield "float64 fused", _bind(probe_float64, True)
