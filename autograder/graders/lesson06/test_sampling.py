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

from .harness import SAMPLING_HINTS, draw_seed, learner_sample, wait_for_sampling, wide_logits

ref = recording.reference_of(__package__)

V = 19
# GPT-2's vocabulary: where k / V is below float32's resolution of a quantile's position.
WIDE_V = 50257
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
    generator, for a T strictly between 0 and 0.5 (drawn from 0.05 .. 0.45 at each official
    grading, its logits scaled by T so that the draw is neither the argmax nor flat: a T
    clamped, squared or taken as greedy below some threshold differs), 0.5, 2.5 and 1 (B = 64)
    and 0.7 (B = 1); then with generator=None, the draw of torch's global generator seeded just
    before (the contract: the draw uses `generator`, and None is torch's default)."""
    gen = generator(check_seed)
    small = round(0.05 + 0.4 * float(torch.rand(1, generator=gen)), 3)
    cases = (
        (small, 64, True),
        (0.5, 64, True),
        (2.5, 64, True),
        (1.0, 64, True),
        (0.7, 1, True),
        (0.8, 64, False),
    )
    for temperature, B, given in cases:
        scale = 1.5 * temperature if temperature < 0.5 else 1.5
        logits = torch.randn(B, V, generator=gen) * scale
        seed = draw_seed(gen)
        drew: list[bool] = []
        out, called = learner_sample(
            submission, logits, temperature, None, seed, own="temperature", drew=drew, given=given
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
            if temperature != 1.0 and given
            else []
        )
        greedy = [(lambda: ref.sample_replay(logits, seed, temperature=0), "lesson06.diag_always_greedy")]
        if torch.equal(out, expected):
            _prime(candidates + greedy)
            continue
        if not given:
            # The same draw with a generator given was right (the cases before): only the
            # global generator's stream is missing.
            diagnoses = _diagnosis(out, greedy) or [message("lesson06.diag_global_generator")]
        elif not drew[0]:
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


def _tied(B: int, k: int, gen: torch.Generator) -> torch.Tensor:
    """(B, V) logits with ties among each row's k best (3 or 3.5) and among the others (-1 ..
    0.5), never across the k-th: the k best are one set, whichever way ties are broken."""
    top = 3.0 + 0.5 * torch.randint(0, 2, (B, k), generator=gen)
    rest = -1.0 + 0.5 * torch.randint(0, 4, (B, V - k), generator=gen)
    order = torch.rand(B, V, generator=gen).argsort(dim=-1)
    return torch.cat((top, rest), dim=-1).gather(-1, order)


def _topk_failure(called, out, expected, k, diagnoses, found=()):
    """Fail: the learner's draws `out` differ from `expected`; the first of `diagnoses` they
    match, or the messages `found`, say why."""
    count = int((out != expected).sum())
    fail(
        called,
        message(
            "lesson06.samples_differ",
            count=count,
            B=out.shape[0],
            expected=message("lesson06.expected_topk", k=k),
        ),
        _differing_rows(out, expected),
        *_diagnosis(out, diagnoses),
        *found,
        message("lesson06.topk_hint"),
    )


@pytest.mark.check("top-k-sampling")
def test_top_k_sampling(submission, check_seed):
    """The draw among the k best is the renormalised softmax (exact replay, temperature 1, so TODO
    [temperature] plays no part): over V = 19 for k < V, k = V - 1, k = V and k > V (which keeps
    every token and must not raise; nearly flat logits where k >= V - 1, so that a least likely
    token dropped by mistake changes the draw), and with ties among the k best; over a
    GPT-2-sized vocabulary (V = 50257, where a k read as a quantile 1 - k / V lands on the
    (k+1)-th in float32) for k = 1 and a k drawn from 2 .. 8; then with generator=None, the
    global generator's draw."""
    gen = generator(check_seed)
    wait_for_sampling(submission, gen)  # it samples at temperature 1 through sample_next
    B = 64
    # (k, the logits' scale; None: ties among the k best)
    for k, scale in ((5, 1.5), (V + 4, 0.15), (V, 0.15), (V - 1, 0.15), (4, None)):
        logits = _tied(B, k, gen) if scale is None else torch.randn(B, V, generator=gen) * scale
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
        _topk_failure(called, out, expected, k, diagnoses)

    # A GPT-2-sized vocabulary, its logits described to the reference by their seed.
    wide_B, wide_V = 16, WIDE_V
    for k in (1, int(torch.randint(2, 9, (1,), generator=gen))):
        logit_seed, seed = draw_seed(gen), draw_seed(gen)
        logits = wide_logits(logit_seed, wide_B, wide_V, 1.0)
        out, called = learner_sample(submission, logits, 1.0, k, seed, own="top-k")
        expected = ref.sample_replay_wide(logit_seed, wide_B, wide_V, 1.0, seed, top_k=k)
        diagnoses = [
            (
                lambda: ref.sample_replay_wide(logit_seed, wide_B, wide_V, 1.0, seed, top_k=k + 1),
                "lesson06.diag_topk_one_more_short",
            ),
            (
                lambda: ref.sample_replay_wide(logit_seed, wide_B, wide_V, 1.0, seed),
                "lesson06.diag_topk_no_filter",
            ),
        ]
        if torch.equal(out, expected):
            _prime(diagnoses)
            continue
        _topk_failure(called, out, expected, k, diagnoses)

    # generator=None: the draw of the global generator. Where sample_next without top_k already
    # misses it, TODO [temperature]'s check says so and this one waits on it.
    k = 5
    logits = torch.randn(B, V, generator=gen) * 1.5
    seed = draw_seed(gen)
    out, called = learner_sample(submission, logits, 1.0, k, seed, own="top-k", given=False)
    expected = ref.sample_replay(logits, seed, top_k=k)
    unfiltered = ref.sample_replay(logits, seed)
    if torch.equal(out, expected):
        return
    plain, _ = learner_sample(submission, logits, 1.0, None, seed, own="temperature", given=False)
    if not torch.equal(plain, unfiltered):
        fail(called, message("lesson06.topk_waits_global"), waits_on="temperature")
    _topk_failure(called, out, expected, k, [], [message("lesson06.diag_global_generator")])
