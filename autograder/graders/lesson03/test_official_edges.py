"""Official-only part of np-edges (never shipped in the learner release): count_edges judged
on sequence lengths drawn afresh for each grading over a wide range, so that a count_edges
tuned to the public check's lengths (5, 10, 64, 1, 2) does not pass."""

from __future__ import annotations

import random

import pytest

from .test_numpy import function, judge_edges

CASES = 4
MAX_T = 4096


@pytest.mark.check("np-edges")
def test_official_np_edges_range(submission, check_seed):
    rng = random.Random(check_seed)
    count_edges = function(submission, "count_edges")
    for T in sorted(rng.sample(range(3, MAX_T + 1), CASES), reverse=True):
        for causal in (True, False):
            judge_edges(submission.call(count_edges, T, causal=causal), T, causal)
