"""Official-only part of eval-loss (never shipped in the learner release): the same judgement
on batches drawn afresh for each grading at the edges of their ranges (a single batch or
several, one sequence or several, T from 1 to block_size), so that an estimate_loss tuned to
the public case's three batches of (3, 5) does not pass."""

from __future__ import annotations

import random

import pytest
import torch

from autograder.engine.grader_helpers import generator

from .harness import DROPOUT_CFG, Trainer, random_state
from .test_eval import judge_eval_loss


@pytest.mark.check("eval-loss")
def test_official_eval_loss_sizes(submission, check_seed):
    rng = random.Random(check_seed)
    n_batches = rng.choice((1, 2, rng.randint(4, 7)))
    B, T = rng.choice((1, rng.randint(2, 4))), rng.choice((1, DROPOUT_CFG["block_size"], rng.randint(2, 7)))
    gen = generator(check_seed + 1)
    state = random_state(DROPOUT_CFG, gen)
    xs = torch.randint(DROPOUT_CFG["vocab_size"], (n_batches, B, T), generator=gen)
    ys = torch.randint(DROPOUT_CFG["vocab_size"], (n_batches, B, T), generator=gen)
    trainer = Trainer(submission)
    trainer.needs_reference_model()
    judge_eval_loss(trainer, state, xs, ys)
