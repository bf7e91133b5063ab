"""Trusted reference for lesson 01, written independently of solutions/: what a correct
tokenizer, split and batch are, stated as facts the graders compare a learner's values with.

No random stream is reproduced here: get_batch is judged by properties (every row is a window
of data, every valid start can come out and none past the end, the same generator seed gives
the same batch), so any correct way of drawing uniform starts with the generator passes.
"""

from __future__ import annotations

import math
import random

import torch

# Texts whose characters appear out of sorted order, with what a Spanish text brings: accents,
# ñ, opening ¿ ¡, capitals, punctuation and a line break (which sorts first).
SHORT = "hola mundo"
ACCENTED = "¿Qué año es?\nÉl dijo: ¡mañana, sí!"
ALPHABET = "abcdefghijklmnñopqrstuvwxyzáéíóúü ABCDEÉÑ¿?¡!,.;:\n"
# Characters that no text above contains: what encode must refuse.
UNKNOWN = "ßΩ€жø"
CORPUS_FILE = "cuentos.txt"
CORPUS_MAX_BYTES = 512 * 1024


def vocabulary(text: str) -> list[str]:
    """The sorted list of the distinct characters of text."""
    seen: dict[str, None] = {}
    for ch in text:
        seen[ch] = None
    return sorted(seen, key=ord)


def appearance_order(text: str) -> list[str]:
    """The distinct characters in the order they first appear (the classic unsorted bug)."""
    return list(dict.fromkeys(text))


def stoi(text: str) -> dict[str, int]:
    return {ch: i for i, ch in enumerate(vocabulary(text))}


def encode(text: str, s: str) -> list[int]:
    table = stoi(text)
    return [table[ch] for ch in s]


def random_text(seed: int, length: int = 60, alphabet: str = ALPHABET) -> str:
    """A fresh text for each run, starting out of sorted order so that order matters."""
    rng = random.Random(seed)
    return "zé¿A " + "".join(rng.choice(alphabet) for _ in range(length))


def val_sizes(n: int, fraction: float) -> set[int]:
    """The lengths of val the spec accepts: fraction * n rounded down or up."""
    exact = n * fraction
    return {math.floor(exact + 1e-9), math.ceil(exact - 1e-9)}


def distinct_data(n: int, generator: torch.Generator) -> torch.Tensor:
    """(n,) int64 of distinct values, none equal to its position, in no particular order: each
    value says where in data it comes from."""
    return torch.randperm(4 * n + 50, generator=generator)[:n] + 1000


def window_start(row: torch.Tensor, data: torch.Tensor, positions: dict[int, int]) -> int | None:
    """Where `row` starts if it is len(row) consecutive tokens of data; None otherwise."""
    if row.ndim != 1 or row.numel() == 0 or row.is_floating_point() and not torch.equal(row, row.round()):
        return None
    values = row.to(torch.int64)
    start = positions.get(int(values[0]))
    if start is None or start + len(values) > len(data):
        return None
    return start if torch.equal(data[start : start + len(values)], values) else None
