"""Checks of TokenPositionEmbedding (TODO positions).

The module holds tables drawn by the grader. Where positions are created is seen on the
"meta" device (shapes without data, available on every machine): the module and idx move
there, and the tensor that enters position_embedding_table must be on meta too. A tensor made
with torch.arange(T) alone is born on the CPU, which on a GPU is an error.

Every reference call is on the grader's own tables and tokens, so the learner release answers
all of them from its recording; what the known mistakes give is asked for even when the check
passes while recording (recording.eager()).
"""

from __future__ import annotations

import pytest
import torch

from autograder.core.results import message
from autograder.engine import recording
from autograder.engine.checks import fail
from autograder.engine.feedback import ATOL, RTOL, compare
from autograder.engine.grader_helpers import generator, tokens

from .harness import EMBED, LearnerEmbedding, embedding_tables, expect_tensor, forked

ref = recording.reference_of(__package__)

POSITION_DIAGNOSES = {
    "none": "lesson02.diag_positions_missing",
    "reversed": "lesson02.diag_positions_reversed",
    "tokens": "lesson02.diag_positions_from_tokens",
}


def _output(emb: LearnerEmbedding, idx: torch.Tensor, called) -> torch.Tensor:
    x = emb.forward(idx)["value"]
    expect_tensor(x, called, "lesson02.what_x")
    return x


def _diagnoses(x, emb: LearnerEmbedding, idx: torch.Tensor) -> list:
    B, T = idx.shape
    C = emb.cfg["C"]
    if tuple(x.shape) == (B, T, 2 * C):
        return [message("lesson02.diag_positions_concat", C=C, twoC=2 * C)]
    if tuple(x.shape) != (B, T, C):
        return []
    for name, expected in ref.position_mistakes(emb.tok, emb.pos, idx).items():
        if torch.allclose(x.double(), expected, atol=1e-5, rtol=1e-5):
            return [message(POSITION_DIAGNOSES[name])]
    return []


@pytest.mark.check("positions-shape")
def test_positions_shape(submission, check_seed):
    gen = generator(check_seed)
    cfg = EMBED
    emb = LearnerEmbedding(submission, cfg, gen)
    # T < block_size first: positions made for block_size instead of T show up there.
    for B, T in ((cfg["B"], cfg["T"]), (cfg["B"], cfg["block_size"]), (3, 1), (1, cfg["T"])):
        idx = tokens(B, T, cfg["V"], gen)
        called = emb.called(idx)
        x = _output(emb, idx, called)
        expected = (B, T, cfg["C"])
        if tuple(x.shape) != expected:
            hint = None
            if tuple(x.shape) == (B, cfg["block_size"], cfg["C"]) and T != cfg["block_size"]:
                hint = message("lesson02.hint_positions_block_size", T=T, bs=cfg["block_size"])
            fail(
                called,
                message("lesson02.x_shape", got=tuple(x.shape), expected=expected),
                hint,
                *([] if hint else _diagnoses(x, emb, idx)),
            )
        if x.dtype != torch.float32:
            fail(called, message("lesson02.x_dtype", got=str(x.dtype)))


@pytest.mark.check("positions-value")
def test_positions_value(submission, check_seed):
    gen = generator(check_seed)
    cfg = EMBED
    emb = LearnerEmbedding(submission, cfg, gen)
    # Token ids below block_size in the second case, so that a position table indexed with
    # the tokens runs (and can be named) instead of failing.
    for B, T, high in ((cfg["B"], cfg["T"], cfg["V"]), (3, 4, cfg["block_size"])):
        idx = tokens(B, T, high, gen)
        judge_positions(emb, idx)
    _expect_position_gradient(emb, idx, gen)
    # One position (T = 1): the only row of the position table is row 0.
    judge_positions(emb, tokens(4, 1, cfg["V"], gen))


def judge_positions(emb: LearnerEmbedding, idx: torch.Tensor) -> None:
    """Fails unless the learner's embedding of idx is tok[idx] + pos[0..T-1]."""
    called = emb.called(idx)
    expected = ref.token_position(emb.tok, emb.pos, idx)
    if recording.eager():
        ref.position_mistakes(emb.tok, emb.pos, idx)  # for a failing learner's replay
    x = _output(emb, idx, called)
    problem = compare(x, expected.float(), what=message("lesson02.what_x"), atol=ATOL, rtol=RTOL)
    if problem:
        fail(called, problem, *_diagnoses(x, emb, idx), message("lesson02.positions_hint"))


def _expect_position_gradient(emb: LearnerEmbedding, idx: torch.Tensor, gen) -> None:
    """The position table learns only if its rows carry x's gradient: <x, v> differentiated with
    respect to it is v summed over the batch at rows 0..T-1, and zero below (a .detach() or
    .data on the positions' embedding gives zero everywhere)."""
    B, T = idx.shape
    v = torch.randn(B, T, emb.cfg["C"], generator=gen)
    got = emb.position_grad(idx, v)
    called = emb.called_grad(idx)
    if got is None or not bool(got.abs().sum() > 0):
        fail(called, message("lesson02.positions_no_gradient"))
    expected = ref.position_gradient(emb.cfg["block_size"], v)
    problem = compare(
        got, expected.float(), what=message("lesson02.what_position_grad"), atol=ATOL, rtol=RTOL
    )
    if problem:
        fail(called, problem)


@pytest.mark.check("positions-device")
def test_positions_device(submission, check_seed):
    gen = generator(check_seed)
    cfg = EMBED
    B, T = cfg["B"], cfg["T"]
    devices = ["meta"] + (["cuda"] if torch.cuda.is_available() else [])
    for device in devices:
        if recording.eager() and device == "meta" and "cuda" not in devices:
            # What the CUDA case below asks the reference, drawn as it would be on a machine
            # with a GPU (the recording is made without one): a learner's GPU replays it.
            ahead = forked(gen)
            _ = embedding_tables(cfg, ahead)
            tok, pos = embedding_tables(cfg, ahead)
            ref.token_position(tok, pos, tokens(B, T, cfg["V"], ahead))
        emb = LearnerEmbedding(submission, cfg, gen)
        moved = submission.call(emb.handle, device, method="to")
        if device == "meta":
            idx = torch.empty(B, T, dtype=torch.long, device="meta")
            reference = None
        else:
            cpu_idx = tokens(B, T, cfg["V"], gen)
            idx, reference = cpu_idx.to(device), ref.token_position(emb.tok, emb.pos, cpu_idx)
        called = emb.called(idx, device=device)
        traced = emb.forward(idx, moved, capture=True)
        x = traced["value"]
        if not isinstance(x, torch.Tensor):
            fail(
                called,
                message("lesson02.not_a_tensor", what=message("lesson02.what_x"), got=type(x).__name__),
            )
        # What entered the position table: positions made on another device than idx.
        for seen in traced["captured"]:
            if seen.device.type != device:
                fail(called, message("lesson02.positions_wrong_device", got=seen.device.type, device=device))
        if x.device.type != device:
            fail(called, message("lesson02.x_wrong_device", got=x.device.type, device=device))
        if tuple(x.shape) != (B, T, cfg["C"]):
            fail(called, message("lesson02.x_shape", got=tuple(x.shape), expected=(B, T, cfg["C"])))
        if reference is not None:
            problem = compare(
                x.cpu(), reference.float(), what=message("lesson02.what_x"), atol=ATOL, rtol=RTOL
            )
            if problem:
                fail(called, problem)
