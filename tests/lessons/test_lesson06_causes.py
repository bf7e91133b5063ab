"""Lesson 06 blames an error by its cause (issue 31 item 4), not by the line that raised: pure
functions of the learner's error (autograder/graders/lesson06/harness.py), proved here on
errors built by hand, without grading (the graded proofs are lesson06_variants.py's
attention-call-forgotten, attention-keys-values-swapped and greedy-condition-inverted).

- a name a TODO defines, read undefined by given code after it, is that TODO's;
- the given line that views the attention's output back to (B, T, C) reads nothing but that
  output: what raises there is TODO [cache-alignment]'s;
- torch.cat or torch.stack refusing the cache (a tensor the call was handed, or state) in
  cached_attention is TODO [kv-cache]'s, whichever line it was written on;
- scaled_dot_product_attention refusing keys or values that do not fit the given queries (as
  the worker traced the call's operands) is TODO [kv-cache]'s, but not when the queries it was
  handed are not the given q (the call's arguments swapped: the mask TODO's own line).
"""

from __future__ import annotations

import pytest

from autograder.graders.lesson06 import harness
from autograder.sandbox.client import StudentError

ROOT = "/learner"
VIEW = "y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)"
SDPA = "y = F.scaled_dot_product_attention(q, k, v, attn_mask=visible)  # (B, nh, T, hs)"


def _error(type_name: str, text: str, function: str, line: str, cause: dict | None = None) -> StudentError:
    frame = {"filename": f"{ROOT}/generate.py", "name": function, "line": line, "lineno": 99}
    return StudentError(type_name, text, [frame], ROOT, (type_name,), cause)


@pytest.mark.parametrize(
    "type_name, text, function, todo",
    [
        (
            "UnboundLocalError",
            "cannot access local variable 'y' where it is not associated with a value",
            "cached_attention",
            "cache-alignment",
        ),
        ("NameError", "name 'pos' is not defined", "forward_cached", "kv-cache"),
        ("NameError", "name 'logits' is not defined", "generate", "kv-cache"),
        # The same name elsewhere is no TODO's: y in another function, another name.
        ("NameError", "name 'y' is not defined", "forward_cached", None),
        ("NameError", "name 'q' is not defined", "cached_attention", None),
        ("RuntimeError", "name 'y' is not defined", "cached_attention", None),
    ],
)
def test_a_name_a_todo_defines_is_that_todos_where_given_code_reads_it(type_name, text, function, todo):
    assert harness.undefined_in(_error(type_name, text, function, "x = y + 1")) == todo


def test_the_view_of_the_attention_output_is_cache_alignments():
    err = _error(
        "RuntimeError", "shape '[2, 1, 20]' is invalid for input of size 240", "cached_attention", VIEW
    )
    assert harness.read_only_in(err) == "cache-alignment"
    assert harness.read_only_in(_error("RuntimeError", "shape", "forward_cached", VIEW)) is None
    assert harness.read_only_in(_error("RuntimeError", "shape", "cached_attention", SDPA)) is None


def _traced(q, k, v) -> dict:
    """A worker's trace of a failed scaled_dot_product_attention(q, k, v) (the shape of each)."""

    def record(shape):
        return {
            "op": "transpose",
            "site": ["generate.py", 91],
            "direct": True,
            "external": None,
            "dtype": "float32",
            "shape": list(shape),
            "device": "cpu",
            "inputs": [],
        }

    return {
        "op": "scaled_dot_product_attention",
        "site": ["generate.py", 99],
        "direct": True,
        "operands": [0, 1, 2],
        "names": {"0": "q", "1": "k", "2": "v"},
        "records": {"0": record(q), "1": record(k), "2": record(v)},
    }


@pytest.mark.parametrize(
    "k, v, expected",
    [
        ((2, 4, 6, 10), (2, 4, 6, 5), True),  # keys concatenated along hs
        ((2, 8, 1, 5), (2, 4, 6, 5), True),  # keys concatenated along the heads
        ((2, 4, 1, 5), (2, 4, 6, 5), True),  # keys never concatenated, values were
        ((2, 4, 6, 5), (2, 4, 11, 5), True),  # values concatenated twice
        ((2, 4, 2, 6, 5), (2, 4, 6, 5), True),  # torch.stack: one dimension more
        ((2, 4, 6, 5), (2, 4, 6, 5), False),  # they fit: the mask is what SDPA refused
    ],
)
def test_keys_and_values_that_do_not_fit_the_given_queries_are_the_caches(monkeypatch, k, v, expected):
    monkeypatch.setattr(harness, "_given_line", lambda err, site: True)
    err = _error("RuntimeError", "size mismatch", "cached_attention", SDPA, _traced((2, 4, 1, 5), k, v))
    assert harness.kv_inconsistent(err) is expected
    assert (harness.cause_of(err) == "kv-cache") is expected


def test_queries_that_are_not_the_given_q_leave_the_blame_where_it_raised(monkeypatch):
    # F.scaled_dot_product_attention(k, q, v, ...): the first operand is the cached keys.
    monkeypatch.setattr(harness, "_given_line", lambda err, site: False)
    err = _error(
        "RuntimeError",
        "size mismatch",
        "cached_attention",
        SDPA,
        _traced((2, 4, 6, 5), (2, 4, 1, 5), (2, 4, 6, 5)),
    )
    assert not harness.kv_inconsistent(err)


def test_without_a_trace_nothing_is_claimed():
    err = _error("RuntimeError", "size mismatch", "cached_attention", SDPA)
    assert not harness.kv_inconsistent(err)


def _cat_trace(external: str | None, function_shape=(2, 4, 5, 5)) -> dict:
    """A worker's trace of a failed torch.cat((past, new), dim=3) in cached_attention."""
    past = {
        "op": "",
        "site": None,
        "direct": False,
        "external": external,
        "dtype": "float32",
        "shape": list(function_shape),
        "device": "cpu",
        "inputs": [],
    }
    new = {
        "op": "transpose",
        "site": ["generate.py", 92],
        "direct": True,
        "external": None,
        "dtype": "float32",
        "shape": [2, 4, 1, 5],
        "device": "cpu",
        "inputs": [],
    }
    return {
        "op": "cat",
        "site": ["generate.py", 95],
        "direct": True,
        "operands": [0, 1],
        "names": {},
        "records": {"0": past, "1": new},
    }


@pytest.mark.parametrize(
    "external, function, expected",
    [
        ("argument", "cached_attention", True),  # past_k as the grader handed it
        ("state", "cached_attention", True),  # a cache the learner's object holds
        (None, "cached_attention", False),  # two tensors the learner's code made
        ("argument", "forward_cached", False),  # another function's concatenation
    ],
)
def test_the_cache_refused_where_it_is_joined_is_the_caches(external, function, expected):
    line = "k = torch.cat((past_k, k), dim=3)  # (B, nh, T_past + T, hs)"
    err = _error("RuntimeError", "Sizes of tensors must match", function, line, _cat_trace(external))
    assert harness.cache_joined(err) is expected
