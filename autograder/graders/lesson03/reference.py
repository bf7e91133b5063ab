"""Trusted reference implementations for lesson 03, written independently of solutions/.

They work on plain weights (a state_dict) in float64, head by head with explicit loops, so
they share no code path with the learner's vectorised version. Each takes options that
reproduce a recognisable bug; the graders compare a learner's output to those variants to
diagnose it ("your output matches the reference scaled by sqrt(C)").

This file never ships: the graders reach it only through `recording.reference_of`, which in
the learner release answers each call from values recorded for the practice inputs. So every
function here takes and returns plain data (tensors, arrays, numbers, and lists, tuples and
dicts of those), and everything that computes what the reference computes lives here, the
values of the recognisable mistakes included, never in the graders files that ship.
"""

from __future__ import annotations

import math

import numpy as np
import torch

# ---------------------------------------------------------------- NumPy warm-up


def np_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    shifted = x - x.max(axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=axis, keepdims=True)


def np_attention(X, W_Q, W_K, W_V, *, scale: str = "sqrt_dk", causal: bool = True, axis: int = -1):
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    T, d_k = Q.shape
    divisor = {
        "sqrt_dk": math.sqrt(d_k),
        "none": 1.0,
        "dk": float(d_k),
        "sqrt_dmodel": math.sqrt(X.shape[1]),
    }[scale]
    scores = Q @ K.T / divisor
    if causal:
        scores = np.where(np.tri(T, dtype=bool), scores, -np.inf)
    weights = np_softmax(scores, axis=axis)
    return weights @ V, weights


def np_scores(X, W_Q, W_K):
    """The scaled scores Q K^T / sqrt(d_k), before any mask: what a learner's own mask is
    added to when np-attention judges masked_self_attention with the learner's pieces."""
    Q, K = X @ W_Q, X @ W_K
    return Q @ K.T / math.sqrt(Q.shape[1])


def np_values(X, W_V):
    return X @ W_V


def np_softmax_slips(x: np.ndarray) -> list[np.ndarray]:
    """What a softmax over the last axis gives when its max or its sum drops keepdims=True
    (on a square input that broadcasts instead of failing)."""
    z = x - x.max(axis=-1, keepdims=True)
    e = np.exp(z)
    slips = [e / e.sum(axis=-1)]
    if x.shape[0] == x.shape[-1]:
        e2 = np.exp(x - x.max(axis=-1))
        slips += [e2 / e2.sum(axis=-1, keepdims=True), e2 / e2.sum(axis=-1)]
    return slips


def np_edges(T: int, causal: bool) -> int:
    return sum(i + 1 for i in range(T)) if causal else T * T


def np_edges_slips(T: int) -> dict[str, int]:
    """The counts recognisable mistakes give: no self-loop (each token attends only to earlier
    ones), every pair (no mask), and the causal count (given for causal=False too)."""
    return {
        "self_loop": sum(range(T)),
        "not_causal": np_edges(T, causal=False),
        "ignores_causal": np_edges(T, causal=True),
    }


# ---------------------------------------------------------------- PyTorch module

SCALES = ("sqrt_hs", "sqrt_C", "none", "hs", "times_sqrt_hs")
MASKS = ("causal", "none", "inverted", "strict")
# How q, k, v can be cut into heads: right, and three recognisable bugs.
SPLITS = ("contiguous", "interleaved", "no_transpose", "qk_swapped", "kv_swapped", "qv_swapped")
# Which third of qkv's output each of q, k, v takes under a split (q, k, v in that order is right).
PART_ORDER = {"qk_swapped": (1, 0, 2), "kv_swapped": (0, 2, 1), "qv_swapped": (2, 1, 0)}


def divisor(scale: str, hs: int, C: int) -> float:
    """What the scores are divided by under each SCALES entry."""
    return {
        "sqrt_hs": math.sqrt(hs),
        "sqrt_C": math.sqrt(C),
        "none": 1.0,
        "hs": float(hs),
        "times_sqrt_hs": 1.0 / math.sqrt(hs),
    }[scale]


def random_weights(C: int, generator: torch.Generator, std: float = 0.35) -> dict[str, torch.Tensor]:
    """Weights for CausalSelfAttention's state_dict; std large enough that softmax is not flat."""

    def normal(*shape):
        return torch.randn(*shape, generator=generator) * std

    return {
        "qkv.weight": normal(3 * C, C),
        "qkv.bias": normal(3 * C) * 0.3,
        "proj.weight": normal(C, C),
        "proj.bias": normal(C) * 0.3,
    }


def causal_keep(T: int) -> torch.Tensor:
    """(T, T) bool: True where a query may see a key (j <= i), the causal buffer's pattern."""
    return _allowed(T, "causal")


def _allowed(T: int, mask: str) -> torch.Tensor:
    i = torch.arange(T).view(T, 1)
    j = torch.arange(T).view(1, T)
    return {
        "causal": j <= i,
        "none": torch.ones(T, T, dtype=torch.bool),
        "inverted": j >= i,
        "strict": j < i,
    }[mask]


def attention_weights(
    x: torch.Tensor,
    sd: dict,
    n_head: int,
    *,
    scale: str = "sqrt_hs",
    mask: str = "causal",
    split: str = "contiguous",
    softmax_dim: int = -1,
) -> torch.Tensor:
    """The attention matrix (B, nh, T, T) the reference computes, head by head (normalised
    over the queries, a bug, when softmax_dim is -2)."""
    _, T, C = x.shape
    scores = raw_scores(x, sd, n_head, split) / divisor(scale, C // n_head, C)
    scores = scores.masked_fill(~_allowed(T, mask), float("-inf"))
    return torch.softmax(scores, dim=softmax_dim)


def values(x: torch.Tensor, sd: dict, n_head: int, split: str = "contiguous") -> list[torch.Tensor]:
    return _project(x, sd, n_head, split)[2]


def merge_and_project(
    weights: torch.Tensor, v_heads: list[torch.Tensor], sd: dict, merge: str = "concat", proj: bool = True
) -> torch.Tensor:
    """Given attention weights (B, nh, T, T) and per-head values, the module's output (B, T, C)
    (without the output projection when `proj` is False: a bug)."""
    B, nh, T, _ = weights.shape
    heads = [weights[:, h].to(torch.float64) @ v_heads[h] for h in range(nh)]  # nh x (B, T, hs)
    if merge == "concat":
        y = torch.cat(heads, dim=-1)
    elif merge == "interleaved":  # channels in (hs, nh) order: permute(0, 2, 3, 1)
        y = torch.stack(heads, dim=-1).reshape(B, T, -1)
    else:  # "no_transpose": (B, nh, T, hs) viewed directly as (B, T, C)
        y = torch.stack(heads, dim=1).reshape(B, T, -1)
    if not proj:
        return y
    W, b = sd["proj.weight"].double(), sd["proj.bias"].double()
    return y @ W.T + b


def attention_forward(x: torch.Tensor, sd: dict, n_head: int, **variant) -> torch.Tensor:
    """The module's output in float64 (dropout off)."""
    merge, proj = variant.pop("merge", "concat"), variant.pop("proj", True)
    weights = attention_weights(x, sd, n_head, **variant)
    return merge_and_project(
        weights, values(x, sd, n_head, variant.get("split", "contiguous")), sd, merge, proj
    )


def _project(x: torch.Tensor, sd: dict, n_head: int, split: str):
    """q, k, v as lists of per-head (B, T, hs) tensors, in float64, split as `split` says."""
    x = x.double()
    W, b = sd["qkv.weight"].double(), sd["qkv.bias"].double()
    B, T, C = x.shape
    hs = C // n_head
    qkv = x @ W.T + b  # (B, T, 3C)
    parts = [qkv[..., i * C : (i + 1) * C] for i in range(3)]
    if split in PART_ORDER:  # e.g. k, q, v = qkv.split(C, dim=2)
        parts = [parts[i] for i in PART_ORDER[split]]
    if split in ("contiguous", *PART_ORDER):  # head h owns channels [h*hs, (h+1)*hs)
        return [[p[..., h * hs : (h + 1) * hs] for h in range(n_head)] for p in parts]
    if split == "interleaved":  # a view(B, T, hs, nh) bug: head h gets channels h, h+nh, ...
        return [[p[..., h::n_head] for h in range(n_head)] for p in parts]
    if split == "no_transpose":  # (B, T, C) reshaped straight to (B, nh, T, hs): tokens mixed
        return [[p.reshape(B, n_head, T, hs)[:, h] for h in range(n_head)] for p in parts]
    raise ValueError(f"unknown split {split!r}")


def raw_scores(x: torch.Tensor, sd: dict, n_head: int, split: str = "contiguous") -> torch.Tensor:
    """q @ k^T per head, (B, nh, T, T) in float64, neither scaled nor masked."""
    q, k, _ = _project(x, sd, n_head, split)
    return torch.stack([torch.einsum("btd,bsd->bts", q[h], k[h]) for h in range(n_head)], dim=1)


def forward_detached(x: torch.Tensor, sd: dict, n_head: int, detach: tuple[str, ...] = ()) -> torch.Tensor:
    """The module's output (float64) with some paths cut from autograd: "q", "k", "v" (that
    projection), "weights" (the attention matrix). Same values as attention_forward; only the
    gradient with respect to x differs (a learner's .detach() or .data on that path)."""
    q, k, v = _project(x, sd, n_head, "contiguous")
    cut = {"q": q, "k": k, "v": v}
    for name in ("q", "k", "v"):
        if name in detach:
            cut[name] = [t.detach() for t in cut[name]]
    T = x.shape[1]
    hs = x.shape[2] // n_head
    scores = torch.stack(
        [torch.einsum("btd,bsd->bts", cut["q"][h], cut["k"][h]) for h in range(n_head)], dim=1
    )
    scores = (scores / math.sqrt(hs)).masked_fill(~_allowed(T, "causal"), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if "weights" in detach:
        weights = weights.detach()
    return merge_and_project(weights, cut["v"], sd)


def input_vjp(
    x: torch.Tensor, sd: dict, n_head: int, cotangents: list[torch.Tensor], detach: tuple[str, ...] = ()
) -> list[torch.Tensor]:
    """d <forward(x), c> / dx for each cotangent c, in float64."""
    xg = x.detach().double().requires_grad_(True)
    y = forward_detached(xg, sd, n_head, detach)
    if not y.requires_grad:  # every path cut
        return [torch.zeros_like(xg) for _ in cotangents]
    # <y, c> differentiated rather than c given as grad_outputs, which imports sympy (~0.7 s).
    grads = [
        torch.autograd.grad((y * c.double()).sum(), xg, retain_graph=True, allow_unused=True)[0]
        for c in cotangents
    ]
    return [torch.zeros_like(xg) if g is None else g for g in grads]
