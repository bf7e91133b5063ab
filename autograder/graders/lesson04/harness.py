"""Helpers shared by lesson 04's graders: configurations, the learner's MLP, Block and GPT behind
the sandbox (with trusted weights loaded, or initialised by their own code under a fixed seed),
and the small comparisons the diagnoses are made of.

The worker's folder holds the learner's model.py next to the REFERENCE attention of lesson 03
(course.yml `uses`), so `from attention import CausalSelfAttention` in their file gets ours: a
lesson-03 mistake never fails these checks (own-pieces runs their own attention instead). In a
learner's release (practice grading, answered from the recording) no reference piece ships:
there the attention is the learner's own, and a lesson-03 mistake shows here too.
"""

from __future__ import annotations

import math
import re
from contextlib import contextmanager, nullcontext
from types import SimpleNamespace

import pytest
import torch

from autograder.core.results import message
from autograder.engine import recording
from autograder.engine.checks import describe_student_error, fail
from autograder.engine.feedback import ATOL, RTOL, compare
from autograder.engine.grader_helpers import config_text, generator, load_weights
from autograder.sandbox.client import Sandbox, StudentError

ref = recording.reference_of(__package__)

FILE = "model"
# What a Block's forward defines in TODO [pre-norm] (and TODO [residual] uses).
PRE_NORM_NAMES = ("a", "m")
# B, T, nh, hs, C, 4C, V, block_size and n_layer all different, nh >= 2, T < block_size: a size
# written where another is meant (a view, a layer's width) shows. n_head > n_layer here.
MAIN = {"vocab_size": 29, "block_size": 9, "n_layer": 2, "n_head": 3, "n_embd": 24, "dropout": 0.0}
MAIN_T = 7
MAIN_B = 5
# A second shape family (hs = 5), used at T = 1 and T = block_size.
SMALL = {"vocab_size": 17, "block_size": 6, "n_layer": 1, "n_head": 4, "n_embd": 20, "dropout": 0.0}
# A third with n_head < n_layer (the others have n_head > n_layer): a structure sized by one where
# the other is meant (range(cfg.n_head) blocks) has the wrong size in one family or the other.
DEEP = {"vocab_size": 23, "block_size": 11, "n_layer": 3, "n_head": 2, "n_embd": 14, "dropout": 0.0}
DEEP_T, DEEP_B = 5, 4
# Large enough to measure the initialisation's statistics (every weight tensor has thousands of
# entries), small enough to build in milliseconds. C = 64 and 56 keep nn.Linear's own init (std
# 1/sqrt(3 fan_in): 0.072 and 0.036, 0.077 and 0.039) far from 0.02. The two differ in n_layer
# (3 and 5) and have n_head on either side of it (8 and 2), so 0.02/sqrt(2*n_layer) (0.0082 and
# 0.0063) is far from 0.02/sqrt(2*n_head), 0.02/sqrt(n_layer), 0.02/(2*n_layer), 0.02/sqrt(2)
# and from any constant written for one of them.
INIT = {"vocab_size": 500, "block_size": 40, "n_layer": 3, "n_head": 8, "n_embd": 64, "dropout": 0.0}
INIT_DEEP = {"vocab_size": 300, "block_size": 32, "n_layer": 5, "n_head": 2, "n_embd": 56, "dropout": 0.0}
INITS = (INIT, INIT_DEEP)
INIT_SEED = 1234  # fixed: the statistics are measured on one known draw, so they never flake
# The whole model chains 2 blocks in float32 against a float64 reference.
MODEL_ATOL = MODEL_RTOL = 1e-4
# load_state_dict's complaint when a learner's layer has another shape than the grader's weights.
_SIZE_MISMATCH = re.compile(
    r"size mismatch for ([\w.]+): copying a param with shape torch\.Size\(\[([\d, ]*)\]\) "
    r"from checkpoint, the shape in current model is torch\.Size\(\[([\d, ]*)\]\)"
)


def describe(cls: str, cfg: dict) -> str:
    return f"{cls}(GPTConfig({config_text(cfg)}))"


class Learner:
    """A learner's MLP, Block or GPT in the worker. With `weights` it holds them (loaded with
    load_state_dict); with `seed` it is built after torch.manual_seed(seed), keeping its own
    initialisation."""

    def __init__(
        self,
        sub: Sandbox,
        cls: str,
        cfg: dict,
        weights: dict | None = None,
        *,
        seed: int | None = None,
        train: bool = False,
    ) -> None:
        self.sub, self.cls, self.cfg, self.weights = sub, cls, cfg, weights
        factory = sub.getattr(sub.module(FILE), cls)
        if seed is None:
            self.handle = sub.call(factory, SimpleNamespace(**cfg))
        else:
            self.handle = sub.call_traced(factory, SimpleNamespace(**cfg), seed=seed)["value"]
        if weights is not None:
            self.load(weights)
        self.mode(train)

    def load(self, weights: dict) -> None:
        try:
            absent = load_weights(self.sub, self.handle, weights)
        except StudentError as err:
            found = _SIZE_MISMATCH.search(err.message)
            if err.todo_pending is None and found:
                fail(
                    message(
                        "lesson04.weights_shape",
                        call=self.call_text,
                        name=found[1],
                        expected=f"({found[2]})",
                        got=f"({found[3]})",
                    )
                )
            raise
        if absent:
            fail(message("lesson04.weights_missing", keys=", ".join(absent[:6]), call=self.call_text))
        self.weights = weights

    def state_shapes(self) -> dict[str, tuple]:
        state = self.sub.call(self.handle, method="state_dict")
        return {str(k): tuple(v.shape) for k, v in state.items() if isinstance(v, torch.Tensor)}

    @property
    def call_text(self) -> str:
        return describe(self.cls, self.cfg)

    def mode(self, train: bool) -> None:
        self.sub.call(self.handle, method="train" if train else "eval")
        self.training = train

    def called_train(self, x: torch.Tensor):
        """As called(x), in train mode (whatever mode the module is in now)."""
        how = message("lesson04.how_weights" if self.weights is not None else "lesson04.how_init")
        return message("lesson04.called_train", call=self.call_text, how=how, shape=tuple(x.shape))

    def called(self, x: torch.Tensor):
        key = {("GPT", False): "lesson04.called_gpt", ("GPT", True): "lesson04.called_gpt_train"}.get(
            (self.cls, self.training), "lesson04.called_train" if self.training else "lesson04.called"
        )
        how = message("lesson04.how_weights" if self.weights is not None else "lesson04.how_init")
        return message(key, call=self.call_text, how=how, shape=tuple(x.shape))

    def traced(self, x: torch.Tensor, *, capture: tuple[str, ...] = (), seed: int | None = None) -> dict:
        """forward(x) with the inputs of the submodules in `capture` (one list for all of them,
        in call order: capture one submodule per call to know whose they are)."""
        with self.blamed(self.called(x)):
            result = self.sub.call_traced(self.handle, x, capture=capture, seed=seed, no_grad=True)
        expect_tensor(result.get("value"), self.called(x))
        return result

    @contextmanager
    def blamed(self, called):
        """A Block's or GPT's forward that raises because of what an earlier TODO gave it (the
        MLP returned something else than a float32 tensor of its input's shape, or `a` / `m`
        were never defined in TODO [pre-norm]) fails saying so and waits on that TODO, wherever
        the error surfaced (often in `x = x + m`, TODO [residual]'s line)."""
        try:
            yield
        except StudentError as err:
            cause = self.crash_cause(err)
            if cause is None:
                raise
            todo, why = cause
            fail(called, describe_student_error(err, None, {}), why, waits_on=todo)

    def crash_cause(self, err: StudentError):
        """(TODO, message) when `err` comes from a value an earlier TODO made; None otherwise."""
        if self.cls not in ("Block", "GPT") or err.todo_pending is not None:
            return None
        if err.is_a("NameError"):  # UnboundLocalError too
            found = re.search(r"'(\w+)'", err.message)
            if found and found[1] in PRE_NORM_NAMES:
                return "pre-norm", message("lesson04.crash_name_cause", name=found[1])
            return None
        problem = self.mlp_output_problem("mlp" if self.cls == "Block" else "transformer.h.0.mlp")
        return ("mlp", problem) if problem is not None else None

    def mlp_output_problem(self, path: str):
        """What is wrong with the learner's MLP at `path` as a function (B, T, C) float32 ->
        (B, T, C) float32, tried alone on a small input; None when nothing is (or there is no
        such module to try)."""
        C = self.cfg["n_embd"]
        z = torch.randn(2, 3, C, generator=torch.Generator().manual_seed(PROBE_SEED))
        try:
            value = self.sub.call_traced(self.child(path), z, no_grad=True)["value"]
        except StudentError as err:
            if err.is_a("MissingSubmodule") or err.is_a("AttributeError"):
                return None
            return message("lesson04.mlp_raises_cause", shape=tuple(z.shape))
        if not isinstance(value, torch.Tensor):
            got = type(value).__name__
        elif tuple(value.shape) != tuple(z.shape):
            got = f"Tensor{tuple(value.shape)}"
        elif value.dtype != z.dtype:
            got = f"Tensor(dtype={str(value.dtype).removeprefix('torch.')})"
        else:
            return None
        return message("lesson04.mlp_output_cause", shape=tuple(z.shape), got=got)

    def forward(self, x: torch.Tensor, seed: int | None = None) -> torch.Tensor:
        return self.traced(x, seed=seed)["value"]

    def inputs_of(self, x: torch.Tensor, submodule: str) -> list[torch.Tensor]:
        """What reached `submodule` (its first positional argument) during forward(x)."""
        return self.traced(x, capture=(submodule,))["captured"]

    def logits_loss(self, idx: torch.Tensor, targets: torch.Tensor | None = None, *, seed: int | None = None):
        """GPT.forward(idx, targets) as the pair (logits, loss) it must return."""
        args = (idx,) if targets is None else (idx, targets)
        called = message(
            "lesson04.called_gpt_targets" if targets is not None else "lesson04.called_gpt",
            call=self.call_text,
            shape=tuple(idx.shape),
            how=message("lesson04.how_weights" if self.weights is not None else "lesson04.how_init"),
        )
        with self.blamed(called):
            result = self.sub.call_traced(self.handle, *args, seed=seed, no_grad=True)["value"]
        if not (isinstance(result, tuple) and len(result) == 2):
            fail(called, message("lesson04.not_a_pair", got=type(result).__name__))
        expect_tensor(result[0], called)
        return result

    def child(self, path: str):
        """A handle to the submodule at `path` ("lm_head", "transformer.wte")."""
        return self.sub.call(self.handle, path, method="get_submodule")

    def sublayer(self, path: str, x: torch.Tensor, seed: int | None = None) -> torch.Tensor:
        """The learner's submodule at `path` applied to `x` (as it is, in the worker; after
        torch.manual_seed(seed) when given)."""
        value = self.sub.call_traced(self.child(path), x, seed=seed, no_grad=True)["value"]
        expect_tensor(value, self.called(x))
        return value

    def grads(
        self, x: torch.Tensor, v: torch.Tensor, path: str = ""
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """The gradient of <forward(x), v> with respect to every parameter of the submodule at
        `path` ("" the whole module) and to x: ({parameter name: gradient}, x's gradient).

        Computed in the worker by plain autograd on one forward call (Sandbox.param_vjp), so no
        grader code runs there and the module's own .grad stay as they were; frozen parameters
        count like any other. A parameter the output does not depend on (a .detach(),
        torch.no_grad()) gets a zero gradient."""
        sub = self.sub
        target = self.child(path) if path else self.handle
        pairs = sub.request("call", target=target, method="named_parameters", options={"materialize": True})
        params = {str(name): value for name, value in pairs if isinstance(value, torch.Tensor)}
        called = self.called_grads(x)
        # A sublayer tried alone (path) is judged as itself: no earlier TODO feeds it.
        with self.blamed(called) if not path else nullcontext():
            result = sub.param_vjp(target, [x.detach().clone()], [v], input_grad=True, all_params=True)
        out = result.get("output") if isinstance(result, dict) else None
        expect_tensor(out, called)
        if tuple(out.shape) != tuple(v.shape):
            fail(
                called,
                message(
                    "lesson04.shape_wrong",
                    what=message("lesson04.what_output"),
                    got=tuple(out.shape),
                    expected=tuple(v.shape),
                ),
            )
        grads, input_grads = result.get("grads"), result.get("input_grads")
        if not (
            isinstance(grads, list)
            and len(grads) == 1
            and isinstance(input_grads, list)
            and len(input_grads) == 1
            and (grads[0] is None or isinstance(grads[0], dict))
            and (input_grads[0] is None or isinstance(input_grads[0], torch.Tensor))
        ):
            fail(called, message("lesson04.grads_unreadable"))
        found = {str(k): g for k, g in (grads[0] or {}).items() if isinstance(g, torch.Tensor)}
        # A parameter nothing reached: zero.
        by_name = {name: found.get(name, torch.zeros_like(value)) for name, value in params.items()}
        x_grad = input_grads[0] if input_grads[0] is not None else torch.zeros_like(x)
        return by_name, x_grad

    def called_grads(self, x: torch.Tensor):
        return message(
            "lesson04.called_grads",
            call=self.call_text,
            shape=tuple(x.shape),
            how=message("lesson04.how_weights" if self.weights is not None else "lesson04.how_init"),
        )

    def parameters_named(self) -> dict[str, torch.Tensor]:
        """named_parameters(): each distinct parameter once, as nn.Module lists them."""
        pairs = self.sub.request(
            "call", target=self.handle, method="named_parameters", options={"materialize": True}
        )
        return {str(name): value for name, value in pairs}


def expect_tensor(value, called) -> None:
    if not isinstance(value, torch.Tensor) or value.device.type == "meta" or value.is_complex():
        got = (
            type(value).__name__
            if not isinstance(value, torch.Tensor)
            else (f"Tensor(device={value.device.type}, dtype={value.dtype})")
        )
        fail(called, message("lesson04.not_a_tensor", got=got))


def expect_finite(value: torch.Tensor, called) -> None:
    bad = ~torch.isfinite(value)
    if bad.any():
        fail(called, message("lesson04.not_finite", count=int(bad.sum()), total=value.numel()))


def expect_shape(
    value: torch.Tensor, expected: tuple, called, what_key: str = "lesson04.what_output"
) -> None:
    if tuple(value.shape) != tuple(expected):
        fail(
            called,
            message(
                "lesson04.shape_wrong",
                what=message(what_key),
                got=tuple(value.shape),
                expected=tuple(expected),
            ),
        )


def close(actual, expected: torch.Tensor, atol: float = 1e-4, rtol: float = 1e-4) -> bool:
    """Loose equality for diagnoses (is this the variant the learner wrote?)."""
    return (
        isinstance(actual, torch.Tensor)
        and tuple(actual.shape) == tuple(expected.shape)
        and bool(torch.isfinite(actual).all())
        and bool(torch.allclose(actual.double(), expected.double(), atol=atol, rtol=rtol))
    )


def first_match(actual, candidates) -> list:
    """The message of the first (expected_variant, message) pair that `actual` matches."""
    for expected, text in candidates:
        if close(actual, expected):
            return [text]
    return []


def expect_close(
    actual: torch.Tensor, expected: torch.Tensor, what, called, *diagnoses, atol=ATOL, rtol=RTOL, hint=None
) -> None:
    # Against float32, the dtype a float32 input keeps through the course's layers: an output
    # in float64 (a .double() on the way) is a mistake of its own, which compare() names.
    problem = compare(actual, expected.float(), what=what, atol=atol, rtol=rtol)
    if problem:
        fail(called, problem, *first_match(actual, diagnoses), hint)


def random_input(C: int, T: int, gen: torch.Generator, B: int = 2) -> torch.Tensor:
    """Block inputs with a mean and a scale of their own, so that normalising them shows."""
    return torch.randn(B, T, C, generator=gen) * 1.7 + torch.randn(B, T, 1, generator=gen)


# ---------------------------------------------------------------- the weights the graders draw
# Drawn here, in the grader, and sent to the learner's modules and to the reference math alike.


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


def new_parameters(submission, cfg: dict, seed: int) -> list[tuple] | None:
    """The shapes of the nn.Parameter objects the learner's own code makes while GPT(cfg) is
    built (torch.nn's layers make theirs out of sight of this spy), in order; None when building
    it that way raised."""
    factory = submission.getattr(submission.module(FILE), "GPT")
    try:
        result = submission.call_traced(
            factory, SimpleNamespace(**cfg), seed=seed, spy=("torch.nn.Parameter",)
        )
    except StudentError:
        return None
    shapes = []
    for call in result.get("spied", []):
        args = [*call.get("args", []), *call.get("kwargs", {}).values()]
        first = args[0] if args else None
        if isinstance(first, dict) and isinstance(first.get("shape"), list):
            shapes.append(tuple(first["shape"]))
    return shapes


def untied_by_init(submission, cfg: dict, seed: int) -> bool:
    """Whether the learner's code replaced parameters of the model's other layers with new
    nn.Parameter objects (an initialisation that does module.weight = nn.Parameter(...)): done
    after the tying, that unties lm_head from the embedding, whatever the tying line says. The
    tying makes at most a (V, C) parameter and the MLP its own layers' shapes: a new parameter of
    any other shape (wpe's, the attention's, a LayerNorm's) comes from a loop over the layers."""
    shapes = new_parameters(submission, cfg, seed)
    if not shapes:
        return False
    V, C = cfg["vocab_size"], cfg["n_embd"]
    own = {(V, C), (4 * C, C), (4 * C,), (C, 4 * C)}
    return any(shape not in own for shape in shapes)


# ---------------------------------------------------------------- practice grading

PROBE_SEED = 4_040  # the attention probe's own inputs: fixed, so a recording answers them


def needs_reference_attention(sub: Sandbox) -> None:
    """For the checks whose expected values assume lesson 03's reference attention inside the
    learner's block. Practice grading has no reference pieces: the attention there is the
    learner's own, so where it does not give what the reference gives with the same weights
    (a lesson-03 mistake) the check is skipped, saying why, rather than blaming a TODO of this
    lesson. Officially nothing happens (the reference attention is in the worker); while
    recording, the reference's answer for the probe is recorded."""
    if attention_like_reference(sub) is False:
        pytest.skip("lesson04.practice_attention_differs")


def attention_like_reference(sub: Sandbox) -> bool | None:
    """Practice grading: whether the attention in the worker (the learner's own) gives what the
    reference gives on the probe's weights and input. None officially and while recording
    (where the probe's reference value is recorded)."""
    if recording.mode() == "official":
        return None
    gen = generator(PROBE_SEED)
    cfg = MAIN
    weights = {
        key[len("attn.") :]: value
        for key, value in block_weights(cfg["n_embd"], gen).items()
        if key.startswith("attn.")
    }
    z = random_input(cfg["n_embd"], MAIN_T, gen)
    expected = ref.attention_out(z, {f"attn.{key}": value for key, value in weights.items()}, cfg["n_head"])
    if recording.mode() != "replay":
        return None
    try:
        attention = sub.call(
            sub.getattr(sub.module("attention"), "CausalSelfAttention"), SimpleNamespace(**cfg)
        )
        load_weights(sub, attention, weights)
        sub.call(attention, method="eval")
        got = sub.call_traced(attention, z, no_grad=True)["value"]
    except StudentError:
        got = None
    return close(got, expected)
