"""Official-only parts of mlp-parity and model-parity (never shipped in the learner release):
the same judgements on a configuration drawn afresh for each grading (heads of 3 to 8
channels, 1 to 3 heads and 1 or 2 layers, any vocabulary and block size) at the edges of the
sequence lengths (T = 1, T = block_size, or between), so that a model tuned to the public
configurations does not pass."""

from __future__ import annotations

import random

import pytest

from autograder.engine.grader_helpers import generator

from .test_gpt import judge_model_parity
from .test_mlp import judge_mlp_parity


def _config(rng: random.Random) -> dict:
    n_head = rng.randint(1, 3)
    return {
        "vocab_size": rng.randint(3, 48),
        "block_size": rng.randint(1, 12),
        "n_layer": rng.randint(1, 2),
        "n_head": n_head,
        "n_embd": n_head * rng.randint(3, 8),
        "dropout": 0.0,
    }


def _length(rng: random.Random, cfg: dict) -> int:
    return rng.choice((1, cfg["block_size"], rng.randint(1, cfg["block_size"])))


@pytest.mark.check("mlp-parity")
def test_official_mlp_parity_sizes(submission, check_seed):
    rng, gen = random.Random(check_seed), generator(check_seed + 1)
    cfg = _config(rng)
    judge_mlp_parity(submission, gen, cfg, _length(rng, cfg), rng.randint(1, 3))


@pytest.mark.check("model-parity")
def test_official_model_parity_sizes(submission, check_seed):
    rng, gen = random.Random(check_seed), generator(check_seed + 1)
    for _ in range(2):
        cfg = _config(rng)
        judge_model_parity(submission, gen, cfg, _length(rng, cfg), rng.randint(1, 3))
