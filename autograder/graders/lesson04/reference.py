"""Trusted reference math for lesson 04, written independently of solutions/ and of lesson 03's
graders: a functional GPT that works on plain weights (a state_dict) in float64.

Attention goes head by head with explicit loops, LayerNorm and GELU are spelled out, so no
code path is shared with the learner's modules (nor with the reference attention the worker
runs). Several functions take options that reproduce a recognisable mistake; the graders
compare a learner's output to those variants to diagnose it ("your block matches a post-norm
block").

Every function takes and returns data only (tensors, numbers, dicts of them): in a learner's
release this file is absent and the graders' calls are answered from a recording of them
(autograder/engine/recording.py).
"""

from __future__ import annotations

import math

import torch

EPS = 1e-5  # nn.LayerNorm's default


# ---------------------------------------------------------------- pieces


def _layer_norm(
    x: torch.Tensor, weight: torch.Tensor | None = None, bias: torch.Tensor | None = None, over: str = "C"
) -> torch.Tensor:
    """LayerNorm over the channels (`over="C"`), or over (T, C) / everything (mistakes)."""
    x = x.double()
    dims = {"C": (-1,), "TC": (-2, -1), "all": tuple(range(x.dim()))}[over]
    mean = x.mean(dim=dims, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=dims, keepdim=True)  # biased, as nn.LayerNorm
    y = (x - mean) / torch.sqrt(var + EPS)
    if weight is not None:
        y = y * weight.double() + bias.double()
    return y


def activation(x: torch.Tensor, kind: str = "gelu") -> torch.Tensor:
    x = x.double()
    if kind == "gelu":  # the exact GELU, x * Phi(x)
        return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
    if kind == "gelu_tanh":
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    if kind == "relu":
        return x.clamp_min(0.0)
    if kind == "none":
        return x
    raise ValueError(f"unknown activation {kind!r}")


def linear(x: torch.Tensor, sd: dict, name: str) -> torch.Tensor:
    y = x.double() @ sd[f"{name}.weight"].double().T
    bias = sd.get(f"{name}.bias")
    return y if bias is None else y + bias.double()


def _ln(x: torch.Tensor, sd: dict, name: str, over: str = "C") -> torch.Tensor:
    return _layer_norm(x, sd[f"{name}.weight"], sd[f"{name}.bias"], over=over)


# What the graders ask of a LayerNorm: float32 (they compare in float32 to 1e-5), which keeps
# the recording that answers practice grading half the size.


def layer_norm(x: torch.Tensor, over: str = "C") -> torch.Tensor:
    """x normalised (over "C", "TC" or "all") without affine parameters, in float32."""
    return _layer_norm(x, over=over).float()


def ln(x: torch.Tensor, sd: dict, name: str, over: str = "C") -> torch.Tensor:
    """The LayerNorm `name` of `sd` applied to x (over "C", or "TC" as a mistake), in float32."""
    return _ln(x, sd, name, over).float()


def mlp(
    x: torch.Tensor, sd: dict, prefix: str = "", *, act: str = "gelu", order: str = "fc_act_proj"
) -> torch.Tensor:
    """c_proj(act(c_fc(x))) in float64, dropout off. `order="fc_proj_act"`: the activation
    after c_proj (a mistake)."""
    h = linear(x, sd, f"{prefix}c_fc")
    if order == "fc_proj_act":
        return activation(linear(h, sd, f"{prefix}c_proj"), act)
    return linear(activation(h, act), sd, f"{prefix}c_proj")


def mlp_grads(x: torch.Tensor, sd: dict, v: torch.Tensor) -> tuple[dict, torch.Tensor]:
    """The gradient of <mlp(x), v> with respect to every weight in `sd` and to x, in float32:
    ({weight name: gradient}, x's gradient)."""
    weights = {name: value.double().requires_grad_(True) for name, value in sd.items()}
    xd = x.double().requires_grad_(True)
    (mlp(xd, weights) * v.double()).sum().backward()
    return {name: value.grad.float() for name, value in weights.items()}, xd.grad.float()


def attention(x: torch.Tensor, sd: dict, n_head: int, prefix: str = "") -> torch.Tensor:
    """Causal multi-head self-attention, head by head: (B, T, C) -> (B, T, C) in float64."""
    x = x.double()
    _, T, C = x.shape
    hs = C // n_head
    qkv = linear(x, sd, f"{prefix}qkv")
    q_all, k_all, v_all = (qkv[..., i * C : (i + 1) * C] for i in range(3))
    allowed = torch.ones(T, T, dtype=torch.bool).tril()
    heads = []
    for h in range(n_head):
        cut = slice(h * hs, (h + 1) * hs)
        q, k, v = q_all[..., cut], k_all[..., cut], v_all[..., cut]
        scores = torch.einsum("btd,bsd->bts", q, k) / math.sqrt(hs)
        scores = scores.masked_fill(~allowed, float("-inf"))
        heads.append(torch.softmax(scores, dim=-1) @ v)
    return linear(torch.cat(heads, dim=-1), sd, f"{prefix}proj")


def dropout_keep(shape: tuple, p: float, seed: int) -> torch.Tensor:
    """Which values nn.Dropout(p) keeps (a float32 0/1 mask) when it runs on a tensor of `shape`
    right after torch.manual_seed(seed), as the worker does before a seeded call: on the CPU it
    draws bernoulli(1 - p) over the tensor, the only random numbers an MLP forward draws."""
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        return torch.empty(shape).bernoulli_(1 - p)
    finally:
        torch.random.set_rng_state(state)


# ---------------------------------------------------------------- the block

# Ways a block can be wired: right, and recognisable mistakes.
BLOCKS = (
    "pre",
    "post",
    "no_norm",
    "swapped_norms",
    "no_residual_attn",
    "no_residual_mlp",
    "no_residual",
    "residual_normed",
    "parallel",
    "attn_not_added",
)


def block(
    x: torch.Tensor, sd: dict, n_head: int, prefix: str = "", *, wiring: str = "pre", act: str = "gelu"
) -> torch.Tensor:
    """A Transformer block (B, T, C) -> (B, T, C) in float64, wired as `wiring` says."""
    x = x.double()

    def A(z):
        return attention(z, sd, n_head, f"{prefix}attn.")

    def M(z):
        return mlp(z, sd, f"{prefix}mlp.", act=act)

    def L1(z):
        return _ln(z, sd, f"{prefix}ln_1")

    def L2(z):
        return _ln(z, sd, f"{prefix}ln_2")

    if wiring == "pre":
        h = x + A(L1(x))
        return h + M(L2(h))
    if wiring == "post":  # the original Transformer: ln(x + sublayer(x))
        h = L1(x + A(x))
        return L2(h + M(h))
    if wiring == "no_norm":
        h = x + A(x)
        return h + M(h)
    if wiring == "swapped_norms":
        h = x + A(L2(x))
        return h + M(L1(h))
    if wiring == "no_residual_attn":  # x = attn(ln_1(x))
        h = A(L1(x))
        return h + M(L2(h))
    if wiring == "no_residual_mlp":  # x = mlp(ln_2(x))
        h = x + A(L1(x))
        return M(L2(h))
    if wiring == "no_residual":
        h = A(L1(x))
        return M(L2(h))
    if wiring == "residual_normed":  # x = ln_1(x) before attn: the stream carries ln_1(x), not x
        n = L1(x)
        h = n + A(n)
        return h + M(L2(h))
    if wiring == "parallel":  # both sublayers see the block's input
        return x + A(L1(x)) + M(L2(x))
    if wiring == "attn_not_added":  # `x + a` computed and thrown away
        return x + M(L2(x))
    raise ValueError(f"unknown wiring {wiring!r}")


def block_grads(x: torch.Tensor, sd: dict, n_head: int, v: torch.Tensor, names: tuple) -> dict:
    """The gradient of <block(x), v> (the pre-norm block, in float64) with respect to x (key
    "x") and to each weight of `sd` named in `names`, in float32."""
    weights = {name: value.double().requires_grad_(name in names) for name, value in sd.items()}
    xd = x.double().requires_grad_(True)
    (block(xd, weights, n_head) * v.double()).sum().backward()
    grads = {"x": xd.grad.float()}
    for name in names:
        grad = weights[name].grad
        grads[name] = (grad if grad is not None else torch.zeros_like(weights[name])).float()
    return grads


# ---------------------------------------------------------------- the model


def gpt(idx: torch.Tensor, sd: dict, cfg: dict, targets: torch.Tensor | None = None, **block_options):
    """(logits (B, T, V) float64, loss or None) of the whole model, dropout off."""
    B, T = idx.shape
    x = sd["transformer.wte.weight"].double()[idx] + sd["transformer.wpe.weight"].double()[:T]
    for i in range(cfg["n_layer"]):
        x = block(x, sd, cfg["n_head"], f"transformer.h.{i}.", **block_options)
    x = _ln(x, sd, "transformer.ln_f")
    logits = x @ sd["lm_head.weight"].double().T
    if targets is None:
        return logits, None
    logp = torch.log_softmax(logits.reshape(B * T, -1), dim=-1)
    loss = -logp.gather(1, targets.reshape(B * T, 1)).mean()
    return logits, loss


def param_count(cfg: dict) -> int:
    """V*C + block_size*C + n_layer*(12*C^2 + 13*C) + 2*C: the tied head counted once."""
    V, C, L, bs = cfg["vocab_size"], cfg["n_embd"], cfg["n_layer"], cfg["block_size"]
    return V * C + bs * C + L * (12 * C * C + 13 * C) + 2 * C


def mlp_param_count(C: int) -> int:
    return (4 * C * C + 4 * C) + (4 * C * C + C)


def attention_out(x: torch.Tensor, sd: dict, n_head: int) -> torch.Tensor:
    """A Block's attention sublayer on its (captured) input, in float32."""
    return attention(x, sd, n_head, "attn.").float()


def gpt_mistakes(idx: torch.Tensor, sd: dict, cfg: dict, mistakes: list) -> torch.Tensor:
    """The logits (float32) of the whole model built with each of `mistakes` (a list of keyword
    options of gpt(): a wiring, an activation), stacked: (len(mistakes), B, T, V)."""
    return torch.stack([gpt(idx, sd, cfg, **options)[0].float() for options in mistakes])


def mlp_mistakes(x: torch.Tensor, sd: dict, mistakes: list) -> torch.Tensor:
    """The MLP's output (float32) with each of `mistakes` (keyword options of mlp()), stacked."""
    return torch.stack([mlp(x, sd, **options).float() for options in mistakes])


# ---------------------------------------------------------------- initialisation

INIT_STD = 0.02


def residual_std(n_layer: int) -> float:
    return INIT_STD / math.sqrt(2 * n_layer)


def default_linear_std(fan_in: int) -> float:
    """nn.Linear's own init (kaiming uniform, a = sqrt(5)): U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    return 1.0 / math.sqrt(3 * fan_in)
