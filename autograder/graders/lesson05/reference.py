"""Trusted reference math for lesson 05, written independently of solutions/.

The model is lesson 04's reference GPT, loaded in this process by `autograder.engine.references`
(our own code, the same file the worker serves), so gradients and losses are computed here on
the very weights the grader sent to the worker. Everything is float64 unless said otherwise.
Functions take options that reproduce a recognisable bug; the graders compare a learner's
result with them to say what went wrong ("your schedule matches a linear decay").
"""

from __future__ import annotations

import functools
import math

import torch

from autograder.engine import references

# What torch.nn.utils.clip_grad_norm_ adds to the norm before dividing.
CLIP_EPS = 1e-6


# ---------------------------------------------------------------- the model


def one_thread(fn):
    """Run `fn` with torch on one thread. These models are tiny: on a busy machine, torch's
    thread pool waiting for a free core costs far more (tens of ms per operation) than it
    saves. The trusted process's setting is restored afterwards."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        previous = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return fn(*args, **kwargs)
        finally:
            torch.set_num_threads(previous)

    return wrapper


def gpt(cfg: dict, state: dict | None = None, dtype: torch.dtype = torch.float64) -> torch.nn.Module:
    """Lesson 04's reference GPT with config `cfg`, in `dtype`, with `state` loaded."""
    mod = references.load()["model"]
    model = mod.GPT(mod.GPTConfig(**cfg)).to(dtype)
    if state is not None:
        model.load_state_dict(state)
    return model


def parameter_names(cfg: dict) -> list[str]:
    """The model's distinct parameters by name (the tied wte/lm_head weight once)."""
    return [name for name, _ in gpt(cfg).named_parameters()]


def parameter_dims(cfg: dict) -> dict[str, int]:
    return {name: p.dim() for name, p in gpt(cfg).named_parameters()}


@one_thread
def random_state(cfg: dict, generator: torch.Generator, dtype: torch.dtype = torch.float64) -> dict:
    """A state_dict with every parameter drawn at random, so no two parameters hold the same
    values (a LayerNorm's ones and zeros would be indistinguishable) and gradients are not tiny.
    The tied weight appears under both of its names with the same values."""
    model = gpt(cfg, dtype=dtype)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=generator, dtype=torch.float64).to(dtype)
            if p.dim() >= 2:
                p.copy_(noise * 0.3)
            elif ".ln_" in name and name.endswith("weight"):
                p.copy_(1.0 + noise * 0.2)
            else:
                p.copy_(noise * 0.2)
    return {key: value.detach().clone() for key, value in model.state_dict().items()}


def random_batch(cfg: dict, B: int, T: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randint(cfg["vocab_size"], (B, T), generator=generator)
    y = torch.randint(cfg["vocab_size"], (B, T), generator=generator)
    return x, y


@one_thread
def loss_and_grads(cfg: dict, state: dict, x: torch.Tensor, y: torch.Tensor) -> tuple[float, dict]:
    """The loss of batch (x, y) at weights `state` (dropout off) and its gradient, by name."""
    model = gpt(cfg, state)
    model.eval()
    _, loss = model(x, y)
    loss.backward()
    return loss.item(), {name: p.grad.detach().clone() for name, p in model.named_parameters()}


@one_thread
def loss_at(cfg: dict, state: dict, x: torch.Tensor, y: torch.Tensor, dtype=torch.float64) -> float:
    model = gpt(cfg, state, dtype)
    model.eval()
    with torch.no_grad():
        return model(x, y)[1].item()


def flat(tensors: dict, names: list[str]) -> torch.Tensor:
    """The named tensors as one float64 vector, in the order of `names`."""
    return torch.cat([tensors[name].detach().double().reshape(-1) for name in names])


def norm(v: torch.Tensor) -> float:
    return float(v.norm())


# ---------------------------------------------------------------- gradient clipping

CLIPS = ("global", "none", "value", "per_parameter", "always", "to_zero")


def clipped(grads: dict, names: list[str], max_norm: float, how: str = "global") -> torch.Tensor:
    """The gradient vector after clipping to max_norm `how`:

    global         the right one: every gradient times min(1, max_norm / (total norm + eps))
    none           not clipped at all (or clipped after optimizer.step())
    value          each component clamped to [-max_norm, max_norm] (clip_grad_value_)
    per_parameter  each parameter's gradient clipped to its own norm
    always         rescaled to norm max_norm even when it was smaller
    to_zero        clipped to a norm of 0 (grad_clip = 0 taken literally)
    """
    g = flat(grads, names)
    total = norm(g)
    if how == "global":
        return g * min(1.0, max_norm / (total + CLIP_EPS))
    if how == "none":
        return g
    if how == "value":
        return g.clamp(-max_norm, max_norm)
    if how == "per_parameter":
        return torch.cat(
            [
                grads[n].double().reshape(-1) * min(1.0, max_norm / (float(grads[n].norm()) + CLIP_EPS))
                for n in names
            ]
        )
    if how == "always":
        return g * (max_norm / (total + CLIP_EPS))
    if how == "to_zero":
        return torch.zeros_like(g)
    raise ValueError(f"unknown clipping {how!r}")


def along(u: torch.Tensor, g: torch.Tensor, tol: float = 1e-6) -> bool:
    """Whether u is a positive multiple of g (same direction), up to `tol` relative error."""
    gg = float(g @ g)
    if gg == 0 or not torch.isfinite(u).all():
        return False
    scale = float(u @ g) / gg
    return scale > 0 and norm(u - scale * g) <= tol * norm(u)


def close(u: torch.Tensor, v: torch.Tensor, rtol: float = 1e-5) -> bool:
    """Whether two vectors agree up to `rtol` of v's norm."""
    return bool(torch.isfinite(u).all()) and norm(u - v) <= rtol * max(norm(v), 1e-12)


# ---------------------------------------------------------------- learning-rate schedule

LR_BUGS = (
    "warmup_no_plus_one",
    "warmup_over_warmup_plus_one",
    "warmup_from_min",
    "warmup_inclusive",
    "no_half",
    "linear",
    "no_min_lr",
    "ratio_from_zero",
    "quarter_cosine",
    "continues_after_max",
    "zero_after_max",
    "max_after_max",
)


def lr_at(
    step: int, max_lr: float, min_lr: float, warmup: int, max_steps: int, bug: str | None = None
) -> float:
    """The learning rate of `step`: linear warmup, cosine decay, min_lr after max_steps (or one
    of LR_BUGS). Written with a branch per phase, independently of the lesson's code."""
    if bug == "warmup_inclusive" and step <= warmup:
        return max_lr * (step + 1) / warmup
    if step < warmup:
        if bug == "warmup_no_plus_one":
            return max_lr * step / warmup
        if bug == "warmup_over_warmup_plus_one":
            return max_lr * (step + 1) / (warmup + 1)
        if bug == "warmup_from_min":
            return min_lr + (max_lr - min_lr) * (step + 1) / warmup
        return max_lr * (step + 1) / warmup
    if step >= max_steps and bug != "continues_after_max":
        return {"zero_after_max": 0.0, "max_after_max": max_lr}.get(bug, min_lr)
    progress = (step - warmup) / (max_steps - warmup)
    if bug == "ratio_from_zero":
        progress = step / max_steps
    if bug == "linear":
        return min_lr + (1.0 - progress) * (max_lr - min_lr)
    if bug == "quarter_cosine":
        return min_lr + math.cos(0.5 * math.pi * progress) * (max_lr - min_lr)
    weight = 0.5 * (1.0 + math.cos(math.pi * progress))
    if bug == "no_half":
        weight = 1.0 + math.cos(math.pi * progress)
    if bug == "no_min_lr":
        return weight * max_lr
    return min_lr + weight * (max_lr - min_lr)
