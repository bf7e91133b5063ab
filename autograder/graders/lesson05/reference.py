"""Trusted reference math for lesson 05, written independently of solutions/.

The model is lesson 04's reference GPT, loaded in this process by `autograder.engine.references`
(our own code, the same file the worker serves), so gradients and losses are computed here on
the very weights the grader sent to the worker. Everything is float64 unless said otherwise.
Functions take options that reproduce a recognisable bug; the graders compare a learner's
result with them to say what went wrong ("your schedule matches a linear decay").

Every public function takes and returns data only (tensors, numbers, strings, dicts and lists
of them), never the model itself: in a learner's release this file is absent and the graders'
calls are answered from a recording of them (autograder/engine/recording.py).
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


def _gpt(cfg: dict, state: dict | None = None, dtype: torch.dtype = torch.float64) -> torch.nn.Module:
    """Lesson 04's reference GPT with config `cfg`, in `dtype`, with `state` loaded. Private: a
    module is never handed to a grader (it could not be recorded for practice grading); the
    functions below compute with it and return tensors and numbers."""
    mod = references.load()["model"]
    model = mod.GPT(mod.GPTConfig(**cfg)).to(dtype)
    if state is not None:
        model.load_state_dict(state)
    return model


def _architecture(cfg: dict) -> tuple:
    """(parameters as (name, dim), state_dict as (key, shape, tied_to)) of the GPT with config
    `cfg`: what the layout functions below read. A function of the config alone (no weights), so
    it is built once per config: a grading asks for it some forty times, each costing a model."""
    key = tuple(sorted(cfg.items()))
    known = _ARCHITECTURES.get(key)
    if known is None:
        model = _gpt(cfg)
        names = {id(p): name for name, p in model.named_parameters()}
        params = tuple((name, p.dim()) for name, p in model.named_parameters())
        state = []
        for name, value in model.state_dict(keep_vars=True).items():
            owner = names.get(id(value))
            state.append((name, tuple(value.shape), owner if owner not in (None, name) else None))
        known = _ARCHITECTURES[key] = (params, tuple(state))
    return known


_ARCHITECTURES: dict[tuple, tuple] = {}


def parameter_names(cfg: dict) -> list[str]:
    """The model's distinct parameters by name (the tied wte/lm_head weight once)."""
    return [name for name, _ in _architecture(cfg)[0]]


def parameter_dims(cfg: dict) -> dict[str, int]:
    return dict(_architecture(cfg)[0])


def state_layout(cfg: dict) -> list:
    """The model's state_dict as [key, shape, tied_to] in its order: tied_to is the name of the
    parameter a key shares its tensor with (lm_head.weight: transformer.wte.weight), else None."""
    return [[key, list(shape), tied_to] for key, shape, tied_to in _architecture(cfg)[1]]


def initial_state(cfg: dict, seed: int) -> dict:
    """The GPT's own initialisation (lesson 04) in float32, drawn after torch.manual_seed(seed)
    without touching the trusted process's global generator."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return {
            key: value.detach().clone() for key, value in _gpt(cfg, dtype=torch.float32).state_dict().items()
        }


@one_thread
def loss_and_grads(cfg: dict, state: dict, x: torch.Tensor, y: torch.Tensor) -> tuple[float, dict]:
    """The loss of batch (x, y) at weights `state` (dropout off) and its gradient, by name."""
    model = _gpt(cfg, state)
    model.eval()
    _, loss = model(x, y)
    loss.backward()
    return loss.item(), {name: p.grad.detach().clone() for name, p in model.named_parameters()}


@one_thread
def loss_at(cfg: dict, state: dict, x: torch.Tensor, y: torch.Tensor, dtype=torch.float64) -> float:
    model = _gpt(cfg, state, dtype)
    model.eval()
    with torch.no_grad():
        return model(x, y)[1].item()


def _flat(tensors: dict, names: list[str]) -> torch.Tensor:
    return torch.cat([tensors[name].detach().double().reshape(-1) for name in names])


# ---------------------------------------------------------------- gradient clipping

CLIPS = ("global", "none", "value", "per_parameter", "always", "to_zero", "twice")


def clipped(grads: dict, names: list[str], max_norm: float, how: str = "global") -> torch.Tensor:
    """The gradient vector after clipping to max_norm `how`:

    global         the right one: every gradient times min(1, max_norm / (total norm + eps))
    none           not clipped at all (or clipped after optimizer.step())
    value          each component clamped to [-max_norm, max_norm] (clip_grad_value_)
    per_parameter  each parameter's gradient clipped to its own norm
    always         rescaled to norm max_norm even when it was smaller
    to_zero        clipped to a norm of 0 (grad_clip = 0 taken literally)
    twice          clipped globally twice in a row: each clip_grad_norm_ divides by the norm
                   plus CLIP_EPS, so the second shortens the step by about CLIP_EPS / max_norm
    """
    g = _flat(grads, names)
    total = float(g.norm())
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
    if how == "twice":
        once = g * min(1.0, max_norm / (total + CLIP_EPS))
        return once * min(1.0, max_norm / (float(once.norm()) + CLIP_EPS))
    raise ValueError(f"unknown clipping {how!r}")


@one_thread
def clip_case(
    cfg: dict, state: dict, x: torch.Tensor, y: torch.Tensor, factor: float, suspects: tuple
) -> dict:
    """What a clipping check judges, all computed here from the grader's own inputs (so that a
    recording can answer it): the gradient's norm `total`, grad_clip = factor * total (for
    factor < 1, also at most half the largest component, so that clamping each component, a
    different bug from not clipping at all, changes the gradient, and at most 0.02: below 1, so
    that a clipping that only starts above 1, `grad_clip > 1` where `> 0` is meant, shows, and
    small enough that clipping twice, which shortens the step by CLIP_EPS / grad_clip, differs
    by 5e-5 of the norm, five times the checks' tolerance, while a clipping written by hand
    without the epsilon differs by CLIP_EPS / total, far below it), the update a right
    train_step gives with SGD of lr 1 (`expected`), and what each clipping mistake in
    `suspects` would give instead (`suspects`: {how: vector})."""
    names = parameter_names(cfg)
    _, grads = loss_and_grads(cfg, state, x, y)
    g = _flat(grads, names)
    total = float(g.norm())
    clip = factor * total
    if factor < 1:
        clip = min(clip, 0.5 * float(g.abs().max()), 0.02)
    # float32 vectors: the checks compare them to 1e-5 of their norm, and the recording that
    # answers practice grading stays half the size.
    return {
        "total": total,
        "clip": clip,
        "expected": clipped(grads, names, clip, "global" if clip > 0 else "none").float(),
        "suspects": {how: clipped(grads, names, clip, how).float() for how in suspects},
    }


def gradient(cfg: dict, state: dict, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The gradient of batch (x, y)'s loss at `state`, as one vector in the order of
    parameter_names(cfg) (float32: the checks judge its direction to 1e-6)."""
    _, grads = loss_and_grads(cfg, state, x, y)
    return _flat(grads, parameter_names(cfg)).float()


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


def lr_table(
    steps: list[int], max_lr: float, min_lr: float, warmup: int, max_steps: int, bugs: tuple
) -> dict:
    """{"right": [lr of each step], bug: [lr of each step with that bug] for bug in `bugs`}."""
    table = {"right": [lr_at(step, max_lr, min_lr, warmup, max_steps) for step in steps]}
    for bug in bugs:
        table[bug] = [lr_at(step, max_lr, min_lr, warmup, max_steps, bug) for step in steps]
    return table
