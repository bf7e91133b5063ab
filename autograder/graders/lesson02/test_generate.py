"""Hidden checks of generate (TODOs last-step and sampling).

generate runs with a bigram model the grader builds from torch parts (harness.TableModel),
not with the learner's BigramLanguageModel, so that these checks depend on no other TODO.
The README fixes the draw: F.softmax over the vocabulary and torch.multinomial(probs,
num_samples=1, generator=generator), once per step. The grader replays it with a generator
seeded the same way and compares token by token.
"""

from __future__ import annotations

import pytest
import torch

from autograder.checks import fail
from autograder.results import Block, message

from . import reference as ref
from .harness import Generate, TableModel, expect_generated, generator, tokens

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
    when the new tokens do not depend on the earlier tokens at all, the position is right."""
    gen = generator(check_seed)
    V, B, T, steps = GEN["V"], GEN["B"], GEN["T"], GEN["steps"]
    succ = ref.chain_successors(V, gen)
    model = TableModel(submission, ref.chain_table(succ))
    learner = Generate(submission, model)
    idx = tokens(B, T, V, gen)
    # The first token of each row differs from the last, so "first position" cannot pass.
    idx[:, 0] = torch.where(idx[:, 0] == idx[:, -1], (idx[:, 0] + 1) % V, idx[:, 0])
    # Same last tokens, every earlier token changed.
    other = idx.clone()
    other[:, :-1] = (idx[:, :-1] + torch.randint(1, V, (B, T - 1), generator=gen)) % V
    seed = _seed(gen)
    called = learner.called(idx, steps, seed)
    run = learner.run(idx, steps, seed, spy=True)
    out = expect_generated(run["value"], idx, steps, called)
    out_other = expect_generated(learner.run(other, steps, seed)["value"], other, steps,
                                 learner.called(other, steps, seed))
    chain = ref.replay(model.table, idx, steps, None, mode="argmax")
    if torch.equal(out, chain) and torch.equal(out_other, ref.replay(model.table, other, steps, None, mode="argmax")):
        return
    wrong = [shape for shape in _spied_probs_shapes(run["spied"]) if shape != (B, V)]
    if wrong:
        fail(called, message("lesson02.probs_shape", got=wrong[0], expected=(B, V)), message("lesson02.last_step_hint"))
    shown = [message("lesson02.chain_legend"), _rows(idx, out, chain)]
    if torch.equal(out, ref.replay(model.table, idx, steps, None, position="first", mode="argmax")):
        fail(called, message("lesson02.chain_not_followed"), *shown, message("lesson02.diag_first_position"),
             message("lesson02.last_step_hint"))
    if not torch.equal(out[:, T:], out_other[:, T:]):
        fail(called, message("lesson02.chain_not_followed"), *shown, message("lesson02.depends_on_earlier"),
             message("lesson02.last_step_hint"))
    # Only the last token matters, but the draws are not its successors: the sampling's business.


# ---------------------------------------------------------------- TODO [sampling]

@pytest.mark.check("sampling-reference")
def test_sampling_reference(submission, check_seed):
    gen = generator(check_seed)
    V, B, T, steps = 11, 4, 3, 10
    model = TableModel(submission, ref.random_table(V, V, gen, std=1.5))
    learner = Generate(submission, model)
    idx = tokens(B, T, V, gen)
    seed, global_seed = _seed(gen), _seed(gen)
    called = learner.called(idx, steps, seed, global_seed)
    out = expect_generated(learner.run(idx, steps, seed, global_seed=global_seed)["value"], idx, steps, called)
    expected = ref.replay(model.table, idx, steps, seed)
    if torch.equal(out, expected):
        return
    # The same draw from another position's logits is last-step's business (its check says
    # so); with replacement=True the draw is just as right.
    if any(torch.equal(out, ref.replay(model.table, idx, steps, seed, position=p)) for p in ("first", "mean")):
        return
    if torch.equal(out, ref.replay(model.table, idx, steps, seed, replacement=True)):
        return
    diagnoses = [
        (ref.replay(model.table, idx, steps, None, mode="argmax"), "lesson02.diag_argmax"),
        (ref.replay(model.table, idx, steps, global_seed), "lesson02.diag_global_rng"),
        (ref.replay(model.table, idx, steps, seed, mode="softmax_batch"), "lesson02.diag_softmax_batch"),
        (ref.replay(model.table, idx, steps, seed, mode="logits"), "lesson02.diag_no_softmax"),
    ]
    found = [message(key) for candidate, key in diagnoses if torch.equal(out, candidate)]
    first = int((out != expected).any(dim=0).nonzero()[0]) - T
    fail(called, message("lesson02.samples_differ", step=first), message("lesson02.samples_legend"),
         _rows(idx, out, expected), *found[:1], message("lesson02.sampling_hint"))


@pytest.mark.check("sampling-generator")
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
        runs[key] = expect_generated(learner.run(idx, steps, s, global_seed=g)["value"], idx, steps,
                                     learner.called(idx, steps, s, g))
    if not torch.equal(runs["a"], runs["b"]):
        fail(learner.called(idx, steps, seed, 1), message("lesson02.not_reproducible", seed=seed))
    if torch.equal(runs["a"], runs["c"]):
        fail(learner.called(idx, steps, seed, 1), message("lesson02.not_random", seed=seed, other=other_seed,
                                                          tokens=str(runs["a"][0, T:].tolist())))


@pytest.mark.check("generate-output")
def test_generate_output(submission, check_seed):
    gen = generator(check_seed)
    V = 11
    model = TableModel(submission, ref.random_table(V, V, gen))
    learner = Generate(submission, model)
    idx = tokens(2, 4, V, gen)
    seed, steps = _seed(gen), 5
    called = learner.called(idx, steps, seed)
    value, after = learner.run_keeping_input(idx, steps, seed)
    out = expect_generated(value, idx, steps, called)
    if not torch.equal(out[:, :idx.shape[1]], idx):
        fail(called, message("lesson02.prefix_changed", got=str(out[0, :idx.shape[1]].tolist()), expected=str(idx[0].tolist())))
    if bool(((out < 0) | (out >= V)).any()):
        fail(called, message("lesson02.tokens_out_of_range", V=V, got=str(out[0].tolist())))
    if after is not None and not (after.shape == idx.shape and torch.equal(after, idx)):
        fail(called, message("lesson02.input_mutated", got=str(tuple(after.shape)), expected=str(tuple(idx.shape))))
    # A one-token context, and no new tokens at all.
    for context, n in ((tokens(3, 1, V, gen), 4), (idx, 0)):
        called = learner.called(context, n, seed)
        out = expect_generated(learner.run(context, n, seed)["value"], context, n, called)
        if not torch.equal(out[:, :context.shape[1]], context):
            fail(called, message("lesson02.prefix_changed", got=str(out[0, :context.shape[1]].tolist()),
                                 expected=str(context[0].tolist())))
