"""Check of generate's given frame: sampling in eval mode with the learner's generator,
and the model's mode restored afterwards (no TODO: the code is given, but it can be broken)."""

from __future__ import annotations

import pytest

from autograder.core.results import message
from autograder.engine.checks import fail
from autograder.engine.grader_helpers import generator, tokens

from .harness import (
    CACHE_HINTS,
    CROP_HINTS,
    GPT_CFG,
    WorkerGPT,
    crop_agrees,
    draw_seed,
    generate_sampled,
    judge_sampled,
    wait_for_sampling,
)


@pytest.mark.check("eval-mode")
def test_eval_mode(submission, check_seed):
    """A model with dropout 0.4 left in train mode: generate samples as in eval mode (the same
    tokens as the reference with the same generator seed) and leaves the model in train mode;
    a model in eval mode stays in eval mode."""
    gen = generator(check_seed)
    wait_for_sampling(submission, gen)  # it samples at temperature 1 through sample_next
    model = WorkerGPT(submission, gen, {**GPT_CFG, "dropout": 0.4}, train=True)
    steps = 6
    if not crop_agrees(submission, 2, range(4, 4 + steps), GPT_CFG["block_size"], GPT_CFG["vocab_size"], gen):
        # generate feeds the model through the learner's crop_context: what comes back cannot be
        # judged (token indices as floats do not reach the embedding).
        fail(message("lesson06.eval_waits_crop"), waits_on="crop-context")
    for use_cache, train in ((False, True), (True, True), (True, False)):
        submission.call(model.handle, method="train" if train else "eval")
        idx = tokens(2, 4, GPT_CFG["vocab_size"], gen)
        seed = draw_seed(gen)
        out, called = generate_sampled(
            submission,
            model,
            idx,
            steps,
            use_cache,
            seed,
            hints=CACHE_HINTS + CROP_HINTS,
            mode="train" if train else "eval",
        )
        judge_sampled(model, idx, out, seed, called, extra=(message("lesson06.eval_mode_hint"),))
        training = submission.getattr(model.handle, "training")
        if training is not train:
            fail(
                called,
                message(
                    "lesson06.mode_not_restored",
                    before="train" if train else "eval",
                    after="train" if training else "eval",
                ),
            )
