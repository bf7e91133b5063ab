"""Blame by cause: the TODO whose value made a torch operation fail somewhere else.

A torch error raised in given code, or in a later TODO, is often no fault of the line that
raised: `y = att @ v` (given code) fails with "expected scalar type Double but found Float"
because the `scaling` TODO made `att` in float64; `m = self.mlp(self.ln_2(x))` (TODO pre-norm)
fails on a (B, T, 2C) input because the `residual` TODO concatenated where it should have added.
The worker replays such a failed call under a tracer (autograder/sandbox/worker/provenance.py)
and sends, untrusted, the failing operation's operands and the records they came from: for each
tensor, the operation and the learner's line that made it, its dtype, shape and device, and its
inputs. This module reads that graph (bounded, checked: anything malformed is no claim) and
decides, in the trusted process:

1. What kind of mismatch the error is, from torch's message: device, dtype or shape.
2. Where each operand got the property that clashed (its *origin*), walking back from the
   operand through the operations that only carried the property on:
   - dtype and device: an operation whose result has the dtype (device) of one of its inputs
     carried it from those inputs; one whose result differs from all of them (`.double()`,
     `torch.from_numpy(...)`, a factory) made it;
   - shape: a matmul, linear or embedding derives it from all its inputs, and its own line
     counts too (the layer it applied chose a size: a forward that skips c_proj gives
     (B, T, 4C) there); any other operation whose result has the shape of one of its inputs
     carried it from those (elementwise arithmetic, softmax, masked_fill, dropout, a LayerNorm,
     `.contiguous()`); any other (view, transpose, cat, indexing, a reduction, a factory) made it;
   - a tensor made before the replay is an origin of its own: an argument the grader drew, a
     parameter, or other state (a buffer, an attribute, a global: possibly a TODO's, unknown).
3. Which TODO each origin's line belongs to (engine/blame.py `todo_at`, the same rules as for
   the line that raised); a line outside every TODO is given code.
4. Whether to blame one TODO, X, instead of the line that raised (otherwise: no claim, and the
   engine blames the line that raised, as before):
   - dtype, device: the operands whose value differs from the operands that came only from
     the grader's arguments and parameters (or, with none such, whose dtype is not float32,
     the course's default) are the odd ones, a bool (a mask, a condition) never; every origin
     of every odd operand is a line of X, and some operand is not odd (what the value met);
   - shape: no operand can be called the odd one, so all of them count: the origins that are
     lines of a TODO are all X's, and no operand comes from other state (a buffer sized by a
     TODO could be the wrong one). A TODO that raised while applying the operation itself
     (not through a module such as a LayerNorm) keeps the blame: a transpose it left out, or
     operands it swapped, look exactly like a wrong operand; so does a line that made one of
     its own operands. What no operation did (a statement left out) leaves no trace: a shape
     never reaches past a matmul or linear that derives it from several TODOs' values;
   - X is not the TODO that raised (that one is already blamed).
   These rules never guess: an operand that could be the culprit and is not traced, or two
   TODOs that could each be, leave the blame where it was.

The replay's graph is as trustworthy as a traceback (the learner's code could forge either): it
only moves the blame between the learner's own TODOs and adds a sentence; it never awards a
point, and a check's verdict does not read it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autograder.core.results import Part, message

KINDS = ("device", "dtype", "shape")
DEFAULT_DTYPE = "float32"
MAX_RECORDS = 2000
MAX_WALK = 4000
CODE_LIMIT = 90
MAX_VALUES = 6  # operands listed in one message

# torch's words for each kind of mismatch, tried in this order (a device message can name dtypes).
_DEVICE_WORDS = re.compile(r"\bdevices?\b|\bcuda(?::\d+)?\b|\bmps\b")
_DTYPE_WORDS = re.compile(
    r"dtype|scalar type|\b(?:Float|Double|Half|BFloat16|Long|Int|Short|Byte|Bool|Char)(?:Tensor)?\b"
    r"|\b(?:float|double|half|bfloat16|long|int)\s*!=|can't be cast|same type"
)
_SHAPE_WORDS = re.compile(
    r"\bsizes?\b|\bshapes?\b|dimension|\bdims?\b|broadcast|must match|normalized_shape|out of bounds"
    r"|out of range|invalid for input|cannot be multiplied|number of elements"
)

# Operations whose result's shape follows from all their inputs' shapes (none chose it).
_DERIVED = frozenset(
    {
        "matmul",
        "__matmul__",
        "__rmatmul__",
        "mm",
        "bmm",
        "linear",
        "embedding",
        "scaled_dot_product_attention",
        "baddbmm",
        "addmm",
        "cross_entropy",
        "nll_loss",
    }
)


@dataclass(frozen=True)
class Record:
    """One tensor of the replay: the operation and the learner's line that made it (`site`:
    (file relative to the submission, line); None outside their files), or `external` ("argument",
    "parameter", "state") for one made before the replay; its looks; its inputs' record numbers."""

    op: str
    site: tuple[str, int] | None
    direct: bool
    external: str | None
    dtype: str
    shape: tuple[int, ...]
    device: str
    inputs: tuple[int, ...]

    def looks(self, kind: str) -> str:
        if kind == "shape":
            return str(tuple(self.shape))
        return self.dtype if kind == "dtype" else self.device


@dataclass(frozen=True)
class Trace:
    """The failing operation: its name, the learner's line that ran it, whether that line called
    it directly, its operands (record numbers, in order) and their local names there."""

    op: str
    site: tuple[str, int] | None
    direct: bool
    operands: tuple[int, ...]
    names: dict[int, str]
    records: dict[int, Record]


@dataclass(frozen=True)
class Origin:
    """Where an operand got its dtype, device or shape: a learner's line, or `external`."""

    site: tuple[str, int] | None = None
    external: str | None = None


@dataclass(frozen=True)
class Value:
    """An operand as the learner sees it: their name for it ("" when none is known), its
    dtype, device or shape, and the line that gave it that (file, line, the code there)."""

    name: str
    looks: str
    file: str
    line: int
    code: str

    def subject(self, capital: bool) -> Part:
        if self.name:
            return message("provenance.subject_named" if capital else "provenance.named", name=self.name)
        return message("provenance.subject" if capital else "provenance.unnamed")


@dataclass(frozen=True)
class Cause:
    """The TODO whose value made the operation fail, and what to tell the learner about it:
    the odd value (dtype, device), or every operand whose shape a line of that TODO gave
    (shape: no operand can be called the odd one); what the odd value met (`other`); the line
    that raised."""

    todo: str
    kind: str
    values: tuple[Value, ...]
    other: str
    crash_file: str
    crash_line: int
    crash_code: str

    @property
    def file(self) -> str:
        return self.values[0].file

    @property
    def line(self) -> int:
        return self.values[0].line

    def explanation(self, check_todo: str | None = None) -> list[Part]:
        """The catalog messages that say it (provenance.*): what was made where, and what it
        met; then, for a check of another TODO, that it waits on this one."""
        crash = {"crash_file": self.crash_file, "crash_line": self.crash_line, "crash_code": self.crash_code}
        if self.kind == "shape":
            parts: list[Part] = [message("provenance.shape", todo=self.todo, **crash)]
            for value in self.values:
                parts.append(
                    message(
                        "provenance.shape_value",
                        subject=value.subject(capital=False),
                        value=value.looks,
                        file=value.file,
                        line=value.line,
                        code=value.code,
                    )
                )
            parts.append(message("provenance.fix", todo=self.todo))
        else:
            value = self.values[0]
            parts = [
                message(
                    f"provenance.{self.kind}",
                    subject=value.subject(capital=True),
                    value=value.looks,
                    other=self.other,
                    todo=self.todo,
                    file=value.file,
                    line=value.line,
                    code=value.code,
                    **crash,
                )
            ]
        if check_todo and check_todo != self.todo:
            parts.append(message("provenance.waits", check=check_todo, todo=self.todo))
        return parts


def explanation(err: Any, check_todo: str | None = None) -> list[Part]:
    """The message parts for the cause blame.raised_in found for `err` (sandbox.StudentError),
    or [] when it found none: what describe_student_error adds in place of "the error jumps in
    TODO X" (engine.raised_in_other_todo), untrue for a cause."""
    cause = getattr(err, "traced_cause", None)
    return cause.explanation(check_todo) if isinstance(cause, Cause) else []


# ---------------------------------------------------------------- reading the worker's answer


def read_trace(raw: Any) -> Trace | None:
    """The worker's answer (sandbox/worker/provenance.py `Tracer.report`) as a Trace, or None
    when it is missing or malformed: it comes from the learner's process."""
    if not isinstance(raw, dict):
        return None
    records_raw = raw.get("records")
    operands = _ints(raw.get("operands"), 16)
    if not isinstance(records_raw, dict) or operands is None or len(records_raw) > MAX_RECORDS:
        return None
    records = {}
    for key, value in records_raw.items():
        number = _int(key)
        record = _record(value)
        if number is None or record is None:
            return None
        records[number] = record
    names_raw = raw.get("names") if isinstance(raw.get("names"), dict) else {}
    names = {}
    for key, value in list(names_raw.items())[:16]:
        position = _int(key)
        if position is not None and 0 <= position < len(operands) and isinstance(value, str):
            if value.isidentifier() and len(value) <= 60:
                names[operands[position]] = value
    if not all(n in records for n in operands):
        return None
    return Trace(
        str(raw.get("op", ""))[:60],
        _site(raw.get("site")),
        raw.get("direct") is True,
        operands,
        names,
        records,
    )


def _int(value: Any) -> int | None:
    try:
        number = int(value) if isinstance(value, (int, str)) and not isinstance(value, bool) else None
    except ValueError:
        return None
    return number if number is not None and 0 <= number < 10**9 else None


def _ints(value: Any, limit: int) -> tuple[int, ...] | None:
    if not isinstance(value, list) or len(value) > limit:
        return None
    numbers = [_int(v) if isinstance(v, int) else None for v in value]
    return None if any(n is None for n in numbers) else tuple(numbers)  # type: ignore[arg-type]


def _site(value: Any) -> tuple[str, int] | None:
    if (
        isinstance(value, list)
        and len(value) == 2
        and isinstance(value[0], str)
        and isinstance(value[1], int)
        and not isinstance(value[1], bool)
        and 0 < value[1] < 10**7
        and len(value[0]) <= 200
    ):
        return value[0], value[1]
    return None


def _record(value: Any) -> Record | None:
    if not isinstance(value, dict):
        return None
    shape = _ints(value.get("shape"), 8)
    inputs = _ints(value.get("inputs", []), 64)
    external = value.get("external")
    if shape is None or inputs is None or external not in (None, "argument", "parameter", "state"):
        return None
    return Record(
        str(value.get("op", ""))[:60],
        _site(value.get("site")),
        value.get("direct") is True,
        external,
        str(value.get("dtype", "?"))[:20],
        shape,
        str(value.get("device", "?"))[:20],
        inputs,
    )


# ---------------------------------------------------------------- what kind, and whose


def kind_of(text: str) -> str | None:
    """The kind of mismatch torch's message speaks of: "device", "dtype", "shape" or None."""
    for kind, words in (("device", _DEVICE_WORDS), ("dtype", _DTYPE_WORDS), ("shape", _SHAPE_WORDS)):
        if words.search(text):
            return kind
    return None


def origins(trace: Trace, number: int, kind: str) -> set[Origin] | None:
    """Where record `number` got its `kind` (see the module docstring); None when the walk
    reaches a record the worker did not send (the graph was cut): then nothing is known."""
    found: set[Origin] = set()
    seen: set[int] = set()
    stack = [number]
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        if len(seen) > MAX_WALK:
            return None
        record = trace.records.get(current)
        if record is None:
            return None
        if record.external is not None:
            found.add(Origin(external=record.external))
            continue
        walked = _walked_from(trace, record, kind)
        if walked is None:
            return None
        inputs, made_here = walked
        stack.extend(inputs)
        if made_here:
            found.add(Origin(site=record.site))
    return found


def _walked_from(trace: Trace, record: Record, kind: str) -> tuple[list[int], bool] | None:
    """The inputs `record`'s `kind` came from, and whether its own line is an origin too:
    carried from same-looking inputs (not an origin); a shape derived from all the inputs by a
    matmul, linear or embedding (its line is an origin too: the layer it applied chose the
    size); made (an origin, no input)."""
    inputs = []
    for n in record.inputs:
        if n not in trace.records:
            return None
        inputs.append(n)
    if kind == "shape" and record.op in _DERIVED:
        # Always derived, even where the result happens to have an input's shape (att @ v has
        # v's): both inputs made it, and so did the layer applied there.
        return inputs, True
    mine = record.looks(kind)
    same = [n for n in inputs if trace.records[n].looks(kind) == mine]
    if same:
        return same, False
    return [], True


def find_cause(
    err: Any,
    files,
    todos: set[str],
    stubs: Path | None,
    crash: tuple[str, int] | None,
    crash_todo: str | None,
    *,
    read_text,
    todo_at,
) -> Cause | None:
    """The Cause of the learner's error `err` (sandbox.StudentError with the worker's `cause`),
    given where it was raised (`crash`: the innermost frame in the learner's files, relative to
    their folder) and that line's TODO; None: no claim (see the module docstring). `read_text` and
    `todo_at` are engine/blame.py's, handed in by blame.raised_in (this module never imports blame:
    blame calls here, and one direction keeps the engine's imports free of cycles)."""
    trace = read_trace(getattr(err, "cause", None))
    if trace is None or crash is None or trace.site != crash:
        return None  # a replay that failed elsewhere does not explain this error
    kind = kind_of(str(getattr(err, "message", "")))
    if kind is None:
        return None
    texts: dict[str, str | None] = {}

    def todo_of(site: tuple[str, int] | None) -> str | None:
        if site is None or site[0] not in files:
            return None
        if site[0] not in texts:
            text = read_text(Path(err.root) / site[0])
            texts[site[0]] = text
        text = texts[site[0]]
        if text is None:
            return None
        stub = read_text(stubs / site[0]) if stubs is not None else None
        return todo_at(text, site[1], stub, todos)

    found = _blamed(trace, kind, todo_of, crash_todo)
    if found is None:
        return None
    todo, blamed, other = found
    values = []
    for operand, origin in blamed:
        file, line = origin.site  # a TODO's line: never None here
        value = Value(
            name=trace.names.get(operand, "") or _assigned_name(texts.get(file), line),
            looks=trace.records[operand].looks(kind),
            file=file,
            line=line,
            code=_code(texts.get(file), line),
        )
        if value not in values:
            values.append(value)
    crash_text = texts.get(crash[0]) or read_text(Path(err.root) / crash[0])
    return Cause(
        todo, kind, tuple(values[:MAX_VALUES]), other, crash[0], crash[1], _code(crash_text, crash[1])
    )


def _blamed(trace: Trace, kind: str, todo_of, crash_todo: str | None):
    """(TODO, [(operand, its origin in that TODO)], what the odd value met) or None: step 4 of
    the module docstring."""
    walked = {}
    for operand in trace.operands:
        found = origins(trace, operand, kind)
        if found is None:
            return None
        walked[operand] = found
    if kind == "shape":
        return _blamed_shape(trace, walked, todo_of, crash_todo)
    return _blamed_value(trace, kind, walked, todo_of, crash_todo)


def _blamed_value(trace: Trace, kind: str, walked: dict, todo_of, crash_todo: str | None):
    looks = {n: trace.records[n].looks(kind) for n in trace.operands}
    given = {looks[n] for n, found in walked.items() if found and all(_given_value(o) for o in found)}
    if given:
        odd = [n for n in trace.operands if looks[n] not in given]
    elif kind == "dtype":
        odd = [n for n in trace.operands if looks[n] != DEFAULT_DTYPE]
    else:
        odd = []
    if kind == "dtype":
        odd = [n for n in odd if looks[n] != "bool"]  # a mask or a condition is bool by right
    others = sorted({looks[n] for n in trace.operands if n not in odd})
    if not odd or not others:
        return None
    todos = set()
    blamed = []
    for n in odd:
        for origin in sorted(walked[n], key=_order):
            todo = todo_of(origin.site) if origin.external is None else None
            if todo is None:
                return None  # an odd value from given code or unknown state: not a TODO's for sure
            todos.add(todo)
            blamed.append((n, origin))
    if len(todos) != 1 or crash_todo in todos:
        return None
    return todos.pop(), blamed, ", ".join(others)


def _given_value(origin: Origin) -> bool:
    return origin.external in ("argument", "parameter")


def _blamed_shape(trace: Trace, walked: dict, todo_of, crash_todo: str | None):
    todos = set()
    blamed = []
    if crash_todo is not None and trace.direct:
        # The TODO that raised applied the operation itself: it may be what is wrong (a
        # transpose left out, operands swapped), whatever made its operands.
        return None
    for n in trace.operands:
        record = trace.records[n]
        if record.external is None and record.site == trace.site:
            return None  # the line that raised made this operand itself: it may be at fault
        for origin in sorted(walked[n], key=_order):
            if origin.external == "state":
                return None
            if origin.external is not None:
                continue
            todo = todo_of(origin.site)
            if todo is not None:
                todos.add(todo)
                blamed.append((n, origin))
    if len(todos) != 1 or crash_todo in todos:
        return None
    return todos.pop(), blamed, ""


def _order(origin: Origin) -> tuple:
    return (origin.site or ("", 0), origin.external or "")


def _code(text: str | None, line: int) -> str:
    rows = text.splitlines() if isinstance(text, str) else []
    if not 1 <= line <= len(rows):
        return ""
    code = rows[line - 1].split("  #", 1)[0].strip()
    return code if len(code) <= CODE_LIMIT else code[: CODE_LIMIT - 1] + "…"


_ASSIGNED = re.compile(r"^\s*([A-Za-z_][A-Za-z_0-9]*)\s*(?:\[[^\]]*\])?\s*[-+*/@]?=(?!=)")


def _assigned_name(text: str | None, line: int) -> str:
    rows = text.splitlines() if isinstance(text, str) else []
    if not 1 <= line <= len(rows):
        return ""
    found = _ASSIGNED.match(rows[line - 1])
    return found.group(1) if found else ""


__all__ = [
    "Cause",
    "Value",
    "Trace",
    "Record",
    "Origin",
    "find_cause",
    "read_trace",
    "kind_of",
    "origins",
    "explanation",
]
