"""Trusted reference math for lesson 04, written independently of solutions/ and of lesson 03's
graders: a functional GPT that works on plain weights (a state_dict) in float64.

Attention goes head by head with explicit loops, LayerNorm and GELU are spelled out, so no
code path is shared with the learner's modules (nor with the reference attention the worker
runs). Several functions take options that reproduce a recognisable mistake; the graders
compare a learner's output to those variants to diagnose it ("your block matches a post-norm
block").
"""

from __future__ import annotations

import math

import torch

EPS = 1e-5  # nn.LayerNorm's default


# ---------------------------------------------------------------- pieces


def layer_norm(
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


def ln(x: torch.Tensor, sd: dict, name: str, over: str = "C") -> torch.Tensor:
    return layer_norm(x, sd[f"{name}.weight"], sd[f"{name}.bias"], over=over)


def mlp(
    x: torch.Tensor, sd: dict, prefix: str = "", *, act: str = "gelu", order: str = "fc_act_proj"
) -> torch.Tensor:
    """c_proj(act(c_fc(x))) in float64, dropout off. `order="fc_proj_act"`: the activation
    after c_proj (a mistake)."""
    h = linear(x, sd, f"{prefix}c_fc")
    if order == "fc_proj_act":
        return activation(linear(h, sd, f"{prefix}c_proj"), act)
    return linear(activation(h, act), sd, f"{prefix}c_proj")


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
        return ln(z, sd, f"{prefix}ln_1")

    def L2(z):
        return ln(z, sd, f"{prefix}ln_2")

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


# ---------------------------------------------------------------- the model


def gpt(idx: torch.Tensor, sd: dict, cfg: dict, targets: torch.Tensor | None = None, **block_options):
    """(logits (B, T, V) float64, loss or None) of the whole model, dropout off."""
    B, T = idx.shape
    x = sd["transformer.wte.weight"].double()[idx] + sd["transformer.wpe.weight"].double()[:T]
    for i in range(cfg["n_layer"]):
        x = block(x, sd, cfg["n_head"], f"transformer.h.{i}.", **block_options)
    x = ln(x, sd, "transformer.ln_f")
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


# ---------------------------------------------------------------- weights


def _normal(gen: torch.Generator, *shape, std: float = 1.0, mean: float = 0.0) -> torch.Tensor:
    return torch.randn(*shape, generator=gen) * std + mean


def mlp_weights(C: int, gen: torch.Generator, prefix: str = "") -> dict[str, torch.Tensor]:
    """Large enough that GELU's curve matters (inputs of order 1) and not ReLU-like."""
    return {
        f"{prefix}c_fc.weight": _normal(gen, 4 * C, C, std=1.0 / math.sqrt(C)),
        f"{prefix}c_fc.bias": _normal(gen, 4 * C, std=0.3),
        f"{prefix}c_proj.weight": _normal(gen, C, 4 * C, std=0.8 / math.sqrt(4 * C)),
        f"{prefix}c_proj.bias": _normal(gen, C, std=0.2),
    }


def block_weights(C: int, gen: torch.Generator, prefix: str = "") -> dict[str, torch.Tensor]:
    """A Block's state_dict: every LayerNorm with its own affine parameters (so that ln_1, ln_2
    and a plain normalisation all differ), attention scores far from flat."""
    sd = {}
    for name in ("ln_1", "ln_2"):
        sd[f"{prefix}{name}.weight"] = _normal(gen, C, std=0.3, mean=1.0)
        sd[f"{prefix}{name}.bias"] = _normal(gen, C, std=0.3)
    sd[f"{prefix}attn.qkv.weight"] = _normal(gen, 3 * C, C, std=0.35)
    sd[f"{prefix}attn.qkv.bias"] = _normal(gen, 3 * C, std=0.1)
    sd[f"{prefix}attn.proj.weight"] = _normal(gen, C, C, std=0.6 / math.sqrt(C))
    sd[f"{prefix}attn.proj.bias"] = _normal(gen, C, std=0.2)
    sd.update(mlp_weights(C, gen, f"{prefix}mlp."))
    return sd


def gpt_weights(cfg: dict, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """A GPT's state_dict with the tied head: lm_head.weight is the same tensor as wte's."""
    V, C, bs = cfg["vocab_size"], cfg["n_embd"], cfg["block_size"]
    wte = _normal(gen, V, C, std=0.5)
    sd = {"transformer.wte.weight": wte, "transformer.wpe.weight": _normal(gen, bs, C, std=0.5)}
    for i in range(cfg["n_layer"]):
        sd.update(block_weights(C, gen, f"transformer.h.{i}."))
    sd["transformer.ln_f.weight"] = _normal(gen, C, std=0.2, mean=1.0)
    sd["transformer.ln_f.bias"] = _normal(gen, C, std=0.2)
    sd["lm_head.weight"] = wte
    return sd


def attention_out(x: torch.Tensor, sd: dict, n_head: int) -> torch.Tensor:
    """A Block's attention sublayer on its (captured) input."""
    return attention(x, sd, n_head, "attn.")


# ---------------------------------------------------------------- initialisation

INIT_STD = 0.02


def residual_std(n_layer: int) -> float:
    return INIT_STD / math.sqrt(2 * n_layer)


def default_linear_std(fan_in: int) -> float:
    """nn.Linear's own init (kaiming uniform, a = sqrt(5)): U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    return 1.0 / math.sqrt(3 * fan_in)
