"""Official-only part of short-sequences (never shipped in the learner release): the same
judgement on module shapes and sequence lengths drawn afresh for each grading (2 to 4 heads
of 2 to 6 channels, block_size 3 to 12, two shorter lengths), so that a mask tuned to the
public check's shapes does not pass."""

from __future__ import annotations

import random

import pytest

from autograder.engine.grader_helpers import generator

from .test_attention_causal import judge_lengths

CASES = 2


@pytest.mark.check("short-sequences")
def test_official_short_sequences_shapes(submission, check_seed):
    rng = random.Random(check_seed)
    gen = generator(check_seed + 1)
    for _ in range(CASES):
        n_head, hs, bs = rng.randint(2, 4), rng.randint(2, 6), rng.randint(3, 12)
        cfg = {"n_embd": n_head * hs, "n_head": n_head, "block_size": bs, "dropout": 0.0}
        lengths = sorted(rng.sample(range(1, bs), 2), reverse=True)
        judge_lengths(submission, cfg, lengths, gen)
