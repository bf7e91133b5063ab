"""Official-only part of split-fraction (never shipped in the learner release): sizes and
fractions drawn afresh for each grading, so that a split tuned to the public cases does not
pass. Each n * fraction is kept away from a whole number, where any correct rounding (and the
float error of 1 - fraction) agrees."""

from __future__ import annotations

import random

import pytest

from .test_split import _splits, judge_fraction

CASES = 4
MIN_GAP = 0.01  # how far n * fraction stays from a whole number


def _cases(seed: int) -> list[tuple[int, float]]:
    rng = random.Random(seed)
    cases: list[tuple[int, float]] = []
    while len(cases) < CASES:
        n, fraction = rng.randint(3, 3000), rng.randint(20, 600) / 1000
        exact = n * fraction
        if abs(exact - round(exact)) >= MIN_GAP:
            cases.append((n, fraction))
    return cases


@pytest.mark.check("split-fraction")
def test_official_split_fraction_sizes(submission, check_seed):
    for n, fraction, _data, called, train, val in _splits(submission, check_seed, _cases(check_seed)):
        judge_fraction(n, fraction, called, train, val)
