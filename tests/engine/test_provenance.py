"""Blame by cause, without a sandbox: the worker's tracer (autograder/sandbox/worker/provenance.py)
run in this process on a learner's file, and the trusted reading of its answer
(autograder/engine/provenance.py) on it and on hand-made graphs.

The learner's files are the course's real solutions with one realistic edit, in a temporary
folder (the worker's submission folder); blame reads them with the real exercise stubs."""

from __future__ import annotations

import importlib.util
import random
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import pytest
import torch
from support.project import ROOT
from support.variants import solution_files

from autograder.core.i18n import feedback_text
from autograder.core.manifest import load_course
from autograder.core.results import Feedback
from autograder.engine import blame, provenance
from autograder.sandbox.client import StudentError
from autograder.sandbox.worker import provenance as tracer

COURSE = load_course(ROOT / "course.yml")
SCORES = "att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))"
RESIDUAL = "        x = x + a  # (B, T, C)"


def _stubs(lesson) -> Path:
    return ROOT / "exercises" / lesson.folder


def _write(root: Path, lesson, name: str, find: str, replace: str) -> str:
    files = solution_files(lesson)
    assert files[name].count(find) == 1
    text = files[name].replace(find, replace)
    root.mkdir(parents=True, exist_ok=True)
    for other, content in files.items():
        (root / other).write_text(text if other == name else content, encoding="utf-8")
    return text


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(name, None)
    return module


def _run(fields: dict):
    target = fields["target"]
    fn = getattr(target, fields["method"]) if fields.get("method") else target
    return fn(*fields.get("args", []), **fields.get("kwargs", {}))


def _fail(root: Path, fields: dict):
    """Call as the worker does; the learner's error as the trusted side sees it (a StudentError's
    fields, with the worker's traced cause)."""
    started = time.perf_counter()
    with pytest.raises(Exception) as caught:
        _run(fields)
    cause = tracer.explain(str(root), caught.value, time.perf_counter() - started, fields, _run)
    frames = [
        {"filename": f.filename, "lineno": f.lineno, "name": f.name, "line": f.line or ""}
        for f in traceback.extract_tb(caught.value.__traceback__)
    ]
    return _student_error(type(caught.value).__name__, str(caught.value), frames, root, cause)


def _student_error(type_name: str, text: str, frames: list[dict], root: Path, cause) -> StudentError:
    err = StudentError(type_name, text, frames, str(root), (type_name,))
    err.cause = cause  # what sandbox/client.py sets from the worker's answer
    return err


def _attention(tmp_path, replace: str, also: tuple[str, str] | None = None):
    lesson = COURSE.lesson("03")
    text = _write(tmp_path, lesson, "attention.py", SCORES, replace)
    if also is not None:
        assert text.count(also[0]) == 1
        text = text.replace(*also)
        (tmp_path / "attention.py").write_text(text, encoding="utf-8")
    module = _load(tmp_path / "attention.py", "prov_attention")
    cfg = module.AttentionConfig(n_embd=24, n_head=3, block_size=8)
    torch.manual_seed(0)
    return lesson, text, module.CausalSelfAttention(cfg)


def _line(text: str, needle: str) -> int:
    rows = [n for n, row in enumerate(text.splitlines(), start=1) if needle in row]
    assert len(rows) == 1, (needle, rows)
    return rows[0]


# ---------------------------------------------------------------- the whole path, in process


@pytest.mark.parametrize(
    "made",
    [
        "att = (q @ k.transpose(-2, -1)).double() * (1.0 / math.sqrt(hs))",
        "att = (q @ k.transpose(-2, -1)) * torch.from_numpy(np.array([1.0 / np.sqrt(hs)]))",
    ],
    ids=["double", "numpy-scale"],
)
def test_scores_made_in_float64_are_the_scaling_todos_though_given_code_raises(tmp_path, made):
    lesson, text, module = _attention(tmp_path, made, ("import math\n", "import math\nimport numpy as np\n"))
    err = _fail(tmp_path, {"target": module, "args": [torch.randn(2, 5, 24)], "kwargs": {}})
    todos = [t.id for t in lesson.todos]

    where = blame.raised_in(err, lesson.files, todos, _stubs(lesson))

    made_at = _line(text, made)
    assert (where.todo, where.file, where.line) == ("scaling", "attention.py", made_at)
    cause = err.traced_cause
    assert (cause.kind, cause.values[0].looks, cause.other, cause.values[0].name) == (
        "dtype",
        "float64",
        "float32",
        "att",
    )
    assert cause.crash_line == _line(text, "y = att @ v")
    said = feedback_text(Feedback(tuple(provenance.explanation(err, "mask"))), "es")
    assert "`att`" in said and "float64" in said and "float32" in said, said
    assert f"attention.py:{made_at}" in said and "TODO [scaling]" in said, said
    assert "TODO [mask]" in said, said  # the check of another TODO says it waits on scaling
    english = feedback_text(Feedback(tuple(provenance.explanation(err, None))), "en")
    assert "float64" in english and "TODO [scaling]" in english and "TODO [mask]" not in english


def test_a_concatenated_residual_is_blamed_where_the_next_todo_raises(tmp_path):
    lesson = COURSE.lesson("04")
    text = _write(tmp_path, lesson, "model.py", RESIDUAL, "        x = torch.cat([x, a], dim=-1)")
    (tmp_path / "attention.py").write_text(
        solution_files(COURSE.lesson("03"))["attention.py"], encoding="utf-8"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        sys.modules.pop("attention", None)
        module = _load(tmp_path / "model.py", "prov_model")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("attention", None)
    torch.manual_seed(0)
    block = module.Block(module.GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=12))
    err = _fail(tmp_path, {"target": block, "args": [torch.randn(2, 5, 12)], "kwargs": {}})
    crash = blame.crash_site(err)
    assert crash == ("model.py", _line(text, "m = self.mlp(self.ln_2(x))"))
    assert (
        blame.todo_of_site(err, crash, lesson.files, [t.id for t in lesson.todos], _stubs(lesson))
        == "pre-norm"
    )

    where = blame.raised_in(err, lesson.files, [t.id for t in lesson.todos], _stubs(lesson))

    assert (where.todo, where.line) == ("residual", _line(text, "x = torch.cat([x, a], dim=-1)"))
    cause = err.traced_cause
    assert [(v.name, v.looks) for v in cause.values] == [("x", "(2, 5, 24)")] and cause.kind == "shape"
    said = feedback_text(Feedback(tuple(cause.explanation("pre-norm"))), "es")
    assert "(2, 5, 24)" in said and "model.py:" in said and "TODO [residual]" in said, said


def test_an_unsliced_mask_stays_the_masks_though_the_scores_shape_came_from_scaling(tmp_path):
    """A shape clash where the TODO that raised passed a buffer itself: either operand could be
    wrong, so nothing moves (the mask TODO made its operand on that very line)."""
    lesson, text, module = _attention(tmp_path, SCORES)
    find = 'att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))'
    text = text.replace(find, 'att = att.masked_fill(self.mask == 0, float("-inf"))')
    (tmp_path / "attention.py").write_text(text, encoding="utf-8")
    module = _load(tmp_path / "attention.py", "prov_attention")
    model = module.CausalSelfAttention(module.AttentionConfig(n_embd=24, n_head=3, block_size=8))
    err = _fail(tmp_path, {"target": model, "args": [torch.randn(2, 5, 24)], "kwargs": {}})
    assert err.cause is not None  # traced, and read as no claim

    where = blame.raised_in(err, lesson.files, [t.id for t in lesson.todos], _stubs(lesson))

    assert where.todo == "mask" and not hasattr(err, "traced_cause")


def test_an_error_of_the_todos_own_line_is_not_moved(tmp_path):
    lesson, text, module = _attention(
        tmp_path, "att = (q @ k.transpose(-2, -1)).double() @ v.transpose(-2, -1)"
    )
    err = _fail(tmp_path, {"target": module, "args": [torch.randn(2, 5, 24)], "kwargs": {}})

    where = blame.raised_in(err, lesson.files, [t.id for t in lesson.todos], _stubs(lesson))

    assert where.todo == "scaling" and not hasattr(err, "traced_cause")


# ---------------------------------------------------------------- the worker's side


class _Counting(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.weight = torch.nn.Parameter(torch.ones(3, 3))

    def forward(self, x):
        self.calls += 1
        torch.rand(2)  # the replay draws too: the random state must come back as the call left it
        random.random()
        np.random.rand()
        return (x.double() @ self.weight).sum()


def test_the_replay_changes_neither_the_learners_objects_nor_the_random_state(tmp_path):
    module = _Counting()
    fields = {"target": module, "args": [torch.ones(2, 3)], "kwargs": {}}
    with pytest.raises(RuntimeError) as caught:
        _run(fields)
    torch.manual_seed(5)
    random.seed(5)
    np.random.seed(5)
    expected = (torch.rand(3), random.random(), np.random.rand())
    torch.manual_seed(5)
    random.seed(5)
    np.random.seed(5)

    answer = tracer.explain(str(tmp_path), caught.value, 0.001, fields, _run)

    assert answer is not None and answer["op"] == "matmul"
    assert module.calls == 1 and torch.equal(module.weight, torch.ones(3, 3))
    assert torch.equal(torch.rand(3), expected[0])
    assert random.random() == expected[1] and np.random.rand() == expected[2]


def test_the_answer_names_the_operands_and_where_their_values_came_from(tmp_path):
    module = _Counting()
    fields = {"target": module, "args": [torch.ones(2, 3)], "kwargs": {}}
    with pytest.raises(RuntimeError) as caught:
        _run(fields)

    answer = tracer.explain(str(tmp_path), caught.value, 0.001, fields, _run)

    trace = provenance.read_trace(answer)
    first, second = (trace.records[n] for n in trace.operands)
    assert (first.op, first.dtype, first.shape) == ("double", "float64", (2, 3))
    assert trace.records[first.inputs[0]].external == "argument"
    assert (second.external, second.dtype) == ("parameter", "float32")
    assert first.site is None  # this test's file is not under the learner's folder


@pytest.mark.parametrize(
    "exc, elapsed",
    [(NotImplementedError("TODO [scaling] pendiente"), 0.001), (RuntimeError("x"), tracer.SLOW_CALL_S + 0.1)],
    ids=["pending-todo", "slow-call"],
)
def test_no_replay_for_a_pending_todo_or_a_slow_call(tmp_path, exc, elapsed):
    ran = []
    assert tracer.explain(str(tmp_path), exc, elapsed, {}, lambda f: ran.append(f)) is None
    assert ran == []


def test_a_replay_that_does_not_fail_again_or_fails_otherwise_explains_nothing(tmp_path):
    state = {"n": 0}

    def flaky(fields):
        state["n"] += 1
        if state["n"] == 1:
            return torch.ones(2) @ torch.ones(3)
        return torch.ones(2)

    with pytest.raises(RuntimeError) as caught:
        flaky({})
    assert tracer.explain(str(tmp_path), caught.value, 0.001, {}, flaky) is None

    def other(fields):
        raise RuntimeError("a different message")

    assert tracer.explain(str(tmp_path), caught.value, 0.001, {}, other) is None


def test_a_replay_past_its_budget_is_abandoned(tmp_path):
    def slow(fields):
        x = torch.ones(2)
        while True:  # every torch operation checks the deadline
            x = x + 1

    started = time.perf_counter()
    assert tracer.explain(str(tmp_path), RuntimeError("x"), 0.0, {}, slow) is None
    # A hang guard, not a speed target (the loop never ends without the budget): on a loaded
    # machine the abandoned replay may return well after its budget, but it returns.
    assert time.perf_counter() - started < tracer.REPLAY_MAX_S + 10


@pytest.mark.parametrize("ends", ["fails", "out-of-time"])
def test_the_replay_leaves_autograd_and_the_default_dtype_as_it_found_them(tmp_path, ends):
    """A learner's code that switches autograd off (or the default dtype to float64) and then
    fails, or loops until the replay's budget cuts it: the grader's next call in the same worker
    still computes gradients in float32."""

    def careless(fields):
        torch.set_grad_enabled(False)
        torch.set_default_dtype(torch.float64)
        x = torch.ones(2)
        if ends == "out-of-time":
            while True:
                x = x + 1
        return x @ torch.ones(3)

    with pytest.raises(RuntimeError) as caught:
        torch.ones(2) @ torch.ones(3)
    assert torch.is_grad_enabled() and torch.get_default_dtype() == torch.float32
    try:
        tracer.explain(str(tmp_path), caught.value, 0.0, {}, careless)
        assert torch.is_grad_enabled()
        assert torch.get_default_dtype() == torch.float32
        weight = torch.ones(3, requires_grad=True)
        (weight * 2).sum().backward()  # the next call: a gradient, as a grader's check asks
        assert torch.equal(weight.grad, torch.full((3,), 2.0))
    finally:
        torch.set_grad_enabled(True)
        torch.set_default_dtype(torch.float32)


# ---------------------------------------------------------------- the trusted reading, by hand


def _record(
    op="mul", site=("attention.py", 10), inputs=(), dtype="float32", shape=(2, 3), external=None, direct=True
):
    out = {"dtype": dtype, "shape": list(shape), "device": "cpu"}
    if external:
        return {**out, "external": external}
    return {**out, "op": op, "site": list(site) if site else None, "direct": direct, "inputs": list(inputs)}


@pytest.mark.parametrize(
    "raw",
    [
        None,
        [],
        {"operands": [0], "records": {}},  # an operand without its record
        {"operands": [0], "records": {"0": {"dtype": "float32", "shape": "big"}}},
        {"operands": [0], "records": {"0": {**_record(), "external": "grader"}}},
        {"operands": ["0"], "records": {"0": _record()}},
        {"operands": [0], "records": {str(n): _record() for n in range(provenance.MAX_RECORDS + 1)}},
    ],
)
def test_a_malformed_answer_is_no_trace(raw):
    assert provenance.read_trace(raw) is None


def test_a_record_cut_from_the_answer_makes_its_origin_unknown():
    raw = {"op": "matmul", "site": ["a.py", 3], "operands": [0], "records": {"0": _record(inputs=[7])}}
    trace = provenance.read_trace(raw)
    assert trace is not None and provenance.origins(trace, 0, "dtype") is None


@pytest.mark.parametrize(
    "text, kind",
    [
        ("expected scalar type Double but found Float", "dtype"),
        ("expected m1 and m2 to have the same dtype, but got: double != float", "dtype"),
        (
            "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
            "device",
        ),
        ("mat1 and mat2 shapes cannot be multiplied (10x24 and 48x24)", "shape"),
        (
            "The size of tensor a (5) must match the size of tensor b (8) at non-singleton dimension 3",
            "shape",
        ),
        (
            "Given normalized_shape=[24], expected input with shape [*, 24], but got input of size[2, 7, 48]",
            "shape",
        ),
        ("division by zero", None),
    ],
)
def test_the_kind_of_mismatch_is_read_from_torchs_words(text, kind):
    assert provenance.kind_of(text) == kind


def test_a_shape_is_carried_by_same_shaped_results_and_derived_through_a_matmul():
    records = {
        "0": _record(external="argument", shape=(2, 5, 8)),
        "1": _record("view", ("a.py", 4), [0], shape=(2, 5, 2, 4)),  # made the shape
        "2": _record("transpose", ("a.py", 5), [1], shape=(2, 2, 5, 4)),  # made it again
        "3": _record("softmax", ("a.py", 6), [2], shape=(2, 2, 5, 4)),  # carried it
        "4": _record("matmul", ("a.py", 7), [3, 5], shape=(2, 2, 5, 5)),  # derived from both
        "5": _record(external="parameter", shape=(4, 5)),
    }
    trace = provenance.read_trace({"op": "x", "site": ["a.py", 9], "operands": [4], "records": records})
    found = provenance.origins(trace, 4, "shape")
    # The matmul's own line counts too: the layer it applies chooses a size.
    assert found == {
        provenance.Origin(site=("a.py", 5)),
        provenance.Origin(site=("a.py", 7)),
        provenance.Origin(external="parameter"),
    }


def _err(tmp_path, cause, message, crash_line, lines):
    (tmp_path / "a.py").write_text("\n".join(lines) + "\n", encoding="utf-8")
    frames = [{"filename": str(tmp_path / "a.py"), "lineno": crash_line, "name": "f", "line": ""}]
    return _student_error("RuntimeError", message, frames, tmp_path, cause)


# A learner's file whose TODOs are told by the comments they kept (no stub needed).
LINES = [
    "def f(x, w):",
    "    # TODO [one] first",
    "    a = x.double()",  # 3
    "    # TODO [two] second",
    "    b = a * 2",  # 5
    "    c = b @ w",  # 6 (still TODO two)
    "",
    "def g(x, w):",
    "    return x @ w",  # 9: given code
]


def _answer(site, operands, records, names=None, direct=True):
    return {
        "op": "matmul",
        "site": list(site),
        "direct": direct,
        "operands": operands,
        "names": names or {},
        "records": records,
    }


def test_a_value_from_unknown_state_is_never_blamed_on_a_todo(tmp_path):
    """float32 made by TODO one meets float64 from state (a buffer, a global): the float64 is
    the odd one, and no TODO is known to have made it."""
    records = {
        "0": _record("float", ("a.py", 3), [2], dtype="float32"),
        "1": _record(external="state", dtype="float64"),
        "2": _record(external="argument", dtype="float16"),
    }
    err = _err(
        tmp_path,
        _answer(("a.py", 9), [0, 1], records),
        "expected scalar type Double but found Float",
        9,
        LINES,
    )
    assert blame.raised_in(err, ["a.py"], ["one", "two"], None) is None


def test_a_float64_value_meeting_given_values_is_its_todos(tmp_path):
    records = {
        "0": _record("mul", ("a.py", 5), [3], dtype="float64"),
        "3": _record("double", ("a.py", 3), [2], dtype="float64"),
        "1": _record(external="parameter", dtype="float32"),
        "2": _record(external="argument"),
    }
    answer = _answer(("a.py", 9), [0, 1], records, names={"0": "b"})
    err = _err(tmp_path, answer, "expected scalar type Double but found Float", 9, LINES)

    where = blame.raised_in(err, ["a.py"], ["one", "two"], None)

    assert (where.todo, where.line) == ("one", 3)
    assert (err.traced_cause.values[0].code, err.traced_cause.values[0].name) == ("a = x.double()", "b")


def test_the_todo_that_raised_is_not_told_to_wait_on_itself(tmp_path):
    records = {
        "0": _record("double", ("a.py", 5), [2], dtype="float64"),
        "1": _record(external="parameter"),
        "2": _record(external="argument"),
    }
    err = _err(
        tmp_path,
        _answer(("a.py", 6), [0, 1], records),
        "expected scalar type Double but found Float",
        6,
        LINES,
    )

    where = blame.raised_in(err, ["a.py"], ["one", "two"], None)

    assert (where.todo, where.line) == ("two", 6) and not hasattr(err, "traced_cause")


def test_a_replay_that_failed_elsewhere_explains_nothing(tmp_path):
    records = {
        "0": _record("double", ("a.py", 3), [2], dtype="float64"),
        "1": _record(external="parameter"),
        "2": _record(external="argument"),
    }
    err = _err(
        tmp_path,
        _answer(("a.py", 6), [0, 1], records),
        "expected scalar type Double but found Float",
        9,
        LINES,
    )
    assert blame.raised_in(err, ["a.py"], ["one", "two"], None) is None


def test_two_todos_that_could_each_be_the_cause_leave_the_blame_where_it_was(tmp_path):
    records = {
        "0": _record("view", ("a.py", 3), [2], shape=(2, 6)),
        "1": _record("transpose", ("a.py", 5), [3], shape=(4, 2)),
        "2": _record(external="argument", shape=(3, 4)),
        "3": _record(external="argument", shape=(2, 4)),
    }
    answer = _answer(("a.py", 9), [0, 1], records)
    err = _err(tmp_path, answer, "mat1 and mat2 shapes cannot be multiplied (2x6 and 4x2)", 9, LINES)
    assert blame.raised_in(err, ["a.py"], ["one", "two"], None) is None


def test_a_shape_made_by_one_todo_meeting_a_parameter_in_given_code_is_that_todos(tmp_path):
    records = {
        "0": _record("view", ("a.py", 3), [2], shape=(2, 6)),
        "1": _record(external="parameter", shape=(4, 2)),
        "2": _record(external="argument", shape=(3, 4)),
    }
    answer = _answer(("a.py", 9), [0, 1], records)
    err = _err(tmp_path, answer, "mat1 and mat2 shapes cannot be multiplied (2x6 and 4x2)", 9, LINES)

    where = blame.raised_in(err, ["a.py"], ["one", "two"], None)

    assert (where.todo, where.line) == ("one", 3) and err.traced_cause.values[0].looks == "(2, 6)"


class _WithBuffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.ones(3, 3, dtype=torch.float64))

    def forward(self, x):
        return x @ self.scale


def test_a_tensor_made_before_the_replay_is_state_and_one_made_by_an_unseen_constructor_is_not(tmp_path):
    module = _WithBuffer()
    fields = {"target": module, "args": [torch.ones(2, 3)], "kwargs": {}}
    with pytest.raises(RuntimeError) as caught:
        _run(fields)
    trace = provenance.read_trace(tracer.explain(str(tmp_path), caught.value, 0.001, fields, _run))
    assert [trace.records[n].external for n in trace.operands] == ["argument", "state"]

    def made_now(fields):  # torch.from_numpy is no torch function: no mode sees it
        return torch.ones(2, 3) @ torch.from_numpy(np.ones((3, 3)))

    with pytest.raises(RuntimeError) as caught:
        made_now({})
    trace = provenance.read_trace(tracer.explain(str(tmp_path), caught.value, 0.001, {}, made_now))
    made = trace.records[trace.operands[1]]
    assert (made.external, made.op, made.dtype) == (None, "(constructor)", "float64")


def test_a_tensor_made_on_another_device_by_one_todo_is_that_todos(tmp_path):
    records = {
        "0": _record("arange", ("a.py", 3), [], dtype="int64", shape=(3,)),
        "1": _record(external="parameter", shape=(8, 4)),
    }
    records["0"]["device"] = "cpu"
    records["1"]["device"] = "cuda:0"
    answer = _answer(("a.py", 9), [0, 1], records, names={"0": "pos"})
    err = _err(
        tmp_path, answer, "Expected all tensors to be on the same device, but found cuda:0 and cpu!", 9, LINES
    )

    where = blame.raised_in(err, ["a.py"], ["one", "two"], None)

    assert (where.todo, where.line) == ("one", 3)
    cause = err.traced_cause
    assert (cause.kind, cause.values[0].looks, cause.other, cause.values[0].name) == (
        "device",
        "cpu",
        "cuda:0",
        "pos",
    )
    said = feedback_text(Feedback(tuple(cause.explanation("two"))), "es")
    assert "dispositivo cpu" in said and "cuda:0" in said and "TODO [two]" in said, said


def test_every_operand_one_todo_shaped_is_listed_since_none_can_be_called_the_odd_one(tmp_path):
    records = {
        "0": _record("view", ("a.py", 5), [2], shape=(2, 3, 7, 8)),
        "1": _record("transpose", ("a.py", 6), [2], shape=(2, 7, 8, 3)),
        "2": _record(external="argument", shape=(2, 7, 24)),
    }
    answer = _answer(("a.py", 9), [0, 1], records, names={"0": "q", "1": "k"})
    err = _err(tmp_path, answer, "The size of tensor a (3) must match the size of tensor b (7)", 9, LINES)

    where = blame.raised_in(err, ["a.py"], ["one", "two"], None)

    assert (where.todo, where.line) == ("two", 5)
    said = feedback_text(Feedback(tuple(err.traced_cause.explanation("one"))), "es")
    assert "`q` tiene forma (2, 3, 7, 8), que sale de a.py:5 (`b = a * 2`)" in said, said
    assert "`k` tiene forma (2, 7, 8, 3), que sale de a.py:6 (`c = b @ w`)" in said, said
    assert "`return x @ w` (a.py:9)" in said and "Arregla TODO [two]." in said and "TODO [one])" in said, said


def test_a_todo_that_applied_the_failing_operation_itself_keeps_the_blame(tmp_path):
    """The scaling TODO leaving out k's transpose: q and k come from head-reshape, but the
    operation the scaling TODO applied on them is what is wrong, and nothing traces an
    operation left out: the blame stays with the line that raised."""
    lesson, text, module = _attention(tmp_path, "att = (q @ k) * (1.0 / math.sqrt(hs))")
    err = _fail(tmp_path, {"target": module, "args": [torch.randn(2, 5, 24)], "kwargs": {}})
    assert err.cause is not None

    where = blame.raised_in(err, lesson.files, [t.id for t in lesson.todos], _stubs(lesson))

    assert where.todo == "scaling" and not hasattr(err, "traced_cause")


def test_a_statement_left_out_is_not_blamed_on_the_todo_whose_shape_reached_the_crash(tmp_path):
    """contiguous-view left out: y keeps its (B, nh, T, hs) from `att @ v` (given code, v's
    shape), and proj raises in given code. The matmul derives y's shape from att and v, made
    by two TODOs: no claim (head-reshape made v right; the missing merge leaves no trace)."""
    lesson, text, module = _attention(
        tmp_path, SCORES, ("y = y.transpose(1, 2).contiguous().view(B, T, C)", "pass")
    )
    err = _fail(tmp_path, {"target": module, "args": [torch.randn(2, 5, 24)], "kwargs": {}})
    assert err.cause is not None

    assert blame.raised_in(err, lesson.files, [t.id for t in lesson.todos], _stubs(lesson)) is None


def test_an_error_the_learners_code_raises_on_purpose_is_not_replayed(tmp_path):
    (tmp_path / "tok.py").write_text(
        "def encode(s, stoi):\n"
        "    for ch in s:\n"
        "        if ch not in stoi:\n"
        "            raise ValueError(f'carácter desconocido: {ch!r}')\n"
        "    return [stoi[ch] for ch in s]\n",
        encoding="utf-8",
    )
    module = _load(tmp_path / "tok.py", "prov_tok")
    ran = []

    def run(fields):
        ran.append(fields)
        return module.encode("ab", {"a": 0})

    with pytest.raises(ValueError) as caught:
        run({})
    ran.clear()
    assert tracer.explain(str(tmp_path), caught.value, 0.001, {}, run) is None
    assert ran == []  # not even replayed: graders ask correct code for this error
