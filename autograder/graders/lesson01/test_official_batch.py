"""Official-only parts of batch-range and batch-shapes (never shipped in the learner release):
the same judgements on data, block and batch sizes drawn afresh for each grading, edges
included (one token of room, one row, a window of one token), so that a get_batch tuned to the
public cases' sizes does not pass.

This file sorts after test_batch.py, so for a check that fails there the learner reads the
same diagnosis officially as in practice."""

from __future__ import annotations

import random

import pytest

from autograder.engine.grader_helpers import generator

from .harness import distinct_data
from .test_batch import RANGE_B, judge_range, judge_shapes

MAX_T, MAX_STARTS = 12, 5  # with 3 x 48 rows each start is missed with probability < 1e-13


@pytest.mark.check("batch-range")
def test_official_batch_range_sizes(submission, check_seed):
    rng = random.Random(check_seed)
    gen = generator(check_seed + 1)
    for k in range(2):
        T, starts = rng.randint(1, MAX_T), rng.randint(1, MAX_STARTS)
        seed = check_seed % 10_000 + 1000 * (k + 1)
        judge_range(submission, distinct_data(T + starts, gen), T, RANGE_B, seed)


@pytest.mark.check("batch-shapes")
def test_official_batch_shapes_sizes(submission, check_seed):
    rng = random.Random(check_seed)
    cases = [
        (rng.randint(40, 400), 1, rng.randint(2, 9)),  # T = 1
        (rng.randint(40, 400), rng.randint(2, 16), 1),  # B = 1
        (rng.randint(40, 400), *rng.sample(range(2, 17), 2)),  # T != B
    ]
    judge_shapes(submission, generator(check_seed + 1), cases, check_seed % 10_000 + 1000)
