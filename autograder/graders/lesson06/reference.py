"""Trusted reference computations for lesson 06, written independently of solutions/.

Sampling is replayed with torch.multinomial on a generator seeded like the learner's: one
draw of num_samples=1 consumes the generator the same way whatever the probabilities, so
the same seed gives the same tokens for the same distribution. Attention with a cache is
computed in float64 with explicit per-head loops and an explicit visibility matrix; options
reproduce recognisable bugs (a mask aligned to the top-left corner, as
scaled_dot_product_attention's is_causal does; no mask; the past appended after the new
keys; positions restarted at 0) so the graders can name them.

The GPT itself is lesson 04's reference (autograder.engine.references), in float64: this module walks
its submodules (embeddings, LayerNorms, MLPs, lm_head) and does the attention itself.
"""

from __future__ import annotations

import functools
import math

import torch

from autograder.engine import references

# ---------------------------------------------------------------- sampling


def sample_replay(
    logits: torch.Tensor, seed: int | None, *, temperature: float = 1.0, top_k: int | None = None
) -> torch.Tensor:
    """(B, 1) tokens: argmax when temperature is 0, else one torch.multinomial draw from
    softmax(logits / temperature) restricted to the top_k largest logits of each row."""
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    probs = probabilities(logits, temperature=temperature, top_k=top_k)
    g = torch.Generator().manual_seed(seed) if seed is not None else None
    return torch.multinomial(probs.float(), num_samples=1, generator=g)


def probabilities(
    logits: torch.Tensor, *, temperature: float = 1.0, top_k: int | None = None
) -> torch.Tensor:
    """softmax(logits / temperature) over the top_k largest logits of each row (the others 0)."""
    z = logits.double() / temperature
    if top_k is not None:
        keep = ranks(logits) < min(top_k, logits.shape[-1])
        z = z.masked_fill(~keep, float("-inf"))
    return torch.softmax(z, dim=-1)


def ranks(logits: torch.Tensor) -> torch.Tensor:
    """(B, V) long: 0 for each row's largest logit, 1 for the next, ... (ties broken by index)."""
    order = torch.sort(logits.double(), dim=-1, descending=True, stable=True).indices
    out = torch.empty_like(order)
    out.scatter_(-1, order, torch.arange(logits.shape[-1]).expand_as(order).contiguous())
    return out


# ---------------------------------------------------------------- context


def crop(idx: torch.Tensor, block_size: int) -> torch.Tensor:
    T = idx.shape[1]
    return idx[:, max(0, T - block_size) :]


# ---------------------------------------------------------------- the models

ALIGNS = ("bottom_right", "top_left", "none", "no_self", "one_ahead")


def visible(T: int, S: int, align: str = "bottom_right") -> torch.Tensor:
    """(T, S) bool: which of S keys each of the T newest queries may see."""
    i = torch.arange(T).view(T, 1)
    j = torch.arange(S).view(1, S)
    if align == "bottom_right":  # query i is token S - T + i
        return j <= S - T + i
    if align == "top_left":  # what is_causal=True does when T < S
        return j <= i
    if align == "no_self":  # each query misses its own key (a bug: SDPA gives a row of 0 where none is left)
        return j < S - T + i
    if align == "one_ahead":  # each query also sees the next token (a bug)
        return j <= S - T + i + 1
    return torch.ones(T, S, dtype=torch.bool)


def gpt(cfg: dict, state: dict) -> torch.nn.Module:
    """Lesson 04's reference GPT in float64, eval mode, holding `state`."""
    mod = references.load()["model"]
    model = mod.GPT(mod.GPTConfig(**cfg))
    model.load_state_dict(state)
    return model.double().eval()


@functools.lru_cache(maxsize=8)
def skeleton(kind: str, items: tuple) -> torch.nn.Module:
    """An untouched float32 reference module ("gpt" or "attention") of config dict(items),
    only to read parameter names and shapes from (never run, never changed)."""
    cfg = dict(items)
    if kind == "gpt":
        mod = references.load()["model"]
        return mod.GPT(mod.GPTConfig(**cfg))
    mod = references.load()["attention"]
    return mod.CausalSelfAttention(mod.AttentionConfig(**cfg))


def random_state(module: torch.nn.Module, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """A state_dict for `module` with values drawn from `gen`, large enough that attention is
    far from uniform (so a wrong mask shows) and logits differ by O(1) (so argmax is stable).
    Tied parameters (wte and lm_head) get one draw, shared by both keys."""
    drawn = {}
    for name, p in module.named_parameters():  # a tied parameter comes once
        if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
            value = 1.0 + 0.2 * torch.randn(p.shape, generator=gen)
        elif name.endswith("bias"):
            value = 0.2 * torch.randn(p.shape, generator=gen)
        elif name.endswith(("wte.weight", "wpe.weight", "lm_head.weight")):
            value = torch.randn(p.shape, generator=gen)
        else:  # Linear (out, in): gain 1.5 over the fan-in keeps activations O(1)
            value = 1.5 * torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[1])
        drawn[p.data_ptr()] = value
    return {k: drawn.get(v.data_ptr(), v).detach().clone() for k, v in module.state_dict().items()}


def heads(t: torch.Tensor, n_head: int) -> torch.Tensor:
    """(B, T, C) -> (B, nh, T, hs), head h holding channels [h*hs, (h+1)*hs)."""
    B, T, C = t.shape
    return torch.stack([t[..., h * (C // n_head) : (h + 1) * (C // n_head)] for h in range(n_head)], dim=1)


def project(sd: dict, x: torch.Tensor, n_head: int, prefix: str = "") -> tuple:
    """q, k, v of x (B, T, C) as (B, nh, T, hs) each, in float64, from attention weights sd."""
    W, b = sd[prefix + "qkv.weight"].double(), sd[prefix + "qkv.bias"].double()
    C = x.shape[-1]
    qkv = x.double() @ W.T + b
    return tuple(heads(qkv[..., i * C : (i + 1) * C], n_head) for i in range(3))


def attend(
    sd: dict,
    x: torch.Tensor,
    past_k,
    past_v,
    n_head: int,
    *,
    align: str = "bottom_right",
    order: str = "past_first",
    prefix: str = "",
) -> tuple:
    """(y (B, T, C), k, v (B, nh, S, hs)) in float64: the cached attention of x's T new tokens
    over the S = T_past + T keys. order "new_first" appends the past after the new keys (a bug);
    "no_past" ignores the past (another)."""
    q, k, v = project(sd, x, n_head, prefix)
    if past_k is not None and order != "no_past":
        pk, pv = past_k.double(), past_v.double()
        k, v = (
            (torch.cat((pk, k), dim=2), torch.cat((pv, v), dim=2))
            if order == "past_first"
            else (torch.cat((k, pk), dim=2), torch.cat((v, pv), dim=2))
        )
    return attend_over(sd, q, k, v, align=align, prefix=prefix), k, v


def attend_over(
    sd: dict,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    align: str = "bottom_right",
    prefix: str = "",
) -> torch.Tensor:
    """y (B, T, C) in float64: the T queries q (B, nh, T, hs) attending to the S keys and values
    k, v (B, nh, S, hs), whatever they are, through the `align` mask, then the projection."""
    q, k, v = q.double(), k.double(), v.double()
    B, nh, T, hs = q.shape
    S = k.shape[2]
    see = visible(T, S, align)
    out = []
    for h in range(nh):
        scores = q[:, h] @ k[:, h].transpose(-2, -1) / math.sqrt(hs)
        w = torch.softmax(scores.masked_fill(~see, float("-inf")), dim=-1).nan_to_num(0.0)  # a blind row: 0
        out.append(w @ v[:, h])  # (B, T, hs)
    y = torch.cat(out, dim=-1)
    W, b = sd[prefix + "proj.weight"].double(), sd[prefix + "proj.bias"].double()
    return y @ W.T + b


def walk(
    model: torch.nn.Module,
    idx: torch.Tensor,
    chunks: list[int],
    *,
    align: str = "bottom_right",
    positions: str = "offset",
    order: str = "past_first",
) -> tuple[list[torch.Tensor], list, list]:
    """Feed idx to a float64 reference GPT chunk by chunk (sizes `chunks`) with a KV cache.

    Returns (logits per chunk (B, T_chunk, V), keys per layer, values per layer). positions
    "zero": each chunk's positions restart at 0 (a bug)."""
    tr = model.transformer
    n_layer = len(tr.h)
    n_head = tr.h[0].attn.n_head
    sd = {k: v for k, v in model.state_dict().items()}
    keys, values = [None] * n_layer, [None] * n_layer
    start, outs = 0, []
    for size in chunks:
        new = idx[:, start : start + size]
        first = start if positions == "offset" else 0
        pos = torch.arange(first, first + size)
        x = tr.wte(new) + tr.wpe(pos)
        for i, block in enumerate(tr.h):
            a, keys[i], values[i] = attend(
                sd,
                block.ln_1(x),
                keys[i],
                values[i],
                n_head,
                align=align,
                order=order,
                prefix=f"transformer.h.{i}.attn.",
            )
            x = x + a
            x = x + block.mlp(block.ln_2(x))
        outs.append(model.lm_head(tr.ln_f(x)))
        start += size
    return outs, keys, values


def next_logits(model: torch.nn.Module, seq: torch.Tensor, start: int, block_size: int) -> torch.Tensor:
    """(steps, B, V): the reference logits for each token seq[:, t], t = start .. end, given
    seq[:, :t] seen through its last block_size tokens, in two batched forward passes (the
    model is causal, so one pass over a prefix gives every prediction inside it)."""
    B, total = seq.shape
    out = []
    with torch.no_grad():
        inside = [t for t in range(start, total) if t <= block_size]
        if inside:
            logits = model(seq[:, : max(inside)])[0]  # (B, t, V)
            out += [logits[:, t - 1] for t in inside]
        sliding = [t for t in range(start, total) if t > block_size]
        if sliding:
            windows = torch.cat([seq[:, t - block_size : t] for t in sliding])  # (n * B, bs)
            last = model(windows)[0][:, -1].view(len(sliding), B, -1)
            out += list(last)
    return torch.stack(out)


def greedy_margin(logits: torch.Tensor, chosen: torch.Tensor) -> torch.Tensor:
    """(B,) how far below each row's largest logit the chosen token's logit is (0: it is the max)."""
    return logits.max(dim=-1).values - logits.gather(-1, chosen.view(-1, 1)).squeeze(-1)
