"""Hidden checks of crop_context and of generate with a context longer than block_size
(TODO crop-context). generate runs lesson 04's reference GPT, built in the worker with
weights the grader draws; generation samples at temperature 1 with a seeded generator (so a
slip in sample_next's greedy branch or temperature costs only those TODOs' checks) and each
draw is replayed on the learner's own prefix."""

from __future__ import annotations

import pytest
import torch

from autograder.core.results import message
from autograder.engine.checks import fail
from autograder.engine.grader_helpers import generator, tokens

from . import reference as ref
from .harness import GPT_CFG, WorkerGPT, draw_seed, function, generate_sampled, judge_sampled


def _crop_diagnosis(out: torch.Tensor, idx: torch.Tensor, bs: int):
    T = idx.shape[1]
    candidates = [
        (idx[:, :bs], "lesson06.diag_crop_first"),
        (idx[-bs:], "lesson06.diag_crop_batch"),
        (idx[:, -(bs - 1) :] if bs > 1 else idx[:, :0], "lesson06.diag_crop_one_less"),
        (idx[:, -(bs + 1) :], "lesson06.diag_crop_one_more"),
        (idx[:, -1:], "lesson06.diag_crop_last_only"),
        (idx[:, -bs:-1], "lesson06.diag_crop_drops_last"),
    ]
    if T < bs:
        candidates.append((idx[:, T - bs :], "lesson06.diag_crop_negative_start"))
    for candidate, key in candidates:
        if tuple(out.shape) == tuple(candidate.shape) and torch.equal(out, candidate):
            return message(key, bs=bs, T=T)
    return None


@pytest.mark.check("crop-context")
def test_crop_context(submission, check_seed):
    gen = generator(check_seed)
    fn = function(submission, "crop_context")
    bs, V = 8, 50
    for B, T in ((3, 13), (3, bs), (3, 5), (3, 1), (1, 9), (1, 1)):
        idx = tokens(B, T, V, gen)
        called = message("lesson06.called_crop", shape=tuple(idx.shape), bs=bs)
        out = submission.call(fn, idx, bs)
        expected = ref.crop(idx, bs)
        if not isinstance(out, torch.Tensor) or out.device.type != "cpu":
            got = f"Tensor(device={out.device.type})" if isinstance(out, torch.Tensor) else type(out).__name__
            fail(called, message("lesson06.not_a_tensor", what=message("lesson06.what_cropped"), got=got))
        if tuple(out.shape) == tuple(expected.shape) and torch.equal(out, expected):
            continue
        fail(
            called,
            message(
                "lesson06.crop_wrong",
                got_shape=tuple(out.shape),
                expected_shape=tuple(expected.shape),
                got=str(out[0].tolist()),
                expected=str(expected[0].tolist()),
            ),
            _crop_diagnosis(out, idx, bs),
            message("lesson06.crop_hint"),
        )


@pytest.mark.check("crop-generate")
def test_crop_generate(submission, check_seed):
    """generate without cache from a prompt longer than block_size, exactly block_size, and one
    token (B = 1) generated past block_size."""
    gen = generator(check_seed)
    model = WorkerGPT(submission, gen)
    bs = GPT_CFG["block_size"]
    for batch, T, steps in ((2, bs + 4, 4), (2, bs, 3), (1, 1, bs + 1)):
        idx = tokens(batch, T, GPT_CFG["vocab_size"], gen)
        seed = draw_seed(gen)
        out, called = generate_sampled(
            submission, model, idx, steps, use_cache=False, seed=seed, own="crop-context"
        )
        judge_sampled(model, idx, out, seed, called, extra=(message("lesson06.crop_generate_hint", bs=bs),))
