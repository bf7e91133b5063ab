"""Trusted reference implementations for lesson 02, written independently of solutions/.

The bigram lookup is a one-hot matrix product and the cross-entropy an explicit
log-sum-exp, both in float64, so they share no code path with nn.Embedding and
F.cross_entropy. Options and the `*_mistakes` functions reproduce recognisable bugs; the
graders compare a learner's value to them to diagnose it ("your loss pairs logits and targets
of different positions"). The sampling replay mirrors the one sampling call the README fixes.

Only behaviour lives here; the inputs the graders draw (tables, tokens) are in harness.py.
Every function takes and returns tensors, numbers and str (or dicts and lists of them), so
that the learner release can answer its calls from a recording (autograder/engine/recording.py)
without this file.
"""

from __future__ import annotations

import torch

# ---------------------------------------------------------------- the bigram model


def bigram_logits(W: torch.Tensor, idx: torch.Tensor, lookup: str = "rows") -> torch.Tensor:
    """(B, T, V) float64: one_hot(idx) @ W, i.e. row idx[b, t] of W ("columns": of W^T, a bug)."""
    table = W.double() if lookup == "rows" else W.double().T
    return torch.nn.functional.one_hot(idx, table.shape[0]).double() @ table


def lookup_mistakes(W: torch.Tensor, idx: torch.Tensor) -> dict[str, torch.Tensor]:
    """What a recognisable lookup bug returns for the table W (V, V) and idx (B, T), float64:
    the rows of W^T ("transposed", (B, T, V)), W's columns indexed with idx ("columns",
    (V, B, T)), a softmax or log-softmax of the right logits, the whole table ((V, V))."""
    right = bigram_logits(W, idx)
    return {
        "transposed": bigram_logits(W, idx, lookup="columns"),
        "columns": W.double()[:, idx],
        "softmax": torch.softmax(right, dim=-1),
        "log_softmax": torch.log_softmax(right, dim=-1),
        "whole_table": W.double(),
    }


def lookup_gradient(V: int, idx: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """(V, V) float64: the gradient of <logits, v> with respect to the table, for v shaped like
    the logits (B, T, V): v's rows added up at each token's row."""
    return torch.zeros(V, V, dtype=torch.float64).index_add_(0, idx.reshape(-1), v.double().reshape(-1, V))


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
    logits are batch-major), "logits_time_major" (logits flattened time-major while the
    targets are batch-major), "classes_T" (what F.cross_entropy does with unflattened
    (B, T, V) logits: dim 1, T, taken as the classes; needs T == V). log_probs=False: -logit
    itself (F.nll_loss on raw logits).
    """
    x = logits.double()
    B, T, V = x.shape
    if pairing == "classes_T":
        x = x.transpose(1, 2)  # (B, V, T): the "classes" are the T positions
        B, T, V = x.shape
    elif pairing == "logits_time_major":
        x = x.transpose(0, 1).reshape(B, T, V)  # each row meets the target of another position
    flat = x.reshape(B * T, V)
    y = targets.T.reshape(-1) if pairing == "targets_transposed" else targets.reshape(-1)
    if log_probs:
        flat = flat - torch.logsumexp(flat, dim=-1, keepdim=True)
    picked = -flat[torch.arange(B * T), y]
    return picked.sum() if reduction == "sum" else picked.mean()


def loss_mistakes(logits: torch.Tensor, targets: torch.Tensor) -> dict[str, torch.Tensor]:
    """What a recognisable loss bug gives on these logits (B, T, V) and targets (B, T), each a
    0-d float64 tensor, in the order a diagnosis tries them ("classes_T" only where T == V)."""
    T, V = logits.shape[1], logits.shape[2]
    found = {"classes_T": cross_entropy(logits, targets, pairing="classes_T")} if T == V else {}
    found["targets_transposed"] = cross_entropy(logits, targets, pairing="targets_transposed")
    found["logits_time_major"] = cross_entropy(logits, targets, pairing="logits_time_major")
    found["sum"] = cross_entropy(logits, targets, reduction="sum")
    found["no_log_softmax"] = cross_entropy(logits, targets, log_probs=False)
    return found


def cross_entropy_grad(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """(B, T, V) float64: the gradient of the mean cross-entropy with respect to the logits,
    (softmax - one-hot) / N."""
    probe = logits.detach().double().requires_grad_(True)
    cross_entropy(probe, targets).backward()
    return probe.grad


# ---------------------------------------------------------------- token + position


def token_position(
    tok: torch.Tensor, pos: torch.Tensor, idx: torch.Tensor, positions: str = "arange"
) -> torch.Tensor:
    """(B, T, C) float64: tok[idx] + pos[0..T-1] ("none": no positions; "reversed": T-1..0;
    "tokens": the position table indexed with the tokens, tok[idx] + pos[idx])."""
    T = idx.shape[1]
    x = bigram_logits(tok, idx)
    if positions == "none":
        return x
    if positions == "tokens":
        return x + bigram_logits(pos, idx)
    order = torch.arange(T) if positions == "arange" else torch.arange(T - 1, -1, -1)
    return x + pos.double()[order]


def position_mistakes(tok: torch.Tensor, pos: torch.Tensor, idx: torch.Tensor) -> dict[str, torch.Tensor]:
    """What a recognisable positions bug gives, (B, T, C) float64 each: no positions, positions
    reversed, and (where every token is below block_size) positions indexed with the tokens."""
    found = {
        "none": token_position(tok, pos, idx, positions="none"),
        "reversed": token_position(tok, pos, idx, positions="reversed"),
    }
    if int(idx.max()) < pos.shape[0]:
        found["tokens"] = token_position(tok, pos, idx, positions="tokens")
    return found


def position_gradient(block_size: int, v: torch.Tensor) -> torch.Tensor:
    """(block_size, C) float64: the gradient of <x, v> with respect to the position table, for
    v (B, T, C): v summed over the batch at rows 0..T-1, zero below."""
    T = v.shape[1]
    grad = torch.zeros(block_size, v.shape[2], dtype=torch.float64)
    grad[:T] = v.double().sum(dim=0)
    return grad


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
