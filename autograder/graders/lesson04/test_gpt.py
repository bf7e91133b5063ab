"""Hidden checks of GPT: weight tying (TODO [weight-tying]), and three checks of the whole model
that belong to no single TODO (parameter count, parity with trusted math, no leak from the
future); their messages say which TODO to look at."""

from __future__ import annotations

import pytest
import torch

from autograder.core.results import Feedback, Figure, message
from autograder.engine import recording
from autograder.engine.checks import CheckFailure, describe_student_error, fail
from autograder.engine.feedback import compare, heatmap, leaking_cells
from autograder.engine.grader_helpers import generator, tokens
from autograder.sandbox.client import StudentError

from .harness import (
    DEEP,
    DEEP_B,
    DEEP_T,
    MAIN,
    MAIN_B,
    MAIN_T,
    MODEL_ATOL,
    MODEL_RTOL,
    SMALL,
    Learner,
    expect_finite,
    expect_shape,
    first_match,
    gpt_weights,
    needs_reference_attention,
    untied_by_init,
)

ref = recording.reference_of(__package__)

WTE, HEAD = "transformer.wte.weight", "lm_head.weight"


def _own_init(submission, check_seed, cfg=MAIN) -> Learner:
    return Learner(submission, "GPT", cfg, seed=check_seed % 10_000)


def _read(submission, model: Learner, path: str) -> torch.Tensor:
    return submission.getattr(model.child(path), "weight")


def _write(submission, model: Learner, path: str, value: torch.Tensor) -> None:
    submission.call(model.child(path), {"weight": value}, method="load_state_dict", strict=False)


def _shared_through(submission, model: Learner, gen) -> list:
    """Which of the two directions (write through one, read through the other) fail."""
    cfg = model.cfg
    broken = []
    for source, target in (("lm_head", "transformer.wte"), ("transformer.wte", "lm_head")):
        before = _read(submission, model, target)
        value = torch.randn(cfg["vocab_size"], cfg["n_embd"], generator=gen)
        _write(submission, model, source, value)
        seen = _read(submission, model, target)
        if not (isinstance(seen, torch.Tensor) and seen.shape == value.shape and torch.equal(seen, value)):
            broken.append(
                (
                    source,
                    target,
                    isinstance(seen, torch.Tensor)
                    and isinstance(before, torch.Tensor)
                    and seen.shape == before.shape
                    and torch.equal(seen, before),
                )
            )
    return broken


def _tying_or_init(submission, check_seed, *parts) -> None:
    """Fails with `parts` for TODO [weight-tying], or, when the learner's initialisation is what
    untied the two, says so and waits on TODO [init] (whose init-std check reports it)."""
    if untied_by_init(submission, MAIN, check_seed % 10_000):
        fail(parts[0], message("lesson04.tying_undone_by_init"), waits_on="init")
    fail(*parts, message("lesson04.tying_hint"))


# ---------------------------------------------------------------- TODO [weight-tying]


@pytest.mark.check("tying-shared")
def test_tying_shared(submission, check_seed):
    """A change made through lm_head is seen through the token embedding, and the other way."""
    gen = generator(check_seed)
    model = _own_init(submission, check_seed)
    broken = _shared_through(submission, model, gen)
    if broken:
        source, target, unchanged = broken[0]
        _tying_or_init(
            submission,
            check_seed,
            message("lesson04.tying_not_shared", source=source, target=target),
            message("lesson04.diag_tying_copy" if unchanged else "lesson04.diag_tying_other", target=target),
        )


@pytest.mark.check("tying-once")
def test_tying_once(submission, check_seed):
    """The tied matrix is one parameter: it appears once in model.parameters()."""
    gen = generator(check_seed)
    model = _own_init(submission, check_seed)
    params = model.parameters_named()
    V, C = MAIN["vocab_size"], MAIN["n_embd"]
    listed = [name for name in (WTE, HEAD) if name in params]
    if len(listed) == 1:
        # One of the two names, once: they are one parameter (another parameter of the same
        # shape elsewhere, an MLP layer of V channels, is no tying matter).
        return
    if len(listed) == 2:
        shares_memory = not _shared_through(submission, model, gen)
        _tying_or_init(
            submission,
            check_seed,
            message("lesson04.tying_twice", V=V, C=C),
            message(
                "lesson04.diag_tying_data" if shares_memory else "lesson04.diag_tying_copy",
                target="transformer.wte",
            ),
        )
    same_shape = [name for name, p in params.items() if tuple(p.shape) == (V, C)]
    fail(
        message("lesson04.tying_listed", names=", ".join(same_shape) or "—", V=V, C=C),
        message("lesson04.tying_hint"),
    )


# ---------------------------------------------------------------- the whole model


@pytest.mark.check("num-params")
def test_num_params(submission, check_seed):
    for cfg in (MAIN, SMALL, DEEP):
        model = _own_init(submission, check_seed, cfg)
        count = submission.call(model.handle, method="num_params")
        expected = ref.param_count(cfg)
        if recording.eager():
            ref.mlp_param_count(cfg["n_embd"])
        if count == expected:
            continue
        V, C, L, bs = cfg["vocab_size"], cfg["n_embd"], cfg["n_layer"], cfg["block_size"]
        formula = message("lesson04.param_formula", V=V, C=C, L=L, bs=bs, expected=expected)
        params = model.parameters_named()
        mlp = sum(p.numel() for name, p in params.items() if name.startswith("transformer.h.0.mlp."))
        if isinstance(count, int) and count - expected == V * C:
            hint = message(
                "lesson04.diag_params_untied_by_init"
                if untied_by_init(submission, cfg, check_seed % 10_000)
                else "lesson04.diag_params_untied",
                extra=V * C,
            )
        elif mlp != ref.mlp_param_count(C):
            hint = message("lesson04.diag_params_mlp", got=mlp, expected=ref.mlp_param_count(C), C=C)
        else:
            hint = message("lesson04.params_breakdown")
        fail(
            message("lesson04.called_num_params", call=model.call_text),
            message("lesson04.params_wrong", got=count, expected=expected),
            formula,
            hint,
        )


# Recognisable wirings of the whole model, and what to say when the logits match one.
_MODEL_VARIANTS = (
    ({"wiring": "post"}, "lesson04.diag_post_norm"),
    ({"wiring": "no_norm"}, "lesson04.diag_model_no_norm"),
    ({"wiring": "swapped_norms"}, "lesson04.diag_model_swapped_norms"),
    ({"wiring": "no_residual_attn"}, "lesson04.diag_no_residual_attn"),
    ({"wiring": "no_residual_mlp"}, "lesson04.diag_no_residual_mlp"),
    ({"wiring": "parallel"}, "lesson04.diag_mlp_sees_old_x"),
    ({"wiring": "attn_not_added"}, "lesson04.diag_attn_not_added"),
    ({"wiring": "residual_normed"}, "lesson04.diag_residual_normed"),
    ({"act": "relu"}, "lesson04.diag_relu"),
    ({"act": "gelu_tanh"}, "lesson04.diag_gelu_tanh"),
)


def _variant_logits(idx: torch.Tensor, sd: dict, cfg: dict) -> list:
    """[(logits, diagnosis)] of the whole model wired or activated as each known mistake."""
    logits = ref.gpt_mistakes(idx, sd, cfg, [options for options, _ in _MODEL_VARIANTS])
    return [(value, message(key)) for value, (_, key) in zip(logits, _MODEL_VARIANTS)]


@pytest.mark.check("model-parity")
def test_model_parity(submission, check_seed):
    needs_reference_attention(submission)
    gen = generator(check_seed)
    cases = (
        (MAIN, MAIN_T, MAIN_B),
        (MAIN, MAIN["block_size"], 4),
        (SMALL, 1, 2),
        (SMALL, 3, 1),
        (DEEP, DEEP_T, DEEP_B),
    )
    for cfg, T, B in cases:
        judge_model_parity(submission, gen, cfg, T, B)
    _judge_device(submission, check_seed)


def judge_model_parity(submission, gen: torch.Generator, cfg: dict, T: int, B: int) -> None:
    """The learner's GPT with the grader's weights on (B, T) tokens: its logits and loss
    against trusted math, and no loss without targets."""
    sd = gpt_weights(cfg, gen)
    model = Learner(submission, "GPT", cfg, sd)
    idx, targets = tokens(B, T, cfg["vocab_size"], gen), tokens(B, T, cfg["vocab_size"], gen)
    try:
        logits, loss = model.logits_loss(idx, targets)
        called = message(
            "lesson04.called_gpt_targets",
            call=model.call_text,
            shape=tuple(idx.shape),
            how=message("lesson04.how_weights"),
        )
        expect_shape(logits, (B, T, cfg["vocab_size"]), called, "lesson04.what_logits")
        expected, expected_loss = ref.gpt(idx, sd, cfg, targets)
        if recording.eager():
            _variant_logits(idx, sd, cfg)
        problem = compare(
            logits,
            expected.float(),
            what=message("lesson04.what_logits"),
            atol=MODEL_ATOL,
            rtol=MODEL_RTOL,
        )
        if problem:
            fail(
                called,
                problem,
                *first_match(logits, recording.for_diagnosis(_variant_logits, idx, sd, cfg) or []),
            )
        if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
            fail(
                called,
                message(
                    "lesson04.loss_not_scalar",
                    got=type(loss).__name__
                    if not isinstance(loss, torch.Tensor)
                    else f"Tensor{tuple(loss.shape)}",
                ),
            )
        problem = compare(
            loss,
            expected_loss.float(),
            what=message("lesson04.what_loss"),
            atol=MODEL_ATOL,
            rtol=MODEL_RTOL,
        )
        if problem:
            fail(called, problem)
        _, no_loss = model.logits_loss(idx)
        if no_loss is not None:
            fail(model.called(idx), message("lesson04.loss_not_none", got=type(no_loss).__name__))
    except CheckFailure as failure:
        # This check belongs to no TODO: point at the ones whose checks say where to look.
        raise CheckFailure(
            failure.feedback + Feedback.of(message("lesson04.parity_hint")), failure.figures, failure.waits_on
        ) from None


def _judge_device(submission, check_seed) -> None:
    """The device contract, without a GPU: the model moved to the "meta" device (shapes, no
    data) and fed meta indices. A tensor made on another device (torch.arange(T) without
    device=idx.device, a .cuda() or .to("cpu")) either raises or shows up on the CPU, and the
    positions that enter wpe are looked at on the way."""
    cfg, B, T = MAIN, MAIN_B, MAIN_T
    model = _own_init(submission, check_seed, cfg)
    idx = torch.empty(B, T, dtype=torch.long, device="meta")
    called = message("lesson04.called_meta", call=model.call_text, shape=(B, T))
    try:
        submission.call(model.handle, "meta", method="to")
        result = submission.call_traced(model.handle, idx, capture=("transformer.wpe",), no_grad=True)
    except StudentError as err:
        if err.todo_pending is not None or err.is_a("MissingSubmodule"):
            raise
        fail(called, message("lesson04.device_raised"), describe_student_error(err, None, {}))
    value = result.get("value")
    logits = value[0] if isinstance(value, tuple) and len(value) == 2 else value
    for seen in result.get("captured", []):
        if isinstance(seen, torch.Tensor) and seen.device.type != "meta":
            fail(called, message("lesson04.positions_wrong_device", got=seen.device.type, device="meta"))
    if not isinstance(logits, torch.Tensor):
        fail(called, message("lesson04.not_a_pair", got=type(value).__name__))
    if logits.device.type != "meta":
        fail(called, message("lesson04.logits_wrong_device", got=logits.device.type, device="meta"))
    if tuple(logits.shape) != (B, T, cfg["vocab_size"]):
        fail(
            called,
            message(
                "lesson04.shape_wrong",
                what=message("lesson04.what_logits"),
                got=tuple(logits.shape),
                expected=(B, T, cfg["vocab_size"]),
            ),
        )


@pytest.mark.check("future-leak")
def test_future_leak(submission, check_seed):
    """Changing token j may only move the logits of positions i >= j (and must move some later
    one: the model has to read its past)."""
    needs_reference_attention(submission)
    gen = generator(check_seed)
    cfg = MAIN
    V, T = cfg["vocab_size"], MAIN_T
    model = Learner(submission, "GPT", cfg, gpt_weights(cfg, gen))
    idx = tokens(1, T, V, gen)
    batch = idx.repeat(T + 1, 1)
    for j in range(T):
        batch[j + 1, j] = (batch[j + 1, j] + 1 + int(torch.randint(0, V - 1, (1,), generator=gen))) % V
    logits, _ = model.logits_loss(batch)
    expect_shape(logits, (T + 1, T, V), model.called(batch), "lesson04.what_logits")
    expect_finite(logits, model.called(batch))
    influence = (logits[1:] - logits[:1]).abs().amax(dim=-1).T  # [i, j]: logits i when token j changes
    shown = (influence / influence.max().clamp_min(1e-12)).numpy()
    leaks = leaking_cells(influence.numpy(), tol=1e-5)
    if leaks.any():
        first = leaks.nonzero()
        fail(
            model.called(batch),
            message("lesson04.future_leak", i=int(first[0][0]), j=int(first[1][0]), count=int(leaks.sum())),
            message("lesson04.influence_title"),
            heatmap(shown, leaks=leaks),
            message("lesson04.heatmap_legend"),
            message("lesson04.leak_hint"),
            Figure(shown, leaks=leaks, title=message("lesson04.figure_influence")),
        )
    starved = [i for i in range(1, T) if not bool((influence[i, :i] > 1e-5).any())]
    if starved:
        fail(
            model.called(batch),
            message("lesson04.no_past_flow", i=starved[0], count=len(starved)),
            message("lesson04.influence_title"),
            heatmap(shown),
            message("lesson04.heatmap_legend"),
        )
