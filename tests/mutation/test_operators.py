"""The mutation operators and the mutants they make (bench/mutation/operators.py, mutants.py): every
operator family on a small marked snippet, nothing outside the TODO regions, stable ids, and
only mutants that compile and change something. Pure functions: no grading here."""

from __future__ import annotations

import difflib
import functools
import warnings

import libcst as cst
import pytest

from bench.mutation import mutants as mutants_module
from bench.mutation.mutants import in_shard, mutants_of, region_spans, sample
from bench.mutation.operators import OPERATORS, Operator

# Each operator has something to mutate in the regions; the function outside them has
# arithmetic, a comparison, a unary minus and a ternary that must stay untouched.
SNIPPET = """\
import torch
import torch.nn.functional as F


def outside(a, b):
    return a + b * 2 if a > b else -a


def inside(self, x, cfg, T, block_size, text, generator=None):
    ### BEGIN SOLUTION shapes
    #: a hint line, never code
    B = x.size(0)
    y = F.softmax(x, dim=-1)
    z = y[:, :T].transpose(1, 2).contiguous().view(B, T, -1)
    w = torch.ones(T, T, dtype=torch.bool).tril()
    w = w.masked_fill(w == 0, float("-inf"))
    d = cfg.dropout if cfg.training and not cfg.frozen else 0.0
    h = cfg.n_head
    ids = []
    for i in range(T):
        ids.append(i)
    total = 0
    total += len(ids) - 1
    k = min(T, block_size)
    out = torch.cat((y, z), dim=1).float()
    n = torch.randint(k, (2,), generator=generator)
    s = (x @ x.T) ** 2 // 3
    chars = sorted(set(text))
    codes = [ord(ch) for ch in text]
    e = self.attn(self.ln_1(x))
    flag = True
    ### END SOLUTION
    return out, flag, d, h, total, n, s, w


def second(xs):
    ### BEGIN SOLUTION loop
    for v in xs:
        if v is None:
            continue
        break
    return xs[0] if xs else None
    ### END SOLUTION
"""


@functools.cache
def _made() -> tuple:
    return tuple(mutants_of(SNIPPET, "snippet.py", "99"))


MERGED = "y[:, :T].transpose(1, 2).contiguous()"
TEST = "cfg.training and not cfg.frozen"
LOOP_BODY = "\n    if v is None:\n        continue\n    break"


def _mutants():
    """The snippet's mutants, made once for the module (about a second of libcst work)."""
    return list(_made())


def _pairs(mutants, operator):
    return {(m.before, m.after) for m in mutants if m.operator == operator}


def test_every_operator_mutates_the_snippet():
    found = {m.operator for m in _mutants()}
    assert found == {operator.name for operator in OPERATORS}


@pytest.mark.parametrize(
    "operator, before, after",
    [
        ("axis", "F.softmax(x, dim=-1)", "F.softmax(x, dim=(-2))"),
        ("axis", "x.size(0)", "x.size(1)"),
        ("slice", ":T", ":T - 1"),
        ("slice", ":T", "T:"),
        ("transpose", "y[:, :T].transpose(1, 2)", "y[:, :T].transpose(2, 3)"),
        ("transpose", "x.T", "x"),
        ("view", f"{MERGED}.view(B, T, -1)", f"{MERGED}.view(T, B, -1)"),
        ("view", "y[:, :T].transpose(1, 2).contiguous()", "y[:, :T].transpose(1, 2)"),
        ("config", "cfg.dropout", "0.0"),
        ("config", "cfg.dropout", "0.1"),
        ("config", "cfg.n_head", "cfg.n_layer"),
        ("config", "T", "block_size"),
        ("inplace", 'w.masked_fill(w == 0, float("-inf"))', 'w.masked_fill_(w == 0, float("-inf"))'),
        ("dtype", "torch.ones(T, T, dtype=torch.bool)", "torch.ones(T, T, dtype=torch.float)"),
        ("dtype", "torch.cat((y, z), dim=1).float()", "torch.cat((y, z), dim=1)"),
        ("stmt-drop", "ids.append(i)", "pass"),
        ("stmt-dup", "ids.append(i)", "ids.append(i)\nids.append(i)"),
        ("swap-args", "(y, z)", "(z, y)"),
        ("swap-args", "min(T, block_size)", "min(block_size, T)"),
        ("swap-operands", "(x @ x.T) ** 2", "2 ** (x @ x.T)"),
        ("remove-kwarg", "torch.randint(k, (2,), generator=generator)", "torch.randint(k, (2,))"),
        ("call-swap", "min(T, block_size)", "max(T, block_size)"),
        ("arith", "len(ids) - 1", "len(ids) + 1"),
        ("compare", "w == 0", "w != 0"),
        ("bool-op", "cfg.training and not cfg.frozen", "cfg.training or not cfg.frozen"),
        ("unary", "not cfg.frozen", "cfg.frozen"),
        ("negate-cond", f"cfg.dropout if {TEST} else 0.0", f"cfg.dropout if not ({TEST}) else 0.0"),
        ("number", "0.0", "1.0"),
        ("keyword", "True", "False"),
        ("return-none", "return xs[0] if xs else None", "return None"),
        ("string", '"-inf"', '"inf"'),
        ("aug-assign", "total += len(ids) - 1", "total = len(ids) - 1"),
        ("for-zero", f"for v in xs:{LOOP_BODY}", f"for v in []:{LOOP_BODY}"),
        ("break-continue", "continue", "break"),
        ("normalise", "set(text)", "set(text.strip())"),
        ("normalise", "set(text)", "set(text.lower())"),
        ("normalise", " for ch in text", " for ch in text.lower()"),
        ("detach", "self.attn(self.ln_1(x))", "self.attn(self.ln_1(x)).detach()"),
        ("detach", "self.attn(self.ln_1(x))", "self.attn(self.ln_1(x).detach())"),
    ],
)  # fmt: skip
def test_operator_makes_the_expected_mutant(operator, before, after):
    assert (before, after) in _pairs(_mutants(), operator)


def test_only_code_inside_a_region_changes():
    text = mutants_module.strip_markers(SNIPPET, "snippet.py")
    spans = region_spans(SNIPPET, "snippet.py")
    inside = {line for _, first, last in spans for line in range(first, last + 1)}
    original = text.splitlines()
    for mutant in _mutants():
        changed = set()
        for tag, i1, i2, _, _ in difflib.SequenceMatcher(
            a=original, b=mutant.text.splitlines()
        ).get_opcodes():
            if tag != "equal":
                changed |= (
                    set(range(i1 + 1, max(i2, i1 + 1) + 1)) if tag == "insert" else set(range(i1 + 1, i2 + 1))
                )
        assert changed and changed <= inside | {max(inside) + 1}, (mutant.id, sorted(changed))
        assert "def outside(a, b):\n    return a + b * 2 if a > b else -a\n" in mutant.text, mutant.id


def test_region_spans_point_at_the_bodies_in_the_stripped_file():
    lines = mutants_module.strip_markers(SNIPPET, "snippet.py").splitlines()
    spans = dict((todo, (first, last)) for todo, first, last in region_spans(SNIPPET, "snippet.py"))
    assert lines[spans["shapes"][0] - 1].strip() == "B = x.size(0)"
    assert lines[spans["shapes"][1] - 1].strip() == "flag = True"
    assert lines[spans["loop"][0] - 1].strip() == "for v in xs:"
    assert lines[spans["loop"][1] - 1].strip() == "return xs[0] if xs else None"


def test_ids_are_stable_unique_and_count_each_operator_per_todo():
    first, again = _mutants(), mutants_of(SNIPPET, "snippet.py", "99")
    assert [m.id for m in first] == [m.id for m in again]
    assert [m.text for m in first] == [m.text for m in again]
    assert len({m.id for m in first}) == len(first)
    for m in first:
        lesson, todo, operator, n = m.id.split(":")
        assert (lesson, todo, operator) == ("99", m.todo, m.operator) and int(n) >= 1
    assert {m.todo for m in first} == {"shapes", "loop"}
    numbers = sorted(int(m.id.split(":")[3]) for m in first if m.todo == "shapes" and m.operator == "number")
    assert numbers == list(range(1, len(numbers) + 1))


def test_every_mutant_compiles_and_differs_and_no_two_are_alike():
    found = _mutants()
    original = mutants_module.strip_markers(SNIPPET, "snippet.py")
    texts = [m.text for m in found]
    assert len(set(texts)) == len(texts) and original not in texts
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # `v is 0`: a mutant, compiled with a warning
        for m in found:
            compile(m.text, "snippet.py", "exec")


def test_a_mutant_that_does_not_compile_is_dropped(monkeypatch):
    # `lambda` where an expression's value is wanted is a syntax error once printed.
    offered = []

    def make(node, ctx):
        offered.append(node)
        return [cst.Name("lambda")]

    broken = Operator("broken", "test", "", (cst.Integer,), make)
    monkeypatch.setattr(mutants_module, "OPERATORS", (*OPERATORS, broken))
    with_broken = mutants_of(SNIPPET, "snippet.py", "99")
    assert offered, "the broken operator was never asked"
    assert [m.id for m in with_broken] == [m.id for m in _mutants()]


def test_a_todo_filter_keeps_only_that_todos_regions():
    only = mutants_of(SNIPPET, "snippet.py", "99", ["loop"])
    assert only and {m.todo for m in only} == {"loop"}
    assert [m.id for m in only] == [m.id for m in _mutants() if m.todo == "loop"]


def test_a_sample_spreads_over_operators_and_is_stable():
    found = _mutants()
    picked = sample(found, 6)
    shapes = [m for m in picked if m.todo == "shapes"]
    assert len(shapes) == 6 and len({m.operator for m in shapes}) == 6
    assert [m.id for m in picked] == [m.id for m in sample(found, 6)]
    assert [m.id for m in sample(found, 1000)] == [m.id for m in found]


def test_shards_split_the_mutants_without_overlap():
    found = _mutants()
    parts = [[m.id for m in found if in_shard(m, index, 3)] for index in (1, 2, 3)]
    assert sorted(sum(parts, [])) == sorted(m.id for m in found)
    assert all(parts)
