"""Trusted reference computations for lesson 06, written independently of solutions/.

Every function here takes and returns values only (tensors, numbers, lists and dicts of them),
never a module: in a learner's release this file is absent and each call the graders make is
answered from the lesson's recording (autograder/engine/recording.py), for the practice inputs.
So everything the graders compare with is computed here: the expected tokens, logits, keys and
values, and what a recognisable mistake would give (the diagnosis candidates).

Sampling is replayed with torch.multinomial on a generator seeded like the learner's: one
draw of num_samples=1 consumes the generator the same way whatever the probabilities, so
the same seed gives the same tokens for the same distribution. Attention with a cache is
computed in float64 with explicit per-head loops and an explicit visibility matrix; options
reproduce recognisable bugs (a mask aligned to the top-left corner, as
scaled_dot_product_attention's is_causal does; no mask; the past appended after the new
keys; positions restarted at 0) so the graders can name them.

The GPT itself is lesson 04's reference (autograder.engine.references), in float64, built here
from a configuration and a state_dict for each call: this module walks its submodules
(embeddings, LayerNorms, MLPs, lm_head) and does the attention itself.
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


def wide_logits(seed: int, B: int, V: int, scale: float) -> torch.Tensor:
    """(B, V) logits drawn from `seed`, as the graders draw them (harness.wide_logits)."""
    return torch.randn(B, V, generator=torch.Generator().manual_seed(seed)) * scale


def sample_replay_wide(
    logit_seed: int, B: int, V: int, scale: float, seed: int, *, top_k: int | None = None
) -> torch.Tensor:
    """sample_replay on wide_logits(logit_seed, B, V, scale): a large vocabulary described by
    its seed, so that a recording of this call holds no (B, V) array."""
    return sample_replay(wide_logits(logit_seed, B, V, scale), seed, top_k=top_k)


def least_likely(logits: torch.Tensor) -> torch.Tensor:
    """(B, 1): each row's smallest logit's index (an argmin where the argmax was meant)."""
    return logits.argmin(dim=-1, keepdim=True)


def probabilities(
    logits: torch.Tensor, *, temperature: float = 1.0, top_k: int | None = None
) -> torch.Tensor:
    """softmax(logits / temperature) over the top_k largest logits of each row (the others 0)."""
    z = logits.double() / temperature
    if top_k is not None:
        keep = best_k(logits, top_k)
        z = z.masked_fill(~keep, float("-inf"))
    return torch.softmax(z, dim=-1)


def best_k(logits: torch.Tensor, k: int) -> torch.Tensor:
    """(B, V) bool: each row's k largest logits, ties broken by index (exactly `ranks(logits) <
    k`) without sorting the row: the k-th largest value, everything above it, and as many of the
    entries equal to it as are still missing, lowest index first. A GPT-2-sized vocabulary costs
    one pass instead of a sort (a fifth of lesson 06's grading time went to that sort). Rows
    holding NaN, which have no order, take the sort."""
    V = logits.shape[-1]
    if k >= V:
        return torch.ones_like(logits, dtype=torch.bool)
    if k <= 0 or logits.isnan().any():
        return ranks(logits) < k
    z = logits.double()
    kth = torch.topk(z, k, dim=-1).values[..., -1:]
    above = z > kth
    at = z == kth
    missing = k - above.sum(dim=-1, keepdim=True)
    return above | (at & (at.cumsum(dim=-1) <= missing))


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


def crop_slips(idx: torch.Tensor, block_size: int) -> list[torch.Tensor]:
    """What recognisable slips of the crop give, in this order: the first block_size columns,
    the last block_size rows (the batch cropped), block_size - 1 and block_size + 1 columns,
    only the last column, the last block_size without the last one, and (when T < block_size)
    a negative start."""
    T, bs = idx.shape[1], block_size
    out = [
        idx[:, :bs],
        idx[-bs:],
        idx[:, -(bs - 1) :] if bs > 1 else idx[:, :0],
        idx[:, -(bs + 1) :],
        idx[:, -1:],
        idx[:, -bs:-1],
    ]
    if T < bs:
        out.append(idx[:, T - bs :])
    return out


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


def _gpt(cfg: dict, state: dict) -> torch.nn.Module:
    """Lesson 04's reference GPT in float64, eval mode, without dropout, holding `state`."""
    mod = references.load()["model"]
    model = mod.GPT(mod.GPTConfig(**{**cfg, "dropout": 0.0}))
    model.load_state_dict(state)
    return model.double().eval()


@functools.lru_cache(maxsize=8)
def _skeleton(kind: str, items: tuple) -> torch.nn.Module:
    """An untouched float32 reference module ("gpt" or "attention") of config dict(items),
    only to read parameter names and shapes from (never run, never changed)."""
    cfg = dict(items)
    if kind == "gpt":
        mod = references.load()["model"]
        return mod.GPT(mod.GPTConfig(**cfg))
    mod = references.load()["attention"]
    return mod.CausalSelfAttention(mod.AttentionConfig(**cfg))


def random_state(kind: str, cfg: dict, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """A state_dict for the reference module `kind` ("gpt" or "attention") of configuration
    `cfg`, with values drawn from `gen`, large enough that attention is far from uniform (so a
    wrong mask shows) and logits differ by O(1) (so argmax is stable). Tied parameters (wte and
    lm_head) get one draw, shared by both keys."""
    module = _skeleton(kind, tuple(sorted({**cfg, "dropout": 0.0}.items())))
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


def attend_given(
    sd: dict,
    x: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    n_head: int,
    *,
    align: str = "bottom_right",
    prefix: str = "",
) -> torch.Tensor:
    """y (B, T, C) in float64: x's T new queries attending to the keys and values k, v
    (B, nh, S, hs) given (whatever they are) through the `align` mask, then the projection."""
    q, _, _ = project(sd, x, n_head, prefix)
    return attend_over(sd, q, k, v, align=align, prefix=prefix)


def walk(
    cfg: dict,
    state: dict,
    idx: torch.Tensor,
    chunks: list[int],
    *,
    align: str = "bottom_right",
    positions: str = "offset",
    order: str = "past_first",
) -> tuple[list[torch.Tensor], list, list]:
    """Feed idx to the float64 reference GPT of (cfg, state) chunk by chunk (sizes `chunks`)
    with a KV cache.

    Returns (logits per chunk (B, T_chunk, V), keys per layer, values per layer). positions
    "zero": each chunk's positions restart at 0 (a bug)."""
    return _walk(_gpt(cfg, state), idx, chunks, align=align, positions=positions, order=order)


def _walk(model, idx, chunks, *, align="bottom_right", positions="offset", order="past_first", inputs=None):
    tr = model.transformer
    n_head = tr.h[0].attn.n_head
    sd = dict(model.state_dict())
    keys, values = [None] * len(tr.h), [None] * len(tr.h)
    start, outs = 0, []
    with torch.no_grad():
        for size in chunks:
            new = idx[:, start : start + size]
            first = start if positions == "offset" else 0
            x = tr.wte(new) + tr.wpe(torch.arange(first, first + size))
            layers = []
            for i, block in enumerate(tr.h):
                h = block.ln_1(x)
                if inputs is not None:
                    # What the graders hand the learner's cached_attention for this layer: the
                    # float32 input and the reference cache so far.
                    layers.append(
                        (
                            h.float(),
                            None if keys[i] is None else keys[i].float(),
                            None if values[i] is None else values[i].float(),
                        )
                    )
                    h = h.float().double()
                a, keys[i], values[i] = attend(
                    sd,
                    h,
                    keys[i],
                    values[i],
                    n_head,
                    align=align,
                    order=order,
                    prefix=f"transformer.h.{i}.attn.",
                )
                x = x + a
                x = x + block.mlp(block.ln_2(x))
            if inputs is not None:
                inputs.append(layers)
            outs.append(model.lm_head(tr.ln_f(x)))
            start += size
    return outs, keys, values


def chunk_inputs(cfg: dict, state: dict, idx: torch.Tensor, chunks: list[int]) -> list:
    """For each chunk and each layer of the reference GPT fed idx chunk by chunk: (the layer's
    attention input (B, T_chunk, C), its cached keys, its cached values (B, nh, T_past, hs) or
    None), float32, as a learner's cached_attention would receive them in that layer."""
    inputs: list = []
    _walk(_gpt(cfg, state), idx, chunks, inputs=inputs)
    return inputs


def logits(cfg: dict, state: dict, idx: torch.Tensor) -> torch.Tensor:
    """The reference full forward's logits (B, T, V), float64."""
    with torch.no_grad():
        return _gpt(cfg, state)(idx)[0]


def sampled(
    cfg: dict,
    state: dict,
    idx: torch.Tensor,
    steps: int,
    seed: int,
    *,
    temperature: float = 1.0,
) -> torch.Tensor:
    """(B, T + steps): idx followed by `steps` tokens, each one torch.multinomial draw from the
    eval-mode model's softmax(logits / temperature) of the context so far seen through its last
    block_size tokens, from one generator seeded `seed` (as sample_next draws)."""
    model = _gpt(cfg, state)
    bs = cfg["block_size"]
    g = torch.Generator().manual_seed(seed)
    seq = idx.clone()
    with torch.no_grad():
        for _ in range(steps):
            last = model(crop(seq, bs))[0][:, -1]  # (B, V)
            probs = torch.softmax(last.float() / temperature, dim=-1)
            seq = torch.cat((seq, torch.multinomial(probs, num_samples=1, generator=g)), dim=1)
    return seq


def cache_feeds(T: int, steps: int, block_size: int) -> list[int]:
    """The tokens each forward pass of the cached generate feeds: the prefill, then one token
    per step while the cache has room, and a prefill of the cropped context when it is full."""
    fed, cached, length = [], None, T
    for _ in range(steps):
        if cached is None or cached == block_size:
            cached = min(length, block_size)
            fed.append(cached)
        else:
            cached += 1
            fed.append(1)
        length += 1
    return fed


def kv_slips(sd: dict, x: torch.Tensor, past_k, past_v, n_head: int) -> list[torch.Tensor]:
    """What cached_attention's keys and values are under recognisable slips, in this order:
    keys and values with the new ones first, then the cached values in front of the new keys
    and the cached keys in front of the new values (float32)."""
    _, k_rev, v_rev = attend(sd, x, past_k, past_v, n_head, order="new_first")
    _, k_new, v_new = attend(sd, x, None, None, n_head)
    return [
        k_rev,
        v_rev,
        torch.cat((past_v, k_new.float()), dim=2),
        torch.cat((past_k, v_new.float()), dim=2),
    ]


def greedy_far_from_tie(cfg: dict, state: dict, seq: torch.Tensor, t: int, chosen: list, tie: float) -> bool:
    """Whether, for the prefix seq[:, :t] seen through its last block_size tokens, some token of
    `chosen` (each (B,)) is more than `tie` below its row's largest reference logit: two greedy
    runs that differ there differ by more than a near-tie the float32 paths may break apart."""
    with torch.no_grad():
        last = _gpt(cfg, state)(crop(seq[:, :t], cfg["block_size"]))[0][:, -1, :]
    top = last.max(dim=-1).values
    return any(bool(((top - last.gather(-1, c.view(-1, 1)).squeeze(-1)) > tie).any()) for c in chosen)
