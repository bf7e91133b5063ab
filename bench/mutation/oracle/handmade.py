"""Hand-written mutants that measure the probes' reach: each is one text substitution in one
solved lesson file, with the verdict the oracle must give ("differs" for a real change of
behaviour the issue names, "equivalent" for a rewrite that behaves the same).

`python3 -m bench.mutation.oracle --handmade [--lesson NN]` runs them all and prints a table;
tests/mutation/test_oracle.py runs a few. `apply` makes a candidate root: a copy of the
reference root with the substitution made (its `find` must occur exactly once).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Handmade:
    name: str
    lesson: str
    file: str  # path under the root, e.g. "01-tokens-y-lotes/data.py"
    find: str
    replace: str
    expect: str  # "differs" or "equivalent"
    note: str = ""

    def apply(self, reference_root: Path, dest: Path) -> Path:
        shutil.copytree(reference_root, dest, ignore=shutil.ignore_patterns("__pycache__"))
        path = Path(dest) / self.file
        text = path.read_text(encoding="utf-8")
        count = text.count(self.find)
        if count != 1:
            raise ValueError(f"handmade mutant {self.name!r}: `find` occurs {count} times in {self.file}")
        path.write_text(text.replace(self.find, self.replace), encoding="utf-8")
        return Path(dest)


D01, D02, D03 = "01-tokens-y-lotes/data.py", "02-bigrama/bigram.py", "03-atencion-causal/attention.py"
N03, D04, D05, D06 = (
    "03-atencion-causal/attention_numpy.py",
    "04-bloque-transformer/model.py",
    "05-entrenar/train.py",
    "06-generar/generate.py",
)

MUTANTS = [
    # --- 01
    Handmade(
        "01-split-floats",
        "01",
        D01,
        "return data[:n_train], data[n_train:]",
        "return data[:n_train].float(), data[n_train:].float()",
        "differs",
        "split returns floats",
    ),
    Handmade(
        "01-vocab-strip",
        "01",
        D01,
        "self.chars = sorted(set(text))",
        "self.chars = sorted(set(text.strip()))",
        "differs",
        "edge whitespace found nowhere else is lost",
    ),
    Handmade(
        "01-unknown-lower",
        "01",
        D01,
        "if ch not in self.stoi:",
        "if ch.lower() not in self.stoi:",
        "differs",
        "an unknown character with a lower-case form slips past the check",
    ),
    Handmade(
        "01-offsets-short",
        "01",
        D01,
        "torch.randint(len(data) - block_size,",
        "torch.randint(len(data) - block_size - 1,",
        "differs",
        "the last valid window never drawn",
    ),
    Handmade(
        "01-global-generator",
        "01",
        D01,
        "block_size, (batch_size,), generator=generator)  # (B,)",
        "block_size, (batch_size,))  # (B,)",
        "differs",
        "the generator is ignored",
    ),
    Handmade(
        "01-itos-dict",
        "01",
        D01,
        "self.itos = {i: ch for i, ch in enumerate(self.chars)}",
        "self.itos = dict(enumerate(self.chars))",
        "equivalent",
    ),
    Handmade(
        "01-int-offsets",
        "01",
        D01,
        "x = torch.stack([data[i : i + block_size] for i in ix])",
        "x = torch.stack([data[int(i) : int(i) + block_size] for i in ix])",
        "equivalent",
    ),
    # --- 02
    Handmade(
        "02-targets-transposed",
        "02",
        D02,
        "targets.view(B * T)",
        "targets.transpose(0, 1).reshape(B * T)",
        "differs",
        "logits and targets rows no longer the same position",
    ),
    Handmade(
        "02-positions-cpu",
        "02",
        D02,
        "pos = torch.arange(T, dtype=torch.long, device=idx.device)",
        "pos = torch.arange(T, dtype=torch.long)",
        "differs",
        "positions made on the CPU",
    ),
    Handmade(
        "02-first-step",
        "02",
        D02,
        "logits = logits[:, -1, :]  # (B, V)",
        "logits = logits[:, 0, :]  # (B, V)",
        "differs",
        "the first position's logits",
    ),
    Handmade(
        "02-softmax-dim1",
        "02",
        D02,
        "probs = F.softmax(logits, dim=-1)",
        "probs = F.softmax(logits, dim=1)",
        "equivalent",
        "(B, V): dim 1 is the last",
    ),
    # --- 03
    Handmade(
        "03-mask-not-cropped",
        "03",
        D03,
        "self.mask[:, :, :T, :T] == 0",
        "self.mask == 0",
        "differs",
        "only visible with T < block_size",
    ),
    Handmade("03-scale-by-C", "03", D03, "(1.0 / math.sqrt(hs))", "(1.0 / math.sqrt(C))", "differs"),
    Handmade(
        "03-fused-dropout-constant",
        "03",
        D03,
        "dropout_p=self.dropout if self.training else 0.0",
        "dropout_p=0.1 if self.training else 0.0",
        "differs",
        "a dropout probability written as a constant",
    ),
    Handmade(
        "03-fused-qk-swapped",
        "03",
        D03,
        "q, k, v,\n            attn_mask=None",
        "k, q, v,\n            attn_mask=None",
        "differs",
        "the flagship gap of issue 31",
    ),
    Handmade(
        "03-np-softmax-axis",
        "03",
        N03,
        "np.max(x, axis=axis, keepdims=True)",
        "np.max(x, axis=-1, keepdims=True)",
        "differs",
        "the shift taken along another axis",
    ),
    Handmade(
        "03-np-mask-small",
        "03",
        N03,
        "return np.where(future, -1e9, 0.0)",
        "return np.where(future, -1e4, 0.0)",
        "differs",
        "not the very large negative value the spec names",
    ),
    Handmade(
        "03-mask-fill-1e9",
        "03",
        D03,
        '== 0, float("-inf"))',
        "== 0, -1e9)",
        "equivalent",
        "-1e9 also gives exactly 0 after softmax",
    ),
    Handmade(
        "03-divide-scale",
        "03",
        D03,
        "* (1.0 / math.sqrt(hs))",
        "/ math.sqrt(hs)",
        "equivalent",
        "a float rounding apart",
    ),
    # --- 04
    Handmade(
        "04-init-by-n_head",
        "04",
        D04,
        "std=0.02 / math.sqrt(2 * cfg.n_layer)",
        "std=0.02 / math.sqrt(2 * cfg.n_head)",
        "differs",
        "visible only when n_head != n_layer",
    ),
    Handmade(
        "04-mlp-dropout-constant",
        "04",
        D04,
        "self.dropout = nn.Dropout(cfg.dropout)",
        "self.dropout = nn.Dropout(0.1)",
        "differs",
    ),
    Handmade(
        "04-post-norm", "04", D04, "a = self.attn(self.ln_1(x))", "a = self.ln_1(self.attn(x))", "differs"
    ),
    Handmade(
        "04-gelu-tanh",
        "04",
        D04,
        "self.gelu = nn.GELU()",
        'self.gelu = nn.GELU(approximate="tanh")',
        "differs",
    ),
    Handmade(
        "04-tie-other-way",
        "04",
        D04,
        "self.transformer.wte.weight = self.lm_head.weight",
        "self.lm_head.weight = self.transformer.wte.weight",
        "equivalent",
        "a correct tying the other way",
    ),
    # --- 05
    Handmade(
        "05-zero-weights",
        "05",
        D05,
        "optimizer.zero_grad(set_to_none=True)",
        "[p.data.zero_() for p in model.parameters()]",
        "differs",
        "zeroes the weights, not the gradients",
    ),
    Handmade(
        "05-decay-dim-gt2",
        "05",
        D05,
        "decay = [p for p in params if p.dim() >= 2]",
        "decay = [p for p in params if p.dim() > 2]",
        "differs",
    ),
    Handmade(
        "05-eval-not-restored", "05", D05, "model.train(was_training)  #", "model.train()  #", "differs"
    ),
    Handmade(
        "05-clip-value",
        "05",
        D05,
        "        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)\n",
        "        torch.nn.utils.clip_grad_value_(model.parameters(), grad_clip)\n",
        "differs",
    ),
    Handmade(
        "05-warmup-no-plus-one",
        "05",
        D05,
        "return max_lr * (step + 1) / warmup_steps",
        "return max_lr * step / warmup_steps",
        "differs",
    ),
    Handmade(
        "05-grad-enabled", "05", D05, "with torch.no_grad():  #", "with torch.enable_grad():  #", "differs"
    ),
    Handmade(
        "05-zero-grad-keep",
        "05",
        D05,
        "optimizer.zero_grad(set_to_none=True)",
        "optimizer.zero_grad(set_to_none=False)",
        "equivalent",
        "every trainable parameter gets a gradient",
    ),
    # --- 06
    Handmade(
        "06-temperature-multiply",
        "06",
        D06,
        "logits = logits / temperature",
        "logits = logits * temperature",
        "differs",
    ),
    Handmade(
        "06-top-k-le",
        "06",
        D06,
        "logits.masked_fill(logits < kth,",
        "logits.masked_fill(logits <= kth,",
        "differs",
    ),
    Handmade(
        "06-crop-batch-dim", "06", D06, "return idx[:, -block_size:]", "return idx[-block_size:]", "differs"
    ),
    Handmade(
        "06-alignment-top-left",
        "06",
        D06,
        ".tril(diagonal=T_past)",
        ".tril(diagonal=0)",
        "differs",
        "visible only with a chunk after a past",
    ),
    Handmade(
        "06-positions-from-zero",
        "06",
        D06,
        "pos = torch.arange(T_past, T_past + T, device=idx_new.device)",
        "pos = torch.arange(T, device=idx_new.device)",
        "differs",
    ),
    Handmade("06-kth-slice", "06", D06, ".values[:, [-1]]", ".values[:, -1:]", "equivalent"),
    Handmade(
        "06-argmax-unsqueeze",
        "06",
        D06,
        "return logits.argmax(dim=-1, keepdim=True)",
        "return logits.argmax(dim=-1).unsqueeze(-1)",
        "equivalent",
    ),
]

# A candidate that never returns (the oracle must time it out, not hang).
LOOPING = Handmade(
    "01-loops",
    "01",
    D01,
    "        ids = []\n",
    "        ids = []\n        while len(ids) >= 0:\n            pass\n",
    "differs",
    "encode never returns",
)


def by_name(name: str) -> Handmade:
    for mutant in (*MUTANTS, LOOPING):
        if mutant.name == name:
            return mutant
    raise KeyError(name)
