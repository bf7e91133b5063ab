"""Official-only check of TODO [crop-context] (a `test_official_*` file never ships: the learner
release has no recording for it, and it stays part of what is hidden).

crop-generate: generate without the cache, on lesson 04's reference GPT built in the worker
with weights the grader draws, from prompts around block_size whose lengths are drawn afresh at
each official grading: longer than block_size by 1 to 6 tokens, exactly block_size, and short
(B = 1) generated well past block_size. Generation samples at temperature 1 with a seeded
generator (so a slip in sample_next's greedy branch or temperature costs only those TODOs'
checks) and the draws are compared with the reference's.
"""

from __future__ import annotations

import pytest
import torch

from autograder.core.results import message
from autograder.engine.grader_helpers import generator, tokens

from .harness import GPT_CFG, WorkerGPT, draw_seed, generate_sampled, judge_sampled, wait_for_sampling


def _between(low: int, high: int, gen: torch.Generator) -> int:
    """An integer in [low, high], drawn from gen."""
    return int(torch.randint(low, high + 1, (1,), generator=gen))


@pytest.mark.check("crop-generate")
def test_crop_generate(submission, check_seed):
    """generate without cache from a prompt longer than block_size, exactly block_size, and a
    short one (B = 1) generated past block_size."""
    gen = generator(check_seed)
    wait_for_sampling(submission, gen)  # it samples at temperature 1 through sample_next
    model = WorkerGPT(submission, gen)
    bs = GPT_CFG["block_size"]
    cases = ((2, bs + _between(1, 6, gen), 4), (2, bs, 3), (1, _between(1, 3, gen), bs + 1))
    for batch, T, steps in cases:
        idx = tokens(batch, T, GPT_CFG["vocab_size"], gen)
        seed = draw_seed(gen)
        out, called = generate_sampled(
            submission, model, idx, steps, use_cache=False, seed=seed, own="crop-context"
        )
        judge_sampled(model, idx, out, seed, called, extra=(message("lesson06.crop_generate_hint", bs=bs),))
