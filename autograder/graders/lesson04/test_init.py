"""Hidden checks of GPT's initialisation (TODO [init]), measured on the learner's own
initialisation of two mid-sized models (n_layer 3 and 5, n_head on either side of it) built
after torch.manual_seed(INIT_SEED).

Every tensor judged has at least 1792 entries, so a sample standard deviation is within ~2 %
of the true one: each tensor's bounds are +-10 % on the std and 0.15 std on the mean. Each kind
(the N(0, 0.02) weights, the residual projections) is also judged pooled over all its tensors
(tens of thousands of entries, ~0.3 % sampling error) to +-3 % on the std and 0.05 std on the
mean, so a slightly wrong deviation (0.02/sqrt(2*n_layer + 1)) or a shifted mean shows. The
draw is fixed: these checks never flake.
"""

from __future__ import annotations

import math

import pytest
import torch

from autograder.core.results import Block, message
from autograder.engine import recording
from autograder.engine.checks import fail
from autograder.engine.feedback import fmt_pair
from autograder.engine.grader_helpers import generator, tokens

from .harness import INIT, INIT_SEED, INITS, Learner, expect_finite, untied_by_init

ref = recording.reference_of(__package__)

STD_TOLERANCE = 0.10  # relative, each tensor
MEAN_TOLERANCE = 0.15  # |mean| as a share of the expected std, each tensor
POOLED_STD_TOLERANCE = 0.03  # relative, a kind's tensors pooled
POOLED_MEAN_TOLERANCE = 0.05
# A weight with fewer entries has no std worth measuring: the course's layers at these sizes have
# 1792 at least, so only a layer of another shape (TODO [mlp]'s mistake, which mlp-structure
# reports) is that small.
MIN_ENTRIES = 256
RESIDUAL = ("attn.proj.weight", "mlp.c_proj.weight")
TIED = ("transformer.wte.weight", "lm_head.weight")


def _initialised(submission, cfg: dict) -> tuple[Learner, dict]:
    model = Learner(submission, "GPT", cfg, seed=INIT_SEED)
    if recording.eager():
        # The diagnoses ask for these with the fan-ins of the course's layers (C and 4C).
        for fan_in in (1, cfg["n_embd"], 4 * cfg["n_embd"]):
            ref.default_linear_std(fan_in)
        ref.residual_std(cfg["n_layer"])
    return model, model.parameters_named()


def _kind(name: str) -> str:
    if ".ln_" in name or name.startswith("transformer.ln_f"):
        return "norm"
    if name.endswith(RESIDUAL):
        return "residual"
    return "weight" if name.endswith(".weight") else "bias"


def _near(std: float, target: float, tolerance: float = STD_TOLERANCE) -> bool:
    return abs(std - target) <= tolerance * target


def _normal_like(d: torch.Tensor, target: float) -> bool:
    """One tensor's std and mean are those of N(0, target) drawn at its size."""
    return _near(d.std().item(), target) and abs(d.mean().item()) < MEAN_TOLERANCE * target


def _fan_in(p: torch.Tensor) -> int:
    return p.shape[1] if p.dim() == 2 else 1


def _std_diagnosis(p: torch.Tensor, std: float, n_layer: int):
    """Why a weight that should be N(0, 0.02) has this spread."""
    if _near(std, 1.0):
        return message("lesson04.diag_init_default_embedding")
    default = recording.for_diagnosis(ref.default_linear_std, _fan_in(p)) if p.dim() == 2 else None
    if default is not None and _near(std, default):
        return message("lesson04.diag_init_default_linear")
    if _near(std, ref.residual_std(n_layer)):
        return message("lesson04.diag_init_rescaled_too_much")
    return None


def _line(name: str, p: torch.Tensor, expected: float) -> str:
    """A language-neutral line for the Block listing wrong tensors (std and mean as in torch),
    with "≠" after each of the two that is off."""
    p = p.double()
    std, mean = p.std().item(), p.mean().item()
    got, want = fmt_pair(std, expected)
    std_text = f"std() = {got}" + ("" if _near(std, expected) else f" (≠ {want})")
    mean_text = f"mean() = {mean:.2g}" + ("" if abs(mean) < MEAN_TOLERANCE * expected else " (≠ 0)")
    return f"{name}: {std_text}, {mean_text}"


def _pooled_line(names: list[str], values: list[torch.Tensor], expected: float, what: str):
    """None when the tensors pooled have N(0, expected)'s std and mean to the pooled tolerance;
    otherwise a line saying what the pool gives."""
    pooled = torch.cat([v.detach().double().flatten() for v in values])
    std, mean = pooled.std().item(), pooled.mean().item()
    if _near(std, expected, POOLED_STD_TOLERANCE) and abs(mean) < POOLED_MEAN_TOLERANCE * expected:
        return None
    got, want = fmt_pair(std, expected)
    return message(
        "lesson04.init_pooled_wrong",
        what=message(what),
        count=len(names),
        total=pooled.numel(),
        std=got,
        expected=want,
        mean=f"{mean:.2g}",
    )


@pytest.mark.check("init-std")
def test_init_std(submission):
    for cfg in INITS:
        _judge_init_std(submission, cfg)


def _judge_init_std(submission, cfg: dict) -> None:
    model, params = _initialised(submission, cfg)
    if all(name in params for name in TIED) and untied_by_init(submission, cfg, INIT_SEED):
        # Parameters replaced by new nn.Parameter objects: right values, but lm_head no longer
        # shares the embedding's (the tying checks wait on this one).
        fail(
            message("lesson04.called_init", call=model.call_text, seed=INIT_SEED),
            message("lesson04.diag_init_replaces_parameters"),
            message("lesson04.init_hint"),
        )
    wrong, diagnosis = [], None
    weights: dict[str, torch.Tensor] = {}
    for name, p in params.items():
        if p.dtype != torch.float32:
            # A parameter made in another dtype (torch.randn(..., dtype=torch.float64)): the
            # forward pass would mix dtypes.
            wrong.append(f"{name}: dtype {str(p.dtype).removeprefix('torch.')} (≠ float32)")
            diagnosis = diagnosis or message("lesson04.diag_init_dtype")
            continue
        kind, d = _kind(name), p.detach().double()
        if kind in ("weight", "residual") and d.numel() < MIN_ENTRIES:
            continue
        if kind == "weight":
            weights[name] = d
            if not _normal_like(d, ref.INIT_STD):
                wrong.append(_line(name, p, ref.INIT_STD))
                diagnosis = diagnosis or _std_diagnosis(p, d.std().item(), cfg["n_layer"])
        elif kind == "bias" and bool((d != 0).any()):
            wrong.append(f"{name}: {int((d != 0).sum())}/{d.numel()} ≠ 0")
            default = recording.for_diagnosis(ref.default_linear_std, _bias_fan_in(name, params))
            diagnosis = diagnosis or message(
                "lesson04.diag_init_bias_default"
                if default is not None and _near(d.std().item(), default)
                else "lesson04.diag_init_bias"
            )
        elif kind == "norm":
            want = 1.0 if name.endswith("weight") else 0.0
            if not bool((d == want).all()):
                wrong.append(f"{name}: {int((d != want).sum())}/{d.numel()} ≠ {want:g}")
                diagnosis = diagnosis or message("lesson04.diag_init_layernorm")
    if wrong:
        fail(
            message("lesson04.called_init", call=model.call_text, seed=INIT_SEED),
            message("lesson04.init_wrong", count=len(wrong)),
            Block("\n".join(wrong[:6]), kind="table"),
            diagnosis,
            message("lesson04.init_hint"),
        )
    pooled = (
        _pooled_line(list(weights), list(weights.values()), ref.INIT_STD, "lesson04.what_init_weights")
        if weights
        else None
    )
    if pooled is not None:
        fail(
            message("lesson04.called_init", call=model.call_text, seed=INIT_SEED),
            pooled,
            message("lesson04.init_hint"),
        )


def _bias_fan_in(name: str, params: dict) -> int:
    weight = params.get(name[: -len("bias")] + "weight")
    return _fan_in(weight) if weight is not None else 1


@pytest.mark.check("init-residual")
def test_init_residual(submission):
    for cfg in INITS:
        _judge_init_residual(submission, cfg)


def _judge_init_residual(submission, cfg: dict) -> None:
    model, params = _initialised(submission, cfg)
    L = cfg["n_layer"]
    target = ref.residual_std(L)
    found = {name: p.detach().double() for name, p in params.items() if name.endswith(RESIDUAL)}
    # As many as the model has blocks (a model with another number of blocks is given code's
    # mistake, which num-params and model-parity report). An MLP whose output layer is not
    # called c_proj is TODO [mlp]'s mistake (mlp-structure names it): then only the attention's
    # projections, which the worker's attention always has, are judged here.
    blocks = {name.split(".")[2] for name in params if name.startswith("transformer.h.")}
    expected = len(blocks) * (1 + any(name.endswith(RESIDUAL[1]) for name in params))
    if len(found) != expected or not found:
        fail(message("lesson04.init_residual_missing", names=", ".join(found) or "—", count=expected))
    measured = {name: d for name, d in found.items() if d.numel() >= MIN_ENTRIES}
    wrong = {name: d.std().item() for name, d in measured.items() if not _normal_like(d, target)}
    lines = [_line(name, params[name], target) for name in wrong]
    if not wrong:
        pooled = (
            _pooled_line(list(measured), list(measured.values()), target, "lesson04.what_init_residual")
            if measured
            else None
        )
        if pooled is None:
            return
        fail(
            message("lesson04.called_init", call=model.call_text, seed=INIT_SEED),
            pooled,
            message("lesson04.init_residual_hint", L=L),
        )
    std = next(iter(wrong.values()))
    fixed = {
        suffix
        for suffix in RESIDUAL
        if any(name.endswith(suffix) for name in found) and not any(name.endswith(suffix) for name in wrong)
    }
    candidates = (
        (ref.INIT_STD, "lesson04.diag_residual_not_rescaled"),
        (ref.INIT_STD / math.sqrt(L), "lesson04.diag_residual_no_two"),
        (ref.INIT_STD / (2 * L), "lesson04.diag_residual_no_sqrt"),
        (ref.INIT_STD / math.sqrt(2), "lesson04.diag_residual_no_layers"),
        (ref.INIT_STD * math.sqrt(2 * L), "lesson04.diag_residual_multiplied"),
        (ref.INIT_STD / math.sqrt(2 * cfg["n_head"]), "lesson04.diag_residual_n_head"),
    )
    means = [abs(found[name].mean().item()) for name in wrong]
    if fixed:
        diagnosis = message(
            "lesson04.diag_residual_only",
            done=" y ".join(sorted(fixed)),
            missing=" y ".join(s for s in RESIDUAL if s not in fixed),
        )
    elif _near(std, target) and min(means) >= MEAN_TOLERANCE * target:
        diagnosis = message("lesson04.diag_residual_mean")
    else:
        diagnosis = next(
            (message(key, L=L, n_head=cfg["n_head"]) for value, key in candidates if _near(std, value, 0.05)),
            None,
        )
        default = recording.for_diagnosis(ref.default_linear_std, _fan_in(params[next(iter(wrong))]))
        if diagnosis is None and default is not None and _near(std, default):
            diagnosis = message("lesson04.diag_init_default_linear")
    fail(
        message("lesson04.called_init", call=model.call_text, seed=INIT_SEED),
        message("lesson04.init_residual_wrong", count=len(wrong), total=len(found)),
        Block("\n".join(lines[:6]), kind="table"),
        diagnosis,
        message("lesson04.init_residual_hint", L=L),
    )


@pytest.mark.check("initial-loss")
def test_initial_loss(submission, check_seed):
    """With small weights every logit starts near 0, so the prediction is almost uniform and the
    loss is close to ln(V): about ln(V) + C * 0.02^2 / 2 here, 0.013 above it."""
    gen = generator(check_seed)
    model = Learner(submission, "GPT", INIT, seed=INIT_SEED)
    V = INIT["vocab_size"]
    idx, targets = tokens(16, INIT["block_size"], V, gen), tokens(16, INIT["block_size"], V, gen)
    logits, loss = model.logits_loss(idx, targets)
    called = message(
        "lesson04.called_init_loss", call=model.call_text, seed=INIT_SEED, shape=tuple(idx.shape)
    )
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        fail(called, message("lesson04.loss_not_scalar", got=type(loss).__name__))
    expect_finite(loss, called)
    value, ln_v = float(loss), math.log(V)
    if abs(value - ln_v) <= 0.06:
        return
    spread = float(logits.double().std())
    fail(
        called,
        message("lesson04.initial_loss_far", loss=f"{value:.4f}", ln_v=f"{ln_v:.4f}", V=V),
        message(
            "lesson04.initial_logits",
            std=f"{spread:.3g}",
            expected=f"{ref.INIT_STD * math.sqrt(INIT['n_embd']):.2g}",
        ),
        message("lesson04.init_hint"),
    )
