"""Measures the attention a learner's CausalSelfAttention (lesson 03) gives a sentence.

The attention viewer (autograder/learner/viewer.py) draws what this module measures. The learner's code
runs behind the same trust boundary as grading: a `Sandbox` worker imports their attention.py,
builds the module with weights chosen here, and sends back tensors; every judgement (leaks,
rows that do not sum to 1, errors) is made in this process, with the graders' own messages.

What the learner's module is fed, fixed so that the same sentence always gives the same picture:

- Tokens are characters (the course's tokenizer is char-level, lesson 01), after Unicode NFC
  normalisation, at most BLOCK_SIZE of them.
- Token j's vector x_j has N_EMBD = CHAR_DIMS + BLOCK_SIZE channels: the character's embedding,
  CHAR_DIMS values drawn by torch.randn from a generator seeded with its code point (so "a" is
  the same vector in every sentence and on every machine), followed by a one-hot of j.
- The query and key weights read only the character part (no positional embeddings: lesson 03's
  module has none, so two equal characters give equal queries and keys); they are drawn once
  from WEIGHT_SEED. Biases are 0 and the output projection is the identity.

Two ways to see the weights, one per path of the module:

- explicit (fused=False): the weights are captured where they enter `attn_drop`, exactly as the
  graders capture them.
- fused (fused=True): scaled_dot_product_attention never materialises the (T, T) matrix, so it
  is measured. The value weights copy the one-hot position codes: head h's value for token j is
  e_(j - offset) for a window of HS positions starting at `offset`. The head's output at query i
  is then sum_j w_ij v_j, i.e. row i of its weights for those keys, read straight from the
  module's output (the projection being the identity). ceil(T / HS) forwards cover every key.
  Queries and keys do not depend on the values, so every forward attends the same way; the
  matrix drawn is the one the learner's SDPA call really computed, leaks included.
"""

from __future__ import annotations

import time
import unicodedata
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from autograder.core.results import Feedback, Part, Text, message
from autograder.engine.checks import CheckFailure, describe_student_error, fail
from autograder.engine.feedback import fmt_number, leaking_cells
from autograder.render.attention_png import head_leaks
from autograder.sandbox.client import Sandbox, StudentError, WorkerDied

ATTENTION_FILE = "attention.py"
ATTENTION_MODULE = "attention"
ATTENTION_CLASS = "CausalSelfAttention"
SDPA = "torch.nn.functional.scaled_dot_product_attention"

BLOCK_SIZE = 64  # the longest sentence, in characters: the module's block_size
N_HEAD = 4
CHAR_DIMS = 32
N_EMBD = CHAR_DIMS + BLOCK_SIZE  # 96: character embedding + one-hot position
HS = N_EMBD // N_HEAD  # 24 keys measured per fused forward
WEIGHT_SEED = 0
# Scores q.k / sqrt(hs) then have a standard deviation of CHAR_DIMS * QK_STD**2 = 2: peaked
# enough that heads differ, flat enough that most visible cells get a visible share.
QK_STD = 0.25
ROW_SUM_TOLERANCE = 1e-4
# max |fused - explicit| below which the two paths agree (float32 on the same weights).
PARITY_TOLERANCE = 1e-5
REQUEST_SECONDS = 20.0  # per measurement, once the worker is up: a hung forward is cut here

MODES = ("explicit", "fused")
# The TODO a pending or failing piece is measured against (see engine.waits_for).
MODE_TODO = {"explicit": "mask", "fused": "fused"}


class InputError(Exception):
    """The sentence cannot be measured (too long, empty, control characters); `text` says why."""

    def __init__(self, text: Text) -> None:
        super().__init__(text.key)
        self.text = text


def tokenize(sentence: str) -> list[str]:
    """The sentence's tokens: its characters after NFC normalisation (an accent typed as two
    code points is one character), or InputError."""
    tokens = list(unicodedata.normalize("NFC", sentence))
    if not tokens:
        raise InputError(message("viewer.empty"))
    if len(tokens) > BLOCK_SIZE:
        raise InputError(message("viewer.too_long", count=len(tokens), max=BLOCK_SIZE))
    bad = [ch for ch in tokens if unicodedata.category(ch) in ("Cc", "Cs")]
    if bad:
        raise InputError(message("viewer.control_character", code=f"U+{ord(bad[0]):04X}"))
    return tokens


def config() -> SimpleNamespace:
    return SimpleNamespace(n_embd=N_EMBD, n_head=N_HEAD, block_size=BLOCK_SIZE, dropout=0.0)


def describe_call(fused: bool) -> str:
    """The constructor call as the graders write it, for their messages."""
    inside = ", ".join(f"{k}={v}" for k, v in vars(config()).items())
    return f"{ATTENTION_CLASS}(cfg({inside}), fused={fused})"


def embed(tokens: list[str]):
    """x (1, T, N_EMBD): each character's seeded embedding, then a one-hot of its position."""
    import torch

    x = torch.zeros(1, len(tokens), N_EMBD)
    for j, ch in enumerate(tokens):
        gen = torch.Generator().manual_seed(ord(ch))
        x[0, j, :CHAR_DIMS] = torch.randn(CHAR_DIMS, generator=gen)
        x[0, j, CHAR_DIMS + j] = 1.0
    return x


def probe_weights(offset: int = 0) -> dict:
    """A state_dict for the module: seeded query/key weights on the character channels; value
    weights that make head h's value for token j the one-hot e_(j - offset) (zero outside the
    window of HS positions); no biases; the identity as output projection."""
    import torch

    gen = torch.Generator().manual_seed(WEIGHT_SEED)
    qk = torch.zeros(2 * N_EMBD, N_EMBD)
    qk[:, :CHAR_DIMS] = torch.randn(2 * N_EMBD, CHAR_DIMS, generator=gen) * QK_STD
    v = torch.zeros(N_EMBD, N_EMBD)
    for h in range(N_HEAD):
        for d in range(HS):
            if offset + d < BLOCK_SIZE:
                v[h * HS + d, CHAR_DIMS + offset + d] = 1.0
    return {
        "qkv.weight": torch.cat([qk, v]),
        "qkv.bias": torch.zeros(3 * N_EMBD),
        "proj.weight": torch.eye(N_EMBD),
        "proj.bias": torch.zeros(N_EMBD),
    }


@dataclass
class FusedReport:
    """What the fused path showed beyond its weights."""

    sdpa_called: bool
    sdpa_causal: bool
    # max |fused - explicit| of the two paths' outputs on the same input and weights; None when
    # the explicit path could not run.
    parity: float | None = None

    @property
    def parity_ok(self) -> bool:
        """The fused output matches the explicit one (not when they could not be compared)."""
        return self.parity is not None and self.parity <= PARITY_TOLERANCE


@dataclass
class Measurement:
    """The attention of one sentence, or why there is none."""

    tokens: list[str]
    mode: str
    weights: np.ndarray | None = None  # (N_HEAD, T, T) float64; NaN where the learner's were
    problems: Feedback = field(default_factory=Feedback)  # the graders' messages
    fused: FusedReport | None = None

    # Cached: `measure` sets the weights before anyone reads this, and nothing changes them after.
    @cached_property
    def leaks(self) -> np.ndarray | None:
        """(N_HEAD, T, T) bool: a non-zero weight where key j > query i."""
        if self.weights is None:
            return None
        return head_leaks(self.weights)

    @property
    def status(self) -> str:
        """ "error" (nothing to draw), "leak" (the future is seen), "warning" (drawn, with the
        graders' objections: NaN, rows that do not sum to 1, SDPA not causal; or, on the fused
        path, an output that differs from the explicit one, or could not be compared with it)
        or "ok". The page shows the parity line under the status: "ok" above a parity line
        that failed would tell the learner all is well when it is not."""
        if self.weights is None:
            return "error"
        if self.leaks.any():
            return "leak"
        if self.problems or (self.fused is not None and not self.fused.parity_ok):
            return "warning"
        return "ok"


def measure(submission: Path, tokens: list[str], mode: str, todo_titles: dict | None = None) -> Measurement:
    """The learner's attention weights for `tokens`, measured in a fresh sandbox on the current
    files of `submission` (so every edit the learner saves shows up at once)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    result = Measurement(list(tokens), mode)
    with Sandbox(submission) as sandbox:
        try:
            sandbox.ensure_ready()
            sandbox.deadline = time.monotonic() + REQUEST_SECONDS
            x = embed(result.tokens)
            if mode == "explicit":
                result.weights = _explicit_weights(sandbox, x)
            else:
                result.weights, result.fused = _fused_weights(sandbox, x)
        except StudentError as err:
            result.problems = describe_student_error(err, MODE_TODO[mode], todo_titles or {})
            return result
        except WorkerDied as died:
            result.problems = died.feedback
            return result
        except CheckFailure as exc:  # what fail() raises: the graders' messages
            result.problems = exc.feedback
            return result
    result.problems = _judge(result)
    return result


def warm_up(submission: Path) -> None:
    """Import torch here and start the sandbox's warm worker pool, so the first sentence a
    learner types does not wait for them."""
    import torch  # noqa: F401

    with Sandbox(submission) as sandbox:
        sandbox.ensure_ready()


# ---------------------------------------------------------------- the two paths


def _module(sandbox: Sandbox, fused: bool, offset: int = 0):
    cls = sandbox.getattr(sandbox.module(ATTENTION_MODULE), ATTENTION_CLASS)
    handle = sandbox.call(cls, config(), fused=fused)
    _load(sandbox, handle, fused, offset)
    sandbox.call(handle, method="eval")
    return handle


def _load(sandbox: Sandbox, handle, fused: bool, offset: int) -> None:
    weights = probe_weights(offset)
    missing, _unexpected = sandbox.call(handle, weights, method="load_state_dict", strict=False)
    absent = [key for key in weights if key in missing]
    if absent:
        fail(message("lesson03.weights_missing", keys=", ".join(absent), call=describe_call(fused)))


def _output(value: Any, x, fused: bool):
    """The module's output as a float64 (1, T, C) tensor, or the graders' message."""
    import torch

    if not isinstance(value, torch.Tensor) or value.device.type == "meta" or value.is_complex():
        got = (
            type(value).__name__
            if not isinstance(value, torch.Tensor)
            else f"Tensor(device={value.device.type}, dtype={value.dtype})"
        )
        fail(
            message("lesson03.called", call=describe_call(fused), shape=tuple(x.shape)),
            message("lesson03.not_a_tensor", got=got),
        )
    if tuple(value.shape) != tuple(x.shape):
        fail(
            message("lesson03.called", call=describe_call(fused), shape=tuple(x.shape)),
            message("lesson03.shape_wrong", got=tuple(value.shape), expected=tuple(x.shape)),
        )
    return value.detach().double()


def _explicit_weights(sandbox: Sandbox, x) -> np.ndarray:
    """The weights as they entered attn_drop, as the graders capture them: (N_HEAD, T, T)."""
    import torch

    handle = _module(sandbox, fused=False)
    traced = sandbox.call_traced(handle, x, capture=("attn_drop",), no_grad=True)
    _output(traced.get("value"), x, fused=False)
    captured = traced.get("captured") or []
    called = message("lesson03.called", call=describe_call(False), shape=tuple(x.shape))
    if not captured or not isinstance(captured[0], torch.Tensor):
        fail(called, message("lesson03.attn_drop_calls", count=0))
    w = captured[0]
    T = x.shape[1]
    expected = (1, N_HEAD, T, T)
    if tuple(w.shape) != expected:
        fail(called, message("lesson03.weights_shape", got=tuple(w.shape), expected=expected))
    return w[0].double().numpy()


def _fused_weights(sandbox: Sandbox, x) -> tuple[np.ndarray, FusedReport]:
    """The fused path's weights, measured window by window (see the module docstring)."""
    T = x.shape[1]
    handle = _module(sandbox, fused=True)
    traced = sandbox.call_traced(handle, x, spy=(SDPA,), no_grad=True)
    first = _output(traced.get("value"), x, fused=True)
    spied = traced.get("spied") or []
    report = FusedReport(sdpa_called=bool(spied), sdpa_causal=any(_causal_call(c) for c in spied))
    heads = np.zeros((N_HEAD, T, T))
    for offset in range(0, T, HS):
        if offset == 0:
            y = first
        else:
            _load(sandbox, handle, True, offset)
            y = _output(sandbox.call_traced(handle, x, no_grad=True)["value"], x, fused=True)
        width = min(HS, T - offset)
        per_head = y[0].view(T, N_HEAD, HS).numpy()  # (T, nh, HS): head h's output channels
        for h in range(N_HEAD):
            heads[h, :, offset : offset + width] = per_head[:, h, :width]
    report.parity = _parity(sandbox, x, first)
    return heads, report


def _causal_call(call: dict) -> bool:
    """Whether a spied scaled_dot_product_attention call was told to be causal."""
    names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale")
    arguments = {**dict(zip(names, call.get("args", []))), **call.get("kwargs", {})}
    return arguments.get("is_causal") is True or isinstance(arguments.get("attn_mask"), dict)


def _parity(sandbox: Sandbox, x, fused_output) -> float | None:
    """max |fused - explicit| on the same input and weights; None when explicit cannot run."""
    try:
        handle = _module(sandbox, fused=False)
        explicit = _output(sandbox.call_traced(handle, x, no_grad=True)["value"], x, fused=False)
    except (StudentError, CheckFailure):
        return None
    difference = (fused_output - explicit).abs().max()
    return float(difference)


# ---------------------------------------------------------------- judging


def _judge(result: Measurement) -> Feedback:
    """The graders' messages about weights that could be drawn: leaks, NaN, rows that do not
    sum to 1, and for the fused path how SDPA was called and whether it matches explicit."""
    w = result.weights
    parts: list[Part] = []
    leaks = leaking_cells(w)  # the (T, T) positions that leak in any head, as the graders count
    if leaks.any():
        parts += [message("lesson03.future_weights", count=int(leaks.sum())), message("viewer.leak_marked")]
    if not np.isfinite(w).all():
        parts.append(message("lesson03.weights_nan"))
    sums = np.nansum(w, axis=-1)
    finite_rows = np.isfinite(w).all(axis=-1)
    if finite_rows.any() and np.abs(sums[finite_rows] - 1).max() > ROW_SUM_TOLERANCE:
        worst = float(np.abs(sums[finite_rows] - 1).max())
        parts += [
            message("lesson03.rows_not_normalised", sums=f"max |suma - 1| = {worst:.3g}"),
            message("lesson03.softmax_dim_hint"),
        ]
    fused = result.fused
    if fused is not None:
        if not fused.sdpa_called:
            parts.append(message("lesson03.sdpa_not_called"))
        elif not fused.sdpa_causal:
            parts.append(message("lesson03.sdpa_not_causal"))
    return Feedback(tuple(parts))


def parity_text(fused: FusedReport) -> Text:
    """How the fused output compares with the explicit one, for the page."""
    if fused.parity is None:
        return message("viewer.parity_unknown")
    key = "viewer.parity_ok" if fused.parity_ok else "viewer.parity_differs"
    return message(key, difference=fmt_number(fused.parity))


__all__ = [
    "BLOCK_SIZE",
    "MODES",
    "N_HEAD",
    "FusedReport",
    "InputError",
    "Measurement",
    "describe_call",
    "embed",
    "measure",
    "parity_text",
    "probe_weights",
    "tokenize",
    "warm_up",
]
