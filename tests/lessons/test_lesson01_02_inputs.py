"""The inputs lessons 01 and 02's graders draw reach the edges issue 31 named, on every seed.

Pure functions of a seed, so no grading runs here: a later edit that simplifies an input (an
unknown character of one kind only, targets that miss a token id) fails at once instead of
letting a whole kind of bug earn full marks again.
"""

from __future__ import annotations

import pytest

from autograder.engine.grader_helpers import generator
from autograder.graders.lesson01 import harness as harness01
from autograder.graders.lesson02 import harness as harness02

SEEDS = range(40)


def _vocabulary(text: str) -> set[str]:
    return set(text)


@pytest.mark.parametrize("seed", SEEDS)
def test_every_kind_of_unknown_character_on_every_seed(seed):
    cases = harness01.unknown_cases(seed)
    for text, s, position, ch in cases:
        known = _vocabulary(text)
        assert s[position] == ch and ch not in known
        assert all(c in known for k, c in enumerate(s) if k != position)
        assert not s[0].isspace()  # a strip() in encode moves no position here
    chars = [ch for *_, ch in cases]
    assert any(ch.isascii() for ch in chars)  # one byte
    assert any(len(ch.encode("utf-8")) > 1 for ch in chars)  # multi-byte
    assert any(
        ch.lower() in _vocabulary(text) or ch.upper() in _vocabulary(text) for text, _, _, ch in cases
    )  # its other case is known
    assert any(position == 0 for _, _, position, _ in cases)
    assert any(position == len(s) - 1 for _, s, position, _ in cases)
    # After two or more multi-byte characters: a position in bytes is at least 2 past it.
    assert any(len(s[:position].encode("utf-8")) >= position + 2 for _, s, position, _ in cases)


@pytest.mark.parametrize("seed", SEEDS)
def test_encode_samples_hold_edge_whitespace(seed):
    for text in (harness01.ACCENTED, harness01.random_text(seed)):
        samples = harness01.samples(text, seed)
        assert any(s and s[0].isspace() and s[-1].isspace() for s in samples)
        assert all(set(s) <= set(text) for s in samples)


def test_a_vocabulary_text_loses_characters_to_strip():
    text = harness01.EDGES
    assert set(text.strip()) != set(text)
    assert set(text.lstrip()) != set(text) and set(text.rstrip()) != set(text)
    assert text in harness01.texts(0)


@pytest.mark.parametrize("B, T, V", [(3, 7, 13), (3, 5, 5), (5, 5, 5), (1, 3, 40), (6, 1, 4)])
def test_loss_targets_hold_every_token_id(B, T, V):
    for seed in SEEDS:
        targets = harness02.every_target(B, T, V, generator(seed))
        assert tuple(targets.shape) == (B, T) and int(targets.min()) >= 0 and int(targets.max()) < V
        assert len(set(targets.view(-1).tolist())) == min(V, B * T)
