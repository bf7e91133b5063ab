"""Trusted reference for lesson 01, written independently of solutions/: what a correct
tokenizer and split are, and what the recognisable mistakes give, stated as facts the graders
compare a learner's values with.

Only behaviour lives here; the inputs the graders draw (texts, data) are in harness.py. Every
function takes and returns plain values (str, numbers, lists), so that the learner release can
answer its calls from a recording (autograder/engine/recording.py) without this file.

No random stream is reproduced here: get_batch is judged by properties (every row is a window
of data, every valid start can come out and none past the end, the same generator seed gives
the same batch), so any correct way of drawing uniform starts with the generator passes.
"""

from __future__ import annotations

import math


def vocabulary(text: str) -> list[str]:
    """The sorted list of the distinct characters of text."""
    seen: dict[str, None] = {}
    for ch in text:
        seen[ch] = None
    return sorted(seen, key=ord)


def appearance_order(text: str) -> list[str]:
    """The distinct characters in the order they first appear (the classic unsorted bug)."""
    return list(dict.fromkeys(text))


def encode(text: str, s: str) -> list[int]:
    """The ids of s in the vocabulary of text."""
    table = {ch: i for i, ch in enumerate(vocabulary(text))}
    return [table[ch] for ch in s]


def val_sizes(n: int, fraction: float) -> list[int]:
    """The lengths of val the spec accepts, ascending: fraction * n rounded down or up."""
    exact = n * fraction
    return sorted({math.floor(exact + 1e-9), math.ceil(exact - 1e-9)})
