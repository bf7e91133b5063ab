"""Hidden checks of MLP (TODO [mlp]): its layers, its output against trusted math with the same
weights, and its dropout."""

from __future__ import annotations

import pytest
import torch

from autograder.core.results import message
from autograder.engine import recording
from autograder.engine.checks import fail
from autograder.engine.feedback import compare
from autograder.engine.grader_helpers import generator

from .harness import (
    MAIN,
    MAIN_B,
    MAIN_T,
    SMALL,
    Learner,
    close,
    expect_close,
    expect_finite,
    expect_shape,
    mlp_weights,
)

ref = recording.reference_of(__package__)

# The layers the interface names (lessons 05 and 06 load weights by these names).
LAYERS = {"c_fc": "Linear", "gelu": "GELU", "c_proj": "Linear", "dropout": "Dropout"}


def _children(submission, handle) -> dict:
    pairs = submission.request("call", target=handle, method="named_children", options={"materialize": True})
    return {str(name): child for name, child in pairs}


@pytest.mark.check("mlp-structure")
def test_mlp_structure(submission, check_seed):
    cfg = {**MAIN, "dropout": 0.3}
    C = cfg["n_embd"]
    mlp = Learner(submission, "MLP", cfg)
    children = _children(submission, mlp.handle)
    found = ", ".join(f"{name} ({child.type})" for name, child in children.items()) or "—"
    missing = [name for name in LAYERS if name not in children]
    if missing:
        fail(message("lesson04.mlp_missing", names=", ".join(missing), found=found))
    sd = submission.call(mlp.handle, method="state_dict")
    expected = {
        "c_fc.weight": (4 * C, C),
        "c_fc.bias": (4 * C,),
        "c_proj.weight": (C, 4 * C),
        "c_proj.bias": (C,),
    }
    for key, shape in expected.items():
        got = tuple(sd[key].shape) if key in sd else None
        if got == shape:
            continue
        hint = None
        if key.endswith("weight") and got is not None and len(got) == 2:
            if got == shape[::-1]:
                hint = message("lesson04.diag_linear_reversed", name=key.split(".")[0])
            elif C in got and 4 * C not in got:
                hint = message("lesson04.diag_no_widening", C=C)
        fail(
            message("lesson04.mlp_shape", name=key, got=got if got is not None else "—", expected=shape, C=C),
            hint,
        )
    for name, kind in LAYERS.items():
        if children[name].type != kind:
            fail(message("lesson04.mlp_layer_type", name=name, got=children[name].type, expected=kind))
    p = submission.getattr(children["dropout"], "p")
    if not isinstance(p, float) or abs(p - cfg["dropout"]) > 1e-12:
        fail(message("lesson04.mlp_dropout_p", got=p, expected=cfg["dropout"]))
    x = torch.randn(MAIN_B, MAIN_T, C, generator=generator(check_seed))
    y = mlp.forward(x)
    expect_shape(y, x.shape, mlp.called(x))


# What the MLP gives with a known mistake, and what to say when the output matches it.
_MLP_MISTAKES = (
    ({"act": "relu"}, "lesson04.diag_relu"),
    ({"act": "gelu_tanh"}, "lesson04.diag_gelu_tanh"),
    ({"act": "none"}, "lesson04.diag_no_activation"),
    ({"order": "fc_proj_act"}, "lesson04.diag_gelu_after_proj"),
)


def _mlp_diagnoses(x, sd):
    outputs = ref.mlp_mistakes(x, sd, [options for options, _ in _MLP_MISTAKES])
    return [(value, message(key)) for value, (_, key) in zip(outputs, _MLP_MISTAKES)]


@pytest.mark.check("mlp-parity")
def test_mlp_parity(submission, check_seed):
    gen = generator(check_seed)
    for cfg, T, B in ((MAIN, MAIN_T, MAIN_B), (SMALL, 1, 3)):
        judge_mlp_parity(submission, gen, cfg, T, B, grads=cfg is MAIN)


def judge_mlp_parity(submission, gen: torch.Generator, cfg: dict, T: int, B: int = 3, *, grads: bool = False):
    """The learner's MLP with the grader's weights on a (B, T, C) input against trusted math
    (and, with `grads`, its gradients)."""
    C = cfg["n_embd"]
    sd = mlp_weights(C, gen)
    mlp = Learner(submission, "MLP", cfg, sd)
    x = torch.randn(B, T, C, generator=gen)
    y = mlp.forward(x)
    expect_shape(y, x.shape, mlp.called(x))
    expect_close(
        y,
        ref.mlp(x, sd),
        message("lesson04.what_output"),
        mlp.called(x),
        *_mlp_diagnoses(x, sd),
        hint=message("lesson04.mlp_hint"),
    )
    if grads:
        _judge_grads(mlp, x, sd, gen)


GRAD_ATOL = GRAD_RTOL = 1e-4


def _judge_grads(mlp: Learner, x: torch.Tensor, sd: dict, gen: torch.Generator) -> None:
    """The gradient of <mlp(x), v> reaches every weight of the MLP and x, as with trusted math
    (a forward computed under torch.no_grad() or detached gives the right values and never
    trains)."""
    v = torch.randn(x.shape, generator=gen)
    grads, x_grad = mlp.grads(x, v)
    expected, expected_x = ref.mlp_grads(x, sd, v)
    called = mlp.called_grads(x)
    if not any(bool(g.abs().sum() > 0) for g in grads.values()) and not bool(x_grad.abs().sum() > 0):
        fail(called, message("lesson04.mlp_no_grad"), message("lesson04.mlp_hint"))
    for name, value in expected.items():
        got = grads.get(name)
        if got is None:
            continue  # a layer under another name: mlp-structure says which
        problem = compare(
            got,
            value,
            what=message("lesson04.what_param_grad", name=name),
            atol=GRAD_ATOL,
            rtol=GRAD_RTOL,
        )
        if problem:
            fail(called, problem, message("lesson04.mlp_grad_hint"))
    problem = compare(
        x_grad, expected_x, what=message("lesson04.what_input_grad"), atol=GRAD_ATOL, rtol=GRAD_RTOL
    )
    if problem:
        fail(called, problem, message("lesson04.mlp_grad_hint"))


# Two probabilities, neither nn.Dropout's default 0.5 nor mlp-structure's 0.3: a p written as a
# constant somewhere in the MLP matches at most one of them.
DROPOUT_PS = (0.6, 0.25)
DROPOUT_SEEDS = (1, 2)  # torch.manual_seed before each train-mode call
# A dropout drawn otherwise than nn.Dropout (by hand, from torch.rand) is judged by its pattern:
# the share of zeros within this many standard deviations of p (B*T*C = 840 values: +-0.08).
ZEROS_SIGMAS = 5


@pytest.mark.check("mlp-dropout")
def test_mlp_dropout(submission, check_seed):
    """Judged against the learner's own MLP with dropout=0 and the same weights, so that a bug in
    the layers (mlp-parity's business) is not reported as a dropout bug. Eval: no dropout. Train,
    under torch.manual_seed(s): what nn.Dropout(p) gives on that output with the same seed (the
    reference's mask); a dropout drawn otherwise passes when every value is 0 or the value
    without dropout / (1 - p), about a fraction p of them 0."""
    gen = generator(check_seed)
    C = MAIN["n_embd"]
    sd = mlp_weights(C, gen)
    x = torch.randn(MAIN_B, MAIN_T, C, generator=gen)
    plain = Learner(submission, "MLP", MAIN, sd).forward(x)
    for p in DROPOUT_PS:
        _judge_dropout(submission, sd, x, plain, p)


def _judge_dropout(submission, sd: dict, x: torch.Tensor, plain: torch.Tensor, p: float) -> None:
    cfg = {**MAIN, "dropout": p}
    C = cfg["n_embd"]
    mlp = Learner(submission, "MLP", cfg, sd)
    expect_finite(plain, mlp.called(x))
    first, second = (mlp.forward(x, seed=seed) for seed in DROPOUT_SEEDS)
    expect_shape(first, x.shape, mlp.called(x))
    problem = compare(first, plain, what=message("lesson04.what_output_eval"))
    if problem or not torch.equal(first, second):
        fail(mlp.called(x), message("lesson04.dropout_in_eval"), problem)
    mlp.mode(True)
    a, b = (mlp.forward(x, seed=seed) for seed in DROPOUT_SEEDS)
    expect_finite(a, mlp.called(x))
    if torch.equal(a, b):
        fail(mlp.called(x), message("lesson04.dropout_inactive", p=p))
    keep = ref.dropout_keep(tuple(x.shape), p, DROPOUT_SEEDS[0])
    if tuple(a.shape) == tuple(plain.shape) and close(a, plain * keep / (1 - p), 1e-6, 1e-5):
        return  # nn.Dropout(p)'s own draw under the same seed
    kept = a != 0
    zeros = 1.0 - float(kept.double().mean())
    scaled_right = tuple(a.shape) == tuple(plain.shape) and torch.allclose(
        a[kept].double(), plain[kept].double() / (1 - p), atol=1e-4, rtol=1e-4
    )
    spread = ZEROS_SIGMAS * (p * (1 - p) / a.numel()) ** 0.5
    if scaled_right and abs(zeros - p) <= spread:
        return
    before_proj = [t for t in mlp.inputs_of(x, "dropout") if t.shape[-1] == 4 * C]
    q = _other_p(a, plain, kept, p)
    if before_proj:
        diagnosis = message("lesson04.diag_dropout_before_proj")
    elif q is not None:
        diagnosis = message("lesson04.diag_dropout_other_p", q=q, p=p)
    else:
        diagnosis = message("lesson04.dropout_hint")
    fail(mlp.called(x), message("lesson04.dropout_pattern", p=p, zeros=f"{zeros:.2f}"), diagnosis)


def _other_p(a: torch.Tensor, plain: torch.Tensor, kept: torch.Tensor, p: float) -> str | None:
    """The p of the dropout the learner applied, when every value kept is the value without
    dropout times one same factor 1/(1 - q) with q other than p (a p written as a constant)."""
    if tuple(a.shape) != tuple(plain.shape):
        return None
    base = plain[kept].double()
    usable = base.abs() > 1e-3
    if not bool(usable.any()):
        return None
    ratios = a[kept].double()[usable] / base[usable]
    factor = float(ratios.mean())
    if factor <= 0 or float((ratios - factor).abs().max()) > 1e-3 * factor:
        return None
    q = 1 - 1 / factor
    return f"{q:.3g}" if 0 <= q < 1 and abs(q - p) > 1e-3 else None
