"""Official-only part of batch-range (never shipped in the learner release): the same
judgement on data and block sizes drawn afresh for each grading, from one token of room to
a few, so that a get_batch tuned to the public cases' sizes does not pass."""

from __future__ import annotations

import random

import pytest

from autograder.engine.grader_helpers import generator

from .harness import distinct_data
from .test_batch import RANGE_B, judge_range

CASES = 2
MAX_T, MAX_STARTS = 12, 5  # with 3 x 48 rows each start is missed with probability < 1e-13


@pytest.mark.check("batch-range")
def test_official_batch_range_sizes(submission, check_seed):
    rng = random.Random(check_seed)
    gen = generator(check_seed + 1)
    for k in range(CASES):
        T, starts = rng.randint(1, MAX_T), rng.randint(1, MAX_STARTS)
        judge_range(
            submission, distinct_data(T + starts, gen), T, RANGE_B, check_seed % 10_000 + 1000 * (k + 1)
        )
