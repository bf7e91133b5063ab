"""Checks of sample_next (TODOs temperature and top-k).

The README fixes the draw: F.softmax over the last dimension and one
torch.multinomial(probs, num_samples=1, generator=generator) per call (given code). The grader
builds a torch.Generator in the worker with a seed it knows and replays the draw here on the
distribution it expects: the same seed gives the same tokens only for the same distribution.
Top-k is judged by the replay here, and officially also by support (which ranks are ever
drawn, over hundreds of rows of nearly flat logits, for a k drawn afresh at each official
grading: test_official_top_k_support.py).
"""

from __future__ import annotations

import pytest
import torch

from autograder.core.results import Block, message
from autograder.engine import recording
from autograder.engine.checks import fail
from autograder.engine.grader_helpers import generator

from .harness import SAMPLING_HINTS, draw_seed, learner_sample

ref = recording.reference_of(__package__)

V = 19
GREEDY_HINTS = (
    (
        r"probability tensor contains either|invalid multinomial distribution|ZeroDivisionError",
        lambda m: message("lesson06.hint_temperature_zero"),
    ),
    *SAMPLING_HINTS,
)


def _differing_rows(got: torch.Tensor, expected: torch.Tensor, limit: int = 4) -> Block:
    bad = (got != expected).view(-1).nonzero().view(-1).tolist()
    lines = [f"[{b}] {int(got[b, 0])} ≠ {int(expected[b, 0])}" for b in bad[:limit]]
    return Block("\n".join(lines) + ("\n…" if len(bad) > limit else "") + "\n")


def _diagnosis(out: torch.Tensor, candidates) -> list:
    """The message of the first (candidate, key) equal to `out`; a candidate is a callable,
    computed only when the ones before it did not match (a replay that cannot answer one skips it)."""
    for candidate, key in candidates:
        try:
            value = candidate()
        except recording.NotRecorded:
            continue
        if torch.equal(out, value):
            return [message(key)]
    return []


def _prime(candidates) -> None:
    """While recording, compute every candidate now, although the check passed (see harness.prime)."""
    if recording.eager():
        for candidate, _ in candidates:
            candidate()


# ---------------------------------------------------------------- TODO [temperature]


@pytest.mark.check("greedy")
def test_greedy(submission, check_seed):
    """temperature 0 (int and float, B = 6 and B = 1): the argmax of each row, (B, 1) int64,
    and no draw: the generator is left as it was given."""
    gen = generator(check_seed)
    for temperature, B in ((0, 6), (0.0, 1)):
        logits = torch.randn(B, V, generator=gen) * 2
        seed = draw_seed(gen)
        drew: list[bool] = []
        # own=None: with top_k None only TODO [temperature]'s code and the given draw run, so a
        # known error is this TODO's whichever line raised it (the draw follows the top-k block,
        # and blame from a learner's TODO comments alone cannot tell where that block ends).
        out, called = learner_sample(submission, logits, temperature, None, seed, GREEDY_HINTS, drew=drew)
        expected = ref.sample_replay(logits, seed, temperature=0)
        diagnoses = [
            (lambda: ref.least_likely(logits), "lesson06.diag_argmin"),
            (lambda: ref.sample_replay(logits, seed), "lesson06.diag_greedy_sampled"),
        ]
        if not torch.equal(out, expected):
            fail(
                called,
                message(
                    "lesson06.greedy_wrong",
                    got=str(out.view(-1).tolist()),
                    expected=str(expected.view(-1).tolist()),
                ),
                *_diagnosis(out, diagnoses),
            )
        _prime(diagnoses)
        if drew[0]:
            fail(called, message("lesson06.greedy_drew"), message("lesson06.temperature_hint"))


@pytest.mark.check("temperature")
def test_temperature(submission, check_seed):
    """temperature T > 0 (no top_k): exactly the draw of softmax(logits / T) with the learner's
    generator, for B = 64 and B = 1."""
    gen = generator(check_seed)
    for temperature, B in ((0.5, 64), (2.5, 64), (1.0, 64), (0.7, 1)):
        logits = torch.randn(B, V, generator=gen) * 1.5
        seed = draw_seed(gen)
        drew: list[bool] = []
        out, called = learner_sample(
            submission, logits, temperature, None, seed, own="temperature", drew=drew
        )
        expected = ref.sample_replay(logits, seed, temperature=temperature)
        candidates = (
            [
                (lambda: ref.sample_replay(logits, seed), "lesson06.diag_temperature_ignored"),
                (
                    lambda: ref.sample_replay(logits, seed, temperature=1 / temperature),
                    "lesson06.diag_temperature_multiplied",
                ),
                (
                    lambda: ref.sample_replay(logits, seed, temperature=temperature**2),
                    "lesson06.diag_temperature_twice",
                ),
            ]
            if temperature != 1.0
            else []
        )
        greedy = [(lambda: ref.sample_replay(logits, seed, temperature=0), "lesson06.diag_always_greedy")]
        if torch.equal(out, expected):
            _prime(candidates + greedy)
            continue
        if not drew[0]:
            # The generator it was given never drew: argmax, or a draw from another generator.
            diagnoses = _diagnosis(out, greedy) or [message("lesson06.diag_generator_unused")]
        else:
            diagnoses = _diagnosis(out, candidates)
        count = int((out != expected).sum())
        fail(
            called,
            message(
                "lesson06.samples_differ",
                count=count,
                B=B,
                expected=message("lesson06.expected_temperature", temperature=temperature),
            ),
            _differing_rows(out, expected),
            *diagnoses,
            message("lesson06.temperature_hint"),
        )


# ---------------------------------------------------------------- TODO [top-k]


@pytest.mark.check("top-k-sampling")
def test_top_k_sampling(submission, check_seed):
    """The draw among the k best is the renormalised softmax (exact replay), for k < V, k = V
    and k > V (which keeps every token and must not raise)."""
    gen = generator(check_seed)
    B = 64
    for k in (5, V + 4, V):
        logits = torch.randn(B, V, generator=gen) * 1.5
        seed = draw_seed(gen)
        out, called = learner_sample(submission, logits, 1.0, k, seed, own="top-k")
        expected = ref.sample_replay(logits, seed, top_k=k)
        diagnoses = []
        if k < V:
            diagnoses = [
                (lambda: ref.sample_replay(logits, seed), "lesson06.diag_topk_no_filter"),
                (lambda: ref.sample_replay(logits, seed, top_k=k - 1), "lesson06.diag_topk_one_less_short"),
                (lambda: ref.sample_replay(logits, seed, top_k=k + 1), "lesson06.diag_topk_one_more_short"),
            ]
        if torch.equal(out, expected):
            _prime(diagnoses)
            continue
        count = int((out != expected).sum())
        fail(
            called,
            message(
                "lesson06.samples_differ", count=count, B=B, expected=message("lesson06.expected_topk", k=k)
            ),
            _differing_rows(out, expected),
            *_diagnosis(out, diagnoses),
            message("lesson06.topk_hint"),
        )
