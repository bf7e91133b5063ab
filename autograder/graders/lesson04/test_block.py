"""Hidden checks of Block (TODOs [pre-norm] and [residual]).

A Block holds weights drawn by the grader (each LayerNorm with its own affine parameters, so
ln_1, ln_2 and a bare normalisation all differ). The grader captures what reaches `attn` and
`mlp` (their inputs, through forward pre-hooks in the worker) and recomputes each sublayer on
that input with trusted math. So the pre-norm checks judge what goes INTO each sublayer, and
the residual checks how their outputs are added, each independently of the other TODO.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from autograder.core.results import message
from autograder.engine import recording
from autograder.engine.checks import fail
from autograder.engine.feedback import compare
from autograder.engine.grader_helpers import generator, hinted
from autograder.sandbox.client import StudentError

from .harness import (
    ATOL,
    MAIN,
    MAIN_B,
    MAIN_T,
    RTOL,
    SMALL,
    Learner,
    attention_like_reference,
    block_weights,
    close,
    expect_shape,
    first_match,
    needs_reference_attention,
    random_input,
)

ref = recording.reference_of(__package__)


@dataclass
class Observed:
    """One forward of the learner's Block: its output and what reached each submodule."""

    x: torch.Tensor
    out: torch.Tensor
    attn: list
    mlp: list
    ln_2: list


def _block(submission, gen, cfg=MAIN, *, silent_outputs: bool = False, silence: tuple[str, ...] = ()):
    """The learner's Block with the grader's weights for its LayerNorms and attention. Its MLP
    keeps the grader's weights only where their shapes fit (an MLP mistake is TODO [mlp]'s
    business); these checks run the learner's own MLP on what reached it. With
    `silent_outputs` both output projections are zero: the sublayers add nothing. `silence`
    names the sublayers ("attn", "mlp") made silent that way, one without the other."""
    if silent_outputs:
        silence = ("attn", "mlp")
    sd = block_weights(cfg["n_embd"], gen)
    block = Learner(submission, "Block", cfg)
    shapes = block.state_shapes()
    # Weights for an MLP of other shapes come from a generator of their own, so that the
    # grader's next draws (the input, the next case) are the same for every learner: the
    # recording of practice grading answers the checks of such a learner too.
    filler = torch.Generator().manual_seed(gen.initial_seed() + 1)
    mlp = {
        key: sd[key]
        if tuple(sd.get(key, torch.empty(0)).shape) == shape
        else torch.randn(shape, generator=filler) * 0.3
        for key, shape in shapes.items()
        if key.startswith("mlp.")
    }
    sd = {**{key: value for key, value in sd.items() if not key.startswith("mlp.")}, **mlp}
    # Every MLP tensor at zero, whatever the learner named them: any MLP of linear layers and
    # an activation with f(0) = 0 then adds exactly 0, and passes no gradient back.
    for key in sd:
        if ("attn" in silence and key in ("attn.proj.weight", "attn.proj.bias")) or (
            "mlp" in silence and key.startswith("mlp.")
        ):
            sd[key] = torch.zeros_like(sd[key])
    block.load(sd)
    return block, sd


# A sublayer called as self.mlp.forward(z) runs no hooks of its own, but its first layer's do
# (and there z arrives untouched): where each sublayer's input can also be read.
FIRST_LAYER = {"attn": "attn.qkv", "mlp": "mlp.c_fc"}


def _inputs(block: Learner, x: torch.Tensor, name: str) -> list:
    captured = block.inputs_of(x, name)
    if not captured and name in FIRST_LAYER:
        try:
            captured = block.inputs_of(x, FIRST_LAYER[name])
        except StudentError as err:
            if err.is_a("MissingSubmodule"):
                return []  # no such layer (an MLP mistake): nothing more to read
            raise
    return captured


def _observe(block: Learner, x: torch.Tensor) -> Observed:
    # One submodule per call, so that each capture is known to be whose (eval: deterministic).
    out = block.forward(x)
    expect_shape(out, x.shape, block.called(x))
    return Observed(x, out, _inputs(block, x, "attn"), _inputs(block, x, "mlp"), block.inputs_of(x, "ln_2"))


def _single(captured: list, name: str, block: Learner, x: torch.Tensor) -> torch.Tensor:
    if len(captured) != 1:
        fail(block.called(x), message("lesson04.sublayer_calls", name=name, count=len(captured)))
    value = captured[0]
    if tuple(value.shape) != tuple(x.shape):
        fail(
            block.called(x),
            message(
                "lesson04.sublayer_input_shape", name=name, got=tuple(value.shape), expected=tuple(x.shape)
            ),
        )
    return value


def _norms(sd: dict) -> dict:
    """The LayerNorms' weights of a Block's state_dict: all that the reference's ln asks for,
    so that a recording answers it whatever the learner's MLP is like."""
    return {key: value for key, value in sd.items() if key.startswith(("ln_1.", "ln_2."))}


def _attention(sd: dict) -> dict:
    """The attention's weights of a Block's state_dict (as _norms)."""
    return {key: value for key, value in sd.items() if key.startswith("attn.")}


def _n_head(block: Learner) -> int:
    return block.cfg["n_head"]


def _whole_post_norm(obs: Observed, sd: dict, block: Learner) -> bool:
    """Whether the block is a post-norm one as a whole (the attention fed the raw x, the
    LayerNorms moved onto the residual path): that wiring is TODO [pre-norm]'s mistake, whose
    checks say so and show the pre-norm block; the residual checks leave it to them."""
    return len(obs.attn) == 1 and close(obs.attn[0], obs.x) and _post_norm(obs, sd, block)


def _post_norm(obs: Observed, sd: dict, block: Learner) -> bool:
    """Whether the block matches a post-norm one (with the grader's MLP: only when the
    learner's MLP has the right shapes, otherwise the question cannot be asked)."""
    try:
        return close(obs.out, ref.block(obs.x, sd, _n_head(block), wiring="post"))
    except (RuntimeError, recording.NotRecorded):
        # Official: the learner's MLP shapes do not fit the grader's weights. Practice: the
        # recording never saw these weights, which happens for the same reason.
        return False


# ---------------------------------------------------------------- TODO [pre-norm]


def _observed(submission, gen: torch.Generator, cases, judged: str):
    """Per (cfg, T, B) case: (cfg, block, sd, x, obs, attn_in), the learner's Block observed on
    a fresh input, with the one input its attention got. `judged`: what the check judges
    ("attn", "mlp" or "residual"), for the values recorded eagerly."""
    if judged != "attn":
        needs_reference_attention(submission)
    for cfg, T, B in cases:
        block, sd = _block(submission, gen, cfg)
        x = random_input(cfg["n_embd"], T, gen, B=B)
        obs = _observe(block, x)
        if recording.eager():
            _record_candidates(block, sd, x, obs, judged)
        yield cfg, block, sd, x, obs, _single(obs.attn, "attn", block, x)


def _record_candidates(block: Learner, sd: dict, x: torch.Tensor, obs: Observed, judged: str) -> None:
    """While recording: every reference value the `judged` check may ask on this input, for
    the inputs a known mistake hands the attention (the raw x, ln_2(x), a normalisation without
    ln_1's parameters or over (T, C)) and, for the MLP's input, what then reaches ln_2 and the
    MLP, so that a replay answers the checks of a learner who made one of those mistakes."""
    _post_norm(obs, sd, block)
    ln_1 = ref.ln(x, _norms(sd), "ln_1")
    candidates = _attn_input_candidates(x, sd)
    if judged == "attn":
        return
    for attn_in in [ln_1, x, *(value for value, _ in candidates)]:
        a = ref.attention_out(attn_in, _attention(sd), _n_head(block))
        if judged != "mlp":
            continue
        h = x.double() + a
        ref.ln(h, _norms(sd), "ln_2")
        _mlp_input_candidates(x, h, sd)
        for stream in (h, x, a, ln_1 + a):  # what may reach ln_2, as the worker sends it
            ref.ln(stream.float(), _norms(sd), "ln_2")


def _mlp_input_candidates(x: torch.Tensor, h: torch.Tensor, sd: dict) -> list:
    """What reaches the MLP for known mistakes, given the stream h after the attention."""
    return [
        (h, message("lesson04.diag_mlp_raw")),
        (ref.ln(h, _norms(sd), "ln_1"), message("lesson04.diag_mlp_ln_1")),
        (ref.layer_norm(h), message("lesson04.diag_norm_without_module", name="ln_2")),
        (ref.ln(x, _norms(sd), "ln_2"), message("lesson04.diag_mlp_sees_old_x")),
        *_normalised_over_t(h, sd, "ln_2"),
    ]


def _normalised_over_t(z: torch.Tensor, sd: dict, name: str) -> list:
    """Diagnoses for `z` normalised over (T, C) or over everything instead of each position's C:
    with the LayerNorm `name`'s affine parameters or without them."""
    over_t = message("lesson04.diag_norm_over_T")
    return [
        (ref.ln(z, _norms(sd), name, over="TC"), over_t),
        (ref.layer_norm(z, over="TC"), over_t),
        (ref.layer_norm(z, over="all"), over_t),
    ]


def _attn_input_candidates(x: torch.Tensor, sd: dict) -> list:
    """What reaches the attention for known mistakes."""
    return [
        (ref.ln(x, _norms(sd), "ln_2"), message("lesson04.diag_attn_ln_2")),
        (ref.layer_norm(x), message("lesson04.diag_norm_without_module", name="ln_1")),
        *_normalised_over_t(x, sd, "ln_1"),
    ]


# The pre-norm checks' (cfg, T, B): T < block_size, and T = 1.
PRE_NORM_CASES = ((MAIN, MAIN_T, MAIN_B), (SMALL, 1, 2))


@pytest.mark.check("pre-norm-attn")
def test_pre_norm_attn(submission, check_seed):
    for _cfg, block, sd, x, obs, attn_in in _observed(
        submission, generator(check_seed), PRE_NORM_CASES, "attn"
    ):
        expected = ref.ln(x, _norms(sd), "ln_1")
        problem = compare(
            attn_in, expected.float(), what=message("lesson04.what_attn_input"), atol=ATOL, rtol=RTOL
        )
        if problem is None:
            continue
        if close(attn_in, x):
            diagnosis = message(
                "lesson04.diag_post_norm" if _post_norm(obs, sd, block) else "lesson04.diag_attn_raw"
            )
            fail(block.called(x), problem, diagnosis)
        fail(
            block.called(x),
            problem,
            *first_match(attn_in, recording.for_diagnosis(_attn_input_candidates, x, sd) or []),
            message("lesson04.pre_norm_hint"),
        )
    _judge_norm_gradient(submission, generator(check_seed + 1), "attn")


@pytest.mark.check("pre-norm-mlp")
def test_pre_norm_mlp(submission, check_seed):
    for _cfg, block, sd, x, obs, attn_in in _observed(
        submission, generator(check_seed), PRE_NORM_CASES, "mlp"
    ):
        mlp_in = _single(obs.mlp, "mlp", block, x)
        h = x.double() + ref.attention_out(
            attn_in, _attention(sd), _n_head(block)
        )  # the stream after attention
        problem = compare(
            mlp_in,
            ref.ln(h, _norms(sd), "ln_2").float(),
            what=message("lesson04.what_mlp_input"),
            atol=ATOL,
            rtol=RTOL,
        )
        if problem is None:
            continue
        normalised_by_ln_2 = False
        if len(obs.ln_2) == 1:
            stream_normed = recording.for_diagnosis(ref.ln, obs.ln_2[0], _norms(sd), "ln_2")
            if stream_normed is None and not _post_norm(obs, sd, block):
                # Practice only: the recording never saw what reached ln_2, and only a post-norm
                # block (whose MLP input is never ln_2's output) can be judged without it.
                raise recording.NotRecorded("ln")
            normalised_by_ln_2 = stream_normed is not None and close(mlp_in, stream_normed, 1e-5, 1e-5)
        residual_right = close(obs.out, h + block.sublayer("mlp", mlp_in))
        if normalised_by_ln_2 and not residual_right:
            continue  # ln_2 normalises the stream the residual code built: TODO [residual]'s checks judge it
        if normalised_by_ln_2:
            # The additions are right, so ln_2 was given the wrong tensor here.
            fail(
                block.called(x),
                problem,
                *first_match(
                    obs.ln_2[0],
                    [
                        (x, message("lesson04.diag_mlp_sees_old_x")),
                        (h - x, message("lesson04.diag_ln_2_of_attn")),
                    ],
                ),
                message("lesson04.pre_norm_mlp_hint"),
            )
        if _post_norm(obs, sd, block):
            fail(block.called(x), problem, message("lesson04.diag_post_norm"))
        fail(
            block.called(x),
            problem,
            *first_match(mlp_in, recording.for_diagnosis(_mlp_input_candidates, x, h, sd) or []),
            message("lesson04.pre_norm_mlp_hint"),
        )
    _judge_norm_gradient(submission, generator(check_seed + 1), "mlp")


# The course's MLP weights, by name and shape for C (what the reference block computes with).
def _mlp_shapes(C: int) -> dict:
    return {
        "mlp.c_fc.weight": (4 * C, C),
        "mlp.c_fc.bias": (4 * C,),
        "mlp.c_proj.weight": (C, 4 * C),
        "mlp.c_proj.bias": (C,),
    }


def _judge_norm_gradient(submission, gen: torch.Generator, sublayer: str) -> None:
    """TODO [pre-norm]'s gradient: the gradient of the block's output reaches x and the
    LayerNorm's parameters through `sublayer` ("attn" or "mlp") as with trusted math. A
    normalised input made under torch.no_grad() or .detach()ed (or a normalisation of
    x.detach()) gives the right values and never trains the LayerNorm, nor what comes before the
    block. The other sublayer is silent (its output projection at zero) so that only this path
    counts. Mistakes elsewhere are left to their own checks: a forward that differs (the forward
    checks), a sublayer off the autograd path (residual's a.detach(), mlp's no_grad), a residual
    path that drops x's own gradient (residual-identity), an MLP whose own gradient is wrong
    (mlp-parity)."""
    if attention_like_reference(submission) is False:
        return  # practice: the learner's own attention is not the reference's (the forward part said it)
    cfg = MAIN
    C = cfg["n_embd"]
    norm = "ln_1" if sublayer == "attn" else "ln_2"
    names = (f"{norm}.weight", f"{norm}.bias")
    block, sd = _block(submission, gen, cfg, silence=("mlp",) if sublayer == "attn" else ("attn",))
    x = random_input(C, MAIN_T, gen, B=MAIN_B)
    v = torch.randn(x.shape, generator=gen)
    u = torch.randn(x.shape, generator=gen)
    shapes = _mlp_shapes(C)
    if sublayer == "attn":
        ref_sd = {k: t for k, t in sd.items() if not k.startswith("mlp.")}
        ref_sd.update({name: torch.zeros(shape) for name, shape in shapes.items()})
    else:
        learner_mlp = {k: tuple(t.shape) for k, t in sd.items() if k.startswith("mlp.")}
        if learner_mlp != shapes:
            return  # an MLP of other names or shapes: TODO [mlp]'s checks say so
        ref_sd = sd
    mlp_sd = {k[len("mlp.") :]: t for k, t in ref_sd.items() if k.startswith("mlp.")}
    n_head = _n_head(block)
    expected_out = ref.block(x, ref_sd, n_head)
    expected = ref.block_grads(x, ref_sd, n_head, v, names)
    if recording.eager() and sublayer == "mlp":
        ref.mlp_grads(x, mlp_sd, u)
    if not close(block.forward(x), expected_out):
        return  # a forward mistake: the forward checks report it
    called = block.called_grads(x)
    # An error here (an in-place sum autograd refuses) is blamed by the line that raised: the
    # residual checks give its diagnosis.
    grads, x_grad = block.grads(x, v)
    if not any(bool(g.abs().sum() > 0) for name, g in grads.items() if name.startswith(f"{sublayer}.")):
        return  # the sublayer itself is off the autograd path: its own checks or residual's say so
    problems = [
        compare(
            grads.get(name),
            expected[name],
            what=message("lesson04.what_param_grad", name=name),
            atol=1e-4,
            rtol=1e-4,
        )
        if name in grads
        else None
        for name in names
    ]
    problems.append(
        compare(x_grad, expected["x"], what=message("lesson04.what_input_grad"), atol=1e-4, rtol=1e-4)
    )
    problems = [problem for problem in problems if problem is not None]
    if not problems:
        return
    if len(problems) == 1 and close(x_grad, expected["x"] - v):
        return  # only x's own path (the residual's identity) is missing: residual-identity says so
    if sublayer == "mlp":
        _, z_grad = block.grads(x, u, path="mlp")
        expected_z = recording.for_diagnosis(ref.mlp_grads, x, mlp_sd, u)
        if expected_z is not None and not close(z_grad, expected_z[1]):
            return  # the learner's MLP alone passes the wrong gradient back: mlp-parity says so
    fail(
        called,
        message("lesson04.norm_no_grad", name=norm, sublayer=sublayer),
        problems[0],
        message("lesson04.pre_norm_hint" if sublayer == "attn" else "lesson04.pre_norm_mlp_hint"),
    )


# ---------------------------------------------------------------- TODO [residual]


@pytest.mark.check("residual")
def test_residual(submission, check_seed):
    """The output is x + attn(its input) + mlp(its input): judged on the sublayers' inputs the
    learner's block really produced, so a pre-norm mistake is not reported here."""
    gen = generator(check_seed)
    # The gradient probe's own draws, so that the next cases' inputs never depend on whether
    # this one passed (a recording answers them either way).
    probes = generator(check_seed + 1)
    cases = ((MAIN, MAIN_T, MAIN_B), (SMALL, SMALL["block_size"], 2), (MAIN, 1, 1))
    for cfg, block, sd, x, obs, attn_in in _observed(submission, gen, cases, "residual"):
        mlp_in = _single(obs.mlp, "mlp", block, x)
        a = ref.attention_out(attn_in, _attention(sd), _n_head(block))
        m = block.sublayer("mlp", mlp_in)
        _mlp_dtype_cause(block, x, obs.out, m)
        m = m.double()
        xd = x.double()
        problem = compare(
            obs.out, (xd + a + m).float(), what=message("lesson04.what_block_output"), atol=ATOL, rtol=RTOL
        )
        if problem is None:
            if cfg is MAIN and x.shape[1] > 1:
                _judge_gradient_paths(block, x, mlp_in, probes)
                _judge_train_mode(block, x, obs.out, attn_in, mlp_in)
            continue
        if _whole_post_norm(obs, sd, block):
            continue  # the pre-norm checks report a post-norm block
        also_attn = len(obs.ln_2) == 1 and close(obs.ln_2[0], a)
        if _post_norm(obs, sd, block):
            fail(block.called(x), problem, message("lesson04.diag_post_norm"))
        fail(
            block.called(x),
            problem,
            *first_match(
                obs.out,
                [
                    (a + m, message("lesson04.diag_no_residual_attn")),
                    (
                        m,
                        message(
                            "lesson04.diag_no_residual_mlp_and_attn"
                            if also_attn
                            else "lesson04.diag_no_residual_mlp"
                        ),
                    ),
                    (xd + m, message("lesson04.diag_attn_not_added")),
                    (xd + a, message("lesson04.diag_mlp_not_added")),
                    *[
                        (ln_1 + a + m, message("lesson04.diag_residual_normed"))
                        for ln_1 in [recording.for_diagnosis(ref.ln, x, _norms(sd), "ln_1")]
                        if ln_1 is not None
                    ],
                ],
            ),
            message("lesson04.residual_hint"),
        )


def _mlp_dtype_cause(block: Learner, x: torch.Tensor, out: torch.Tensor, m: torch.Tensor) -> None:
    """A block output in another dtype than x's because the learner's MLP returns that dtype
    (a .double() in its forward) is TODO [mlp]'s mistake, which mlp-parity reports: the
    residual checks wait on it instead of blaming the sum."""
    if out.dtype != x.dtype and m.dtype != x.dtype:
        fail(
            block.called(x),
            message("lesson04.mlp_dtype_cause", got=str(m.dtype).removeprefix("torch."), expected="float32"),
            waits_on="mlp",
        )


def _judge_train_mode(
    block: Learner, x: torch.Tensor, out: torch.Tensor, attn_in: torch.Tensor, mlp_in: torch.Tensor
) -> None:
    """With cfg.dropout = 0 every dropout of the course is off, so train mode gives what eval
    mode gives: a dropout of the learner's own in the block's forward, with p written as a number
    (x + F.dropout(a, 0.1, self.training), the original Transformer's residual dropout), shows
    here and nowhere in eval. A sublayer whose own train mode differs (its dropout's p written
    as a number) is its own checks' business (mlp-dropout), so each is tried alone first."""
    assert block.cfg["dropout"] == 0.0
    sublayers = (("attn", attn_in), ("mlp", mlp_in))
    in_eval = [block.sublayer(name, z) for name, z in sublayers]
    block.mode(True)
    try:
        for (name, z), value in zip(sublayers, in_eval):
            if not close(block.sublayer(name, z, seed=1), value, 1e-6, 1e-6):
                return
        trained = block.forward(x, seed=1)
    finally:
        block.mode(False)
    if not close(trained, out, 1e-6, 1e-6):
        fail(
            block.called_train(x), message("lesson04.block_train_differs"), message("lesson04.residual_hint")
        )


def _in_place_hint(called):
    """Fails with the in-place diagnosis when autograd refused the learner's in-place sum."""
    return hinted(
        lambda err: (
            message("lesson04.diag_in_place")
            if "in-place" in err.message or "inplace" in err.message
            else None
        ),
        called,
    )


def _judge_gradient_paths(
    block: Learner, x: torch.Tensor, mlp_in: torch.Tensor, gen: torch.Generator
) -> None:
    """The gradient of the block's output reaches the parameters of both sublayers: a sum with
    a detached sublayer (x + a.detach()) gives the right values and never trains it. An MLP
    that stops gradients on its own is TODO [mlp]'s business (mlp-parity), so it is tried alone
    before the sum is blamed."""
    v = torch.randn(x.shape, generator=gen)
    called = block.called_grads(x)
    with _in_place_hint(called):
        grads, _ = block.grads(x, v)

    def reached(prefix: str, found: dict) -> bool:
        return any(bool(g.abs().sum() > 0) for name, g in found.items() if name.startswith(prefix))

    if not reached("attn.", grads):
        fail(
            called,
            message("lesson04.residual_no_grad", name="attn", var="a"),
            message("lesson04.residual_hint"),
        )
    if not reached("mlp.", grads):
        alone, _ = block.grads(mlp_in, torch.randn(mlp_in.shape, generator=gen), path="mlp")
        if reached("", alone):
            fail(
                called,
                message("lesson04.residual_no_grad", name="mlp", var="m"),
                message("lesson04.residual_hint"),
            )


@pytest.mark.check("residual-identity")
def test_residual_identity(submission, check_seed):
    """With both output projections at zero each sublayer adds nothing, so the block must give
    back its input exactly: the residual path is x itself, untouched by any normalisation."""
    gen = generator(check_seed)
    cfg = MAIN
    block, sd = _block(submission, gen, cfg, silent_outputs=True)
    x = random_input(cfg["n_embd"], MAIN_T, gen, B=MAIN_B)
    out = block.forward(x)
    expect_shape(out, x.shape, block.called(x))
    if out.dtype != x.dtype:
        mlp_in = _inputs(block, x, "mlp")
        if len(mlp_in) == 1:
            _mlp_dtype_cause(block, x, out, block.sublayer("mlp", mlp_in[0]))
    problem = compare(out, x, what=message("lesson04.what_block_output"), atol=ATOL, rtol=RTOL)
    if problem is not None or recording.eager():
        # Reference values on the grader's own input: a recording answers them.
        ln_1 = ref.ln(x, _norms(sd), "ln_1")
        post_norm = ref.ln(ln_1, _norms(sd), "ln_2")
        ln_2 = ref.ln(x, _norms(sd), "ln_2")
    if problem is not None:
        attn_in = _inputs(block, x, "attn")
        if len(attn_in) == 1 and close(attn_in[0], x) and close(out, post_norm):
            return  # a post-norm block, ln_2(ln_1(x)) here: the pre-norm checks report it
        fail(
            block.called(x),
            message("lesson04.identity_intro"),
            problem,
            *first_match(
                out,
                [
                    (torch.zeros_like(x), message("lesson04.diag_identity_zero")),
                    (post_norm, message("lesson04.diag_identity_normalised")),
                    (ln_2, message("lesson04.diag_identity_normalised")),
                    (ln_1, message("lesson04.diag_identity_normalised")),
                ],
            ),
            message("lesson04.residual_hint"),
        )
    # The same path carries the gradient back: d<out, v>/dx must be v itself. Autograd also
    # finds an in-place sum (x += a), which training's backward pass would reject.
    v = torch.randn(x.shape, generator=gen)
    with _in_place_hint(message("lesson04.called_vjp", call=block.call_text, shape=tuple(x.shape))):
        (grad,) = submission.vjp(block.handle, x, [v])
    problem = compare(grad, v, what=message("lesson04.what_input_grad"), atol=ATOL, rtol=RTOL)
    if problem is not None:
        fail(
            message("lesson04.called_vjp", call=block.call_text, shape=tuple(x.shape)),
            message("lesson04.identity_grad_intro"),
            problem,
            message("lesson04.residual_hint"),
        )
