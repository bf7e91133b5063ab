"""Learner-facing feedback: the one place where checks turn values into explanations.

Pure functions, no I/O. They accept NumPy arrays and torch tensors (torch is never imported
here: a value is a tensor only if torch is already loaded), and return catalog messages
(`Text`, localised later by the renderer) or preformatted `Block`s.

    compare(actual, expected, what=...)   what came back vs what was expected, tensor-aware
    heatmap(weights, leaks=...)           an attention matrix as text, leaking cells marked
    leaking_cells(weights)                where a causal attention matrix looks at the future
    student_frames / format_traceback     a traceback trimmed to the learner's own files
    relative_to(filename, root)           a frame's file relative to the learner's folder
    truncate / redact / secrets_from_environ / fmt_number / fmt_pair
    to_float64(values)                    any numbers, tensors included, as a float64 array
"""

from __future__ import annotations

import math
import numbers
import os
import sys
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from autograder.core import i18n
from autograder.core.results import Block, Feedback, Text

# The one tolerance for a float32 output on the CPU against its float64 reference (every
# lesson's harness imports it); a check that chains many float32 steps states its own, wider one.
ATOL = RTOL = 1e-5
# One character per cell, from exactly 0 (blank) to 1; any non-zero weight gets at least '.'.
HEATMAP_RAMP = " .:-=+*#%@"
HEATMAP_LEAK = "X"
HEATMAP_NAN = "?"
TRACEBACK_MESSAGE_LIMIT = 600
SECRET_MIN_LENGTH = 6
SECRET_NAME_PARTS = (
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "KEY",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "SESSION",
)


# --- numbers, shapes, indices ---------------------------------------------------------------


def fmt_number(x: Any) -> str:
    """Compact: integers exactly, floats with 4 significant digits ("0.1235", "1e-5", "-inf")."""
    if isinstance(x, (bool, np.bool_)):
        return str(bool(x))
    if isinstance(x, (numbers.Integral, np.integer)):
        return str(int(x))
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == 0:
        return "0"  # also -0.0
    text = f"{x:.4g}"
    if "e" in text:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}e{int(exponent)}"
    return text


def fmt_pair(got: Any, expected: Any) -> tuple[str, str]:
    """Two numbers a message sets side by side, with as many significant digits as it takes for
    them to print differently when they differ (4 at least, 17 at most): a message must never
    read "0.1455, debería 0.1455". Equal numbers print alike."""
    a, e = fmt_number(got), fmt_number(expected)
    if a != e or _same_value(got, expected):
        return a, e
    for digits in range(5, 18):
        a, e = _fmt_digits(float(got), digits), _fmt_digits(float(expected), digits)
        if a != e:
            break
    return a, e


def _same_value(a: Any, b: Any) -> bool:
    try:
        return float(a) == float(b) or (math.isnan(float(a)) and math.isnan(float(b)))
    except (TypeError, ValueError):
        return False


def _fmt_digits(x: float, digits: int) -> str:
    if math.isnan(x) or math.isinf(x) or x == 0:
        return fmt_number(x)
    text = f"{x:.{digits}g}"
    if "e" in text:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}e{int(exponent)}"
    return text


def _fmt_shape(shape: tuple[int, ...]) -> str:
    return str(tuple(int(n) for n in shape))


def _fmt_index(index: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(int(i)) for i in index) + "]"


# --- values as arrays -----------------------------------------------------------------------


def _is_tensor(x: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _is_scalar(x: Any) -> bool:
    return isinstance(x, (numbers.Number, np.generic)) and not isinstance(x, (str, bytes))


def _kind(x: Any) -> str | None:
    """ "tensor", "array", "scalar", or None for anything else (None, lists, strings...)."""
    if _is_tensor(x):
        return "tensor"
    if isinstance(x, np.ndarray):
        return "array"
    if _is_scalar(x):
        return "scalar"
    return None


def _dtype_name(x: Any) -> str:
    return str(x.dtype).removeprefix("torch.")


def to_float64(x: Any) -> np.ndarray:
    """Values as a float64 NumPy array (bool and int included); raises on non-numeric data.
    A tensor (any device, with or without grad) is detached and copied to the CPU."""
    if _is_tensor(x):
        import torch  # already loaded, or _is_tensor would be False

        return x.detach().to("cpu", torch.float64).numpy()
    return np.asarray(x, dtype=np.float64)


# --- compare --------------------------------------------------------------------------------


def compare(
    actual: Any,
    expected: Any,
    *,
    what: str | Text,
    atol: float = ATOL,
    rtol: float = RTOL,
) -> Feedback | None:
    """None when `actual` matches `expected` (shape, dtype, values within atol*scale +
    rtol*|expected|, NaN/inf where expected has them); otherwise the first thing a learner
    should fix.

    `scale` is the largest finite |expected|, at least 1: float32 rounding in a chain of sums
    and products is proportional to the size of the terms, not to each output element, so a
    correct float32 GPT whose logits reach 13 misses an element near 0 by 1e-5 on some draws
    of the weights (issue: a solution failed CI on one seed in ~600). For values of order 1,
    the tolerance is exactly atol + rtol*|expected|; the feedback names the atol applied.

    `what` names the value for the learner ("la salida de forward(x)"): a str or a `Text`.
    Python and NumPy scalars compare by value only; arrays and tensors also by dtype (NumPy's
    float32 and torch.float32 are the same dtype here).
    """
    expected_kind = _kind(expected)
    if expected_kind is None:
        raise TypeError(
            f"compare(): expected must be a tensor, array or number, not {type(expected).__name__}"
        )
    actual_kind = _kind(actual)
    if actual_kind is None:
        return _not_a_value(actual, expected_kind, what)

    e = to_float64(expected)
    shape = tuple(np.shape(actual))
    if shape != e.shape:
        return _shape_feedback(shape, e.shape, what)

    feedback = Feedback()
    if "scalar" not in (actual_kind, expected_kind):
        got, want = _dtype_name(actual), _dtype_name(expected)
        if got != want:
            feedback += Feedback.of(
                Text("feedback.dtype_mismatch", {"what": what, "got": got, "expected": want})
            )
    try:
        a = to_float64(actual)
    except (TypeError, ValueError):  # strings, objects: nothing to compare beyond the dtype
        return feedback or _not_a_value(actual, expected_kind, what)

    nonfinite = _nonfinite_feedback(a, e, what)
    if nonfinite:
        return feedback + nonfinite
    values = _values_feedback(a, e, what, atol * tolerance_scale(e), rtol)
    if values:
        feedback += values
    return feedback or None


def tolerance_scale(expected: np.ndarray) -> float:
    """The factor compare() applies to atol: the largest finite |expected|, at least 1."""
    finite = np.abs(expected[np.isfinite(expected)])
    return max(1.0, float(finite.max())) if finite.size else 1.0


def _not_a_value(actual: Any, expected_kind: str, what: str | Text) -> Feedback:
    if actual is None:
        return Feedback.of(Text("feedback.returned_none", {"what": what}))
    key = {
        "tensor": "feedback.not_a_tensor",
        "array": "feedback.not_an_array",
        "scalar": "feedback.not_a_number",
    }[expected_kind]
    return Feedback.of(Text(key, {"what": what, "got": type(actual).__name__}))


def _shape_feedback(got: tuple[int, ...], expected: tuple[int, ...], what: str | Text) -> Feedback:
    feedback = Feedback.of(
        Text(
            "feedback.shape_mismatch",
            {"what": what, "got": _fmt_shape(got), "expected": _fmt_shape(expected)},
        )
    )
    if len(got) == len(expected) and sorted(got) == sorted(expected):
        differ = [axis for axis, (g, x) in enumerate(zip(got, expected, strict=True)) if g != x]
        if len(differ) == 2:
            hint = Text("feedback.shape_swapped", {"first": differ[0], "second": differ[1]})
        else:
            hint = Text("feedback.shape_permuted")
        return feedback + Feedback.of(hint)
    if math.prod(got) == math.prod(expected):
        return feedback + Feedback.of(Text("feedback.shape_same_numel", {"numel": math.prod(got)}))
    return feedback


def _nonfinite_feedback(a: np.ndarray, e: np.ndarray, what: str | Text) -> Feedback | None:
    # Only non-finite values that the reference does not have at the same place count.
    nan = np.isnan(a) & ~np.isnan(e)
    inf = np.isinf(a) & (a != e)
    total = a.size
    if nan.any():
        first = tuple(np.argwhere(nan)[0])
        message = Text(
            "feedback.nan_present",
            {"what": what, "count": int(nan.sum()), "total": total, "index": _fmt_index(first)},
        )
    elif inf.any():
        first = tuple(np.argwhere(inf)[0])
        message = Text(
            "feedback.inf_present",
            {
                "what": what,
                "count": int(inf.sum()),
                "total": total,
                "index": _fmt_index(first),
                "value": fmt_number(a[first]),
            },
        )
    else:
        return None
    return Feedback.of(message, Text("feedback.nonfinite_hint"))


def _values_feedback(
    a: np.ndarray, e: np.ndarray, what: str | Text, atol: float, rtol: float
) -> Feedback | None:
    with np.errstate(invalid="ignore", over="ignore"):
        close = np.isclose(a, e, atol=atol, rtol=rtol, equal_nan=True)
        if close.all():
            return None
        diff = np.abs(a - e)
    tolerances = {"atol": fmt_number(atol), "rtol": fmt_number(rtol)}
    if a.ndim == 0:
        return Feedback.of(
            Text(
                "feedback.scalar_differs",
                {"what": what, **dict(zip(("got", "expected"), fmt_pair(a, e))), **tolerances},
            )
        )
    # The worst element: a NaN difference (NaN expected, a number obtained) ranks as infinite.
    rank = np.where(close, -1.0, np.nan_to_num(diff, nan=np.inf))
    worst = np.unravel_index(int(np.argmax(rank)), a.shape)
    return Feedback.of(
        Text(
            "feedback.values_differ",
            {"what": what, "count": int((~close).sum()), "total": a.size, **tolerances},
        ),
        Text(
            "feedback.max_error",
            {
                "error": fmt_number(diff[worst]),
                "index": _fmt_index(worst),
                **dict(zip(("got", "expected"), fmt_pair(a[worst], e[worst]))),
            },
        ),
    )


# --- attention matrices ---------------------------------------------------------------------


def leaking_cells(weights: Any, tol: float = 0.0) -> np.ndarray:
    """(T, T) bool: True where key j > query i has |weight| > tol, in any of the leading dims."""
    w = to_float64(weights)
    if w.ndim < 2 or w.shape[-1] != w.shape[-2]:
        raise ValueError(f"leaking_cells(): expected (..., T, T) weights, got shape {w.shape}")
    with np.errstate(invalid="ignore"):
        nonzero = np.abs(w) > tol  # NaN is not a leak; the heatmap shows it as '?'
    future = np.triu(np.ones(w.shape[-2:], dtype=bool), k=1)
    leaks = nonzero & future
    return leaks.reshape(-1, *w.shape[-2:]).any(axis=0)


def heatmap(
    weights: Any, *, leaks: Any = None, max_size: int = 12, lang: str = i18n.DEFAULT_LANGUAGE
) -> Block:
    """A 2-D attention matrix (rows: queries i, columns: keys j) as text, one character per cell.

    Values are clipped to 0..1 (attention weights are probabilities). Cells where `leaks` is True
    show 'X', NaN shows '?'. Larger matrices are cropped to their top-left max_size x max_size.
    The block is language-neutral (it is shown verbatim); put `heatmap_legend()` after it.
    `lang` is accepted for compatibility and unused.
    """
    w = to_float64(weights)
    if w.ndim != 2:
        raise ValueError(f"heatmap(): expected a 2-D matrix, got shape {w.shape}")
    marks = np.zeros(w.shape, dtype=bool) if leaks is None else np.asarray(leaks, dtype=bool)
    if marks.shape != w.shape:
        raise ValueError(f"heatmap(): leaks has shape {marks.shape}, weights {w.shape}")
    rows, cols = w.shape
    shown_rows, shown_cols = min(rows, max_size), min(cols, max_size)

    label = "i\\j"
    label_width = max(len(label), len(str(shown_rows - 1)))
    cell_width = len(str(max(shown_cols - 1, 0))) + 1
    lines = [label.rjust(label_width) + "".join(str(j).rjust(cell_width) for j in range(shown_cols))]
    for i in range(shown_rows):
        cells = (_heat_char(w[i, j], marks[i, j]).rjust(cell_width) for j in range(shown_cols))
        lines.append(str(i).rjust(label_width) + "".join(cells))
    if (shown_rows, shown_cols) != (rows, cols):
        lines.append(f"… {shown_rows}×{shown_cols} / {rows}×{cols}")
    return Block("\n".join(lines) + "\n", kind="heatmap")


def heatmap_legend() -> Text:
    """The legend to put after a heatmap; a separate Text so it follows the output language."""
    return Text("feedback.heatmap_legend")


def _heat_char(value: float, leak: bool) -> str:
    if leak:
        return HEATMAP_LEAK
    if math.isnan(value):
        return HEATMAP_NAN
    if value <= 0:
        return HEATMAP_RAMP[0]
    steps = len(HEATMAP_RAMP) - 1
    return HEATMAP_RAMP[min(steps, max(1, math.ceil(value * steps - 1e-9)))]


# --- tracebacks -----------------------------------------------------------------------------


def student_frames(frames: Iterable[Mapping[str, Any]], root: str) -> list[dict[str, Any]]:
    """The frames in files under `root` (the sandbox copy of the submission), with file names
    relative to it ("attention.py"); if there are none, the innermost frame alone."""
    frames = [dict(frame) for frame in frames]
    kept = []
    for frame in frames:
        relative = relative_to(str(frame.get("filename", "")), root)
        if relative is not None:
            kept.append({**frame, "filename": relative})
    return kept or frames[-1:]


def relative_to(filename: str, root: str) -> str | None:
    """`filename` relative to `root` ("attention.py", posix), or None when it is not below it;
    a symlinked temporary folder (macOS: /tmp -> /private/tmp) is the same folder."""
    if not filename or filename.startswith("<"):  # "<string>", "<frozen ...>"
        return None
    for normalise in (os.path.abspath, os.path.realpath):  # realpath: macOS /tmp -> /private/tmp
        path, base = os.path.normpath(normalise(filename)), os.path.normpath(normalise(root))
        base = base.rstrip(os.sep)
        if os.path.normcase(path).startswith(os.path.normcase(base) + os.sep):
            return path[len(base) + 1 :].replace(os.sep, "/")
    return None


def format_traceback(
    frames: Iterable[Mapping[str, Any]],
    exc_type: str,
    message: str,
    *,
    final_line: bool = True,
) -> Block:
    """A compact Python-like traceback of the given (already trimmed) frames:

      attention.py:57 · forward()
        y = q @ k
    RuntimeError: ...

    A Block is kept verbatim and rendered later in whichever language the reader asked for, so
    its lines hold no word of either language (it once said "en forward" under --lang en).
    """
    lines = []
    for frame in frames:
        lines.append("  " + frame_location(frame))
        source = (frame.get("line") or "").strip()
        if source:
            lines.append("    " + source)
    if final_line:  # off where the message above the traceback already says "Type: message"
        message = truncate(str(message).strip(), TRACEBACK_MESSAGE_LIMIT)
        lines.append(f"{exc_type}: {message}" if message else str(exc_type))
    return Block("\n".join(lines) + "\n", kind="traceback")


def frame_location(frame: Mapping[str, Any]) -> str:
    """A frame as "attention.py:57 · forward()"; a module-level one ("<module>") as its file and line."""
    where = f"{frame.get('filename', '?')}:{frame.get('lineno', '?')}"
    name = str(frame.get("name") or "")
    return where if not name or name.startswith("<") else f"{where} · {name}()"


# --- text hygiene ---------------------------------------------------------------------------


def truncate(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, ending in '…' when it was cut."""
    if limit < 1:
        raise ValueError("truncate(): limit must be at least 1")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def redact(text: str, secrets: Iterable[str]) -> str:
    """Every occurrence of each secret (of at least 6 characters) replaced by '***'."""
    # Longest first, so that a secret containing another is replaced whole.
    for secret in sorted({s for s in secrets if s and len(s) >= SECRET_MIN_LENGTH}, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def secrets_from_environ(environ: Mapping[str, str]) -> list[str]:
    """Values (>= 6 characters) of variables whose name looks secret (GITHUB_TOKEN, API_KEY...).

    Over-matching (SSH_AUTH_SOCK, XDG_SESSION_DESKTOP) only hides a harmless value."""
    found = {
        value
        for name, value in environ.items()
        if value
        and len(value) >= SECRET_MIN_LENGTH
        and any(part in name.upper() for part in SECRET_NAME_PARTS)
    }
    return sorted(found, key=lambda s: (-len(s), s))
