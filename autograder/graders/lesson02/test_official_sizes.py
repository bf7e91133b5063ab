"""Official-only parts of logits-lookup and positions-value (never shipped in the learner
release): the same judgements on sizes drawn afresh for each grading, edges included (one
token, one row, a sequence as long as block_size), so that code tuned to the public cases'
sizes does not pass."""

from __future__ import annotations

import random

import pytest

from autograder.engine.grader_helpers import generator, tokens

from .harness import LearnerEmbedding
from .test_bigram import judge_lookup
from .test_positions import judge_positions


@pytest.mark.check("logits-lookup")
def test_official_lookup_sizes(submission, check_seed):
    rng = random.Random(check_seed)
    gen = generator(check_seed + 1)
    for B, T in ((rng.randint(1, 6), 1), (1, rng.randint(2, 12))):
        judge_lookup(submission, gen, rng.randint(2, 40), B, T)


@pytest.mark.check("positions-value")
def test_official_positions_sizes(submission, check_seed):
    rng = random.Random(check_seed)
    gen = generator(check_seed + 1)
    block_size = rng.randint(2, 16)
    cfg = {"V": rng.randint(2, 40), "C": rng.randint(2, 24), "block_size": block_size}
    emb = LearnerEmbedding(submission, cfg, gen)
    for B, T in ((rng.randint(1, 4), block_size), (rng.randint(1, 4), 1), (1, rng.randint(1, block_size))):
        judge_positions(emb, tokens(B, T, cfg["V"], gen))
