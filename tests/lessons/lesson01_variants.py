"""Lesson 01's catalog of variant submissions (see tests/support/variants.py for the rules), used to
prove its hidden graders. Each variant edits solutions/01-tokens-y-lotes/data.py with its
region markers stripped. A plain module: tests/lessons/test_variants.py grades every variant.
"""

from __future__ import annotations

from support.variants import Variant

DATA = "data.py"


# --------------------------------------------------------------------------- fragments
# Exact lines of the marker-stripped solution that several variants edit.

CHARS = "self.chars = sorted(set(text))"
SIZE = "self.vocab_size = len(self.chars)"
STOI = "self.stoi = {ch: i for i, ch in enumerate(self.chars)}"
ITOS = "self.itos = {i: ch for i, ch in enumerate(self.chars)}"
ENCODE = """\
        ids = []
        for pos, ch in enumerate(s):
            if ch not in self.stoi:
                msg = f"carácter desconocido {ch!r} en la posición {pos}: no está en el vocabulario"
                raise ValueError(msg)
            ids.append(self.stoi[ch])
        return ids
"""
ERROR_TEXT = 'f"carácter desconocido {ch!r} en la posición {pos}: no está en el vocabulario"'
DECODE = 'return "".join(self.itos[int(i)] for i in ids)'
N_TRAIN = "n_train = int(len(data) * (1 - val_fraction))"
SPLIT_RETURN = "return data[:n_train], data[n_train:]"
IX = "ix = torch.randint(len(data) - block_size, (batch_size,), generator=generator)"
X = "x = torch.stack([data[i : i + block_size] for i in ix])"
Y = "y = torch.stack([data[i + 1 : i + 1 + block_size] for i in ix])"
XY = f"""\
    {X}  # (B, T)
    {Y}  # (B, T)
"""


# --------------------------------------------------------------------------- buggy

BUGGY: list[Variant] = [
    # ---- TODO [vocab]
    Variant(
        "vocab-appearance-order",
        DATA,
        CHARS,
        "self.chars = list(dict.fromkeys(text))",
        "vocab",
        "characters in order of appearance, not sorted",
    ),
    Variant(
        "vocab-reverse-sorted",
        DATA,
        CHARS,
        "self.chars = sorted(set(text), reverse=True)",
        "vocab",
        "sorted in decreasing order",
    ),
    Variant(
        "vocab-duplicates",
        DATA,
        CHARS,
        "self.chars = sorted(text)",
        "vocab",
        "sorted(text) keeps every repeated character",
    ),
    Variant(
        "vocab-lowercased",
        DATA,
        CHARS,
        "self.chars = sorted(set(text.lower()))",
        "vocab",
        "vocabulary of the lowercased text: capitals are missing",
    ),
    Variant(
        "vocab-words",
        DATA,
        CHARS,
        "self.chars = sorted(set(text.split()))",
        "vocab",
        "a vocabulary of words, not characters",
    ),
    Variant(
        "vocab-size-of-text",
        DATA,
        SIZE,
        "self.vocab_size = len(text)",
        "vocab",
        "vocab_size counts the text, not the distinct characters",
    ),
    Variant(
        "stoi-from-set",
        DATA,
        STOI,
        "self.stoi = {ch: i for i, ch in enumerate(set(text))}",
        "vocab",
        "stoi numbered in set order: stoi and itos are not inverses",
    ),
    Variant(
        "itos-copy-of-stoi",
        DATA,
        ITOS,
        "self.itos = {ch: i for i, ch in enumerate(self.chars)}",
        "vocab",
        "itos copied from stoi: character -> id again",
    ),
    Variant(
        "vocab-size-plus-one",
        DATA,
        SIZE,
        "self.vocab_size = len(self.chars) + 1",
        "vocab",
        "one id reserved for padding or unknown: vocab_size off by one",
    ),
    Variant(
        "stoi-one-based",
        DATA,
        STOI,
        "self.stoi = {ch: i + 1 for i, ch in enumerate(self.chars)}",
        "vocab",
        "ids counted from 1 (0 kept for padding)",
    ),
    # issue 31: a text whose edges hold whitespace found nowhere else in it (EDGES)
    Variant(
        "vocab-stripped",
        DATA,
        CHARS,
        "self.chars = sorted(set(text.strip()))",
        "vocab",
        "vocabulary of the stripped text: edge whitespace lost",
    ),
    # ---- TODO [encode-decode]
    # issue 31: unknown characters of every kind (one byte, other case known, after multi-byte ones)
    Variant(
        "encode-unknown-lowercased",
        DATA,
        "            if ch not in self.stoi:\n",
        "            if ch not in self.stoi:\n                ch = ch.lower()\n            if ch not in self.stoi:\n",
        "encode-decode",
        "an unknown capital falls back on its lower case in silence",
    ),
    Variant(
        "encode-checks-only-non-ascii",
        DATA,
        "            if ch not in self.stoi:\n",
        "            if not ch.isascii() and ch not in self.stoi:\n",
        "encode-decode",
        "only non-ASCII characters are taken as possibly unknown: a bare KeyError for the rest",
    ),
    Variant(
        "encode-error-byte-position",
        DATA,
        ERROR_TEXT,
        'f"carácter desconocido {ch!r} en la posición {len(s[:pos].encode())}"',
        "encode-decode",
        "the position counted in UTF-8 bytes",
    ),
    Variant(
        "decode-joins-with-spaces",
        DATA,
        DECODE,
        'return " ".join(self.itos[int(i)] for i in ids)',
        "encode-decode",
        "decode puts a space between characters",
    ),
    Variant(
        "decode-returns-list",
        DATA,
        DECODE,
        "return [self.itos[int(i)] for i in ids]",
        "encode-decode",
        "decode returns the list of characters",
    ),
    Variant(
        "encode-skips-unknown",
        DATA,
        ENCODE,
        "        return [self.stoi[ch] for ch in s if ch in self.stoi]\n",
        "encode-decode",
        "unknown characters silently dropped",
    ),
    Variant(
        "encode-unknown-to-zero",
        DATA,
        ENCODE,
        "        return [self.stoi.get(ch, 0) for ch in s]\n",
        "encode-decode",
        "unknown characters silently mapped to id 0",
    ),
    Variant(
        "encode-keyerror",
        DATA,
        ENCODE,
        "        return [self.stoi[ch] for ch in s]\n",
        "encode-decode",
        "the dictionary's bare KeyError escapes",
    ),
    Variant(
        "encode-code-points",
        DATA,
        "ids.append(self.stoi[ch])",
        "ids.append(ord(ch))",
        "encode-decode",
        "Unicode code points (ord) instead of vocabulary ids",
    ),
    Variant(
        "encode-returns-tensor",
        DATA,
        "        return ids\n",
        "        return torch.tensor(ids)\n",
        "encode-decode",
        "encode returns a tensor instead of a list of ints",
    ),
    Variant(
        "encode-error-without-char",
        DATA,
        ERROR_TEXT,
        'f"carácter desconocido en la posición {pos}"',
        "encode-decode",
        "the error does not name the character",
    ),
    Variant(
        "encode-error-without-position",
        DATA,
        ERROR_TEXT,
        'f"carácter desconocido {ch!r}"',
        "encode-decode",
        "the error does not say where the character is",
    ),
    Variant(
        "encode-error-one-based",
        DATA,
        ERROR_TEXT,
        'f"carácter desconocido {ch!r} en la posición {pos + 1}"',
        "encode-decode",
        "the position counted from 1",
    ),
    Variant(
        "encode-raises-keyerror-with-message",
        DATA,
        "raise ValueError(msg)",
        "raise KeyError(msg)",
        "encode-decode",
        "a KeyError with a good message instead of a ValueError",
    ),
    Variant(
        "encode-raises-exception",
        DATA,
        "raise ValueError(msg)",
        "raise Exception(msg)",
        "encode-decode",
        "a bare Exception instead of a ValueError",
    ),
    # ---- TODO [split]
    Variant(
        "split-shuffles",
        DATA,
        N_TRAIN,
        f"data = data[torch.randperm(len(data))]\n    {N_TRAIN}",
        "split",
        "shuffles the tokens before cutting",
    ),
    Variant(
        "split-fraction-inverted",
        DATA,
        N_TRAIN,
        "n_train = int(len(data) * val_fraction)",
        "split",
        "val_fraction taken as the training fraction",
    ),
    Variant(
        "split-ignores-fraction",
        DATA,
        N_TRAIN,
        "n_train = int(len(data) * 0.9)",
        "split",
        "always 10 % validation",
    ),
    Variant(
        "split-swapped",
        DATA,
        SPLIT_RETURN,
        "return data[n_train:], data[:n_train]",
        "split",
        "returns (val, train)",
    ),
    Variant(
        "split-overlap",
        DATA,
        SPLIT_RETURN,
        "return data[:n_train + 1], data[n_train:]",
        "split",
        "one token in both parts",
    ),
    # n_val rounds to 0 on a short text: data[-0:] is the whole of data
    Variant(
        "split-negative-index",
        DATA,
        f"{N_TRAIN}\n",
        """\
n_val = int(len(data) * val_fraction)
    n_train = len(data) - n_val
""",
        "split",
        "counts val from the end: data[:-n_val], data[-n_val:]",
        also=((SPLIT_RETURN, "return data[:-n_val], data[-n_val:]"),),
    ),
    Variant(
        "split-train-from-end",
        DATA,
        SPLIT_RETURN,
        "return data[len(data) - n_train:], data[:len(data) - n_train]",
        "split",
        "train cut from the end, val from the beginning",
    ),
    # issue 31: dtypes of every returned tensor
    Variant(
        "split-float",
        DATA,
        SPLIT_RETURN,
        "return data[:n_train].float(), data[n_train:].float()",
        "split",
        "train and val cast to float32",
    ),
    # ---- TODO [batch-offsets]
    Variant(
        "offsets-off-by-one",
        DATA,
        IX,
        "ix = torch.randint(len(data) - block_size - 1, (batch_size,), generator=generator)",
        "batch-offsets",
        "the last valid window can never come out",
    ),
    # a start past the end breaks the get_batch calls that draw it: the checks of
    # targets-shift judge a batch that came out whole, batch-range blames the starts
    Variant(
        "offsets-overflow",
        DATA,
        IX,
        "ix = torch.randint(len(data) - block_size + 1, (batch_size,), generator=generator)",
        "batch-offsets",
        "a start one past the last valid one: y comes out short",
    ),
    Variant(
        "offsets-whole-length",
        DATA,
        IX,
        "ix = torch.randint(len(data), (batch_size,), generator=generator)",
        "batch-offsets",
        "starts anywhere in data: windows run past the end",
    ),
    Variant(
        "offsets-global-rng",
        DATA,
        IX,
        "ix = torch.randint(len(data) - block_size, (batch_size,))",
        "batch-offsets",
        "ignores generator: draws from torch's global generator",
    ),
    Variant(
        "offsets-own-generator",
        DATA,
        IX,
        "ix = torch.randint(len(data) - block_size, (batch_size,), generator=torch.Generator().manual_seed(0))",
        "batch-offsets",
        "a fixed generator of its own",
    ),
    Variant(
        "offsets-constant",
        DATA,
        IX,
        "ix = torch.zeros(batch_size, dtype=torch.long)",
        "batch-offsets",
        "every window starts at 0",
    ),
    Variant(
        "offsets-never-zero",
        DATA,
        IX,
        "ix = torch.randint(1, len(data) - block_size, (batch_size,), generator=generator)",
        "batch-offsets",
        "randint from 1: the first window never comes out",
    ),
    Variant(
        "offsets-python-random",
        DATA,
        IX,
        """\
import random
    ix = [random.randint(0, len(data) - block_size - 1) for _ in range(batch_size)]""",
        "batch-offsets",
        "Python's random module: right range, but the generator is ignored",
    ),
    # issue 31: generator=None draws from torch's global generator
    Variant(
        "offsets-none-own-generator",
        DATA,
        IX,
        f"if generator is None:\n        generator = torch.Generator()\n    {IX}",
        "batch-offsets",
        "a fresh torch.Generator() when none is given: the same batch whatever the global seed",
    ),
    # block_size starts: rows are windows cut right, one per start; only batch-offsets is charged
    Variant(
        "offsets-block-size-starts",
        DATA,
        IX,
        "ix = torch.randint(len(data) - block_size, (block_size,), generator=generator)",
        "batch-offsets",
        "block_size starts instead of batch_size",
    ),
    # ---- TODO [targets-shift]
    Variant(
        "targets-not-shifted",
        DATA,
        Y,
        "y = torch.stack([data[i : i + block_size] for i in ix])",
        "targets-shift",
        "y equals x",
    ),
    # data[i - 1 : ...] with i = 0 is empty: batch-range says it waits on targets-shift
    Variant(
        "targets-shifted-left",
        DATA,
        Y,
        "y = torch.stack([data[i - 1 : i - 1 + block_size] for i in ix])",
        "targets-shift",
        "y shifted the wrong way",
    ),
    # y runs one past the end at the last window: batch-range says it waits on targets-shift
    Variant(
        "targets-shifted-by-two",
        DATA,
        Y,
        "y = torch.stack([data[i + 2 : i + 2 + block_size] for i in ix])",
        "targets-shift",
        "y shifted two positions",
    ),
    Variant(
        "targets-from-x", DATA, Y, "y = x[:, 1:]", "targets-shift", "y cut from x: one token short (B, T - 1)"
    ),
    # the last window's y is one token shorter than the others: batch-range waits on it
    Variant(
        "targets-one-too-long",
        DATA,
        Y,
        "y = torch.stack([data[i + 1 : i + 2 + block_size] for i in ix])",
        "targets-shift",
        "y one token longer than x",
    ),
    # issue 31 blame: x not (B, T) windows, or never defined (NameError in the provided `return x, y`):
    # batch-range cannot read the starts off x and says it waits on targets-shift
    Variant(
        "targets-x-one-short",
        DATA,
        X,
        "x = torch.stack([data[i : i + block_size - 1] for i in ix])",
        "targets-shift",
        "x's windows one token short",
    ),
    Variant(
        "targets-x-misnamed",
        DATA,
        X,
        "xb = torch.stack([data[i : i + block_size] for i in ix])",
        "targets-shift",
        "x stored under another name: `return x, y` raises NameError",
    ),
    Variant(
        "batch-int32",
        DATA,
        "    return x, y\n",
        "    return x.int(), y.int()\n",
        "targets-shift",
        "x and y cast to int32",
    ),
    Variant(
        "targets-x-y-swapped",
        DATA,
        XY,
        """\
    x = torch.stack([data[i + 1 : i + 1 + block_size] for i in ix])  # (B, T)
    y = torch.stack([data[i : i + block_size] for i in ix])  # (B, T)
""",
        "targets-shift",
        "x is the shifted one",
    ),
    Variant(
        "batch-returns-y-x", DATA, "    return x, y\n", "    return y, x\n", "targets-shift", "returns (y, x)"
    ),
    Variant(
        "batch-float",
        DATA,
        X,
        "x = torch.stack([data[i : i + block_size] for i in ix]).float()",
        "targets-shift",
        "x as float32: no longer ids",
    ),
    # The device contract, seen on the meta device: rows copied out through Python or into a
    # tensor made on the CPU would leave a GPU batch on the CPU.
    Variant(
        "batch-through-tolist",
        DATA,
        XY,
        """\
    x = torch.tensor([data[i : i + block_size].tolist() for i in ix])  # (B, T)
    y = torch.tensor([data[i + 1 : i + 1 + block_size].tolist() for i in ix])  # (B, T)
""",
        "targets-shift",
        "rows through .tolist() and torch.tensor: always on the CPU",
    ),
    Variant(
        "batch-filled-cpu-zeros",
        DATA,
        XY,
        """\
    x = torch.zeros(batch_size, block_size, dtype=torch.long)  # (B, T)
    y = torch.zeros(batch_size, block_size, dtype=torch.long)  # (B, T)
    for b, i in enumerate(ix):
        x[b] = data[i : i + block_size]
        y[b] = data[i + 1 : i + 1 + block_size]
""",
        "targets-shift",
        "fills torch.zeros made on the CPU: a GPU batch comes back on the CPU",
    ),
    Variant(
        "batch-stacked-on-dim-1",
        DATA,
        XY,
        """\
    x = torch.stack([data[i : i + block_size] for i in ix], dim=1)  # (T, B)
    y = torch.stack([data[i + 1 : i + 1 + block_size] for i in ix], dim=1)  # (T, B)
""",
        "targets-shift",
        "stacked along dim 1: (T, B)",
    ),
]


# --------------------------------------------------------------------------- correct

CORRECT: list[Variant] = [
    Variant(
        "chars-dict-fromkeys",
        DATA,
        CHARS,
        "self.chars = sorted(list(dict.fromkeys(text)))",
        note="sorted(dict.fromkeys(text)) instead of sorted(set(text))",
    ),
    Variant(
        "stoi-zip",
        DATA,
        STOI,
        "self.stoi = dict(zip(self.chars, range(len(self.chars))))",
        note="dict(zip(...)) instead of a comprehension",
    ),
    Variant(
        "itos-from-stoi",
        DATA,
        ITOS,
        "self.itos = {i: ch for ch, i in self.stoi.items()}",
        note="itos inverted from stoi",
    ),
    Variant(
        "itos-list",
        DATA,
        ITOS,
        "self.itos = list(self.chars)",
        note="itos as a list: itos[i] is still chars[i]",
    ),
    Variant(
        "encode-try-except",
        DATA,
        ENCODE,
        """\
        try:
            return [self.stoi[ch] for ch in s]
        except KeyError as err:
            ch = err.args[0]
            raise ValueError(f"{ch!r} (posición {s.index(ch)}) no está en el vocabulario") from None
""",
        note="a comprehension, and the KeyError turned into a ValueError",
    ),
    Variant(
        "encode-valueerror-subclass",
        DATA,
        "raise ValueError(msg)",
        "raise UnknownCharacterError(msg)",
        note="an exception class of its own, a subclass of ValueError",
        also=(
            (
                "class CharTokenizer:",
                "class UnknownCharacterError(ValueError):\n    pass\n\n\nclass CharTokenizer:",
            ),
        ),
    ),
    Variant(
        "encode-index-in-message",
        DATA,
        ERROR_TEXT,
        'f"{ch!r} no está en el vocabulario (s[{pos}])"',
        note="another wording, with the character and the index",
    ),
    Variant(
        "decode-through-chars",
        DATA,
        DECODE,
        'return "".join(self.chars[i] for i in ids)',
        note="decode indexes chars",
    ),
    Variant(
        "split-val-count-first",
        DATA,
        N_TRAIN,
        "n_train = len(data) - int(len(data) * val_fraction)",
        note="rounds val down instead of train",
    ),
    Variant(
        "split-round",
        DATA,
        N_TRAIN,
        "n_train = round(len(data) * (1 - val_fraction))",
        note="round() instead of int()",
    ),
    Variant(
        "split-ceil-val",
        DATA,
        N_TRAIN,
        "n_train = len(data) - math.ceil(len(data) * val_fraction)",
        note="val rounded up with math.ceil",
        also=(("import torch\n", "import math\n\nimport torch\n"),),
    ),
    Variant(
        "offsets-default-generator",
        DATA,
        IX,
        "ix = torch.randint(len(data) - block_size, (batch_size,), "
        "generator=generator if generator is not None else torch.default_generator)",
        note="torch.default_generator named when generator is None: the global generator all the same",
    ),
    Variant(
        "split-torch-split",
        DATA,
        SPLIT_RETURN,
        "return tuple(torch.split(data, [n_train, len(data) - n_train]))",
        note="torch.split into two pieces",
    ),
    Variant(
        "offsets-low-and-high",
        DATA,
        IX,
        "ix = torch.randint(0, len(data) - block_size, (batch_size,), generator=generator)",
        note="randint(low, high, ...)",
    ),
    Variant(
        "offsets-rand-floor",
        DATA,
        IX,
        "ix = (torch.rand(batch_size, generator=generator) * (len(data) - block_size)).long()",
        note="uniform floats scaled and floored: another random stream, same distribution",
    ),
    Variant(
        "batch-index-matrix",
        DATA,
        XY,
        """\
    pos = ix[:, None] + torch.arange(block_size)  # (B, T)
    x = data[pos]  # (B, T)
    y = data[pos + 1]  # (B, T)
""",
        note="one index matrix instead of torch.stack",
    ),
    Variant(
        "batch-one-window",
        DATA,
        XY,
        """\
    chunks = torch.stack([data[i : i + block_size + 1] for i in ix])  # (B, T + 1)
    x, y = chunks[:, :block_size], chunks[:, 1:]  # (B, T), (B, T)
""",
        note="one window of T + 1 tokens per row, then x and y from it",
    ),
    Variant(
        "batch-unfold",
        DATA,
        XY,
        """\
    windows = data.unfold(0, block_size + 1, 1)[ix]  # (B, T + 1)
    x, y = windows[:, :-1], windows[:, 1:]  # (B, T), (B, T)
""",
        note="windows of T + 1 tokens with unfold, then x and y from each",
    ),
]


# The practice agreement CI sample (tests/lessons/test_practice_agreement.py): buggy variants
# whose diagnosis the recording answers. A vocabulary in order of appearance and an inverted
# split fraction are named by a mistake asked for while recording (ref.appearance_order,
# ref.val_sizes of 1 - f); a start one past the last valid one once cost batch-shapes too at
# the practice seed (a one-row batch whose y came out a token short). bench/bench_practice_agreement.py
# compares every buggy variant.
PRACTICE_SAMPLE = ("vocab-appearance-order", "split-fraction-inverted", "offsets-overflow")
