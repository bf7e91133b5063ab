"""Checks of crop_context (TODO crop-context): the last block_size columns, int64 like the
tokens, for contexts longer, as long and shorter than block_size, for two block sizes; a wrong
crop is named when it is a recognisable slip. generate with a context longer than block_size is
checked officially only (test_official_crop_generate.py)."""

from __future__ import annotations

import pytest
import torch

from autograder.core.results import message
from autograder.engine import recording
from autograder.engine.checks import fail
from autograder.engine.grader_helpers import generator, tokens

from .harness import function

ref = recording.reference_of(__package__)


# The slips reference.crop_slips computes, in its order.
CROP_SLIPS = (
    "lesson06.diag_crop_first",
    "lesson06.diag_crop_batch",
    "lesson06.diag_crop_one_less",
    "lesson06.diag_crop_one_more",
    "lesson06.diag_crop_last_only",
    "lesson06.diag_crop_drops_last",
    "lesson06.diag_crop_negative_start",
)


def _crop_diagnosis(out: torch.Tensor, slips: list, idx: torch.Tensor, bs: int):
    for candidate, key in zip(slips, CROP_SLIPS):
        if tuple(out.shape) == tuple(candidate.shape) and torch.equal(out, candidate):
            return message(key, bs=bs, T=idx.shape[1])
    return None


@pytest.mark.check("crop-context")
def test_crop_context(submission, check_seed):
    gen = generator(check_seed)
    fn = function(submission, "crop_context")
    V = 50
    # block_size 8 and 3 (a constant written for block_size fails one), contexts longer, as
    # long and shorter than it, and of one token.
    cases = ((3, 13, 8), (3, 8, 8), (3, 5, 8), (3, 1, 8), (1, 9, 8), (1, 1, 8), (2, 7, 3), (4, 2, 3))
    for B, T, bs in cases:
        idx = tokens(B, T, V, gen)
        called = message("lesson06.called_crop", shape=tuple(idx.shape), bs=bs)
        out = submission.call(fn, idx, bs)
        expected = ref.crop(idx, bs)
        # What recognisable slips give: now, for a wrong crop, or while recording (eager).
        slips = ref.crop_slips(idx, bs) if recording.eager() else None
        if not isinstance(out, torch.Tensor) or out.device.type != "cpu":
            got = f"Tensor(device={out.device.type})" if isinstance(out, torch.Tensor) else type(out).__name__
            fail(called, message("lesson06.not_a_tensor", what=message("lesson06.what_cropped"), got=got))
        if out.dtype != torch.int64:
            # torch.equal compares values only: token indices as floats would pass it.
            fail(
                called,
                message("lesson06.dtype_wrong", what=message("lesson06.what_cropped"), got=str(out.dtype)),
            )
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
            _crop_diagnosis(out, slips if slips is not None else ref.crop_slips(idx, bs), idx, bs),
            message("lesson06.crop_hint"),
        )
