"""Hidden check of generate's given frame: sampling in eval mode with the learner's generator,
and the model's mode restored afterwards (no TODO: the code is given, but it can be broken)."""

from __future__ import annotations

import pytest
import torch

from autograder.checks import fail
from autograder.results import message

from . import reference as ref
from .harness import (
    CACHE_HINTS,
    CROP_HINTS,
    FROM_SAMPLE_NEXT,
    GPT_CFG,
    WorkerGPT,
    draw_seed,
    expect_tokens,
    function,
    generator,
    hinted,
    rows,
    tokens,
    worker_generator,
)


def judge_sampled(model: WorkerGPT, idx: torch.Tensor, out: torch.Tensor, seed: int, temperature: float, called) -> None:
    """Replay the draws on the learner's own prefix: one torch.multinomial per step on the
    eval-mode distribution, from a generator seeded `seed`."""
    T, bs = idx.shape[1], model.cfg["block_size"]
    g = torch.Generator().manual_seed(seed)
    expected = out.clone()
    steps = ref.next_logits(model.trusted, out, T, bs)  # (steps, B, V)
    for t in range(T, out.shape[1]):
        logits = steps[t - T].float()
        probs = torch.softmax(logits / temperature, dim=-1)
        expected[:, t] = torch.multinomial(probs, num_samples=1, generator=g).view(-1)
        if not torch.equal(out[:, t], expected[:, t]):
            fail(called, message("lesson06.sampled_wrong", step=t - T), message("lesson06.rows_legend"),
                 rows(idx, out[:, :t + 1], expected[:, :t + 1]), message("lesson06.eval_mode_hint"))


@pytest.mark.check("eval-mode")
def test_eval_mode(submission, check_seed):
    """A model with dropout 0.4 left in train mode: generate samples as in eval mode (the same
    tokens as the reference with the same generator seed) and leaves the model in train mode;
    a model in eval mode stays in eval mode."""
    gen = generator(check_seed)
    model = WorkerGPT(submission, gen, {**GPT_CFG, "dropout": 0.4}, train=True)
    fn = function(submission, "generate")
    steps, temperature = 6, 1.0
    for use_cache, train in ((False, True), (True, True), (True, False)):
        submission.call(model.handle, method="train" if train else "eval")
        idx = tokens(2, 4, GPT_CFG["vocab_size"], gen)
        seed = draw_seed(gen)
        called = message("lesson06.called_generate_sampled", model=model.text, shape=tuple(idx.shape), steps=steps,
                         options=f"temperature={temperature}, use_cache={use_cache}", seed=seed,
                         mode="train" if train else "eval")
        with hinted(*FROM_SAMPLE_NEXT, *CACHE_HINTS, *CROP_HINTS):
            out = submission.call(fn, model.handle, idx, steps, temperature=temperature,
                                  generator=worker_generator(submission, seed), use_cache=use_cache)
        out = expect_tokens(out, (idx.shape[0], idx.shape[1] + steps), called, what="lesson06.what_generated")
        if not torch.equal(out[:, :idx.shape[1]], idx):
            fail(called, message("lesson06.prefix_changed", got=str(out[0, :idx.shape[1]].tolist()),
                                 expected=str(idx[0].tolist())))
        judge_sampled(model, idx, out, seed, temperature, called)
        training = submission.getattr(model.handle, "training")
        if training is not train:
            fail(called, message("lesson06.mode_not_restored", before="train" if train else "eval",
                                 after="train" if training else "eval"))
