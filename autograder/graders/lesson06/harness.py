"""Helpers shared by lesson 06's graders: the learner's generate.py behind the sandbox, the
reference GPT and attention of lessons 03-04 built in the worker with weights the grader
draws (their expected values come from reference.py, given the same weights), and the hints
that name a recognisable mistake from the error it raises.

Every expected value and every diagnosis candidate is a call into `ref` on the grader's own
inputs, so that a learner's release answers it from the recording; while recording
(recording.eager()), the candidates are computed even when the check passes (`prime`). A
candidate the recording cannot answer (one computed on the learner's own values) is left out
of the diagnosis, never a reason to drop the check."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from types import SimpleNamespace

import torch

from autograder.core.results import Block, Feedback, Text, message
from autograder.engine import blame, provenance, recording, references
from autograder.engine.checks import describe_student_error, fail
from autograder.engine.feedback import ATOL, RTOL, compare
from autograder.engine.grader_helpers import (
    config_text,
    first_hint,
    generator,
    learner_frames,
    load_weights,
    tokens,
    worker_generator,
)
from autograder.engine.grader_helpers import hinted as shared_hinted
from autograder.sandbox.client import Sandbox, StudentError

ref = recording.reference_of(__package__)

FILE = "generate"
# T, nh, hs, C and V all different, nh >= 2, prompts shorter and longer than block_size.
GPT_CFG = {"vocab_size": 19, "block_size": 10, "n_layer": 2, "n_head": 3, "n_embd": 12, "dropout": 0.0}
ATTN_CFG = {"n_embd": 20, "n_head": 4, "block_size": 12, "dropout": 0.0}
# A greedy token counts as the argmax when its logit is this close to the maximum: the
# learner's float32 path and the float64 reference may order near-ties differently.
TIE = 1e-4


def draw_seed(gen: torch.Generator) -> int:
    return int(torch.randint(0, 2**31 - 1, (1,), generator=gen))


def fork(gen: torch.Generator) -> torch.Generator:
    """A generator of its own for a probe, seeded by one draw from `gen`: what the probe draws
    then depends on how far the learner's code gets, while `gen` always moves by one draw, so
    the check's later inputs are the same whatever the probe found (a replay's recording holds
    the inputs the solution was graded with)."""
    return generator(draw_seed(gen))


def function(sub: Sandbox, name: str):
    return sub.getattr(sub.module(FILE), name)


# ---------------------------------------------------------------- the pieces of lessons 03-04


class WorkerGPT:
    """Lesson 04's GPT (module `model` in the worker: the reference one, or in own-pieces the
    learner's) holding weights drawn by the grader, in eval mode; `state` and `ref_cfg` are
    what reference.py computes its expected values with (never the learner's code)."""

    def __init__(
        self,
        sub: Sandbox,
        gen: torch.Generator,
        cfg: dict | None = None,
        *,
        train: bool = False,
        blind: tuple[int, ...] = (),
        why: str = "lesson06.model_blind",
    ) -> None:
        self.sub, self.cfg = sub, dict(cfg or GPT_CFG)
        mod = sub.module("model")
        config = sub.call(sub.getattr(mod, "GPTConfig"), **self.cfg)
        self.handle = sub.call(sub.getattr(mod, "GPT"), config)
        self.state = ref.random_state("gpt", self.cfg, gen)
        self.blind, self.why = tuple(blind), why
        C = self.cfg["n_embd"]
        for layer in self.blind:  # values 0: the layer's attention output is its bias, whatever the mask
            for name in ("weight", "bias"):
                self.state[f"transformer.h.{layer}.attn.qkv.{name}"][2 * C :] = 0.0
        absent = load_weights(sub, self.handle, self.state)
        if absent:
            fail(message("lesson06.gpt_weights_missing", keys=", ".join(absent[:6])))
        sub.call(self.handle, method="train" if train else "eval")
        self.ref_cfg = {**self.cfg, "dropout": 0.0}

    @property
    def text(self):
        text = f"GPT(GPTConfig({config_text(self.cfg)}))"
        if self.blind:
            return message(self.why, model=text, layers=", ".join(str(i) for i in self.blind))
        return text

    def attach(self, name: str) -> str:
        """Put the learner's function `name` on the model as an attribute, so that a traced call
        (sub.call_traced(model.handle, model.handle, ..., method=...)) can hook the model's
        submodules while the learner's function runs; returns the method name."""
        method = f"_graded_{name}"
        self.sub.request("setattr", target=self.handle, name=method, value=function(self.sub, name))
        return method

    def attention(self, layer: int):
        """The handle of block `layer`'s attention in the worker."""
        blocks = self.sub.getattr(self.sub.getattr(self.handle, "transformer"), "h")
        return self.sub.getattr(self.sub.getattr(blocks, str(layer)), "attn")

    def full_logits(self, idx: torch.Tensor) -> torch.Tensor:
        """The reference full forward's logits (B, T, V), float64."""
        return ref.logits(self.ref_cfg, self.state, idx)

    def walk(self, idx: torch.Tensor, chunks: list[int], **options):
        """reference.walk with this model's weights: (logits per chunk, keys, values)."""
        return ref.walk(self.ref_cfg, self.state, idx, chunks, **options)


class WorkerAttention:
    """Lesson 03's reference CausalSelfAttention in the worker with weights drawn by the grader."""

    def __init__(self, sub: Sandbox, gen: torch.Generator, cfg: dict | None = None) -> None:
        self.sub, self.cfg = sub, dict(cfg or ATTN_CFG)
        cls = sub.getattr(sub.module("attention"), "CausalSelfAttention")
        self.handle = sub.call(cls, SimpleNamespace(**self.cfg))
        self.state = ref.random_state("attention", self.cfg, gen)
        sub.call(self.handle, self.state, method="load_state_dict")
        sub.call(self.handle, method="eval")
        self.n_head = self.cfg["n_head"]

    def past(self, B: int, T: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(x_past, past_k, past_v): T earlier tokens and their keys and values (float32)."""
        x = torch.randn(B, T, self.cfg["n_embd"], generator=gen)
        _, k, v = ref.project(self.state, x, self.n_head)
        return x, k.float(), v.float()

    def expected(self, x, past_k, past_v, **variant):
        return ref.attend(self.state, x, past_k, past_v, self.n_head, **variant)


# ---------------------------------------------------------------- what comes back


def expect_tokens(out, shape: tuple, called, *, what: str = "lesson06.what_tokens") -> torch.Tensor:
    """A tensor of token indices of the given shape and dtype int64; a wrong shape is explained."""
    if not isinstance(out, torch.Tensor) or out.device.type == "meta" or out.is_complex():
        got = type(out).__name__ if not isinstance(out, torch.Tensor) else f"Tensor(device={out.device.type})"
        fail(called, message("lesson06.not_a_tensor", what=message(what), got=got))
    if tuple(out.shape) != tuple(shape):
        hint = None
        if tuple(out.shape) == tuple(shape[:1]):
            hint = message("lesson06.hint_keepdim", B=shape[0])
        fail(
            called,
            message("lesson06.shape_wrong", what=message(what), got=tuple(out.shape), expected=tuple(shape)),
            hint,
        )
    if out.dtype != torch.int64:
        fail(called, message("lesson06.dtype_wrong", what=message(what), got=str(out.dtype)))
    return out


def expect_logits(out, shape: tuple, called, what: str = "lesson06.what_logits") -> torch.Tensor:
    if (
        not isinstance(out, torch.Tensor)
        or out.device.type == "meta"
        or out.is_complex()
        or not out.is_floating_point()
    ):
        got = type(out).__name__ if not isinstance(out, torch.Tensor) else f"Tensor(dtype={out.dtype})"
        if isinstance(out, tuple):
            got = f"tuple[{len(out)}]"
        fail(called, message("lesson06.not_a_tensor", what=message(what), got=got))
    if tuple(out.shape) != tuple(shape):
        fail(
            called,
            message("lesson06.shape_wrong", what=message(what), got=tuple(out.shape), expected=tuple(shape)),
        )
    return out


def rows(context: torch.Tensor, got: torch.Tensor, expected: torch.Tensor, limit: int = 2) -> Block:
    """Rows as context -> learner's continuation ≠ expected continuation, those that differ first."""
    T = context.shape[1]
    differ = (
        (got != expected).any(dim=1).tolist() if got.shape == expected.shape else [True] * context.shape[0]
    )
    order = sorted(range(context.shape[0]), key=lambda b: not differ[b])
    lines = []
    for b in order[:limit]:
        lines.append(f"[{b}] {context[b].tolist()} -> {got[b, T:].tolist()}  ≠  {expected[b, T:].tolist()}")
    return Block("\n".join(lines) + "\n")


# ---------------------------------------------------------------- sample_next, as the sampling checks call it


def sample_called(shape, temperature, top_k, seed, *, given: bool = True):
    return message(
        "lesson06.called_sample" if given else "lesson06.called_sample_global",
        shape=tuple(shape),
        temperature=temperature,
        top_k="None" if top_k is None else top_k,
        seed=seed,
    )


def learner_sample(
    submission,
    logits,
    temperature,
    top_k,
    seed,
    hints=None,
    own=None,
    drew: list | None = None,
    *,
    given: bool = True,
):
    """(tokens (B, 1), the call described) from the learner's sample_next; with `drew` (a list),
    whether the generator was used is appended to it. With `given` False, generator=None and
    the worker's global generator seeded `seed` just before the call (torch.manual_seed draws
    the same stream as torch.Generator().manual_seed, so the same replay judges both)."""
    called = sample_called(logits.shape, temperature, top_k, seed, given=given)
    fn = function(submission, "sample_next")
    with hinted(*(SAMPLING_HINTS if hints is None else hints), own=own, called=called):
        if given:
            gen = worker_generator(submission, seed)
            out = submission.call(fn, logits, temperature=temperature, top_k=top_k, generator=gen)
        else:
            out = submission.call_traced(
                fn, logits, temperature=temperature, top_k=top_k, generator=None, seed=seed
            )["value"]
    if drew is not None and given:
        drew.append(not generator_untouched(submission, gen, seed))
    return expect_tokens(out, (logits.shape[0], 1), called), called


def wide_logits(seed: int, B: int, V: int, scale: float) -> torch.Tensor:
    """(B, V) logits over a GPT-2-sized vocabulary, drawn from `seed` (reference.wide_logits draws
    the same): the reference calls take the seed, so the recording holds no (B, V) array."""
    return torch.randn(B, V, generator=generator(seed)) * scale


# ---------------------------------------------------------------- sampled generation
# The generation checks of crop-context, kv-cache and eval-mode sample at temperature 1 with
# no top_k and a seeded generator: at temperature 1 the temperature TODO's division changes
# nothing and its greedy branch is never taken, so a slip in sample_next costs only its own
# checks (greedy and temperature), not every check that generates.
SAMPLED_TEMPERATURE = 1.0


def judge_sampled(
    model: WorkerGPT,
    idx: torch.Tensor,
    out: torch.Tensor,
    seed: int,
    called,
    *,
    extra=(),
    window: torch.Tensor | None = None,
) -> None:
    """Compare with the reference's own draws from the prompt seen through its last block_size
    tokens: one torch.multinomial per step on the eval-mode distribution, from a generator
    seeded `seed`, as sample_next draws at temperature 1. Up to the first step where a token of
    the learner's differs, both saw the same context, so that step is the first wrong draw. With
    `window`, the model saw that instead of the prompt (the learner's own crop of it)."""
    T = idx.shape[1]
    if not torch.equal(out[:, :T], idx):
        fail(
            called,
            message("lesson06.prefix_changed", got=str(out[0, :T].tolist()), expected=str(idx[0].tolist())),
        )
    V = model.cfg["vocab_size"]
    if bool(((out < 0) | (out >= V)).any()):
        fail(called, message("lesson06.tokens_out_of_range", V=V, got=str(out[0].tolist())))
    start = idx if window is None else window
    drawn = ref.sampled(
        model.ref_cfg, model.state, start, out.shape[1] - T, seed, temperature=SAMPLED_TEMPERATURE
    )
    expected = torch.cat((idx, drawn[:, start.shape[1] :]), dim=1)
    differ = (out != expected).any(dim=0).nonzero().view(-1)
    if len(differ):
        t = int(differ[0])
        fail(
            called,
            message("lesson06.sampled_wrong", step=t - T),
            message("lesson06.rows_legend"),
            rows(idx, out[:, : t + 1], expected[:, : t + 1]),
            *extra,
        )


def generate_sampled(
    submission,
    model: WorkerGPT,
    idx: torch.Tensor,
    steps: int,
    use_cache: bool,
    seed: int,
    hints=None,
    mode: str = "eval",
    own: str | None = None,
    fed: list | None = None,
):
    """The learner's generate at temperature 1 with a worker generator seeded `seed`:
    (tokens (B, T + steps), the call's description for feedback). With `fed` (a list), the
    token counts that reached the token embedding, one per forward pass, are appended to it."""
    called = message(
        "lesson06.called_generate_sampled",
        model=model.text,
        shape=tuple(idx.shape),
        steps=steps,
        options=f"temperature={SAMPLED_TEMPERATURE}, use_cache={use_cache}",
        seed=seed,
        mode=mode,
    )
    options = dict(
        temperature=SAMPLED_TEMPERATURE, generator=worker_generator(submission, seed), use_cache=use_cache
    )
    # The worker's global generator is seeded too (call_traced's seed): whatever draws from it
    # while generate runs (dropout left on, a generator not passed on) then draws the same for the
    # same seed, whichever checks the pooled worker ran before.
    with hinted(*FROM_SAMPLE_NEXT, *(hints if hints is not None else CROP_HINTS), own=own, called=called):
        traced = submission.call_traced(
            model.handle,
            model.handle,
            idx,
            steps,
            method=model.attach("generate"),
            capture=("transformer.wte",) if fed is not None else (),
            seed=seed,
            **options,
        )
        out = traced["value"]
        if fed is not None:
            fed += [
                int(t.shape[-1]) if isinstance(t, torch.Tensor) and t.dim() >= 1 else -1
                for t in traced["captured"]
            ]
    return expect_tokens(
        out, (idx.shape[0], idx.shape[1] + steps), called, what="lesson06.what_generated"
    ), called


# ---------------------------------------------------------------- probes of the other TODOs
# A check of one TODO runs the learner's code of another only where it must; where that code is
# wrong, the check judges with what it measured of it, or leaves the case that needs it aside
# (that TODO's own checks fail and say why).


def generator_untouched(sub: Sandbox, gen_handle, seed: int) -> bool:
    """Whether the worker generator `gen_handle`, seeded `seed`, has drawn nothing since."""
    state = sub.call(gen_handle, method="get_state")
    fresh = generator(seed).get_state()
    return (
        isinstance(state, torch.Tensor)
        and state.shape == fresh.shape
        and bool(torch.equal(state.cpu(), fresh))
    )


def crop_agrees(sub: Sandbox, B: int, lengths, block_size: int, V: int, gen: torch.Generator) -> bool:
    """Whether the learner's crop_context returns the reference crop (int64: torch.equal alone
    would take floats) for every length in `lengths` (TODO [crop-context]). An error in it goes
    to the engine, which says that the check waits on crop-context (a pending stub included)."""
    fn, gen = function(sub, "crop_context"), fork(gen)
    for T in sorted(set(lengths)):
        idx = tokens(B, T, V, gen)
        out = sub.call(fn, idx, block_size)
        expected = ref.crop(idx, block_size)
        if not (
            isinstance(out, torch.Tensor)
            and out.device.type == "cpu"
            and out.dtype == torch.int64
            and tuple(out.shape) == tuple(expected.shape)
            and torch.equal(out, expected)
        ):
            return False
    return True


def learner_crop(sub: Sandbox, idx: torch.Tensor, block_size: int) -> torch.Tensor | None:
    """The learner's crop_context(idx, block_size) when it is a usable window of idx's rows
    ((B, L) int64 on the CPU, 1 <= L <= min(T, block_size)), else None."""
    out = sub.call(function(sub, "crop_context"), idx, block_size)  # an error: as in crop_agrees
    return out if usable_window(out, idx, block_size) else None


def usable_window(out, idx: torch.Tensor, block_size: int) -> bool:
    """Whether `out` can stand for a crop of idx (B, T): (B, L) int64 on the CPU, 1 <= L <= min(T, block_size)."""
    B, T = idx.shape
    return (
        isinstance(out, torch.Tensor)
        and out.device.type == "cpu"
        and out.dtype == torch.int64
        and out.dim() == 2
        and out.shape[0] == B
        and 1 <= out.shape[1] <= min(T, block_size)
    )


def given_kv(
    state: dict, n_head: int, x: torch.Tensor, result, prefix: str = "", align: str = "bottom_right"
):
    """The output cached_attention should give for x with the keys and values IT returned, over
    the `align` mask (float64), or None when the result cannot be judged that way (not three
    tensors, or keys and values not (B, nh, S, hs) with S >= T). A reference call on the
    learner's own keys and values: a replay answers it only when they are the recorded ones
    (else recording.NotRecorded)."""
    if not (
        isinstance(result, (tuple, list))
        and len(result) == 3
        and all(isinstance(t, torch.Tensor) for t in result)
    ):
        return None
    _, k, v = result
    B, T, C = x.shape
    if k.device.type != "cpu" or v.device.type != "cpu" or k.dim() != 4 or tuple(k.shape) != tuple(v.shape):
        return None
    if tuple(k.shape[:2]) != (B, n_head) or k.shape[3] != C // n_head or k.shape[2] < T:
        return None
    if not (k.is_floating_point() and torch.isfinite(k).all() and torch.isfinite(v).all()):
        return None
    return ref.attend_given(state, x, k, v, n_head, align=align, prefix=prefix)


def close(a, b) -> bool:
    return (
        isinstance(a, torch.Tensor)
        and isinstance(b, torch.Tensor)
        and tuple(a.shape) == tuple(b.shape)
        and a.device.type == "cpu"
        and bool(torch.allclose(a.double(), b.double(), atol=1e-4, rtol=1e-4))
    )


def alignment_agrees(sub: Sandbox, gen: torch.Generator) -> bool:
    """Whether the learner's cached_attention masks as the reference does (TODO [cache-alignment]),
    judged with the keys and values it returns (so a slip in TODO [kv-cache] plays no part):
    a prefill, one token after a cache and a chunk after a cache. An error in the alignment's
    code counts as no; anything else that cannot be judged, as yes (the check then runs as
    usual and fails where the mistake is), keys and values a replay has no recording for
    included."""
    gen = fork(gen)
    attn = WorkerAttention(sub, gen)
    C, fn = attn.cfg["n_embd"], function(sub, "cached_attention")
    for B, P, T in ((2, 0, 4), (1, 4, 1), (2, 5, 3)):
        x = torch.randn(B, T, C, generator=gen)
        past_k = past_v = None
        if P:
            _, past_k, past_v = attn.past(B, P, gen)
        try:
            result = sub.call(fn, attn.handle, x, past_k, past_v)
        except StudentError as err:
            return cause_of(err) != "cache-alignment"
        try:
            expected = given_kv(attn.state, attn.n_head, x, result)
        except recording.NotRecorded:
            continue
        if expected is not None and not close(result[0], expected):
            return False
    return True


def sampling_agrees(sub: Sandbox, gen: torch.Generator) -> bool:
    """Whether the learner's sample_next draws the reference's tokens at temperature 1 without
    top_k (64 rows, a generator given): the only path of it the checks of the other TODOs take,
    where TODO [temperature]'s code is the only TODO code that runs. An error there counts as no,
    except a pending stub's, which goes to the engine (it groups the checks that wait on it)."""
    gen = fork(gen)
    logits = torch.randn(64, GPT_CFG["vocab_size"], generator=gen) * 1.5
    seed = draw_seed(gen)
    try:
        out = sub.call(
            function(sub, "sample_next"),
            logits,
            temperature=SAMPLED_TEMPERATURE,
            top_k=None,
            generator=worker_generator(sub, seed),
        )
    except StudentError as err:
        if err.todo_pending is not None:
            raise
        return False
    expected = ref.sample_replay(logits, seed, temperature=SAMPLED_TEMPERATURE)
    return (
        isinstance(out, torch.Tensor)
        and out.device.type == "cpu"
        and out.dtype == torch.int64
        and tuple(out.shape) == tuple(expected.shape)
        and bool(torch.equal(out, expected))
    )


def wait_for_sampling(sub: Sandbox, gen: torch.Generator) -> None:
    """Fail, waiting on TODO [temperature], when the learner's sample_next at temperature 1 is
    wrong: a check of another TODO that samples through it cannot judge its own then."""
    if not sampling_agrees(sub, gen):
        fail(message("lesson06.waits_sampling"), waits_on="temperature")


# ---------------------------------------------------------------- errors with a known cause


TODOS = frozenset({"temperature", "top-k", "crop-context", "kv-cache", "cache-alignment"})


def raised_in(err: StudentError) -> str | None:
    """The TODO whose code raised `err`, as the engine tells it (autograder/engine/blame.py), or None."""
    where = blame.raised_in(err, [f"{FILE}.py"], TODOS, references.graded_stubs("06-generar"))
    return where.todo if where is not None else None


def _error_text(err: StudentError) -> str:
    """What the hint patterns search: "Type: message", then "@function: line" per frame."""
    return (
        err.type_name
        + ": "
        + err.message
        + "\n"
        + "\n".join(f"@{f.get('name', '')}: {f.get('line', '')}" for f in err.frames)
    )


# Queries and keys with different numbers of heads: keys and values concatenated along the heads
# (dimension 1) instead of the time, in TODO [kv-cache]'s code. With as many cached tokens as
# new ones that torch.cat succeeds, and scaled_dot_product_attention, in TODO
# [cache-alignment]'s code, is what raises: the line that raised is not the mistake.
HEADS_DIFFER = r"must match the size of tensor b \(\d+\) at non-singleton dimension 1"


def heads_differ(err: StudentError) -> bool:
    """Whether `err` is that mismatch: dimension 1 raised inside cached_attention (elsewhere,
    in sample_next for one, dimension 1 is something else)."""
    frames = learner_frames(err)
    return (
        bool(re.search(HEADS_DIFFER, err.message))
        and bool(frames)
        and frames[-1].get("name") == "cached_attention"
    )


# Names a TODO's code defines and given code after it reads. With the TODO's line missing the
# error (NameError, or UnboundLocalError where given code assigns the name later) is raised in
# given code, but it is that TODO's: (function, name) -> TODO.
DEFINED_BY = {
    ("cached_attention", "y"): "cache-alignment",
    ("forward_cached", "pos"): "kv-cache",
    ("generate", "logits"): "kv-cache",
}
UNDEFINED = r"name '(\w+)' is not defined|local variable '(\w+)'"


def undefined_in(err: StudentError) -> str | None:
    """The TODO that should have defined the name `err` says is undefined (DEFINED_BY), or None."""
    if err.type_name not in ("NameError", "UnboundLocalError"):
        return None
    found = re.search(UNDEFINED, err.message)
    frames = learner_frames(err)
    if found is None or not frames:
        return None
    return DEFINED_BY.get((frames[-1].get("name"), found.group(1) or found.group(2)))


# Given lines whose only value a TODO made is that TODO's result: an error there (a shape that
# cannot be viewed back to (B, T, C)) is that TODO's. (function, code without its comment) -> TODO.
READS_ONLY = {
    ("cached_attention", "y = y.transpose(1, 2).contiguous().view(B, T, C)"): "cache-alignment",
}


def read_only_in(err: StudentError) -> str | None:
    """The TODO whose result the given line that raised `err` reads alone (READS_ONLY), or None."""
    frames = learner_frames(err)
    if not frames:
        return None
    code = str(frames[-1].get("line", "")).split("#")[0].strip()
    return READS_ONLY.get((frames[-1].get("name"), code))


def kv_inconsistent(err: StudentError) -> bool:
    """Whether `err` is scaled_dot_product_attention refusing queries, keys and values whose
    shapes do not fit together (keys or values not (B, nh, S, hs) with the queries' B, nh and
    hs, or keys and values of different lengths), as the worker traced the call's operands
    (engine/provenance.py reads its answer). The queries come from given code, so the keys or
    values are TODO [kv-cache]'s, whatever the mask (TODO [cache-alignment]'s line raised),
    provided the first operand is that given q (else the call's arguments are in the wrong
    order, the mask TODO's own line). Untrusted, like a traceback: it only moves the blame."""
    trace = provenance.read_trace(getattr(err, "cause", None))
    if trace is None or "scaled_dot_product_attention" not in trace.op or len(trace.operands) < 3:
        return False
    first = trace.records[trace.operands[0]]
    if not _given_line(err, first.site):
        return False  # the queries passed are not the given q (the call's arguments swapped)
    q, k, v = (trace.records[n].shape for n in trace.operands[:3])
    if len(q) != 4:
        return False
    return not (
        len(k) == 4 and len(v) == 4 and k[:2] == q[:2] and v[:2] == q[:2] and k[3] == q[3] and k[2] == v[2]
    )


def cache_joined(err: StudentError) -> bool:
    """Whether `err` is a torch.cat or torch.stack in cached_attention refusing the cached keys
    or values (a 4-D operand the call was handed, or state it holds, as the worker traced it):
    putting the cache and the new keys together is TODO [kv-cache]'s, whichever line a learner
    wrote it on. Untrusted, like a traceback: it only moves the blame."""
    frames = learner_frames(err)
    if not frames or frames[-1].get("name") != "cached_attention":
        return False
    trace = provenance.read_trace(getattr(err, "cause", None))
    if trace is None or trace.op not in ("cat", "concat", "concatenate", "stack"):
        return False
    return any(
        trace.records[n].external in ("argument", "state") and len(trace.records[n].shape) == 4
        for n in trace.operands
    )


def _given_line(err: StudentError, site: tuple[str, int] | None) -> bool:
    """Whether `site` (file, line) of the learner's files is a line of given code (one the stub
    of that file has outside its TODO blocks)."""
    stubs = references.graded_stubs("06-generar")
    if site is None or stubs is None:
        return False
    text = blame.read_text(Path(err.root) / site[0])
    stub = blame.read_text(stubs / site[0])
    if text is None or stub is None:
        return False
    rows = text.splitlines()
    return 1 <= site[1] <= len(rows) and rows[site[1] - 1].strip() in blame.stub_blocks(stub).given


def cause_of(err: StudentError) -> str | None:
    """The TODO whose mistake made the learner's error `err`: a pending stub's; a name a TODO
    should have defined (undefined_in), or a given line that reads only a TODO's result
    (read_only_in); the cache refused where it is put together with the new keys
    (cache_joined), or keys and values that do not fit the queries (the heads concatenated,
    heads_differ, or any traced shape, kv_inconsistent), which are TODO [kv-cache]'s wherever
    they raise; else the TODO whose code raised (the engine's answer)."""
    if err.todo_pending is not None:
        return err.todo_pending
    return known_cause(err) or raised_in(err)


def known_cause(err: StudentError) -> str | None:
    """The TODO one of this lesson's rules (cause_of's) names for `err`, or None: the same in
    practice and officially, where the engine's own answer may differ (without the stubs a
    given line under a TODO's comments is taken for that TODO's)."""
    named = undefined_in(err) or read_only_in(err)
    if named is not None:
        return named
    if heads_differ(err) or cache_joined(err) or kv_inconsistent(err):
        return "kv-cache"
    return None


@contextlib.contextmanager
def hinted(*patterns, own: str | None = None, called=None):
    """Re-raise a learner's error as feedback with a hint when it matches one of `patterns`
    ((regex, lambda match: message or None)); other errors pass through to the engine. An error
    raised in another TODO's code than `own` passes through (the engine then says that the
    check waits on that TODO), except one whose cause this lesson's rules know (known_cause):
    keys and values that do not fit the queries, or a cache refused where it is joined, are TODO
    [kv-cache]'s, a name a TODO should have defined is that TODO's, wherever they raise; so a
    check of that TODO fails with its diagnosis and a check of another TODO says it waits on it,
    in practice as officially."""

    def hint_of(err: StudentError):
        if own is not None and (raised_in(err) not in (None, own) or known_cause(err) is not None):
            return None  # said below, with the cause
        return first_hint(_error_text(err), patterns)

    try:
        with shared_hinted(hint_of, called):
            yield
    except StudentError as err:
        if own is not None and err.todo_pending is None:
            cause = known_cause(err)
            if cause is not None:
                if cause == "kv-cache":
                    hint = message("lesson06.hint_cat_dim")
                else:
                    hint = message("lesson06.hint_undefined", todo=cause)
                fail(called, described(err), hint, waits_on=None if own == cause else cause)
        raise


def described(err: StudentError) -> Feedback:
    """The learner's error as the engine describes it, without its generic hint ("the shapes do
    not fit"): the caller gives the specific one."""
    parts = describe_student_error(err, None, {}).parts
    return Feedback(tuple(p for p in parts if not (isinstance(p, Text) and p.key == "engine.hint_shapes")))


SAMPLING_HINTS = (
    (
        r"probability tensor contains either|invalid multinomial distribution",
        lambda m: message("lesson06.hint_probs_invalid"),
    ),
    (
        r"selected index k out of range|k \(\d+\) is too big|out of range.*topk|topk.*out of range",
        lambda m: message("lesson06.hint_topk_too_big"),
    ),
    (
        r"must be int, not NoneType|'NoneType' object cannot be interpreted",
        lambda m: message("lesson06.hint_topk_none"),
    ),
    (r"ZeroDivisionError|division by zero", lambda m: message("lesson06.hint_probs_invalid")),
)

# An error inside sample_next while generate runs: the sampling checks say more.
FROM_SAMPLE_NEXT = (
    (r"@sample_next:", lambda m: message("lesson06.hint_from_sample_next")),
    (r"Tensors must have same number of dimensions", lambda m: message("lesson06.hint_next_shape")),
)

CACHE_HINTS = (
    (r"no caben en block_size", lambda m: message("lesson06.hint_cache_full")),
    (r"IndexError: index out of range in self", lambda m: message("lesson06.hint_positions_range")),
    (r"Sizes of tensors must match except in dimension (\d+)", lambda m: message("lesson06.hint_cat_dim")),
    (
        r"must match the size of tensor b \(\d+\) at non-singleton dimension 3",
        lambda m: message("lesson06.hint_mask_shape"),
    ),
    (
        r"must match the size of tensor b \(\d+\) at non-singleton dimension 1",
        lambda m: message("lesson06.hint_cat_dim"),
    ),
    (r"\A[^\n]*attn_mask", lambda m: message("lesson06.hint_mask_shape")),
)

# A tensor born on the CPU meeting the meta device's (or a GPU's).
DEVICE_HINTS = (
    (
        r"is not on the expected device|Expected all tensors to be on the same device",
        lambda m: message("lesson06.hint_device"),
    ),
)

CROP_HINTS = (
    (r"AssertionError: .*block_size|Cannot forward sequence", lambda m: message("lesson06.hint_not_cropped")),
    (r"IndexError: index out of range in self", lambda m: message("lesson06.hint_not_cropped")),
)


ALIGN_HINTS = DEVICE_HINTS + tuple(h for h in CACHE_HINTS if "attn_mask" in h[0] or "dimension 3" in h[0])


def judge_attention(y, expected, state, n_head, x, result, prefix: str = ""):
    """The compare() problem of y against `expected` (the reference over the learner's own keys
    and values) with the diagnoses of a recognisable mask, or None when y is right."""
    if y.device.type != "cpu" or tuple(y.shape) != tuple(expected.shape):
        return [
            message(
                "lesson06.shape_wrong",
                what=message("lesson06.what_attention_out"),
                got=tuple(y.shape),
                expected=tuple(expected.shape),
            )
        ]
    candidates = [
        (lambda: given_kv(state, n_head, x, result, prefix, align="top_left"), "lesson06.diag_top_left"),
        (lambda: given_kv(state, n_head, x, result, prefix, align="none"), "lesson06.diag_no_mask"),
        (
            lambda: given_kv(state, n_head, x, result, prefix, align="no_self"),
            "lesson06.diag_mask_hides_self",
        ),
        (
            lambda: given_kv(state, n_head, x, result, prefix, align="one_ahead"),
            "lesson06.diag_mask_one_ahead",
        ),
    ]
    problem = compare(y, expected.float(), what=message("lesson06.what_attention_out"), atol=ATOL, rtol=RTOL)
    if not problem:
        prime(candidates)
        return None
    return [problem, *diagnose(y, candidates)]


# ---------------------------------------------------------------- cached_attention, as the cache checks call it

# The batch of most cases of the cache checks (each case says where it is 1).
B = 2


def diagnose(actual: torch.Tensor, candidates) -> list:
    """The message of the first (candidate, key) whose candidate `actual` matches; a candidate
    may be a callable, computed only when the ones before it did not match. One a replay cannot
    answer is skipped: the failure stands, with the best diagnosis the recording allows."""
    for candidate, key in candidates:
        try:
            value = candidate() if callable(candidate) else candidate
        except recording.NotRecorded:
            continue
        if value is not None and close(actual, value):
            return [message(key)]
    return []


def prime(candidates) -> None:
    """While recording, compute every callable candidate of `candidates` ((candidate, key) pairs)
    now, on the grader's inputs, although the check passed: a replay then has the values to
    diagnose a learner whose check fails here."""
    if recording.eager():
        for candidate, _ in candidates:
            if callable(candidate):
                candidate()


def _attention_called(attn: WorkerAttention, x: torch.Tensor, past: int, device: str = "cpu"):
    called = message(
        "lesson06.called_cached_attention",
        cfg=config_text(attn.cfg),
        shape=tuple(x.shape),
        past=past,
        past_shape=(x.shape[0], attn.n_head, past, attn.cfg["n_embd"] // attn.n_head),
    )
    return called if device == "cpu" else message("lesson06.called_on_device", called=called, device=device)


def cached(
    submission, attn: WorkerAttention, x, past_k, past_v, own: str, hints=CACHE_HINTS, device: str = "cpu"
):
    """The learner's cached_attention(attn, x, past_k, past_v) as (y, k, v), checked to be three tensors."""
    past = 0 if past_k is None else past_k.shape[2]
    called = _attention_called(attn, x, past, device)
    with hinted(*hints, own=own, called=called):
        result = submission.call(function(submission, "cached_attention"), attn.handle, x, past_k, past_v)
    if not (
        isinstance(result, (tuple, list))
        and len(result) == 3
        and all(isinstance(t, torch.Tensor) for t in result)
    ):
        got = type(result).__name__ + (f"[{len(result)}]" if isinstance(result, (tuple, list)) else "")
        fail(called, message("lesson06.not_a_triple", got=got))
    return tuple(result), called
