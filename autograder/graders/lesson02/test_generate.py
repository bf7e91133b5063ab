"""Checks of generate (TODOs last-step and sampling).

generate runs with a bigram model the grader builds from torch parts (harness.TableModel),
not with the learner's BigramLanguageModel, so that these checks depend on no other TODO.
The README fixes the draw: F.softmax over the vocabulary and torch.multinomial(probs,
num_samples=1, generator=generator), once per step. The grader replays it with a generator
seeded the same way and compares token by token.

Every reference call is on the grader's own tables, contexts and seeds, so the learner release
answers all of them from its recording; the other draws a check accepts or names (another
position, replacement=True, greedy, the global generator, ...) are asked for even when the
check passes while recording (recording.eager()).
"""

from __future__ import annotations

import functools

import pytest
import torch

from autograder.core.results import Block, message
from autograder.engine import recording
from autograder.engine.checks import CheckFailure, fail
from autograder.engine.grader_helpers import generator, tokens
from autograder.sandbox.client import StudentError

from .harness import (
    CannotJudge,
    Generate,
    TableModel,
    chain_successors,
    chain_table,
    expect_generated,
    forked,
    random_table,
)

ref = recording.reference_of(__package__)

GEN = {"V": 17, "B": 3, "T": 5, "steps": 6}


def _seed(gen: torch.Generator) -> int:
    return int(torch.randint(0, 2**31 - 1, (1,), generator=gen))


def _rows(idx: torch.Tensor, got: torch.Tensor, expected: torch.Tensor, rows: int = 2) -> Block:
    """The first rows as context | learner's continuation | expected continuation."""
    T = idx.shape[1]
    lines = []
    for b in range(min(rows, idx.shape[0])):
        lines.append(f"[{b}] {idx[b].tolist()} -> {got[b, T:].tolist()}  ≠  {expected[b, T:].tolist()}")
    return Block("\n".join(lines) + "\n")


def _spied_probs_shapes(spied: list) -> list[tuple]:
    shapes = []
    for call in spied:
        probs = call["args"][0] if call.get("args") else call.get("kwargs", {}).get("input")
        if isinstance(probs, dict) and probs.get("tensor"):
            shapes.append(tuple(probs["shape"]))
    return shapes


# ---------------------------------------------------------------- TODO [last-step]


@pytest.mark.check("last-position")
def test_last_position(submission, check_seed):
    """With a table where every token has one certain successor, generate must follow the
    chain from the LAST token of each row. Judged so that a sampling bug is not reported here:
    when the new tokens do not depend on the earlier tokens at all, the position is right, and
    an output that does not grow as it should (the sampling code's business, which its checks
    report) is judged only by the shape of the probabilities torch.multinomial receives."""
    gen = generator(check_seed)
    V, steps = GEN["V"], GEN["steps"]
    succ = chain_successors(V, gen)
    model = TableModel(submission, chain_table(succ))
    learner = Generate(submission, model)
    # B = 1 too: a last step that squeezes every axis of length 1 gives (V,) there.
    for B, T in ((GEN["B"], GEN["T"]), (1, 4)):
        _judge_last_position(learner, model, gen, B, T, V, steps, rows_fine=B == 1)


def _judge_last_position(learner, model, gen, B: int, T: int, V: int, steps: int, rows_fine: bool) -> None:
    idx = tokens(B, T, V, gen)
    # The first token of each row differs from the last, so "first position" cannot pass.
    idx[:, 0] = torch.where(idx[:, 0] == idx[:, -1], (idx[:, 0] + 1) % V, idx[:, 0])
    # Same last tokens, every earlier token changed.
    other = idx.clone()
    other[:, :-1] = (idx[:, :-1] + torch.randint(1, V, (B, T - 1), generator=gen)) % V
    seed = _seed(gen)
    called = learner.called(idx, steps, seed)
    chain = ref.replay(model.table, idx, steps, None, mode="argmax")
    chain_other = ref.replay(model.table, other, steps, None, mode="argmax")
    first = ref.replay(model.table, idx, steps, None, position="first", mode="argmax")
    run = learner.run(idx, steps, seed, spy=True, judging="last-step", rows_fine=rows_fine)
    wrong = [shape for shape in _spied_probs_shapes(run["spied"]) if shape != (B, V)]
    if wrong:
        fail(
            called,
            message("lesson02.probs_shape", got=wrong[0], expected=(B, V)),
            message("lesson02.last_step_hint"),
        )
    if not _grown(run["value"], idx, steps):
        return  # the right (B, V) draws, but the output is malformed: the sampling checks say how
    out = run["value"]
    run_other = learner.run(other, steps, seed, judging="last-step", rows_fine=rows_fine)["value"]
    if not _grown(run_other, other, steps):
        return
    if torch.equal(out, chain) and torch.equal(run_other, chain_other):
        return
    shown = [message("lesson02.chain_legend"), _rows(idx, out, chain)]
    if torch.equal(out, first):
        fail(
            called,
            message("lesson02.chain_not_followed"),
            *shown,
            message("lesson02.diag_first_position"),
            message("lesson02.last_step_hint"),
        )
    if not torch.equal(out[:, T:], run_other[:, T:]):
        fail(
            called,
            message("lesson02.chain_not_followed"),
            *shown,
            message("lesson02.depends_on_earlier"),
            message("lesson02.last_step_hint"),
        )
    # Only the last token matters, but the draws are not its successors: the sampling's business.


def _grown(out, idx: torch.Tensor, steps: int) -> bool:
    """Whether generate's output is what the sampling code should make of it: an int64 tensor
    (B, T + steps) starting with idx (anything else is reported by the sampling checks)."""
    B, T = idx.shape
    return (
        isinstance(out, torch.Tensor)
        and out.device.type != "meta"
        and out.dtype == torch.int64
        and tuple(out.shape) == (B, T + steps)
        and torch.equal(out[:, :T], idx)
    )


def _unless_last_step_broke(check):
    """A sampling check that cannot judge the sampling code when the logits TODO [last-step]
    keeps are not (B, V): it fails saying it waits on last-step (which last-position explains),
    never blaming the sampling code."""

    @functools.wraps(check)
    def judged(*args, **kwargs):
        try:
            return check(*args, **kwargs)
        except CannotJudge:
            fail(message("lesson02.sampling_waits_for_last_step"), waits_on="last-step")

    return judged


# ---------------------------------------------------------------- TODO [sampling]


@pytest.mark.check("sampling-reference")
@_unless_last_step_broke
def test_sampling_reference(submission, check_seed):
    gen = generator(check_seed)
    V, B, T, steps = 11, 4, 3, 10
    model = TableModel(submission, random_table(V, V, gen, std=1.5))
    learner = Generate(submission, model)
    idx = tokens(B, T, V, gen)
    seed, global_seed = _seed(gen), _seed(gen)
    called = learner.called(idx, steps, seed, global_seed)
    expected = ref.replay(model.table, idx, steps, seed)
    if recording.eager():
        # What the paths below ask for when a learner's draw differs: for their replay.
        _accepted(model.table, idx, steps, seed)
        _sampling_diagnoses(model.table, idx, steps, seed, global_seed)
        _flat_expected(forked(gen), V, idx, steps, seed)
    out = expect_generated(
        learner.run(idx, steps, seed, global_seed=global_seed)["value"], idx, steps, called
    )
    if torch.equal(out, expected):
        return
    # The same draw from another position's logits is last-step's business (its check says
    # so); with replacement=True the draw is just as right.
    if any(torch.equal(out, draw) for draw in _accepted(model.table, idx, steps, seed)):
        return
    if _right_on_flat_positions(learner, submission, gen, V, idx, steps, seed, global_seed):
        return
    found = [
        message(key)
        for candidate, key in _sampling_diagnoses(model.table, idx, steps, seed, global_seed)
        if torch.equal(out, candidate)
    ]
    first = int((out != expected).any(dim=0).nonzero()[0]) - T
    fail(
        called,
        message("lesson02.samples_differ", step=first),
        message("lesson02.samples_legend"),
        _rows(idx, out, expected),
        *found[:1],
        message("lesson02.sampling_hint"),
    )


def _accepted(table: torch.Tensor, idx, steps: int, seed: int) -> list[torch.Tensor]:
    """Draws as right as the expected one for the sampling code: from the first or the mean
    position's logits (last-step's business, which its check reports), or with replacement."""
    return [
        ref.replay(table, idx, steps, seed, position="first"),
        ref.replay(table, idx, steps, seed, position="mean"),
        ref.replay(table, idx, steps, seed, replacement=True),
    ]


def _sampling_diagnoses(table: torch.Tensor, idx, steps: int, seed: int, global_seed: int) -> list:
    """(what a known sampling mistake draws, its message key), in the order they are named."""
    return [
        (ref.replay(table, idx, steps, None, mode="argmax"), "lesson02.diag_argmax"),
        (ref.replay(table, idx, steps, global_seed), "lesson02.diag_global_rng"),
        (ref.replay(table, idx, steps, seed, mode="softmax_batch"), "lesson02.diag_softmax_batch"),
        (ref.replay(table, idx, steps, seed, mode="logits"), "lesson02.diag_no_softmax"),
    ]


def _flat_table(gen, V: int) -> torch.Tensor:
    """A (V, V) table whose rows are one random row repeated."""
    return random_table(1, V, gen, std=1.5).expand(V, V).clone()


def _flat_expected(gen, V: int, idx, steps: int, seed: int) -> list[torch.Tensor]:
    """The right draws (without and with replacement) of a model built on _flat_table(gen, V)."""
    table = (_flat_table(gen, V) + TableModel.SHIFT).float()  # as TableModel holds it
    return [ref.replay(table, idx, steps, seed), ref.replay(table, idx, steps, seed, replacement=True)]


def _right_on_flat_positions(
    learner, submission, gen, V: int, idx, steps: int, seed: int, global_seed: int
) -> bool:
    """Whether generate draws right with a model whose logits are the same at every position
    (one row repeated in the table): whichever position TODO [last-step] keeps, the sampling
    code then gets the right (B, V) logits, so a mismatch above was the position's."""
    expected = _flat_expected(forked(gen), V, idx, steps, seed)
    flat = TableModel(submission, _flat_table(gen, V))
    again = Generate(submission, flat)
    try:
        out = again.run(idx, steps, seed, global_seed=global_seed)["value"]
    except (StudentError, CheckFailure):
        return False
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (idx.shape[0], idx.shape[1] + steps):
        return False
    return any(torch.equal(out.cpu(), draw) for draw in expected)


@pytest.mark.check("sampling-generator")
@_unless_last_step_broke
def test_sampling_generator(submission, check_seed):
    """On a flat distribution: the same generator seed gives the same tokens whatever torch's
    global seed, and another generator seed gives other tokens."""
    gen = generator(check_seed)
    V, B, T, steps = 11, 3, 2, 8
    model = TableModel(submission, torch.zeros(V, V))
    learner = Generate(submission, model)
    idx = tokens(B, T, V, gen)
    seed, other_seed = _seed(gen), _seed(gen)
    runs = {}
    for key, s, g in (("a", seed, 1), ("b", seed, 2), ("c", other_seed, 1)):
        runs[key] = expect_generated(
            learner.run(idx, steps, s, global_seed=g)["value"], idx, steps, learner.called(idx, steps, s, g)
        )
    if not torch.equal(runs["a"], runs["b"]):
        fail(learner.called(idx, steps, seed, 1), message("lesson02.not_reproducible", seed=seed))
    if torch.equal(runs["a"], runs["c"]):
        fail(
            learner.called(idx, steps, seed, 1),
            message(
                "lesson02.not_random", seed=seed, other=other_seed, tokens=str(runs["a"][0, T:].tolist())
            ),
        )
    _expect_global_without_generator(learner, model, idx, steps, gen)


def _expect_global_without_generator(learner, model, idx: torch.Tensor, steps: int, gen) -> None:
    """generator=None draws from torch's global generator (the contract): after
    torch.manual_seed(s), the tokens are the ones torch.multinomial draws from it, so the same
    global seed gives the same tokens and another seed others (a generator of generate's own,
    made when none is given, gives the same tokens whatever the global seed)."""
    T = idx.shape[1]
    seed, other = _seed(gen), _seed(gen)
    expected = [
        ref.replay(model.table, idx, steps, seed),
        ref.replay(model.table, idx, steps, seed, replacement=True),
    ]
    runs = [
        expect_generated(
            learner.run(idx, steps, None, global_seed=g)["value"],
            idx,
            steps,
            learner.called(idx, steps, None, g),
        )
        for g in (seed, seed, other)
    ]
    called = learner.called(idx, steps, None, seed)
    if not torch.equal(runs[0], runs[1]):
        fail(called, message("lesson02.none_not_reproducible", seed=seed))
    if torch.equal(runs[0], runs[2]):
        fail(
            called,
            message(
                "lesson02.none_ignores_global", seed=seed, other=other, tokens=str(runs[0][0, T:].tolist())
            ),
        )
    if not any(torch.equal(runs[0], draw) for draw in expected):
        fail(
            called,
            message("lesson02.none_not_global"),
            message("lesson02.samples_legend"),
            _rows(idx, runs[0], expected[0]),
        )


@pytest.mark.check("generate-output")
@_unless_last_step_broke
def test_generate_output(submission, check_seed):
    gen = generator(check_seed)
    V = 11
    model = TableModel(submission, random_table(V, V, gen))
    learner = Generate(submission, model)
    idx = tokens(2, 4, V, gen)
    seed, steps = _seed(gen), 5
    called = learner.called(idx, steps, seed)
    value, after = learner.run_keeping_input(idx, steps, seed)
    out = expect_generated(value, idx, steps, called)
    if not torch.equal(out[:, : idx.shape[1]], idx):
        fail(
            called,
            message(
                "lesson02.prefix_changed",
                got=str(out[0, : idx.shape[1]].tolist()),
                expected=str(idx[0].tolist()),
            ),
        )
    if bool(((out < 0) | (out >= V)).any()):
        fail(called, message("lesson02.tokens_out_of_range", V=V, got=str(out[0].tolist())))
    if after is not None and not (after.shape == idx.shape and torch.equal(after, idx)):
        fail(
            called,
            message("lesson02.input_mutated", got=str(tuple(after.shape)), expected=str(tuple(idx.shape))),
        )
    # A one-token context, and no new tokens at all.
    for context, n in ((tokens(3, 1, V, gen), 4), (idx, 0)):
        called = learner.called(context, n, seed)
        out = expect_generated(learner.run(context, n, seed)["value"], context, n, called)
        if not torch.equal(out[:, : context.shape[1]], context):
            fail(
                called,
                message(
                    "lesson02.prefix_changed",
                    got=str(out[0, : context.shape[1]].tolist()),
                    expected=str(context[0].tolist()),
                ),
            )
