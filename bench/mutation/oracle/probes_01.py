"""Lesson 01 (data.py) probes: the character tokenizer, split and get_batch.

Probe space:
- CharTokenizer on five texts: the lesson's corpus (load_corpus), a text whose edges hold
  whitespace found nowhere else ("\\t" first, "\\n" and "\\r" last) with multi-byte characters
  (ñ, ¿, —, an emoji), a one-character text, the empty text, and digits with both cases. Outputs:
  chars, vocab_size (and its type), stoi and itos as dicts.
- encode/decode on every tokenizer: its whole vocabulary, substrings, the empty string; decode of
  a list, of a 1-D int64 tensor and of numpy ints; the round trip.
- unknown characters (ValueError): one with a lower-case form in the vocabulary (K, Ñ, É),
  one without (W), multi-byte ones (€, an emoji, a combining accent), at positions 0, 3 and 11.
  Outputs: the exception's type, whether its message names the character and the position.
- split: N in {1, 10, 11, 37, 1000} x val_fraction in {0.1, 0.25, 1/3, 0.5, 0.0}, int64 and
  int32 data. Outputs: train and val (values, dtype, shape).
- get_batch: (N, block_size, batch_size) with every size different, T = 1, windows that leave
  one or two valid starts (N = T + 1, T + 2), seeds 0, 1, 2 with a torch.Generator and with
  generator=None under torch.manual_seed; int64 and int32 data. Outputs: x and y (values,
  dtype, shape) and the generator's next draw (an extra or missing draw shows).
- the lesson's own pipeline: corpus -> encode -> split -> get_batch -> decode.
"""

from __future__ import annotations

import re

import numpy as np
import torch

from bench.mutation.oracle.probing import SEEDS, gen, load_modules, next_draw

TEXTS = {
    "edges": "\tla niña vio 🐙 —¿qué? Ñu dijo: ¡ay!\n\r",
    "one-char": "aaaa",
    "empty": "",
    "digits-cases": "Zz9 0aAz",
}

# (text name or "corpus", the string to encode, the unknown character's position).
UNKNOWN = [
    ("corpus", "Kilo", 0),  # 'k' is in the corpus, 'K' is not
    ("corpus", "el Ñandú", 3),  # 'ñ' yes, 'Ñ' no, and two bytes in UTF-8
    ("corpus", "la casa de W", 11),  # neither 'w' nor 'W'
    ("corpus", "Había €", 6),  # three bytes
    ("corpus", "🐙", 0),  # four bytes
    ("corpus", "cafe\u0301", 4),  # a combining accent
    ("edges", "la NIÑA", 3),  # upper-case forms of text that is in the vocabulary
    ("digits-cases", "zZ9b", 3),
]


def load(folder):
    return load_modules(folder, ["data"])


def _tokenizer(lesson, which):
    text = lesson.data.load_corpus() if which == "corpus" else TEXTS[which]
    return text, lesson.data.CharTokenizer(text)


def probe_vocab(which, lesson, out):
    _, tok = _tokenizer(lesson, which)
    out["chars"] = list(tok.chars)
    out["vocab_size"] = tok.vocab_size
    out["stoi"] = dict(tok.stoi)
    out["itos"] = dict(tok.itos)


def probe_encode_decode(which, lesson, out):
    text, tok = _tokenizer(lesson, which)
    vocab = "".join(tok.chars)
    pieces = [vocab, vocab[::-1], text[:40], text[-40:], "", text[: len(text) // 2 + 1][-7:]]
    for i, s in enumerate(pieces):
        ids = tok.encode(s)
        out[f"encode[{i}]"] = ids
        out[f"decode[{i}]"] = tok.decode(ids)
        out[f"decode-tensor[{i}]"] = tok.decode(torch.tensor(ids, dtype=torch.long))
        out[f"decode-numpy[{i}]"] = tok.decode(list(np.array(ids, dtype=np.int64)))


def probe_unknown(which, s, pos, lesson, out):
    _, tok = _tokenizer(lesson, which)
    try:
        out["returns"] = tok.encode(s)
    except Exception as exc:  # the expected path: which exception, and what its message names
        message = str(exc)
        out["raises"] = type(exc).__name__
        out["names-char"] = s[pos] in message or repr(s[pos]) in message
        out["names-position"] = str(pos) in re.findall(r"\d+", message)


def probe_split(n, frac, dtype, lesson, out):
    data = (torch.arange(n) * 7 + 3).to(dtype)
    parts = lesson.data.split(data, val_fraction=frac)
    out["count"] = len(parts)
    train, val = parts
    out["train"] = train
    out["val"] = val
    out["data-untouched"] = data


def probe_split_default(lesson, out):
    data = torch.arange(55) * 2
    train, val = lesson.data.split(data)
    out["train"] = train
    out["val"] = val


def probe_batch(n, block_size, batch_size, seed, use_generator, dtype, lesson, out):
    data = torch.arange(100, 100 + n).to(dtype)
    if use_generator:
        g = gen(seed)
        x, y = lesson.data.get_batch(data, block_size, batch_size, g)
        out["next-draw"] = next_draw(g)
    else:
        torch.manual_seed(seed)
        x, y = lesson.data.get_batch(data, block_size, batch_size)
        out["next-draw"] = next_draw()
    out["x"] = x
    out["y"] = y


def probe_pipeline(lesson, out):
    d = lesson.data
    text = d.load_corpus()
    tok = d.CharTokenizer(text)
    data = torch.tensor(tok.encode(text), dtype=torch.long)
    train, val = d.split(data)
    out["sizes"] = [len(train), len(val)]
    x, y = d.get_batch(train, 16, 3, gen(0))
    out["x"] = x
    out["y"] = y
    out["text"] = [tok.decode(row.tolist()) for row in x]
    xv, _ = d.get_batch(val, 24, 2, gen(5))
    out["val-text"] = [tok.decode(row) for row in xv]


def _bind(fn, *args):
    return lambda lesson, out: fn(*args, lesson, out)


BATCHES = [
    # (N, block_size, batch_size): every size different; one or two valid starts; T = 1.
    (50, 8, 5),
    (9, 8, 16),
    (10, 8, 32),
    (300, 1, 6),
    (1000, 16, 3),
]


def probes():
    for which in ("corpus", *TEXTS):
        yield f"vocab {which}", _bind(probe_vocab, which)
        yield f"encode-decode {which}", _bind(probe_encode_decode, which)
    for which, s, pos in UNKNOWN:
        yield f"unknown char {s[pos]!r} at {pos} ({which})", _bind(probe_unknown, which, s, pos)
    for n in (1, 10, 11, 37, 1000):
        for frac in (0.1, 0.25, 1 / 3, 0.5, 0.0):
            yield f"split N={n} val_fraction={frac:.3g}", _bind(probe_split, n, frac, torch.long)
    yield "split int32 N=37 val_fraction=0.25", _bind(probe_split, 37, 0.25, torch.int32)
    yield "split default val_fraction", probe_split_default
    for n, t, b in BATCHES:
        for seed in SEEDS:
            yield (
                f"get_batch N={n} T={t} B={b} seed={seed}",
                _bind(probe_batch, n, t, b, seed, True, torch.long),
            )
        yield f"get_batch N={n} T={t} B={b} generator=None", _bind(probe_batch, n, t, b, 3, False, torch.long)
    yield "get_batch int32 data", _bind(probe_batch, 60, 7, 4, 0, True, torch.int32)
    yield "pipeline", probe_pipeline
