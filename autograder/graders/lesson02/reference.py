"""Trusted reference implementations for lesson 02, written independently of solutions/.

The bigram lookup is a one-hot matrix product and the cross-entropy an explicit
log-sum-exp, both in float64, so they share no code path with nn.Embedding and
F.cross_entropy. Options reproduce recognisable bugs; the graders compare a learner's value
to those variants to diagnose it ("your loss pairs logits and targets of different
positions"). The sampling replay mirrors the one sampling call the README fixes.
"""

from __future__ import annotations

import torch

# ---------------------------------------------------------------- weights


def random_table(rows: int, cols: int, generator: torch.Generator, std: float = 1.0) -> torch.Tensor:
    return torch.randn(rows, cols, generator=generator) * std


def chain_successors(V: int, generator: torch.Generator) -> torch.Tensor:
    """succ[i]: one random cycle through all V tokens, so no token follows itself."""
    order = torch.randperm(V, generator=generator)
    succ = torch.empty(V, dtype=torch.long)
    succ[order] = order.roll(-1)
    return succ


def chain_table(succ: torch.Tensor, peak: float = 40.0) -> torch.Tensor:
    """A (V, V) table whose row i puts all the probability on succ[i] (e^-40: never drawn)."""
    V = succ.numel()
    table = torch.zeros(V, V)
    table[torch.arange(V), succ] = peak
    return table


# ---------------------------------------------------------------- the bigram model


def bigram_logits(W: torch.Tensor, idx: torch.Tensor, lookup: str = "rows") -> torch.Tensor:
    """(B, T, V) float64: one_hot(idx) @ W, i.e. row idx[b, t] of W ("columns": of W^T, a bug)."""
    table = W.double() if lookup == "rows" else W.double().T
    return torch.nn.functional.one_hot(idx, table.shape[0]).double() @ table


def cross_entropy(
    logits: torch.Tensor,
    targets: torch.Tensor,
    *,
    pairing: str = "same",
    reduction: str = "mean",
    log_probs: bool = True,
) -> torch.Tensor:
    """Mean over the B*T positions of -log softmax(logits[b, t])[targets[b, t]], in float64.

    pairing: "same" (right), "targets_transposed" (targets flattened time-major while the
    logits are batch-major), "classes_T" (what F.cross_entropy does with unflattened (B, T, V)
    logits: dim 1, T, taken as the classes; needs T == V). log_probs=False: -logit itself
    (F.nll_loss on raw logits).
    """
    x = logits.double()
    B, T, V = x.shape
    if pairing == "classes_T":
        x = x.transpose(1, 2)  # (B, V, T): the "classes" are the T positions
        B, T, V = x.shape
    flat = x.reshape(B * T, V)
    y = targets.T.reshape(-1) if pairing == "targets_transposed" else targets.reshape(-1)
    if log_probs:
        flat = flat - torch.logsumexp(flat, dim=-1, keepdim=True)
    picked = -flat[torch.arange(B * T), y]
    return picked.sum() if reduction == "sum" else picked.mean()


# ---------------------------------------------------------------- token + position


def token_position(
    tok: torch.Tensor, pos: torch.Tensor, idx: torch.Tensor, positions: str = "arange"
) -> torch.Tensor:
    """(B, T, C) float64: tok[idx] + pos[0..T-1] ("none": no positions; "reversed": T-1..0)."""
    T = idx.shape[1]
    x = bigram_logits(tok, idx)
    if positions == "none":
        return x
    order = torch.arange(T) if positions == "arange" else torch.arange(T - 1, -1, -1)
    return x + pos.double()[order]


# ---------------------------------------------------------------- sampling


def select(logits: torch.Tensor, position: str) -> torch.Tensor:
    """(B, T, V) -> (B, V): the position generate keeps ("last" is right)."""
    if position == "last":
        return logits[:, -1, :]
    if position == "first":
        return logits[:, 0, :]
    return logits.mean(dim=1)  # "mean"


def replay(
    table: torch.Tensor,
    idx: torch.Tensor,
    steps: int,
    seed: int | None,
    *,
    position: str = "last",
    mode: str = "softmax",
    replacement: bool = False,
) -> torch.Tensor:
    """What generate returns for a position-wise bigram model whose logits at a token are its
    row of `table` (float32), drawing with torch.multinomial from a generator seeded `seed`.

    mode: "softmax" (right), "argmax" (greedy), "softmax_batch" (softmax over dim 0), "logits"
    (multinomial on the logits themselves, which are positive here).
    """
    g = torch.Generator().manual_seed(seed) if seed is not None else None
    out = idx.clone()
    for _ in range(steps):
        logits = select(table[out], position)  # (B, V)
        if mode == "argmax":
            nxt = logits.argmax(dim=-1, keepdim=True)
        else:
            probs = {
                "softmax": lambda: torch.softmax(logits, dim=-1),
                "softmax_batch": lambda: torch.softmax(logits, dim=0),
                "logits": lambda: logits,
            }[mode]()
            nxt = torch.multinomial(probs, num_samples=1, replacement=replacement, generator=g)
        out = torch.cat((out, nxt), dim=1)
    return out
