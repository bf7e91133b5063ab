"""Official-only parts of logits-lookup and loss-value (never shipped in the learner release):
the same judgements on sizes drawn afresh for each grading, edges included (one token, one
row), so that code tuned to the public cases' sizes does not pass.

This file sorts after test_bigram.py, so for a check that fails there the learner reads the
same diagnosis officially as in practice."""

from __future__ import annotations

import random

import pytest

from autograder.engine.grader_helpers import generator

from .test_bigram import _loss_check, judge_lookup


@pytest.mark.check("logits-lookup")
def test_official_lookup_sizes(submission, check_seed):
    rng = random.Random(check_seed)
    gen = generator(check_seed + 1)
    for B, T in ((rng.randint(1, 6), 1), (1, rng.randint(2, 12))):
        judge_lookup(submission, gen, rng.randint(2, 40), B, T)


@pytest.mark.check("loss-value")
def test_official_loss_sizes(submission, check_seed):
    rng = random.Random(check_seed)
    gen = generator(check_seed + 1)
    for B, T in ((rng.randint(2, 6), 1), (1, rng.randint(2, 12)), (rng.randint(2, 5), rng.randint(2, 9))):
        _loss_check(submission, gen, rng.randint(2, 40), B, T)
