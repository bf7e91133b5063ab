"""Helpers shared by lesson 03's graders: configurations, the learner's module behind the
sandbox with trusted weights loaded, the diagnoses that name a recognisable bug, and what
several check files ask of the module alike (forward on the meta device, its vector-Jacobian
products).

Every expected value comes from `ref` (the lesson's reference.py officially, its recording in
the learner release: engine/recording.py). A diagnosis candidate ("what a known mistake
gives") is a reference call on the grader's own inputs; `each` makes all of them while
recording, so that the replay can answer whichever one a failing learner's check reaches."""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from autograder.core.results import Block, Figure, message
from autograder.engine import blame, recording, references
from autograder.engine.checks import CheckFailure, describe_student_error, fail
from autograder.engine.feedback import ATOL, RTOL, compare, fmt_number, fmt_pair
from autograder.engine.grader_helpers import config_text, hinted, learner_frames, load_weights
from autograder.sandbox.client import Sandbox, StudentError

ref = recording.reference_of(__package__)

# T, nh, hs and C all different, nh >= 2, T < block_size: shape bugs cannot hide.
MAIN = {"n_embd": 24, "n_head": 3, "block_size": 11, "dropout": 0.0}
MAIN_T = 7
# A second shape family, used at T = 1 and T = block_size.
SMALL = {"n_embd": 20, "n_head": 4, "block_size": 6, "dropout": 0.0}


def each(calls: Iterable[Callable[[], Any]]) -> Iterator[Any]:
    """The result of each zero-argument call in `calls`, in order, each made when it is asked
    for; while recording (recording.eager()), all of them are made at once, here, so that a
    check which stops at its first match (or never looks, as for a correct learner) still
    records every candidate a failing learner's check may reach in the replay."""
    calls = list(calls)
    if recording.eager():
        return iter([call() for call in calls])
    return (call() for call in calls)


def captured_weights(captured: list, n_head: int) -> torch.Tensor | None:
    """What entered attn_drop the first time, or the heads' (B, T, T) weights stacked into
    (B, nh, T, T) when a loop over heads sent them one by one; None when nothing entered."""
    tensors = [c for c in captured if isinstance(c, torch.Tensor)]
    if not tensors:
        return None
    first = tensors[0]
    if (
        first.dim() == 3
        and n_head > 1
        and len(tensors) >= n_head
        and all(c.shape == first.shape for c in tensors[:n_head])
    ):
        return torch.stack(tensors[:n_head], dim=1)
    return first


def looks_like_weights(w: torch.Tensor, B: int, n_head: int, T: int) -> bool:
    """Attention weights as attn_drop should get them: (B, nh, T, T), after the softmax (no
    negative or infinite entry; NaN may come from a mask bug, for its checks to show)."""
    if tuple(w.shape) != (B, n_head, T, T) or not w.is_floating_point():
        return False
    finite = w[torch.isfinite(w)]
    return not bool(torch.isinf(w).any()) and not bool((finite < 0).any())


# Heads smaller than their number (hs = 2 < nh = 6), and a single head (hs = C): for the
# checks of the whole output.
NARROW = {"n_embd": 12, "n_head": 6, "block_size": 9, "dropout": 0.0}
ONE_HEAD = {"n_embd": 8, "n_head": 1, "block_size": 5, "dropout": 0.0}


def exact(cfg: dict, T: int) -> dict:
    """`cfg` with block_size = T: the checks of other TODOs than [mask] run at T = block_size,
    where a mask that is not cropped to T (TODO [mask]) cannot break their forward."""
    return {**cfg, "block_size": T}


SDPA = "torch.nn.functional.scaled_dot_product_attention"


def describe_call(cfg: dict, fused: bool) -> str:
    return f"CausalSelfAttention(cfg({config_text(cfg)}), fused={fused})"


class LearnerAttention:
    """A learner's CausalSelfAttention in the worker, holding weights drawn by the grader."""

    def __init__(
        self,
        sub: Sandbox,
        cfg: dict,
        gen: torch.Generator | None,
        *,
        fused: bool = False,
        train: bool = False,
        weights: dict | None = None,
    ) -> None:
        self.sub, self.cfg, self.fused = sub, cfg, fused
        cls = sub.getattr(sub.module("attention"), "CausalSelfAttention")
        self.handle = sub.call(cls, SimpleNamespace(**cfg), fused=fused)
        self.sd = weights if weights is not None else ref.random_weights(cfg["n_embd"], gen)
        absent = load_weights(sub, self.handle, self.sd)
        if absent:
            fail(message("lesson03.weights_missing", keys=", ".join(absent), call=self.call_text))
        sub.call(self.handle, method="train" if train else "eval")
        self.n_head = cfg["n_head"]

    @property
    def call_text(self) -> str:
        return describe_call(self.cfg, self.fused)

    def called(self, x: torch.Tensor, *, train: bool = False):
        return message(
            "lesson03.called_train" if train else "lesson03.called", call=self.call_text, shape=tuple(x.shape)
        )

    def forward(self, x: torch.Tensor, seed: int | None = None) -> torch.Tensor:
        y = self.traced(x, seed=seed)["value"]
        return y

    def traced(
        self,
        x: torch.Tensor,
        *,
        seed: int | None = None,
        spy: bool = False,
        capture: tuple[str, ...] = ("attn_drop",),
        hint: bool = True,
    ) -> dict:
        """forward(x), with the attention weights captured where they enter attn_drop (an error
        from a mask applied without its crop to T named as such, unless `hint` is off)."""
        with self.shared_cause(x), mask_crop_hint(self.cfg, x.shape[1]) if hint else contextlib.nullcontext():
            result = self.sub.call_traced(
                self.handle, x, capture=capture, spy=(SDPA,) if spy else (), seed=seed, no_grad=True
            )
        if not isinstance(result.get("value"), torch.Tensor):
            fail(self.called(x), message("lesson03.not_a_tensor", got=type(result.get("value")).__name__))
        if result["value"].device.type != "meta":
            expect_output_shape(self, x, result["value"])
        if result["value"].device.type == "meta" or result["value"].is_complex():
            # A tensor without values (or of a kind attention never produces) cannot be judged.
            fail(
                self.called(x),
                message(
                    "lesson03.not_a_tensor",
                    got=f"Tensor(device={result['value'].device.type}, dtype={result['value'].dtype})",
                ),
            )
        return result

    @contextlib.contextmanager
    def shared_cause(self, x: torch.Tensor) -> Iterator[None]:
        """A shape error whose cause is a value the code both paths share made (see
        shared_cause below) fails the check, naming that TODO as the one it waits on; any other
        error goes on to the engine as it was raised."""
        try:
            yield
        except StudentError as err:
            cause = shared_cause(self, x, err)
            if cause is not None:
                fail(
                    self.called(x),
                    describe_student_error(err, None, {}),
                    message(f"lesson03.cause_{cause.replace('-', '_')}"),
                    waits_on=cause,
                )
            raise

    def traced_short(self, x_full: torch.Tensor, T: int, **options) -> tuple[torch.Tensor, dict]:
        """(x, traced(x)) for x = x_full[:, :T], T < block_size: the length every TODO's own
        check runs at, so that a size read from block_size where T is meant shows. Where that
        forward raises in TODO [mask]'s code (a mask not cropped to T: its own checks say so),
        x is x_full, whose length is block_size: the check still judges its own TODO."""
        x = x_full[:, :T]
        try:
            return x, self.traced(x, hint=False, **options)
        except StudentError as err:
            if raised_in(err) != "mask" and not mask_not_cropped(err, self.cfg, T, x.shape[0]):
                raise
        return x_full, self.traced(x_full, **options)

    def weights(
        self, x: torch.Tensor, traced: dict | None = None, *, required: bool = True
    ) -> torch.Tensor | None:
        """The attention weights (B, nh, T, T) of forward(x): as they entered attn_drop (the
        first time: passing through it more than once is dropout-modes' business), stacked when
        the heads went through it one by one (a loop over heads, (B, T, T) each); or, when what
        enters attn_drop is no weights (attn_drop never called, called on the scores before the
        softmax or on the heads' output: conventions judged by dropout-modes alone), the weights
        the module's float64 output implies. None (or, when `required`, a failure) when neither
        works; what entered attn_drop when only that exists and the weights are `required`."""
        traced = traced if traced is not None else self.traced(x)
        seen = captured_weights(traced["captured"], self.n_head)
        if recording.eager():
            self.reference_values(x)  # what implied_weights needs, for a learner whose weights skip attn_drop
        if seen is not None and looks_like_weights(seen, x.shape[0], self.n_head, x.shape[1]):
            return seen
        implied = self.implied_weights(x)
        if implied is not None or not required:
            return implied
        if seen is None:
            fail(self.called(x), message("lesson03.attn_drop_calls", count=0))
        return seen  # for the check to show what it is

    def reference_values(self, x: torch.Tensor) -> list[torch.Tensor] | None:
        """The reference's per-head values of x, where implied_weights can use them (hs >= T)."""
        T, hs = x.shape[1], x.shape[2] // self.n_head
        return ref.values(x, self.sd, self.n_head) if 1 <= T <= hs else None

    def implied_weights(self, x: torch.Tensor) -> torch.Tensor | None:
        """The weights w with output = proj(merge(w @ v)) for the reference's values v, solved
        from the module's float64 output (exact when hs >= T: v has full row rank). Used only
        when the weights never pass through attn_drop; None when they cannot be solved for."""
        B, T, C = x.shape
        hs = C // self.n_head
        v = self.reference_values(x)
        if v is None:
            return None
        try:
            self.sub.call(self.handle, method="double")
            try:
                y = self.forward(x.double())
            finally:
                self.sub.call(self.handle, method="float")
        except (StudentError, CheckFailure):  # a module that cannot run in float64: no fallback
            return None
        if y.shape != x.shape or y.dtype != torch.float64 or not torch.isfinite(y).all():
            return None
        W, b = self.sd["proj.weight"].double(), self.sd["proj.bias"].double()
        try:
            merged = torch.linalg.solve(W, (y - b).transpose(-1, -2)).transpose(-1, -2)  # (B, T, C)
            w = torch.stack(
                [merged[..., h * hs : (h + 1) * hs] @ torch.linalg.pinv(v[h]) for h in range(self.n_head)],
                dim=1,
            )  # (B, nh, T, T)
        except RuntimeError:  # a singular system: nothing to say
            return None
        return torch.where(w.abs() < 1e-9, torch.zeros_like(w), w).float()

    def expect_output(self, x: torch.Tensor, expected: torch.Tensor, what, *diagnoses) -> torch.Tensor:
        y = self.forward(x)
        problem = compare(
            y,
            expected.to(y.dtype) if isinstance(y, torch.Tensor) else expected,
            what=what,
            atol=ATOL,
            rtol=RTOL,
        )
        if problem:
            fail(self.called(x), problem, *diagnose(y, diagnoses))
        return y


def short_inputs(attn: LearnerAttention, x_full: torch.Tensor, T: int) -> Iterator[tuple[torch.Tensor, dict]]:
    """(x, traced(x)) for a TODO's own check: at T < block_size, or at block_size where the
    mask's crop breaks forward (LearnerAttention.traced_short). While recording, the whole
    x_full first too, so that the replay answers the reference calls of either length."""
    if recording.eager():
        yield x_full, attn.traced(x_full)
    yield attn.traced_short(x_full, T)


def fused_witness(submission, attn: LearnerAttention, x: torch.Tensor) -> str | None:
    """What the learner's fused path says of the heads, which it takes from TODO [head-reshape]
    as the explicit path does: "right" when its output is the reference's (q, k and v are cut
    right: a mix-up of q and k that the explicit weights show is in the scores, TODO [scaling]);
    "<split>" when it gives what the reference gives with q, k, v cut as that entry of
    ref.SPLITS (both paths share that cut); None when it says neither (not written yet, raises,
    or wrong its own way)."""
    n_head = attn.n_head
    candidates = each(
        [
            lambda: ("right", ref.attention_forward(x, attn.sd, n_head)),
            *(
                lambda split=split: (split, ref.attention_forward(x, attn.sd, n_head, split=split))
                for split in ref.SPLITS[1:]
            ),
        ]
    )
    try:
        fused = LearnerAttention(submission, attn.cfg, None, fused=True, weights=attn.sd)
        y = fused.forward(x)
    except (StudentError, CheckFailure):
        return None
    for name, expected in candidates:
        if (
            y.shape == expected.shape
            and compare(y, expected.to(y.dtype), what="", atol=ATOL, rtol=RTOL) is None
        ):
            return name
    return None


# Errors a whole (block_size, block_size) mask applied to (T, T) scores gives, e.g. "The size of
# tensor a (11) must match the size of tensor b (7) at non-singleton dimension 3", or with T = 1
# (where masked_fill broadcasts) "Expected size for first two dimensions of batch2 tensor to be:
# [6, 11] but got: [6, 1]."
_SIZE_MISMATCH = (
    re.compile(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)"),
    re.compile(r"batch2 tensor to be: \[\d+, (\d+)\] but got: \[\d+, (\d+)\]"),
)
# A view that asks for a shape its input's number of elements does not fill.
_VIEW_SIZE = re.compile(r"shape '\[([\d, -]+)\]' is invalid for input of size (\d+)")


def _merge_input_size(err: StudentError, x_shape: tuple) -> int | None:
    """The number of elements the heads' merge got, when it raised asking for x's own shape
    (B, T, C): then its target was right and what it got was not."""
    found = _VIEW_SIZE.search(err.message)
    if not found or raised_in(err) != "contiguous-view":
        return None
    try:
        asked = tuple(int(n) for n in found[1].split(","))
    except ValueError:
        return None
    return int(found[2]) if asked == tuple(x_shape) else None


def mask_not_cropped(err: StudentError, cfg: dict, T: int, B: int | None = None) -> bool:
    """Whether `err` is what a mask whose rows or columns are not cropped to T gives applied to
    (T, T) scores (raised in TODO [mask]'s line; or with T = 1, where masked_fill broadcasts,
    in the weighted sum after it, or, with only the columns cropped, in the heads' merge, which
    then gets block_size rows per head: B * block_size * C elements)."""
    bs = cfg["block_size"]
    found = [m for m in (p.search(err.message) for p in _SIZE_MISMATCH) if m]
    if found and T != bs and {int(found[0][1]), int(found[0][2])} == {bs, T}:
        return True
    size = _merge_input_size(err, (B, T, cfg["n_embd"])) if B is not None else None
    return T == 1 != bs and size == B * bs * cfg["n_embd"]


def mask_crop_hint(cfg: dict, T: int):
    """Adds a hint to a learner's error that comes from applying the whole (block_size,
    block_size) mask to (T, T) scores: the most common way to break forward for T < block_size."""

    def hint_of(err: StudentError):
        if mask_not_cropped(err, cfg, T):
            return message("lesson03.hint_mask_not_cropped", T=T, bs=cfg["block_size"])
        return None

    return hinted(hint_of)


TODOS = frozenset(
    {
        "np-mask",
        "np-softmax",
        "np-attention",
        "np-edges",
        "mask",
        "head-reshape",
        "scaling",
        "contiguous-view",
        "fused",
    }
)


def raised_in(err: StudentError) -> str | None:
    """The TODO whose code raised `err`, as the engine tells it (autograder/engine/blame.py), or None."""
    where = blame.raised_in(
        err, ["attention.py", "attention_numpy.py"], TODOS, references.graded_stubs("03-atencion-causal")
    )
    return where.todo if where is not None else None


_SHAPE_ERROR = re.compile(r"size|shape|dimension", re.IGNORECASE)


def _innermost_line(err: StudentError) -> str:
    frames = learner_frames(err)
    return str(frames[-1].get("line", "")) if frames else ""


def _first_use_of_heads(err: StudentError) -> bool:
    """Whether `err` is a shape error raised where a path first uses q, k and v: the explicit
    path's scores (TODO [scaling]) or weighted sum (y = att @ v, given code), or the fused call
    (TODO [fused])."""
    if err.todo_pending is not None or not _SHAPE_ERROR.search(err.message):
        return False
    where = raised_in(err)
    return where in ("scaling", "fused") or (
        where is None and bool(re.search(r"@\s*v\b", _innermost_line(err)))
    )


# The TODO that assigns each of forward's local variables (a name read before it is assigned is
# that TODO's statement left out, wherever the read raises).
ASSIGNED_BY = {"att": "scaling", "q": "head-reshape", "k": "head-reshape", "v": "head-reshape"}
_UNASSIGNED = re.compile(r"local variable '(\w+)'|name '(\w+)' is not defined")


def shared_cause(attn: LearnerAttention, x: torch.Tensor, err: StudentError) -> str | None:
    """The TODO whose value an error of forward(x) comes from, where lesson 03's structure tells
    it and the engine's blame (the line that raised) would not:

    - the TODO that assigns a variable (ASSIGNED_BY) read before it was assigned;
    - "contiguous-view" when self.proj (given code) raised a shape error: what enters it comes
      straight from the heads' merge, which makes (B, T, C) or raises itself; and when autograd
      found the output's shape is not the input's (only the merge's view sets it);
    - "head-reshape" when the merge, asking for (B, T, C), got another number of elements
      (the heads' output is sized by q, k, v; a mask not cropped to T = 1 excepted); and when
      this path raised a shape error where it first uses q, k, v (see _first_use_of_heads;
      for the explicit path also where the mask meets the scores) and the other path (fused or
      explicit, same weights and input), which takes the same q, k, v from TODO
      [head-reshape], raises a shape error where it first uses them too, or hands the merge a
      heads' output of the wrong size: a scores line that left out k's transpose, or a mask
      cropped wrongly, does not make the fused call fail.

    None otherwise (a pending TODO, another kind of error, or no evidence)."""
    if err.todo_pending is not None:
        return None
    unassigned = (
        _UNASSIGNED.search(err.message) if err.type_name in ("UnboundLocalError", "NameError") else None
    )
    if unassigned:
        return ASSIGNED_BY.get(unassigned[1] or unassigned[2])
    if not err.frames_in_root() and "Mismatch in shape: grad_output" in err.message:
        return "contiguous-view"
    if not _SHAPE_ERROR.search(err.message):
        return None
    if raised_in(err) is None and "self.proj(" in _innermost_line(err):
        return "contiguous-view"
    B, T, C = x.shape
    merged = _merge_input_size(err, tuple(x.shape))
    if merged is not None and merged != B * T * C and not mask_not_cropped(err, attn.cfg, T, B):
        # The merge asked for (B, T, C), its own target: the heads' output it got has another
        # size, which only q, k, v (their number of heads, tokens or channels) set.
        return "head-reshape"
    # The explicit path may also first trip over bad heads where the mask meets the scores they
    # made (a batch of one broadcasts what would fail elsewhere).
    if not (_first_use_of_heads(err) or (not attn.fused and raised_in(err) == "mask")):
        return None
    try:
        other = LearnerAttention(attn.sub, attn.cfg, None, fused=not attn.fused, weights=attn.sd)
        attn.sub.call(other.handle, x)
    except StudentError as other_err:
        merged_other = _merge_input_size(other_err, tuple(x.shape))
        bad_size = merged_other is not None and merged_other != B * T * C
        return "head-reshape" if _first_use_of_heads(other_err) or bad_size else None
    except CheckFailure:
        return None
    return None


def expect_output_shape(attn: LearnerAttention, x: torch.Tensor, y: torch.Tensor) -> None:
    """forward keeps x's shape; where it does not, only the heads' merge (the last reshape
    before proj) can have changed it: a check of another TODO waits on TODO [contiguous-view]."""
    if tuple(y.shape) != tuple(x.shape):
        fail(
            attn.called(x),
            message("lesson03.shape_wrong", got=tuple(y.shape), expected=tuple(x.shape)),
            message("lesson03.merge_hint"),
            waits_on="contiguous-view",
        )


def _raised_at(err: StudentError, *, function: str | None = None, mentions: str | None = None) -> bool:
    """Whether the innermost frame of the learner's files is in `function`, or its line
    mentions `mentions`: so that a device error is told as this check's TODO only when it
    was raised there (elsewhere the engine says which TODO raised it)."""
    frames = learner_frames(err)
    if not frames:
        return False
    last = frames[-1]
    return (function is not None and last.get("name") == function) or (
        mentions is not None and mentions in str(last.get("line", ""))
    )


def expect_forward_on_meta(submission, moved, attn: LearnerAttention) -> None:
    """forward runs on the "meta" device (shapes without data, on every machine): a tensor that
    forward makes without device=... (a mask built there with torch.ones(T, T)) lands on the
    CPU and cannot mix with the module's; a hard-coded .cuda() or "cpu" is caught the same way.
    Used by the checks of TODO [mask] and TODO [fused]: only torch's device errors raised in
    that TODO's code are told as its own; any other error is left to the engine."""
    x = torch.empty(2, MAIN_T, MAIN["n_embd"], device="meta")
    called = message("lesson03.called_meta", call=attn.call_text, shape=tuple(x.shape))

    def device_hint(err: StudentError):
        here = (
            _raised_at(err, function="_fused_attention")
            if attn.fused
            else _raised_at(err, mentions="mask") and not _raised_at(err, function="_fused_attention")
        )
        return message("lesson03.meta_forward") if "device" in err.message and here else None

    with hinted(device_hint, called), mask_crop_hint(MAIN, MAIN_T):
        y = submission.call(moved, x)
    if not isinstance(y, torch.Tensor):
        fail(called, message("lesson03.not_a_tensor", got=type(y).__name__))
    if y.device.type != "meta":
        fail(called, message("lesson03.meta_output", got=y.device.type))


def vjp_or_none(submission, attn: LearnerAttention, x: torch.Tensor, cotangents: list):
    """The learner's vector-Jacobian products, or None when the output carries no gradient
    back to x at all (the worker's own RuntimeError, no learner frame)."""
    try:
        with attn.shared_cause(x):
            grads = submission.vjp(attn.handle, x, cotangents)
    except StudentError as err:
        if not err.frames_in_root() and "does not depend on the input" in err.message:
            return None
        raise
    if not (
        isinstance(grads, list)
        and len(grads) == len(cotangents)
        and all(isinstance(g, torch.Tensor) and g.shape == x.shape for g in grads)
    ):
        fail(attn.called(x), message("lesson03.shape_wrong", got="?", expected=tuple(x.shape)))
    return grads


# Paths a .detach() (or .data, torch.tensor(...)) can cut, as the gradient checks name them.
GRAD_CUTS = (("q",), ("k",), ("v",), ("q", "k"), ("weights",), ("q", "k", "v"))


def gradient_problem(submission, attn: LearnerAttention, x: torch.Tensor, cotangents: list) -> tuple | None:
    """None when the module's vector-Jacobian products at x are the reference's; else the parts
    of a failure (what was called, what differs, which path a .detach() cut where one explains
    it). The reference's products with each cut are made as asked (all at once while recording)."""
    grads = vjp_or_none(submission, attn, x, cotangents)
    called = message("lesson03.called_grad", call=attn.call_text, shape=tuple(x.shape))
    if grads is None:
        return called, message("lesson03.no_gradient")
    expected = ref.input_vjp(x, attn.sd, attn.n_head, cotangents)
    cuts = each(
        lambda cut=cut: ref.input_vjp(x, attn.sd, attn.n_head, cotangents, detach=cut) for cut in GRAD_CUTS
    )
    problem = compare(
        torch.stack(grads),
        torch.stack(expected).float(),
        what=message("lesson03.what_grad"),
        atol=1e-4,
        rtol=1e-4,
    )
    if problem is None:
        return None
    for cut, other in zip(GRAD_CUTS, cuts):
        if compare(torch.stack(grads), torch.stack(other).float(), what="", atol=1e-4, rtol=1e-4) is None:
            return called, problem, message("lesson03.grad_cut", path=" + ".join(cut))
    return called, problem, message("lesson03.grad_wrong")


@dataclass(frozen=True)
class ScoreFit:
    """How well attention weights are explained as softmax(scores / divisor) row by row."""

    divisor: float  # the fitted divisor (inf when the weights ignore the scores)
    residual: float  # worst mismatch of log-weight differences, in nats
    spread: float  # largest log-weight difference, in nats: how much the weights vary
    pairs: int  # how many (row, key) differences the fit rests on

    # Relative to the spread: float32 weights give ~1e-6 of it, a wrong split ~0.5 or more.
    FITS = 1e-3
    MIN_SPREAD = 1e-2  # nats; weights flatter than this carry no evidence
    MIN_PAIRS = 10

    @property
    def fits(self) -> bool:
        # Weights that ignore the scores (divisor inf) or flee them (< 0) explain nothing.
        return (
            self.pairs >= self.MIN_PAIRS
            and self.spread >= self.MIN_SPREAD
            and self.residual <= self.FITS * self.spread
            and 0 < self.divisor < math.inf
        )


def fit_scores(weights: torch.Tensor, raw: torch.Tensor, dim: int = -1) -> ScoreFit:
    """Whether `weights` (B, nh, T, T) are a softmax of raw / d over dimension `dim` for one
    d > 0, over the entries each softmax lets through, whatever the mask did to the others.

    Along one softmax (a row when dim is -1), log w_a - log w_b = (raw_a - raw_b) / d for any two
    entries that both got a weight: that holds with no mask, with -inf or -1e9 masks of any
    pattern, with masked scores set to 0, and with weights zeroed after the softmax. So this
    judges how q and k are formed (which `raw` fits) and the scale (d) without depending on the
    mask, nor on which dimension the softmax ran over (a softmax over the queries, the heads or
    the batch is a slip outside the TODOs). Over the keys it uses the causal keys (j <= i) when
    they are enough, else every key with a weight; a softmax with a NaN or inf entry (all its
    scores -inf) is left out.
    """
    w = weights.detach().double()
    T = w.shape[-1]
    if w.shape != raw.shape or w.dim() != 4:
        return ScoreFit(math.nan, math.inf, 0.0, 0)
    fibres_ok = torch.isfinite(w).all(dim=dim, keepdim=True)
    visible = (w > 1e-30) & fibres_ok

    def pairs(use):
        return int((use.sum(dim=dim) - 1).clamp_min(0).sum())

    use = visible
    if dim in (-1, 3):
        causal = visible & torch.ones(T, T, dtype=torch.bool).tril()
        use = causal if pairs(causal) >= ScoreFit.MIN_PAIRS else visible
    n = pairs(use)
    if n < ScoreFit.MIN_PAIRS:
        return ScoreFit(math.nan, math.inf, 0.0, n)
    w, raw, use = w.movedim(dim, -1), raw.movedim(dim, -1), use.movedim(dim, -1)
    log_w = torch.where(use, w.clamp_min(1e-300).log(), torch.zeros_like(w))
    anchor = torch.where(use, w, torch.full_like(w, -1.0)).argmax(dim=-1, keepdim=True)
    L = (log_w - log_w.gather(-1, anchor))[use]
    D = (raw - raw.gather(-1, anchor))[use]
    denominator = float((D * D).sum())
    spread = float(L.abs().max())
    if denominator == 0:
        return ScoreFit(math.nan, math.inf, spread, n)
    a = float((L * D).sum()) / denominator
    residual = float((L - a * D).abs().max())
    return ScoreFit(1.0 / a if a else math.inf, residual, spread, n)


def split_scores(x: torch.Tensor, sd: dict, n_head: int) -> dict[str, torch.Tensor]:
    """The raw scores q k^T under every split of ref.SPLITS (cheap; all of them, so that the
    replay can answer whichever split a learner's weights fit)."""
    return {split: ref.raw_scores(x, sd, n_head, split) for split in ref.SPLITS}


# The dimensions a softmax may have run over, the right one (the keys) first: the queries, the
# heads and the batch are slips of the line outside the TODOs, judged by reference-parity.
SOFTMAX_DIMS = (-1, -2, 1, 0)


@dataclass(frozen=True)
class Explained:
    """Attention weights explained as softmax(q k^T / d) under one split, over one dimension."""

    split: str  # an entry of ref.SPLITS: how q and k were cut into heads
    fit: ScoreFit
    dim: int  # the dimension the softmax ran over (-1: the keys, right)


def explain_weights(weights: torch.Tensor, x: torch.Tensor, sd: dict, n_head: int) -> Explained | None:
    """The first split of ref.SPLITS under which the weights are a softmax of q k^T / d, over
    the keys or, failing that, over another dimension (SOFTMAX_DIMS), so that how q and k are
    formed and the scale can be judged whichever dimension the softmax took."""
    raws = split_scores(x, sd, n_head)
    for dim in SOFTMAX_DIMS:
        for split, raw in raws.items():
            fit = fit_scores(weights, raw, dim)
            if fit.fits:
                return Explained(split, fit, dim)
    return None


def rows_sum_to_one(weights: torch.Tensor) -> bool:
    sums = weights.double().sum(dim=-1)
    finite = torch.isfinite(sums)
    return bool(torch.allclose(sums[finite], torch.ones_like(sums[finite]), atol=1e-5))


def columns_sum_to_one(weights: torch.Tensor) -> bool:
    """A softmax over the queries (dim=-2) instead of the keys."""
    return rows_sum_to_one(weights.transpose(-1, -2))


def softmax_elsewhere(weights: torch.Tensor | None) -> bool:
    """Whether the weights are what a right mask gives when the softmax runs over the heads or
    the batch (dim 1 or 0, a slip outside the TODOs): -inf put exactly where j > i makes every
    such entry NaN (all its scores -inf) while each visible entry is finite, and those sum to 1
    over the heads or over the batch. The mask did its job; reference-parity names the slip."""
    if weights is None or weights.dim() != 4 or weights.shape[-1] != weights.shape[-2]:
        return False
    w = weights.double()
    T = w.shape[-1]
    future = torch.ones(T, T, dtype=torch.bool).triu(1).expand_as(w)
    finite = torch.isfinite(w)
    if T < 2 or not torch.equal(~finite, future) or bool((w[finite] < 0).any()):
        return False
    visible = torch.where(finite, w, torch.zeros_like(w))
    for dim in (1, 0):
        sums = visible.sum(dim=dim)[..., ~future[0, 0]]
        if torch.allclose(sums, torch.ones_like(sums), atol=1e-5):
            return True
    return False


def mask_explains(weights: torch.Tensor | None) -> bool:
    """Whether attention weights show a mask bug, when the output leaks or changes with T.

    Weights that are finite, exactly 0 where j > i and a softmax over the keys (rows sum to 1)
    are what a right mask gives: the leak then comes from mixing positions (heads split or
    merged wrongly, checks of their own TODOs). Rows that do not sum to 1 while the columns do
    are a softmax over the queries, and NaN exactly where j > i with the rest summing to 1 over
    the heads or the batch a softmax over those (outside the TODOs: reference-parity). Anything
    else, e.g. the future zeroed after the softmax (rows < 1), is the mask's. No weights: no excuse."""
    if weights is None:
        return True
    if softmax_elsewhere(weights):
        return False
    w = weights.double()
    if w.dim() < 2 or w.shape[-1] != w.shape[-2] or not torch.isfinite(w).all():
        return True
    future = torch.ones(w.shape[-2:], dtype=torch.bool).triu(1)
    if bool((w[..., future] != 0).any()):
        return True
    return not (rows_sum_to_one(w) or columns_sum_to_one(w))


def reversed_mask_hint(weights: torch.Tensor):
    """A message naming a reversed mask (torch.triu for torch.tril, or filled where mask == 1)
    when the weights' finite rows look only at j >= i and some look at the future; else None."""
    w = weights.detach().double()
    if w.dim() < 2 or w.shape[-1] != w.shape[-2] or w.shape[-1] < 2:
        return None
    rows = torch.isfinite(w).all(dim=-1, keepdim=True).expand_as(w)
    T = w.shape[-1]
    past = torch.ones(T, T, dtype=torch.bool).tril(-1)
    future = past.T
    if not bool(rows.any()):
        return None
    seen_past = bool(((w != 0) & rows & past).any())
    seen_future = bool(((w != 0) & rows & future).any())
    return message("lesson03.weights_reversed") if seen_future and not seen_past else None


def expect_finite(value: torch.Tensor, called) -> None:
    """Fail when `value` holds NaN or inf: a check must not pass on values it cannot judge."""
    bad = ~torch.isfinite(value)
    if bad.any():
        fail(called, message("lesson03.not_finite", count=int(bad.sum()), total=value.numel()))


def expect_some_finite_weights(weights: torch.Tensor, called, attn: LearnerAttention | None = None) -> None:
    """Fail when no attention weight is finite: nothing left to judge. Where the module's mask
    buffer is not the causal pattern (every row hidden, say), the check waits on TODO [mask]."""
    if not torch.isfinite(weights).any():
        waits = "mask" if attn is not None and mask_buffer_wrong(attn) else None
        fail(called, message("lesson03.weights_nan"), *attention_heatmap(weights), waits_on=waits)


def mask_buffer_wrong(attn: LearnerAttention) -> bool:
    """Whether the module's buffer "mask" is missing, not (1, 1, block_size, block_size), or
    does not let through exactly j <= i (as a 0/1 or True/False keep-mask, or an additive one)."""
    buffers = dict(
        attn.sub.request("call", target=attn.handle, method="named_buffers", options={"materialize": True})
    )
    mask = buffers.get("mask")
    bs = attn.cfg["block_size"]
    if not isinstance(mask, torch.Tensor) or tuple(mask.shape) != (1, 1, bs, bs):
        return True
    m = mask[0, 0].double()
    keep = (m != 0) if mask.dtype == torch.bool or bool(((m == 0) | (m == 1)).all()) else (m == 0)
    return not torch.equal(keep, torch.ones(bs, bs, dtype=torch.bool).tril())


def diagnose(actual, candidates) -> list:
    """Messages for every (expected_variant, message) pair that `actual` matches."""
    found = []
    for expected, text in candidates:
        if (
            isinstance(actual, torch.Tensor)
            and actual.shape == expected.shape
            and torch.allclose(actual.double(), expected.double(), atol=1e-4, rtol=1e-4, equal_nan=True)
        ):
            found.append(text)
            break
    return found


def random_input(cfg: dict, T: int, gen: torch.Generator, B: int = 2) -> torch.Tensor:
    return torch.randn(B, T, cfg["n_embd"], generator=gen)


def dropped_weights(merged: torch.Tensor, v_heads: list[torch.Tensor], n_head: int) -> torch.Tensor | None:
    """The weights D (B, nh, T, T), float64, that the heads' merged output (what entered proj,
    (B, T, C)) implies for the reference's values v: merged = concat_h(D_h @ v_h), solved head by
    head (exact when hs >= T, where v_h has full row rank; None otherwise). In train mode D is
    what left the dropout of the weights: each entry 0 or the weight scaled by 1/(1 - p), whatever
    random numbers drew it, so dropout is judged without reproducing the learner's generator."""
    B, T, C = merged.shape
    hs = C // n_head
    if not (1 <= T <= hs) or len(v_heads) != n_head or not torch.isfinite(merged).all():
        return None
    m = merged.double()
    return torch.stack(
        [m[..., h * hs : (h + 1) * hs] @ torch.linalg.pinv(v_heads[h].double()) for h in range(n_head)], dim=1
    )


@dataclass(frozen=True)
class DropoutFit:
    """How dropped weights D compare with the weights w before the dropout, for probability p."""

    p: float  # the probability the configuration asks for
    stray: int  # entries of D neither 0 nor w / (1 - p)
    dropped: float  # the share of w's clearly positive entries that D zeroed
    scale: float  # the median D / w over the kept entries: 1 / (1 - p) when p is the module's

    @property
    def implied_p(self) -> float:
        return 1.0 - 1.0 / self.scale if self.scale > 0 and math.isfinite(self.scale) else math.nan


def dropout_scale_hint(key: str, fit: DropoutFit):
    """The message `key` naming the p the kept weights' scale implies, beside the configuration's
    (with the digits that tell them apart), when that scale is not 1 / (1 - p); else None."""
    if not math.isfinite(fit.scale) or math.isclose(fit.scale, 1 / (1 - fit.p), rel_tol=1e-3):
        return None
    implied, p = fmt_pair(fit.implied_p, fit.p)
    return message(key, scale=fmt_number(fit.scale), implied=implied, p=p)


def fit_dropout(dropped: torch.Tensor, weights: torch.Tensor, p: float) -> DropoutFit:
    """Compare `dropped` (B, nh, T, T) with `weights` of the same shape under dropout p."""
    D, w = dropped.double(), weights.double()
    tol = 1e-4
    scaled = w / (1.0 - p)
    zero = D.abs() <= tol
    kept_right = (D - scaled).abs() <= tol * scaled.abs().clamp_min(1.0)
    stray = int((~(zero | kept_right)).sum())
    clear = w > 1e-3  # a weight clearly above 0: whether dropout zeroed it is visible
    n = int(clear.sum())
    dropped_share = float((zero & clear).sum()) / n if n else math.nan
    kept = clear & ~zero
    scale = float((D[kept] / w[kept]).median()) if bool(kept.any()) else math.nan
    return DropoutFit(p, stray, dropped_share, scale)


def attention_heatmap(weights, title_key: str = "lesson03.heatmap_title"):
    """The (T, T) matrix of batch 0, head 0, drawn with its leaking cells marked, and every
    head of batch 0 as a Figure (a PNG where an image can be shown)."""
    from autograder.engine.feedback import heatmap, leaking_cells

    heads = np.asarray(weights, dtype=np.float64)
    while heads.ndim > 3:
        heads = heads[0]
    w = heads[0] if heads.ndim == 3 else heads
    return [
        message(title_key),
        heatmap(w, leaks=leaking_cells(w)),
        Figure(heads, title=message("lesson03.figure_weights")),
    ]


def mask_grid(mask: np.ndarray) -> Block:
    """An additive mask drawn as '0' (visible) and '-' (masked, <= -1e9) and '?' otherwise."""
    rows = []
    for row in np.asarray(mask, dtype=np.float64):
        rows.append(" ".join("0" if v == 0 else "-" if v <= -1e9 else "?" for v in row))
    return Block("\n".join(rows), kind="heatmap")
