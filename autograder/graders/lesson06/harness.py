"""Helpers shared by lesson 06's graders: the learner's generate.py behind the sandbox, the
reference GPT and attention of lessons 03-04 built in the worker with weights the grader
draws (and their float64 twins here, for the expected values), and the hints that name a
recognisable mistake from the error it raises."""

from __future__ import annotations

import contextlib
import re
from types import SimpleNamespace

import torch

from autograder.checks import describe_student_error, fail, keys_not_taken
from autograder.results import Block, message
from autograder.sandbox import Sandbox, StudentError

from . import reference as ref

FILE = "generate"
# T, nh, hs, C and V all different, nh >= 2, prompts shorter and longer than block_size.
GPT_CFG = {"vocab_size": 19, "block_size": 10, "n_layer": 2, "n_head": 3, "n_embd": 12, "dropout": 0.0}
ATTN_CFG = {"n_embd": 20, "n_head": 4, "block_size": 12, "dropout": 0.0}
ATOL = RTOL = 1e-5
# A greedy token counts as the argmax when its logit is this close to the maximum: the
# learner's float32 path and the float64 reference may order near-ties differently.
TIE = 1e-4


def generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def draw_seed(gen: torch.Generator) -> int:
    return int(torch.randint(0, 2**31 - 1, (1,), generator=gen))


def function(sub: Sandbox, name: str):
    return sub.getattr(sub.module(FILE), name)


def worker_generator(sub: Sandbox, seed: int):
    """A torch.Generator built in the worker, seeded `seed`."""
    torch_h = sub.library("torch")
    gen = sub.call(sub.getattr(torch_h, "Generator"))
    return sub.call(gen, seed, method="manual_seed")


def cfg_text(cfg: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in cfg.items())


# ---------------------------------------------------------------- the pieces of lessons 03-04


class WorkerGPT:
    """Lesson 04's GPT (module `model` in the worker: the reference one, or in own-pieces the
    learner's) holding weights drawn by the grader, in eval mode; `trusted` is its float64 twin
    here (lesson 04's reference code, never the learner's)."""

    def __init__(self, sub: Sandbox, gen: torch.Generator, cfg: dict | None = None, *,
                 train: bool = False) -> None:
        self.sub, self.cfg = sub, dict(cfg or GPT_CFG)
        mod = sub.module("model")
        config = sub.call(sub.getattr(mod, "GPTConfig"), **self.cfg)
        self.handle = sub.call(sub.getattr(mod, "GPT"), config)
        self.state = ref.random_state(trusted_skeleton(self.cfg), gen)
        loaded = sub.call(self.handle, self.state, method="load_state_dict", strict=False)
        absent = keys_not_taken(loaded, self.state)
        if absent:
            fail(message("lesson06.gpt_weights_missing", keys=", ".join(absent[:6])))
        sub.call(self.handle, method="train" if train else "eval")
        self.trusted = ref.gpt({**self.cfg, "dropout": 0.0}, self.state)

    @property
    def text(self) -> str:
        return f"GPT(GPTConfig({cfg_text(self.cfg)}))"

    def full_logits(self, idx: torch.Tensor) -> torch.Tensor:
        """The reference full forward's logits (B, T, V), float64."""
        with torch.no_grad():
            return self.trusted(idx)[0]


def trusted_skeleton(cfg: dict) -> torch.nn.Module:
    return ref.skeleton("gpt", tuple(sorted({**cfg, "dropout": 0.0}.items())))


class WorkerAttention:
    """Lesson 03's reference CausalSelfAttention in the worker with weights drawn by the grader."""

    def __init__(self, sub: Sandbox, gen: torch.Generator, cfg: dict | None = None) -> None:
        self.sub, self.cfg = sub, dict(cfg or ATTN_CFG)
        cls = sub.getattr(sub.module("attention"), "CausalSelfAttention")
        self.handle = sub.call(cls, SimpleNamespace(**self.cfg))
        self.state = ref.random_state(ref.skeleton("attention", tuple(sorted(self.cfg.items()))), gen)
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


def tokens(B: int, T: int, V: int, gen: torch.Generator) -> torch.Tensor:
    return torch.randint(0, V, (B, T), generator=gen)


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
        fail(called, message("lesson06.shape_wrong", what=message(what), got=tuple(out.shape),
                             expected=tuple(shape)), hint)
    if out.dtype != torch.int64:
        fail(called, message("lesson06.dtype_wrong", what=message(what), got=str(out.dtype)))
    return out


def expect_logits(out, shape: tuple, called, what: str = "lesson06.what_logits") -> torch.Tensor:
    if not isinstance(out, torch.Tensor) or out.device.type == "meta" or out.is_complex() or not out.is_floating_point():
        got = type(out).__name__ if not isinstance(out, torch.Tensor) else f"Tensor(dtype={out.dtype})"
        if isinstance(out, tuple):
            got = f"tuple[{len(out)}]"
        fail(called, message("lesson06.not_a_tensor", what=message(what), got=got))
    if tuple(out.shape) != tuple(shape):
        fail(called, message("lesson06.shape_wrong", what=message(what), got=tuple(out.shape), expected=tuple(shape)))
    return out


def rows(context: torch.Tensor, got: torch.Tensor, expected: torch.Tensor, limit: int = 2) -> Block:
    """Rows as context -> learner's continuation ≠ expected continuation, those that differ first."""
    T = context.shape[1]
    differ = (got != expected).any(dim=1).tolist() if got.shape == expected.shape else [True] * context.shape[0]
    order = sorted(range(context.shape[0]), key=lambda b: not differ[b])
    lines = []
    for b in order[:limit]:
        lines.append(f"[{b}] {context[b].tolist()} -> {got[b, T:].tolist()}  ≠  {expected[b, T:].tolist()}")
    return Block("\n".join(lines) + "\n")


# ---------------------------------------------------------------- sampled generation
# The generation checks of crop-context, kv-cache and eval-mode sample at temperature 1 with
# no top_k and a seeded generator: at temperature 1 the temperature TODO's division changes
# nothing and its greedy branch is never taken, so a slip in sample_next costs only its own
# checks (greedy and temperature), not every check that generates.
SAMPLED_TEMPERATURE = 1.0


def judge_sampled(model: WorkerGPT, idx: torch.Tensor, out: torch.Tensor, seed: int, called, *, extra=()) -> None:
    """Replay the draws on the learner's own prefix, seen through the last block_size tokens:
    one torch.multinomial per step on the eval-mode distribution, from a generator seeded
    `seed`, as sample_next draws at temperature 1."""
    T, bs = idx.shape[1], model.cfg["block_size"]
    if not torch.equal(out[:, :T], idx):
        fail(called, message("lesson06.prefix_changed", got=str(out[0, :T].tolist()), expected=str(idx[0].tolist())))
    V = model.cfg["vocab_size"]
    if bool(((out < 0) | (out >= V)).any()):
        fail(called, message("lesson06.tokens_out_of_range", V=V, got=str(out[0].tolist())))
    g = torch.Generator().manual_seed(seed)
    expected = out.clone()
    steps = ref.next_logits(model.trusted, out, T, bs)  # (steps, B, V)
    for t in range(T, out.shape[1]):
        probs = torch.softmax(steps[t - T].float() / SAMPLED_TEMPERATURE, dim=-1)
        expected[:, t] = torch.multinomial(probs, num_samples=1, generator=g).view(-1)
        if not torch.equal(out[:, t], expected[:, t]):
            fail(called, message("lesson06.sampled_wrong", step=t - T), message("lesson06.rows_legend"),
                 rows(idx, out[:, :t + 1], expected[:, :t + 1]), *extra)


def generate_sampled(submission, model: WorkerGPT, idx: torch.Tensor, steps: int, use_cache: bool, seed: int,
                     hints=None, mode: str = "eval"):
    """The learner's generate at temperature 1 with a worker generator seeded `seed`:
    (tokens (B, T + steps), the call's description for feedback)."""
    called = message("lesson06.called_generate_sampled", model=model.text, shape=tuple(idx.shape), steps=steps,
                     options=f"temperature={SAMPLED_TEMPERATURE}, use_cache={use_cache}", seed=seed, mode=mode)
    with hinted(*FROM_SAMPLE_NEXT, *(hints if hints is not None else CROP_HINTS)):
        out = submission.call(function(submission, "generate"), model.handle, idx, steps,
                              temperature=SAMPLED_TEMPERATURE, generator=worker_generator(submission, seed),
                              use_cache=use_cache)
    return expect_tokens(out, (idx.shape[0], idx.shape[1] + steps), called, what="lesson06.what_generated"), called


# ---------------------------------------------------------------- errors with a known cause


def _hint_for(err: StudentError, patterns) -> object | None:
    if err.todo_pending is not None:
        return None
    text = err.type_name + ": " + err.message + "\n" + "\n".join(
        f"@{f.get('name', '')}: {f.get('line', '')}" for f in err.frames)
    for pattern, make in patterns:
        found = re.search(pattern, text)
        if found:
            hint = make(found)
            if hint is not None:
                return hint
    return None


@contextlib.contextmanager
def hinted(*patterns):
    """Re-raise a learner's error as feedback with a hint when it matches one of `patterns`
    ((regex, lambda match: message or None)); other errors pass through to the engine."""
    try:
        yield
    except StudentError as err:
        hint = _hint_for(err, patterns)
        if hint is not None:
            fail(describe_student_error(err, None, {}), hint)
        raise


SAMPLING_HINTS = (
    (r"probability tensor contains either|invalid multinomial distribution",
     lambda m: message("lesson06.hint_probs_invalid")),
    (r"selected index k out of range|k \(\d+\) is too big|out of range.*topk|topk.*out of range",
     lambda m: message("lesson06.hint_topk_too_big")),
    (r"must be int, not NoneType|'NoneType' object cannot be interpreted",
     lambda m: message("lesson06.hint_topk_none")),
    (r"ZeroDivisionError|division by zero", lambda m: message("lesson06.hint_probs_invalid")),
)

# An error inside sample_next while generate runs: the sampling checks say more.
FROM_SAMPLE_NEXT = ((r"@sample_next:", lambda m: message("lesson06.hint_from_sample_next")),
                    (r"Tensors must have same number of dimensions", lambda m: message("lesson06.hint_next_shape")))

CACHE_HINTS = (
    (r"no caben en block_size", lambda m: message("lesson06.hint_cache_full")),
    (r"IndexError: index out of range in self", lambda m: message("lesson06.hint_positions_range")),
    (r"Sizes of tensors must match except in dimension (\d+)", lambda m: message("lesson06.hint_cat_dim")),
    (r"must match the size of tensor b \(\d+\) at non-singleton dimension 3",
     lambda m: message("lesson06.hint_mask_shape")),
    (r"must match the size of tensor b \(\d+\) at non-singleton dimension 1",
     lambda m: message("lesson06.hint_cat_dim")),
    (r"attn_mask|Expected attn_mask", lambda m: message("lesson06.hint_mask_shape")),
)

CROP_HINTS = (
    (r"AssertionError: .*block_size|Cannot forward sequence", lambda m: message("lesson06.hint_not_cropped")),
    (r"IndexError: index out of range in self", lambda m: message("lesson06.hint_not_cropped")),
)
