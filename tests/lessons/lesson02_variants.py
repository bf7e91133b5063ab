"""Lesson 02's catalog of variant submissions (see tests/support/variants.py for the rules), used to
prove its hidden graders. Each variant edits solutions/02-bigrama/bigram.py with its region
markers stripped. A plain module: tests/lessons/test_variants.py grades every variant.
"""

from __future__ import annotations

from support.variants import Variant

BG = "bigram.py"


# --------------------------------------------------------------------------- fragments
# Exact lines of the marker-stripped solution that several variants edit.

LOOKUP = "logits = self.token_embedding_table(idx)  # (B, T, V)"
LOSS_NONE = "            loss = None\n"
LOSS_CALL = "loss = F.cross_entropy(logits.view(B * T, V), targets.view(B * T))"
POS = "pos = torch.arange(T, dtype=torch.long, device=idx.device)  # (T,)"
POS_ADD = "x = tok + self.position_embedding_table(pos)  # (B, T, C) + (T, C) -> (B, T, C)"
LAST = "logits = logits[:, -1, :]  # (B, V)"
PROBS = "probs = F.softmax(logits, dim=-1)  # (B, V)"
DRAW = "idx_next = torch.multinomial(probs, num_samples=1, generator=generator)  # (B, 1)"
CAT = "idx = torch.cat((idx, idx_next), dim=1)  # (B, T + 1)"


# --------------------------------------------------------------------------- buggy

BUGGY: list[Variant] = [
    # ---- TODO [embedding-lookup]
    Variant(
        "lookup-transposed",
        BG,
        LOOKUP,
        "logits = self.token_embedding_table.weight.T[idx]",
        "embedding-lookup",
        "looks up the columns of the table (its transpose)",
    ),
    # logits (V, B, T): the loss checks judge the loss code with B = T = V, where it runs
    Variant(
        "lookup-columns",
        BG,
        LOOKUP,
        "logits = self.token_embedding_table.weight[:, idx]",
        "embedding-lookup",
        "indexes the second axis of the table: (V, B, T)",
    ),
    Variant(
        "lookup-one-hot-no-classes",
        BG,
        LOOKUP,
        "logits = F.one_hot(idx).float() @ self.token_embedding_table.weight",
        "embedding-lookup",
        "F.one_hot without num_classes: too few columns when idx misses the last tokens",
    ),
    Variant(
        "lookup-softmax",
        BG,
        LOOKUP,
        "logits = F.softmax(self.token_embedding_table(idx), dim=-1)",
        "embedding-lookup",
        "returns probabilities instead of logits",
    ),
    Variant(
        "lookup-log-softmax",
        BG,
        LOOKUP,
        "logits = F.log_softmax(self.token_embedding_table(idx), dim=-1)",
        "embedding-lookup",
        "returns log-probabilities instead of logits",
    ),
    # nn.Embedding refuses float indices: every check of the model waits on the lookup
    Variant(
        "lookup-float-indices",
        BG,
        LOOKUP,
        "logits = self.token_embedding_table(idx.float())",
        "embedding-lookup",
        "float indices into the table",
    ),
    Variant(
        "lookup-float64",
        BG,
        LOOKUP,
        "logits = F.one_hot(idx, self.vocab_size).double() @ self.token_embedding_table.weight.double()",
        "embedding-lookup",
        "a one-hot product in float64: the logits are no longer float32",
    ),
    # Values right, gradient cut: the table would never learn (logits-lookup asks autograd).
    # issue 31 blame: logits never defined, read by the loss code: the loss checks wait on the lookup
    Variant(
        "lookup-misnamed",
        BG,
        LOOKUP,
        "out = self.token_embedding_table(idx)  # (B, T, V)",
        "embedding-lookup",
        "the lookup stored under another name: logits is undefined",
    ),
    Variant(
        "lookup-detached",
        BG,
        LOOKUP,
        "logits = self.token_embedding_table(idx).detach()",
        "embedding-lookup",
        "detaches the logits from the graph: right values, no gradient",
    ),
    Variant(
        "lookup-weight-data",
        BG,
        LOOKUP,
        "logits = self.token_embedding_table.weight.data[idx]",
        "embedding-lookup",
        "looks up .data: right values, no gradient reaches the table",
    ),
    # ---- TODO [loss-reshape]
    Variant(
        "loss-unflattened",
        BG,
        LOSS_CALL,
        "loss = F.cross_entropy(logits, targets)",
        "loss-reshape",
        "F.cross_entropy on (B, T, V): dim 1 (T) taken as the classes",
    ),
    Variant(
        "loss-targets-transposed",
        BG,
        LOSS_CALL,
        "loss = F.cross_entropy(logits.view(B * T, V), targets.transpose(0, 1).reshape(B * T))",
        "loss-reshape",
        "targets flattened time-major, logits batch-major",
    ),
    Variant(
        "loss-logits-time-major",
        BG,
        LOSS_CALL,
        "loss = F.cross_entropy(logits.transpose(0, 1).reshape(B * T, V), targets.view(B * T))",
        "loss-reshape",
        "logits flattened time-major, targets batch-major",
    ),
    Variant(
        "loss-sum",
        BG,
        LOSS_CALL,
        'loss = F.cross_entropy(logits.view(B * T, V), targets.view(B * T), reduction="sum")',
        "loss-reshape",
        "sums the per-position losses instead of averaging them",
    ),
    Variant(
        "loss-item",
        BG,
        LOSS_CALL,
        "loss = F.cross_entropy(logits.view(B * T, V), targets.view(B * T)).item()",
        "loss-reshape",
        "returns a Python float: no backward possible",
    ),
    Variant(
        "loss-returns-flat-logits",
        BG,
        LOSS_CALL,
        """\
logits = logits.view(B * T, V)
            loss = F.cross_entropy(logits, targets.view(B * T))""",
        "loss-reshape",
        "flattens logits in place and returns them (B*T, V)",
    ),
    # issue 31 blame: forward(idx) breaks in the loss code, so the lookup checks wait on loss-reshape
    Variant(
        "loss-undefined-without-targets",
        BG,
        LOSS_NONE,
        "            pass\n",
        "loss-reshape",
        "no loss = None branch: forward(idx) raises UnboundLocalError at `return logits, loss`",
    ),
    Variant(
        "loss-without-targets",
        BG,
        LOSS_NONE,
        "            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), idx.view(-1))\n",
        "loss-reshape",
        "makes up targets (idx) and computes a loss without targets",
    ),
    Variant(
        "loss-none-returns-logits-only",
        BG,
        LOSS_NONE,
        "            return logits\n",
        "loss-reshape",
        "returns only the logits when there are no targets",
    ),
    Variant(
        "loss-softmax-first",
        BG,
        LOSS_CALL,
        "loss = F.cross_entropy(F.softmax(logits.view(B * T, V), dim=-1), targets.view(B * T))",
        "loss-reshape",
        "probabilities into F.cross_entropy, which wants logits",
    ),
    # issue 31: every target id occurs, so a class left out shows on every seed
    Variant(
        "loss-ignores-token-0",
        BG,
        LOSS_CALL,
        "loss = F.cross_entropy(logits.view(B * T, V), targets.view(B * T), ignore_index=0)",
        "loss-reshape",
        "token 0 taken for padding and left out of the loss",
    ),
    Variant(
        "loss-label-smoothing",
        BG,
        LOSS_CALL,
        "loss = F.cross_entropy(logits.view(B * T, V), targets.view(B * T), label_smoothing=0.1)",
        "loss-reshape",
        "label smoothing: another loss than the plain cross-entropy",
    ),
    Variant(
        "loss-reduction-none",
        BG,
        LOSS_CALL,
        'loss = F.cross_entropy(logits.view(B * T, V), targets.view(B * T), reduction="none")',
        "loss-reshape",
        "one loss per position, not averaged",
    ),
    Variant(
        "loss-last-position-only",
        BG,
        LOSS_CALL,
        "loss = F.cross_entropy(logits[:, -1, :], targets[:, -1])",
        "loss-reshape",
        "only the last position's loss",
    ),
    Variant(
        "loss-nll-on-logits",
        BG,
        LOSS_CALL,
        "loss = F.nll_loss(logits.view(B * T, V), targets.view(B * T))",
        "loss-reshape",
        "F.nll_loss on raw logits, no log-softmax",
    ),
    Variant(
        "loss-detached",
        BG,
        LOSS_CALL,
        "loss = F.cross_entropy(logits.view(B * T, V), targets.view(B * T)).detach()",
        "loss-reshape",
        "detaches the loss: right value, loss.backward() moves nothing",
    ),
    Variant(
        "loss-rebuilt-from-number",
        BG,
        LOSS_CALL,
        "loss = torch.tensor(F.cross_entropy(logits.view(B * T, V), targets.view(B * T)).item(), requires_grad=True)",
        "loss-reshape",
        "rebuilds the loss from its value: a leaf with no gradient to the table",
    ),
    # ---- TODO [positions]
    Variant(
        "positions-on-cpu",
        BG,
        POS,
        "pos = torch.arange(T, dtype=torch.long)  # (T,)",
        "positions",
        "positions created on the CPU, not on idx's device",
    ),
    Variant(
        "positions-block-size",
        BG,
        POS,
        "pos = torch.arange(self.block_size, dtype=torch.long, device=idx.device)",
        "positions",
        "block_size positions instead of T",
    ),
    Variant("positions-not-added", BG, POS_ADD, "x = tok", "positions", "only the token embeddings"),
    Variant(
        "positions-from-tokens",
        BG,
        POS_ADD,
        "x = tok + self.position_embedding_table(idx)",
        "positions",
        "looks up the token ids in the position table",
    ),
    Variant(
        "positions-concatenated",
        BG,
        POS_ADD,
        "x = torch.cat((tok, self.position_embedding_table(pos).expand(B, T, -1)), dim=-1)",
        "positions",
        "concatenates token and position embeddings: (B, T, 2C)",
    ),
    Variant(
        "positions-reversed",
        BG,
        POS,
        "pos = torch.arange(T - 1, -1, -1, device=idx.device)",
        "positions",
        "positions counted down from T - 1",
    ),
    Variant(
        "positions-from-one",
        BG,
        POS,
        "pos = torch.arange(1, T + 1, device=idx.device)",
        "positions",
        "positions counted from 1: T = block_size runs off the table",
    ),
    Variant(
        "positions-multiplied",
        BG,
        POS_ADD,
        "x = tok * self.position_embedding_table(pos)",
        "positions",
        "multiplies the two embeddings instead of adding them",
    ),
    # the video lecture's module-level device: "cpu" here, whatever device idx is on
    Variant(
        "positions-global-device",
        BG,
        POS,
        'pos = torch.arange(T, device="cuda" if torch.cuda.is_available() else "cpu")',
        "positions",
        "the device picked once for the machine, not idx's",
    ),
    Variant(
        "positions-detached",
        BG,
        POS_ADD,
        "x = tok + self.position_embedding_table(pos).detach()",
        "positions",
        "detaches the positions' embedding: right values, the positions never learn",
    ),
    # ---- TODO [last-step]
    Variant(
        "last-step-first",
        BG,
        LAST,
        "logits = logits[:, 0, :]",
        "last-step",
        "samples from the first position's logits",
    ),
    Variant(
        "last-step-mean",
        BG,
        LAST,
        "logits = logits.mean(dim=1)",
        "last-step",
        "averages the logits of all positions",
    ),
    # multinomial draws B*T tokens and torch.cat fails: the sampling checks cannot judge, and pass
    Variant(
        "last-step-all-positions",
        BG,
        LAST,
        "logits = logits.reshape(-1, logits.size(-1))",
        "last-step",
        "samples from every position: (B*T, V)",
    ),
    # (B, 1, V) probabilities: torch.multinomial fails; the sampling checks cannot judge, and pass
    Variant(
        "last-step-keepdim",
        BG,
        LAST,
        "logits = logits[:, -1:, :]",
        "last-step",
        "keeps a time axis of length 1: (B, 1, V)",
    ),
    # (T, V) logits of the last sequence: T tokens drawn, torch.cat fails (as above)
    Variant(
        "last-step-batch-axis",
        BG,
        LAST,
        "logits = logits[-1]",
        "last-step",
        "indexes the batch axis: the last sequence's (T, V) logits",
    ),
    # a one-token context has no position -2: generate-output says it waits on last-step
    Variant(
        "last-step-second-to-last",
        BG,
        LAST,
        "logits = logits[:, -2, :]",
        "last-step",
        "the second-to-last position",
    ),
    # (V,) logits with B = 1: caught by last-position's one-row case
    Variant(
        "last-step-squeeze",
        BG,
        LAST,
        "logits = logits[:, -1:, :].squeeze()",
        "last-step",
        "squeezes every axis of length 1: (V,) when B = 1",
    ),
    Variant(
        "last-step-max-over-time",
        BG,
        LAST,
        "logits = logits.max(dim=1).values",
        "last-step",
        "the largest logit of each token over all positions",
    ),
    # ---- TODO [sampling]
    Variant(
        "sampling-argmax",
        BG,
        DRAW,
        "idx_next = torch.argmax(probs, dim=-1, keepdim=True)",
        "sampling",
        "greedy argmax instead of a random draw",
    ),
    Variant(
        "sampling-global-rng",
        BG,
        DRAW,
        "idx_next = torch.multinomial(probs, num_samples=1)",
        "sampling",
        "ignores the generator it receives",
    ),
    Variant(
        "sampling-softmax-batch",
        BG,
        PROBS,
        "probs = F.softmax(logits, dim=0)",
        "sampling",
        "softmax over the batch axis",
    ),
    Variant(
        "sampling-no-softmax", BG, PROBS, "probs = logits", "sampling", "draws with the logits as weights"
    ),
    # the output keeps the input's length: last-position judges only the (B, V) draws' shape
    Variant(
        "sampling-no-concat",
        BG,
        CAT,
        "out = torch.cat((idx, idx_next), dim=1)",
        "sampling",
        "concatenates into a new name and returns idx unchanged",
    ),
    # negative "probabilities": torch.multinomial refuses them; last-position waits on sampling
    Variant(
        "sampling-log-softmax",
        BG,
        PROBS,
        "probs = F.log_softmax(logits, dim=-1)",
        "sampling",
        "log-probabilities passed to torch.multinomial",
    ),
    Variant(
        "sampling-next-flattened",
        BG,
        DRAW,
        "idx_next = torch.multinomial(probs, num_samples=1, generator=generator).view(-1)",
        "sampling",
        "the drawn tokens flattened to (B,): torch.cat fails",
    ),
    Variant(
        "sampling-cat-batch-axis",
        BG,
        CAT,
        "idx = torch.cat((idx, idx_next), dim=0)",
        "sampling",
        "concatenates along the batch axis",
    ),
    Variant(
        "sampling-draws-vocab",
        BG,
        DRAW,
        "idx_next = torch.multinomial(probs, num_samples=probs.size(-1), generator=generator)",
        "sampling",
        "num_samples = V: a whole permutation per step",
    ),
    # issue 31: generator=None draws from torch's global generator
    Variant(
        "sampling-none-own-generator",
        BG,
        DRAW,
        f"if generator is None:\n            generator = torch.Generator()\n        {DRAW}",
        "sampling",
        "a fresh torch.Generator() when none is given: the same text whatever the global seed",
    ),
    Variant(
        "sampling-generator-positional",
        BG,
        DRAW,
        "idx_next = torch.multinomial(probs, 1, generator)",
        "sampling",
        "the generator passed positionally, where replacement goes",
    ),
    Variant(
        "sampling-mutates-input",
        BG,
        CAT,
        "idx.data = torch.cat((idx, idx_next), dim=1)",
        "sampling",
        "grows the caller's idx in place through .data",
    ),
]


# --------------------------------------------------------------------------- correct

CORRECT: list[Variant] = [
    Variant(
        "last-step-two-indices",
        BG,
        LAST,
        "logits = logits[:, -1]",
        note="logits[:, -1] instead of logits[:, -1, :]",
    ),
    Variant(
        "loss-reshape-minus-one",
        BG,
        LOSS_CALL,
        "loss = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))",
        note="reshape(-1, V) instead of view(B*T, V)",
    ),
    Variant(
        "loss-classes-transposed",
        BG,
        LOSS_CALL,
        "loss = F.cross_entropy(logits.transpose(1, 2), targets)",
        note="(B, V, T) logits: F.cross_entropy's K-dimensional form, classes in dim 1",
    ),
    Variant(
        "loss-probability-targets",
        BG,
        LOSS_CALL,
        "loss = F.cross_entropy(logits.view(B * T, V), F.one_hot(targets.view(B * T), V).float())",
        note="one-hot probability targets: the same cross-entropy",
    ),
    Variant(
        "loss-log-softmax-first",
        BG,
        LOSS_CALL,
        "loss = F.cross_entropy(F.log_softmax(logits.view(B * T, V), dim=-1), targets.view(B * T))",
        note="log_softmax before F.cross_entropy: log_softmax of log-probabilities changes nothing",
    ),
    Variant(
        "last-step-select", BG, LAST, "logits = logits.select(1, -1)", note="Tensor.select on the time axis"
    ),
    Variant(
        "last-step-squeeze-time",
        BG,
        LAST,
        "logits = logits[:, -1:, :].squeeze(1)",
        note="keeps the time axis, then squeezes only it",
    ),
    Variant(
        "last-step-temperature-one",
        BG,
        LAST,
        "logits = logits[:, -1, :] / 1.0",
        note="minGPT's temperature division, at temperature 1",
    ),
    Variant(
        "positions-unsqueeze",
        BG,
        POS_ADD,
        "x = tok + self.position_embedding_table(pos).unsqueeze(0)",
        note="(1, T, C) positions, explicit broadcast",
    ),
    Variant(
        "multinomial-method",
        BG,
        DRAW,
        "idx_next = probs.multinomial(1, generator=generator)",
        note="Tensor.multinomial",
    ),
    Variant(
        "lookup-weight-index",
        BG,
        LOOKUP,
        "logits = self.token_embedding_table.weight[idx]",
        note="indexes the weight directly",
    ),
    Variant(
        "lookup-one-hot",
        BG,
        LOOKUP,
        "logits = F.one_hot(idx, self.vocab_size).float() @ self.token_embedding_table.weight",
        note="one-hot rows times the table",
    ),
    Variant(
        "positions-to-device",
        BG,
        POS,
        "pos = torch.arange(T).to(idx.device)",
        note="created on the CPU, then moved to idx's device",
    ),
    Variant(
        "positions-weight-device",
        BG,
        POS,
        "pos = torch.arange(T, device=self.position_embedding_table.weight.device)",
        note="the device of the position table",
    ),
    Variant(
        "positions-weight-slice",
        BG,
        POS_ADD,
        "x = tok + self.position_embedding_table.weight[:T]",
        note="the first T rows of the position table, no arange",
    ),
    Variant(
        "loss-nll-log-softmax",
        BG,
        LOSS_CALL,
        "loss = F.nll_loss(F.log_softmax(logits.view(B * T, V), dim=-1), targets.view(B * T))",
        note="log_softmax + nll_loss, what cross_entropy does in one call",
    ),
    Variant(
        "softmax-by-hand",
        BG,
        PROBS,
        """\
probs = torch.exp(logits - logits.max(dim=-1, keepdim=True).values)
        probs = probs / probs.sum(dim=-1, keepdim=True)""",
        note="a stable softmax written out",
    ),
    Variant("softmax-method", BG, PROBS, "probs = logits.softmax(-1)", note="Tensor.softmax"),
    Variant(
        "torch-softmax-dim-1",
        BG,
        PROBS,
        "probs = torch.softmax(logits, dim=1)",
        note="torch.softmax over dim 1, the vocabulary of a (B, V) tensor",
    ),
    Variant(
        "multinomial-default-generator",
        BG,
        DRAW,
        "idx_next = torch.multinomial(probs, num_samples=1, "
        "generator=generator if generator is not None else torch.default_generator)",
        note="torch.default_generator named when generator is None: the global generator all the same",
    ),
    Variant(
        "multinomial-replacement",
        BG,
        DRAW,
        "idx_next = torch.multinomial(probs, 1, replacement=True, generator=generator)",
        note="with replacement: the same distribution for one draw",
    ),
    Variant(
        "cat-list-last-dim", BG, CAT, "idx = torch.cat([idx, idx_next], dim=-1)", note="a list and dim=-1"
    ),
]


# The practice agreement CI sample (tests/lessons/test_practice_agreement.py): buggy variants
# whose diagnosis the recording answers, each named by what a known mistake gives, asked for
# while recording: the loss's targets flattened time-major (ref.loss_mistakes on the learner's
# right logits), positions reversed (ref.position_mistakes), greedy sampling (ref.replay's
# argmax). bench/bench_practice_agreement.py compares every buggy variant.
PRACTICE_SAMPLE = ("loss-targets-transposed", "positions-reversed", "sampling-argmax")
