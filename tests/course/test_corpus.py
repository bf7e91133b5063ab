"""The corpus of lessons 01 and 06: exercises/01-tokens-y-lotes/cuentos.txt.

Lesson 01 builds a character tokenizer and batches from this text, and lesson 06 trains a tiny
GPT on it on a CPU. These tests pin the properties those lessons rely on: a size that trains in
minutes, a small and closed character set (so the vocabulary stays small and predictable), clean
lines, natural Spanish with plenty of repetition, a simple structure of titled pieces, no padding
by copy-paste, and a licence file next to it.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LESSON_DIR = ROOT / "exercises" / "01-tokens-y-lotes"  # the corpus lives once, beside the stubs
CORPUS = LESSON_DIR / "cuentos.txt"
LICENCE = LESSON_DIR / "LICENCIA-cuentos.md"

MIN_BYTES = 45_000  # 45 KB (1 KB = 1000 bytes)
MAX_BYTES = 70_000  # 70 KB
MAX_LINE = 100
MIN_DISTINCT_CHARS = 60
MIN_PIECES = 15
MAX_LINE_REPEATS = 3
MAX_TITLE = 60
MIN_BODY_LINES = 4

UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZÁÉÍÓÚÜÑ"
LOWER = "abcdefghijklmnopqrstuvwxyzáéíóúüñ"
DIGITS = "0123456789"
PUNCTUATION = ".,;:¿?¡!«»—()-"
ALLOWED = frozenset(UPPER + LOWER + DIGITS + PUNCTUATION + " \n")

REQUIRED_MARKS = ["á", "é", "í", "ó", "ú", "ñ", "¿", "¡"]
COMMON_WORDS = ["de", "la", "que", "el", "y"]

WORD = re.compile(r"[a-záéíóúüñ]+")


# --- helpers -----------------------------------------------------------------------------------


def read_corpus() -> str:
    return CORPUS.read_bytes().decode("utf-8")  # strict: raises on invalid UTF-8


def split_pieces(text: str) -> list[list[str]]:
    """Split the corpus into pieces: blocks of non-empty lines separated by one blank line."""
    return [block.split("\n") for block in text.rstrip("\n").split("\n\n")]


def title_problem(block: list[str]) -> str | None:
    """Why a block is not a titled piece, or None when it is.

    The rule: the first line is the title (at most MAX_TITLE characters, starting with an
    uppercase letter, not ending in . , ; : and not a line of dialogue); then come at least
    MIN_BODY_LINES non-empty lines of prose or verse, the first of which does not repeat the title.
    """
    if not block or not block[0]:
        return "empty block (two blank lines in a row?)"
    title, body = block[0], block[1:]
    if len(title) > MAX_TITLE:
        return f"title longer than {MAX_TITLE} characters: {title!r}"
    if title[0] not in UPPER:
        return f"title does not start with an uppercase letter: {title!r}"
    if title[-1] in ".,;:":
        return f"title ends like a sentence: {title!r}"
    if title.startswith(("—", "«")):
        return f"title looks like dialogue: {title!r}"
    if len(body) < MIN_BODY_LINES:
        return f"piece {title!r} has only {len(body)} body lines"
    if any(not line.strip() for line in body):
        return f"piece {title!r} contains a whitespace-only line"
    if body[0] == title:
        return f"piece {title!r} repeats its title"
    return None


def top_words(text: str, n: int) -> list[str]:
    return [w for w, _ in Counter(WORD.findall(text.lower())).most_common(n)]


@pytest.fixture(scope="module")
def text() -> str:
    assert CORPUS.is_file(), f"missing corpus: {CORPUS.relative_to(ROOT)}"
    return read_corpus()


# --- size and encoding -------------------------------------------------------------------------


def test_size_between_45_and_70_kb():
    size = CORPUS.stat().st_size
    assert MIN_BYTES <= size <= MAX_BYTES, f"{size} bytes, expected {MIN_BYTES}-{MAX_BYTES}"


def test_is_strict_utf8_without_bom_or_carriage_returns():
    raw = CORPUS.read_bytes()
    raw.decode("utf-8")
    assert not raw.startswith(b"\xef\xbb\xbf"), "the corpus starts with a BOM"
    assert b"\r" not in raw, "the corpus has Windows line endings"


# --- character set -----------------------------------------------------------------------------


def test_characters_are_a_subset_of_the_allowed_set(text):
    extra = sorted(set(text) - ALLOWED)
    where = {ch: text.index(ch) for ch in extra}
    assert not extra, "characters outside the allowed set: " + ", ".join(
        f"{ch!r} (U+{ord(ch):04X}) at offset {where[ch]}" for ch in extra
    )


def test_character_set_is_not_trivially_small(text):
    distinct = len(set(text))
    assert distinct >= MIN_DISTINCT_CHARS, f"only {distinct} distinct characters"
    assert distinct <= len(ALLOWED)


@pytest.mark.parametrize("mark", REQUIRED_MARKS)
def test_spanish_marks_occur(text, mark):
    assert mark in text, f"{mark!r} never occurs in the corpus"


def test_no_straight_quotes_apostrophes_or_tabs(text):
    # Already excluded by the allowed set; spelled out because they are the usual intruders.
    for ch in "\"'\t“”‘’…":
        assert ch not in text, f"{ch!r} in the corpus"


def test_paired_punctuation_is_balanced_within_each_piece(text):
    for block in split_pieces(text):
        piece = "\n".join(block)
        # In Spanish a question or an exclamation needs its opening mark too.
        for left, right in ("«»", "()", "¿?", "¡!"):
            opened, closed = piece.count(left), piece.count(right)
            assert opened == closed, f"{block[0]!r}: {opened} {left} but {closed} {right}"


# --- lines -------------------------------------------------------------------------------------


def test_no_line_longer_than_100_characters(text):
    long_lines = [
        (number, len(line)) for number, line in enumerate(text.split("\n"), start=1) if len(line) > MAX_LINE
    ]
    assert not long_lines, f"lines over {MAX_LINE} characters (line, length): {long_lines[:10]}"


def test_no_trailing_whitespace(text):
    bad = [n for n, line in enumerate(text.split("\n"), start=1) if line != line.rstrip()]
    assert not bad, f"trailing whitespace on lines {bad[:10]}"


def test_ends_with_exactly_one_newline(text):
    assert text.endswith("\n"), "the corpus does not end with a newline"
    assert not text.endswith("\n\n"), "the corpus ends with a blank line"
    assert not text.startswith("\n"), "the corpus starts with a blank line"


def test_no_line_repeated_more_than_three_times(text):
    counts = Counter(line for line in text.split("\n") if line)
    repeated = {line: n for line, n in counts.items() if n > MAX_LINE_REPEATS}
    assert not repeated, f"lines repeated more than {MAX_LINE_REPEATS} times: {repeated}"


def test_no_long_passage_is_duplicated(text):
    # Padding by copy-paste usually survives re-wrapping, so look at sentences too.
    sentences = [s.strip() for s in re.split(r"(?<=[.!?»])\s+", text.replace("\n", " "))]
    counts = Counter(s for s in sentences if len(s) >= 80)
    repeated = {s: n for s, n in counts.items() if n > 1}
    assert not repeated, f"long sentences that occur more than once: {list(repeated)[:3]}"


# --- language and structure --------------------------------------------------------------------


def test_common_spanish_words_dominate(text):
    top10 = top_words(text, 10)
    missing = [w for w in COMMON_WORDS if w not in top10]
    assert not missing, f"{missing} not among the 10 most frequent words {top10}"


def test_vocabulary_is_varied(text):
    words = WORD.findall(text.lower())
    assert len(words) >= 7_000, f"only {len(words)} words"
    assert len(set(words)) >= 1_000, f"only {len(set(words))} different words"


def test_every_block_is_a_titled_piece(text):
    problems = [p for p in map(title_problem, split_pieces(text)) if p]
    assert not problems, "\n".join(problems[:10])


def test_at_least_15_pieces_with_distinct_titles(text):
    titles = [block[0] for block in split_pieces(text)]
    assert len(titles) >= MIN_PIECES, f"only {len(titles)} pieces"
    duplicated = [t for t, n in Counter(titles).items() if n > 1]
    assert not duplicated, f"titles used more than once: {duplicated}"


def test_piece_rule_rejects_malformed_blocks():
    good = "Un título\nUna línea.\nOtra línea.\nY otra.\nY la última."
    assert title_problem(good.split("\n")) is None
    assert len(split_pieces(good + "\n\n" + good + "\n")) == 2
    assert title_problem(["—Hola —dijo.", "a", "b", "c", "d"])  # dialogue, not a title
    assert title_problem(["Esto es una frase.", "a", "b", "c", "d"])  # ends with a period
    assert title_problem(["Título", "una sola línea"])  # too short to be a piece
    assert title_problem(["x" * (MAX_TITLE + 1), "a", "b", "c", "d"])  # too long
    assert title_problem([""])  # two blank lines in a row leave an empty block
    assert any(map(title_problem, split_pieces(good + "\n\n\n" + good + "\n")))


# --- licence -----------------------------------------------------------------------------------


def test_licence_file_names_cc0():
    assert LICENCE.is_file(), f"missing licence: {LICENCE.relative_to(ROOT)}"
    licence = LICENCE.read_text(encoding="utf-8")
    assert "CC0" in licence
    assert "https://creativecommons.org/publicdomain/zero/1.0/" in licence
    assert "Transformers desde cero" in licence


def test_licence_states_the_current_size(text):
    licence = LICENCE.read_text(encoding="utf-8")
    size = len(text.encode("utf-8"))
    assert f"{size} bytes" in licence, f"the licence does not state the size ({size} bytes)"
    assert f"{len(text)} caracteres" in licence, (
        f"the licence does not state the character count ({len(text)} caracteres)"
    )
