"""Helpers shared by lesson 01's graders: the inputs they draw, the learner's data.py behind
the sandbox, short descriptions of what was called, where a row of a batch sits in data, and
the hints that name a recognisable mistake."""

from __future__ import annotations

import collections
import contextlib
import random
import re

import torch

from autograder.core.results import message
from autograder.engine import recording
from autograder.engine.checks import describe_student_error, fail
from autograder.engine.feedback import truncate
from autograder.engine.grader_helpers import hinted, worker_generator
from autograder.sandbox.client import Sandbox, StudentError
from autograder.sandbox.protocol import Handle

ref = recording.reference_of(__package__)


FILE = "data"
SHOWN_CHARS = 240  # longer reprs are cut: a learner needs the start, not all 50 KB

# ---------------------------------------------------------------- inputs

# Texts whose characters appear out of sorted order, with what a Spanish text brings: accents,
# ñ, opening ¿ ¡, capitals, punctuation and a line break (which sorts first).
SHORT = "hola mundo"
ACCENTED = "¿Qué año es?\nÉl dijo: ¡mañana, sí!"
ALPHABET = "abcdefghijklmnñopqrstuvwxyzáéíóúü ABCDEÉÑ¿?¡!,.;:\n"
# Whitespace at both edges that the text holds nowhere else (a tab first, a line break last):
# a vocabulary built from text.strip() (or an lstrip/rstrip) loses a character only here.
EDGES = "\tdos palabras, ¿y qué?\n"
# Characters that no text above contains: what encode must refuse. Several kinds, so that an
# encoder that refuses only some of them shows: multi-byte in UTF-8 (2, 3 and 4 bytes; Ω has a
# lower-case form, ω); one-byte (ASCII) ones; and ones whose other case IS in the vocabulary
# (an encoder that falls back on ch.lower() or ch.upper() maps them to a known id).
UNKNOWN = "ßΩ€жø"
UNKNOWN_WIDE = "€ж🙂Ω"
UNKNOWN_ASCII = "xz#@k"
UNKNOWN_UPPER_OF_SHORT = "HOLAMUND"  # lower() of each is in SHORT's vocabulary
UNKNOWN_OTHER_CASE_OF_ACCENTED = "qELÑÍ"  # lower() or upper() of each is in ACCENTED's
CORPUS_FILE = "cuentos.txt"
CORPUS_MAX_BYTES = 512 * 1024


def random_text(seed: int, length: int = 60, alphabet: str = ALPHABET) -> str:
    """A fresh text for each run, starting out of sorted order so that order matters."""
    rng = random.Random(seed)
    return "zé¿A " + "".join(rng.choice(alphabet) for _ in range(length))


def distinct_data(n: int, generator: torch.Generator) -> torch.Tensor:
    """(n,) int64 of distinct values, none equal to its position, in no particular order: each
    value says where in data it comes from."""
    return torch.randperm(4 * n + 50, generator=generator)[:n] + 1000


def function(sub: Sandbox, name: str):
    return sub.getattr(sub.module(FILE), name)


def show(value) -> str:
    """A value as a learner would write it in Python, cut to a readable length."""
    if isinstance(value, torch.Tensor):
        value = value.tolist()
    if isinstance(value, Handle):
        return f"<{value.type}>"
    return truncate(repr(value), SHOWN_CHARS)


def type_name(value) -> str:
    if isinstance(value, torch.Tensor) and value.device.type == "meta":
        return "Tensor(device='meta')"
    return value.type if isinstance(value, Handle) else type(value).__name__


# ---------------------------------------------------------------- texts the tokenizer checks use


def texts(seed: int) -> list[str]:
    return [SHORT, ACCENTED, random_text(seed), EDGES]


def samples(text: str, seed: int) -> list[str]:
    """text itself, a random string of its characters, one character, nothing, and (where the
    vocabulary has whitespace) a string with whitespace at both edges, which a strip() in
    encode or decode would lose."""
    rng = random.Random(seed)
    alphabet = ref.vocabulary(text)
    samples = [text, "".join(rng.choice(alphabet) for _ in range(40)), text[:1], ""]
    spaces = [ch for ch in alphabet if ch.isspace()]
    if spaces:
        middle = "".join(rng.choice(alphabet) for _ in range(8))
        samples.append(spaces[-1] + middle + spaces[0])
    return samples


def unknown_cases(seed: int) -> list[tuple[str, str, int, str]]:
    """(vocabulary text, s, position, character): s holds exactly one character outside the
    vocabulary of the text. Every kind of unknown character comes out on every seed: multi-byte
    and one-byte (ASCII) ones, ones whose other case is in the vocabulary, at the first and at
    the last position, and after two or more multi-byte known characters (where a position
    counted in UTF-8 bytes is at least 2 past the index of the character, never what counting
    from 1 gives). No s starts with whitespace, so a strip() in encode (the encode check's
    business) moves no position here on any seed."""
    rng = random.Random(seed)
    short, accented = ref.vocabulary(SHORT), ref.vocabulary(ACCENTED)
    wide_known = [ch for ch in accented if len(ch.encode("utf-8")) > 1]
    letters = [ch for ch in short if not ch.isspace()]

    def draw(alphabet, n: int) -> str:
        return "".join(rng.choice(alphabet) for _ in range(n))

    cases = [(SHORT, "hola ßmundo", 5, "ß")]
    position = rng.randrange(2, 25)
    ch = rng.choice(UNKNOWN_UPPER_OF_SHORT)
    prefix = rng.choice(letters) + draw(short, position - 1)
    cases.append((SHORT, prefix + ch + draw(short, 4), position, ch))
    ch = rng.choice(UNKNOWN_ASCII)
    cases.append((SHORT, ch + draw(short, rng.randrange(3, 9)), 0, ch))
    position = rng.randrange(3, 20)
    ch = rng.choice(UNKNOWN_OTHER_CASE_OF_ACCENTED)
    prefix = draw(wide_known, 2) + draw(accented, position - 2)
    cases.append((ACCENTED, prefix + ch + draw(accented, 4), position, ch))
    position = rng.randrange(3, 20)
    ch = rng.choice(UNKNOWN_WIDE + UNKNOWN)
    cases.append((ACCENTED, draw(wide_known, position) + ch, position, ch))
    return cases


# ---------------------------------------------------------------- the tokenizer


def construct(sub: Sandbox, text: str) -> Handle:
    """The learner's CharTokenizer(text)."""
    return sub.call(function(sub, "CharTokenizer"), text)


def attribute(sub: Sandbox, tok: Handle, name: str, called):
    """tok.<name>, failing with a clear message when the attribute does not exist."""
    try:
        return sub.getattr(tok, name)
    except StudentError as err:
        if err.is_a("AttributeError") and err.todo_pending is None:
            fail(called, message("lesson01.missing_attribute", name=name))
        raise


def with_vocabulary(sub: Sandbox, text: str) -> Handle:
    """CharTokenizer(text) with the correct vocabulary put in place by the grader, so that
    encode and decode are judged on their own: a bug in TODO [vocab] has checks of its own."""
    tok = construct(sub, text)
    install_vocabulary(sub, tok, ref.vocabulary(text))
    return tok


def with_any_vocabulary(sub: Sandbox, text: str) -> Handle:
    """CharTokenizer(text) with a vocabulary of text in an order of the grader's own (most
    frequent character first) put in place: decode(encode(text)) == text holds for any
    one-to-one vocabulary, so the round trip of a learner's own corpus needs no reference."""
    tok = construct(sub, text)
    install_vocabulary(sub, tok, [ch for ch, _ in collections.Counter(text).most_common()])
    return tok


def install_vocabulary(sub: Sandbox, tok: Handle, chars: list[str]) -> None:
    """chars, vocab_size and the two maps of `chars` set on the learner's tokenizer."""
    for name, value in (
        ("chars", chars),
        ("vocab_size", len(chars)),
        ("stoi", dict(zip(chars, range(len(chars))))),
        ("itos", dict(enumerate(chars))),
    ):
        sub.request("setattr", target=tok, name=name, value=value)


def text_call(text: str) -> str:
    return f"CharTokenizer({show(text)})"


# ---------------------------------------------------------------- batches


def batch_call(n: int, block_size: int, batch_size: int, seed) -> dict:
    """What get_batch was called with, in both languages (a message parameter); seed None:
    generator=None, after torch.manual_seed (`seed` is then the global seed when known)."""
    if seed is None:
        return {
            "es": (
                f"get_batch(data, block_size={block_size}, batch_size={batch_size}, generator=None) con data "
                f"un tensor int64 de {n} valores distintos"
            ),
            "en": (
                f"get_batch(data, block_size={block_size}, batch_size={batch_size}, generator=None) with data "
                f"an int64 tensor of {n} distinct values"
            ),
        }
    return {
        "es": (
            f"get_batch(data, block_size={block_size}, batch_size={batch_size}, generator) con data un "
            f"tensor int64 de {n} valores distintos y generator un torch.Generator con semilla {seed}"
        ),
        "en": (
            f"get_batch(data, block_size={block_size}, batch_size={batch_size}, generator) with data an "
            f"int64 tensor of {n} distinct values and generator a torch.Generator seeded with {seed}"
        ),
    }


def short_rows(err: StudentError) -> bool:
    """Whether a learner's error from get_batch is a row of another length than the others (a
    start past the end, or a slice of the wrong length at the edge of data)."""
    text = err.message
    return err.todo_pending is None and (
        "stack expects each tensor to be equal size" in text or "out of bounds" in text
    )


def batch_hints(n: int, block_size: int):
    """A learner's error from get_batch that says which mistake it is: a row shorter than the
    others (a start past the end, or a slice of the wrong length), or randint with no room."""

    def hint_of(err: StudentError):
        if "random_ expects 'from' to be less than 'to'" in err.message:
            return message("lesson01.hint_randint_empty", n=n, T=block_size, high=n - block_size)
        if short_rows(err):
            return message("lesson01.hint_short_row", n=n, T=block_size, last=n - block_size - 1)
        return None

    return hinted(hint_of)


# The names get_batch's TODOs define, and the TODO that defines each: a name used where it was
# never defined (a line left out, a typo) is that TODO's, wherever the error is raised (y's line
# reads ix; `return x, y` is provided code).
DEFINED_IN = {"ix": "batch-offsets", "x": "targets-shift", "y": "targets-shift"}
_UNDEFINED = re.compile(r"name '(\w+)' is not defined|local variable '(\w+)'")


def fail_if_undefined(err: StudentError, called, judging: str) -> None:
    """Fails when the learner's error is a name of get_batch's TODOs used undefined (NameError,
    UnboundLocalError): as this check's own when the name is its TODO's (`judging`), otherwise
    saying it waits on the TODO that defines it. Returns for any other error."""
    found = _UNDEFINED.search(err.message) if err.todo_pending is None else None
    todo = DEFINED_IN.get(next((g for g in found.groups() if g), "")) if found else None
    if todo is None:
        return
    name = next(g for g in found.groups() if g)
    fail(
        called,
        describe_student_error(err, None, {}),
        message("lesson01.undefined_name", name=name, todo=todo),
        waits_on=None if todo == judging else todo,
    )


def get_batch(
    sub: Sandbox,
    data: torch.Tensor,
    block_size: int,
    batch_size: int,
    seed: int | None,
    *,
    global_seed: int | None = None,
    hints: bool = True,
    judging: str = "targets-shift",
):
    """(called, x, y): what was called (a message) and the learner's get_batch result, with a
    fresh worker generator seeded with `seed` (None: generator=None, torch's global generator
    per the contract); `global_seed` also reseeds torch's global generator first (to catch code
    that draws from it). hints=False lets the learner's StudentError through as it is (the
    caller decides whose it is). `judging`: the TODO the calling check judges; a name of
    get_batch's TODOs used undefined fails as that TODO's (see fail_if_undefined)."""
    call = batch_call(len(data), block_size, batch_size, seed)
    called = message("lesson01.called", call=call)
    generator = worker_generator(sub, seed) if seed is not None else None
    try:
        with batch_hints(len(data), block_size) if hints else contextlib.nullcontext():
            result = sub.call_traced(
                function(sub, "get_batch"), data, block_size, batch_size, generator, seed=global_seed
            )["value"]
    except StudentError as err:
        fail_if_undefined(err, called, judging)
        raise
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        fail(called, message("lesson01.batch_not_pair", got=type_name(result)))
    for name, value in zip("xy", result):
        if not has_values(value):
            fail(called, message("lesson01.batch_not_tensor", name=name, got=type_name(value)))
    return called, result[0].cpu(), result[1].cpu()


# Seeds a check tries before it takes a crash as the learner's: a start past the end (TODO
# [batch-offsets]) breaks only the calls that draw it, so checks of TODO [targets-shift] judge
# a batch that came out whole; a slice that breaks at every start fails on every seed.
RETRIES = 8
RETRY_SEED_STEP = 7919  # the seed of try k is seed + k * RETRY_SEED_STEP


def get_batch_whole(
    sub: Sandbox,
    data: torch.Tensor,
    block_size: int,
    batch_size: int,
    seed: int,
    *,
    global_seed: int | None = None,
):
    """get_batch, retried with other seeds while it breaks with rows of different lengths, or
    (B = 1, where nothing breaks) returns a row of x or y cut short by the end of data (x whole
    and y a token short: the start just past the last valid one): the first batch that comes
    out whole. The last try reports what it gets, with hints."""
    for k in range(RETRIES - 1):
        try:
            called, x, y = get_batch(
                sub,
                data,
                block_size,
                batch_size,
                seed + RETRY_SEED_STEP * k,
                global_seed=global_seed,
                hints=False,
            )
        except StudentError as err:
            if not short_rows(err):
                raise
            continue
        if past_end_start(x, data, block_size) is None and past_end_start(y, data, block_size) is None:
            return called, x, y
    return get_batch(
        sub, data, block_size, batch_size, seed + RETRY_SEED_STEP * (RETRIES - 1), global_seed=global_seed
    )


def past_end_start(x: torch.Tensor, data: torch.Tensor, block_size: int) -> int | None:
    """Where a window of x started when one of its rows was cut short by the end of data (a
    start past the last valid one, TODO [batch-offsets]; torch.stack only breaks on it when
    another row is whole, so a batch of one row comes out (1, shorter)); None otherwise.
    A non-empty row shorter than block_size that is exactly data's tail can come from nothing
    else: a slice of the wrong length that ends at the end of data starts at a valid place
    only if it is block_size long."""
    if not has_values(x) or x.ndim != 2 or not 0 < x.shape[1] < block_size:
        return None
    tail = data[len(data) - x.shape[1] :]
    if any(torch.equal(row.to(tail.dtype), tail) for row in x):
        return len(data) - x.shape[1]
    return None


def has_values(value) -> bool:
    """A tensor whose values came back (not a meta tensor, which has only a shape)."""
    return isinstance(value, torch.Tensor) and value.device.type != "meta"


def rows_of_starts(t: torch.Tensor, data: torch.Tensor, batch_size: int, block_size: int) -> int | None:
    """How many rows t has when it is (k, block_size) with k != batch_size and every row a window
    of data: the rows were cut right, one per start, but there are k starts instead of B (the
    length of ix is TODO [batch-offsets]'s); None otherwise."""
    if not has_values(t) or t.ndim != 2 or t.shape[1] != block_size or t.shape[0] == batch_size:
        return None
    where = positions(data)
    if all(window_start(row, data, where) is not None for row in t):
        return int(t.shape[0])
    return None


def as_rows(t: torch.Tensor, batch_size: int, block_size: int) -> torch.Tensor | None:
    """t as (B, T) rows: as it is, or transposed when it came back (T, B) (a shape bug that
    checks of TODO [targets-shift] report); None when it is neither."""
    if tuple(t.shape) == (batch_size, block_size):
        return t
    if t.ndim == 2 and tuple(t.shape) == (block_size, batch_size):
        return t.T
    return None


def positions(data: torch.Tensor) -> dict[int, int]:
    """{value: its index} of data, whose values are distinct."""
    return {int(v): i for i, v in enumerate(data.tolist())}


def window_start(row: torch.Tensor, data: torch.Tensor, where: dict[int, int]) -> int | None:
    """Where `row` sits in data if it is len(row) consecutive tokens of it; None otherwise.
    `where` is positions(data)."""
    if row.ndim != 1 or row.numel() == 0 or row.is_floating_point() and not torch.equal(row, row.round()):
        return None
    values = row.to(torch.int64)
    start = where.get(int(values[0]))
    if start is None or start + len(values) > len(data):
        return None
    return start if torch.equal(data.narrow(0, start, len(values)), values) else None
