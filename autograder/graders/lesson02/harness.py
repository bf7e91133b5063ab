"""Helpers shared by lesson 02's graders: the weights they draw, the learner's modules behind
the sandbox with those weights loaded, a bigram model built from torch parts for generate, and
the hints that name a recognisable mistake from the error it raises."""

from __future__ import annotations

import contextlib
import re

import torch

from autograder.core.results import message
from autograder.engine.checks import describe_student_error, fail
from autograder.engine.grader_helpers import first_hint, hinted, load_weights, tokens, worker_generator
from autograder.sandbox.client import Sandbox, StudentError

FILE = "bigram"
TABLE = "token_embedding_table.weight"
POSITIONS = "position_embedding_table.weight"
MULTINOMIAL = "torch.multinomial"
# B, T, V and C all different (and T < block_size), so that an axis mixed up cannot hide.
BIGRAM = {"V": 13, "B": 3, "T": 7}
EMBED = {"V": 13, "C": 10, "block_size": 9, "B": 2, "T": 6}


# ---------------------------------------------------------------- weights the grader draws


def random_table(rows: int, cols: int, generator: torch.Generator, std: float = 1.0) -> torch.Tensor:
    return torch.randn(rows, cols, generator=generator) * std


def chain_successors(V: int, generator: torch.Generator) -> torch.Tensor:
    """succ[i]: one random cycle through all V tokens, so no token follows itself."""
    order = torch.randperm(V, generator=generator)
    succ = torch.empty(V, dtype=torch.long)
    succ[order] = order.roll(-1)
    return succ


def chain_table(succ: torch.Tensor, peak: float = 40.0) -> torch.Tensor:
    """A (V, V) table whose row i puts all the probability on succ[i] (e^-40: never drawn)."""
    V = succ.numel()
    table = torch.zeros(V, V)
    table[torch.arange(V), succ] = peak
    return table


def every_target(B: int, T: int, V: int, gen) -> torch.Tensor:
    """Random targets (B, T) in which every token id 0..V-1 is the target of some position
    (min(V, B*T) distinct ids where B*T < V): a loss that leaves a class out (ignore_index=0,
    the last id cut off the logits) differs from the right one on every seed."""
    targets = tokens(B, T, V, gen)
    n = min(V, B * T)
    targets.view(-1)[torch.randperm(B * T, generator=gen)[:n]] = torch.randperm(V, generator=gen)[:n]
    return targets


def function(sub: Sandbox, name: str):
    return sub.getattr(sub.module(FILE), name)


def load_or_fail(sub: Sandbox, handle, weights: dict, call: str) -> None:
    """The grader's weights into the learner's module; fails naming the ones it did not take."""
    absent = load_weights(sub, handle, weights)
    if absent:
        fail(message("lesson02.weights_missing", keys=", ".join(absent), call=call))


class LearnerBigram:
    """A learner's BigramLanguageModel in the worker, holding a table drawn by the grader."""

    def __init__(self, sub: Sandbox, V: int, table: torch.Tensor, judging: str = "embedding-lookup") -> None:
        """judging: the TODO of the check that drives it; an error that names the other
        TODO's mistake fails the check as waiting on that TODO (see loss_hints)."""
        self.sub, self.V, self.table, self.judging = sub, V, table, judging
        self.handle = sub.call(function(sub, "BigramLanguageModel"), V)
        load_or_fail(sub, self.handle, {TABLE: table}, self.call_text)
        sub.call(self.handle, method="eval")

    @property
    def call_text(self) -> str:
        return f"BigramLanguageModel({self.V})"

    def called(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        if targets is None:
            return message("lesson02.called_bigram", call=self.call_text, shape=tuple(idx.shape))
        return message("lesson02.called_bigram_targets", call=self.call_text, shape=tuple(idx.shape))

    def forward(
        self,
        idx: torch.Tensor,
        targets: torch.Tensor | None = None,
        *,
        with_targets: bool = True,
        pair: bool = True,
    ):
        """(logits, loss) as the learner's forward returns them; fails unless it is a pair.

        With pair=False a bare tensor is taken as the logits (loss None): returning only the
        logits without targets is the loss code's mistake, which loss-none reports."""
        with loss_hints(idx.shape, self.V, self.judging):
            if targets is None and not with_targets:
                result = self.sub.call(self.handle, idx)
            else:
                result = self.sub.call(self.handle, idx, targets)
        if not pair and isinstance(result, torch.Tensor):
            return result, None
        if not (isinstance(result, tuple) and len(result) == 2):
            got = (
                type(result).__name__
                if not isinstance(result, torch.Tensor)
                else f"Tensor{tuple(result.shape)}"
            )
            fail(self.called(idx, targets), message("lesson02.not_a_pair", got=got))
        return result

    def logits(
        self,
        idx: torch.Tensor,
        targets: torch.Tensor | None = None,
        *,
        with_targets: bool = True,
        pair: bool = True,
    ):
        logits, loss = self.forward(idx, targets, with_targets=with_targets, pair=pair)
        expect_tensor(logits, self.called(idx, targets), "lesson02.what_logits")
        return logits, loss

    def table_grads(self, idx: torch.Tensor, targets: torch.Tensor | None, cotangents: list) -> list:
        """Per cotangent (shaped like forward's output), the gradient reaching the table, or
        None where what the cotangent asks for carries no gradient to any parameter."""
        args = [idx] if targets is None else [idx, targets]
        with loss_hints(idx.shape, self.V, self.judging):
            return parameter_grads(
                self.sub, self.handle, args, cotangents, TABLE, self.called_grad(idx, targets)
            )

    def called_grad(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        key = "lesson02.called_grad" if targets is None else "lesson02.called_grad_targets"
        return message(key, call=self.call_text, shape=tuple(idx.shape))


def parameter_grads(sub: Sandbox, handle, args: list, cotangents: list, name: str, called) -> list:
    """Per cotangent (shaped like the module's output), the gradient reaching its parameter
    `name`, or None where what the cotangent asks for carries no gradient to any parameter
    (Sandbox.param_vjp: plain autograd in the worker)."""
    result = sub.param_vjp(handle, args, cotangents)
    grads = result.get("grads") if isinstance(result, dict) else None
    if not (isinstance(grads, list) and len(grads) == len(cotangents)):
        fail(called, message("lesson02.grads_unreadable"))
    return [
        g.get(name) if isinstance(g, dict) and isinstance(g.get(name), torch.Tensor) else None for g in grads
    ]


def expect_tensor(value, called, what_key: str) -> None:
    if not isinstance(value, torch.Tensor) or value.device.type == "meta" or value.is_complex():
        got = (
            type(value).__name__
            if not isinstance(value, torch.Tensor)
            else f"Tensor(device={value.device.type})"
        )
        fail(called, message("lesson02.not_a_tensor", what=message(what_key), got=got))


def embedding_tables(cfg: dict, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(token table (V, C), position table (block_size, C)) drawn from gen."""
    return torch.randn(cfg["V"], cfg["C"], generator=gen), torch.randn(
        cfg["block_size"], cfg["C"], generator=gen
    )


def forked(gen: torch.Generator) -> torch.Generator:
    """A generator in gen's state, drawing without moving gen: what a draw would give that
    only another path (another machine, another learner's code) takes."""
    return torch.Generator().set_state(gen.get_state())


class LearnerEmbedding:
    """A learner's TokenPositionEmbedding in the worker, holding tables drawn by the grader."""

    def __init__(self, sub: Sandbox, cfg: dict, gen: torch.Generator) -> None:
        self.sub, self.cfg = sub, cfg
        V, C, bs = cfg["V"], cfg["C"], cfg["block_size"]
        self.tok, self.pos = embedding_tables(cfg, gen)
        self.handle = sub.call(function(sub, "TokenPositionEmbedding"), V, C, bs)
        load_or_fail(
            sub, self.handle, {"token_embedding_table.weight": self.tok, POSITIONS: self.pos}, self.call_text
        )
        sub.call(self.handle, method="eval")

    @property
    def call_text(self) -> str:
        c = self.cfg
        return f"TokenPositionEmbedding({c['V']}, {c['C']}, {c['block_size']})"

    def called(self, idx: torch.Tensor, device: str = "cpu"):
        key = "lesson02.called_embedding" if device == "cpu" else "lesson02.called_embedding_device"
        return message(key, call=self.call_text, shape=tuple(idx.shape), device=device)

    def called_grad(self, idx: torch.Tensor):
        return message("lesson02.called_embedding_grad", call=self.call_text, shape=tuple(idx.shape))

    def position_grad(self, idx: torch.Tensor, v: torch.Tensor) -> torch.Tensor | None:
        """The gradient of <forward(idx), v> reaching the position table (None: none does)."""
        with position_hints(idx.shape[1], self.cfg):
            return parameter_grads(self.sub, self.handle, [idx], [v], POSITIONS, self.called_grad(idx))[0]

    def forward(self, idx: torch.Tensor, handle=None, *, capture: bool = False) -> dict:
        with position_hints(idx.shape[1], self.cfg):
            return self.sub.call_traced(
                handle or self.handle,
                idx,
                capture=("position_embedding_table",) if capture else (),
                no_grad=True,
            )


# ---------------------------------------------------------------- a model for generate


class TableModel:
    """A position-wise bigram model built in the worker from torch parts only, so that
    generate's checks depend on no other TODO: an Embedding whose row i is the logits of the
    token after i (shifted to be positive), then a ReLU RNN with identity input weights and no
    recurrence, which passes each row through unchanged. Called as model(idx) it returns the
    tuple (logits (B, T, V), h_n), as the learner's models return (logits, loss).

    `table` holds the exact float32 logits; the trusted side replays generate with it.
    """

    SHIFT = 20.0  # softmax does not change; ReLU keeps every (now positive) logit

    def __init__(self, sub: Sandbox, table: torch.Tensor) -> None:
        self.V = table.shape[0]
        self.table = (table + self.SHIFT).float()
        assert bool((self.table > 0).all())
        torch_h = sub.library("torch")
        nn = sub.getattr(torch_h, "nn")
        emb = sub.call(sub.getattr(nn, "Embedding"), self.V, self.V)
        rnn = sub.call(
            sub.getattr(nn, "RNN"), self.V, self.V, nonlinearity="relu", bias=False, batch_first=True
        )
        self.handle = sub.call(sub.getattr(nn, "Sequential"), emb, rnn)
        sub.call(
            self.handle,
            {
                "0.weight": self.table,
                "1.weight_ih_l0": torch.eye(self.V),
                "1.weight_hh_l0": torch.zeros(self.V, self.V),
            },
            method="load_state_dict",
        )
        sub.call(self.handle, method="eval")


class CannotJudge(Exception):
    """A sampling check cannot judge the sampling code: the logits TODO [last-step] hands it are
    not (B, V), which the last-position check reports. The check then passes: its TODO is
    judged once TODO [last-step] gives it what it needs."""


class Generate:
    """The learner's generate(model, idx, max_new_tokens, generator=g), g a torch.Generator
    built in the worker with a seed the grader knows."""

    def __init__(self, sub: Sandbox, model: TableModel) -> None:
        self.sub, self.model = sub, model
        self.fn = function(sub, "generate")

    def called(self, idx: torch.Tensor, steps: int, seed: int | None, global_seed: int | None = None):
        if seed is None:
            key = "lesson02.called_generate_none"
        elif global_seed is None:
            key = "lesson02.called_generate"
        else:
            key = "lesson02.called_generate_global"
        return message(
            key, shape=tuple(idx.shape), steps=steps, V=self.model.V, seed=seed, global_seed=global_seed
        )

    def run(
        self,
        idx: torch.Tensor,
        steps: int,
        seed: int | None,
        *,
        global_seed: int = 0,
        spy: bool = False,
        judging: str = "sampling",
        rows_fine: bool = False,
    ) -> dict:
        """{"value": the output, "spied": torch.multinomial's calls} with torch's global seed
        set to `global_seed` first (so that a learner who ignores `generator` is
        reproducible too, and can be told apart). seed None: generator=None, which the
        contract says draws from torch's global generator.

        judging: the TODO the calling check judges. "sampling": an error that comes from the
        logits TODO [last-step] keeps (harness.last_step_broke) raises CannotJudge, since the
        sampling code cannot be judged on them; "last-step": only the hints that name TODO
        [last-step] are given, and any other error goes through as the learner raised it."""
        gen = worker_generator(self.sub, seed) if seed is not None else None
        with generate_hints(
            idx.shape, self.model.V, only_last_step=judging == "last-step", rows_fine=rows_fine
        ):
            try:
                return self.sub.call_traced(
                    self.fn,
                    self.model.handle,
                    idx,
                    steps,
                    generator=gen,
                    spy=(MULTINOMIAL,) if spy else (),
                    seed=global_seed,
                )
            except StudentError as err:
                if judging == "sampling" and last_step_broke(err, *idx.shape):
                    raise CannotJudge from None
                raise

    def run_keeping_input(self, idx: torch.Tensor, steps: int, seed: int) -> tuple:
        """(output, idx as the worker holds it after the call): generate is called through a
        functools.partial built in the worker, which keeps its own reference to idx, so an
        in-place change of the input can be seen."""
        gen = worker_generator(self.sub, seed)
        partial = self.sub.getattr(self.sub.library("functools"), "partial")
        with generate_hints(idx.shape, self.model.V):
            bound = self.sub.call(partial, self.fn, self.model.handle, idx)
            try:
                value = self.sub.call_traced(bound, steps, generator=gen, seed=0)["value"]
            except StudentError as err:
                if last_step_broke(err, *idx.shape):
                    raise CannotJudge from None
                raise
        args = self.sub.getattr(bound, "args")
        after = args[1] if isinstance(args, tuple) and len(args) == 2 else None
        return value, after if isinstance(after, torch.Tensor) else None


def expect_generated(out, idx: torch.Tensor, steps: int, called) -> torch.Tensor:
    """The output must be a (B, T + steps) int64 tensor; a wrong length is diagnosed."""
    B, T = idx.shape
    if not isinstance(out, torch.Tensor) or out.device.type == "meta":
        got = type(out).__name__ if not isinstance(out, torch.Tensor) else f"Tensor(device={out.device.type})"
        fail(called, message("lesson02.generate_not_tensor", got=got))
    expected = (B, T + steps)
    if tuple(out.shape) != expected:
        got = tuple(out.shape)
        hint = None
        if len(got) == 2 and got[0] == B:
            if got[1] == T and steps > 0:
                hint = message("lesson02.generate_no_growth")
            elif got[1] in (steps, 1) and T != got[1]:
                hint = message("lesson02.generate_only_new")
            elif got[1] == T + 1 and steps > 1:
                hint = message("lesson02.generate_one_step")
        fail(called, message("lesson02.generate_shape", got=got, expected=expected), hint)
    if out.dtype != torch.int64:
        fail(called, message("lesson02.generate_dtype", got=str(out.dtype)))
    return out


# ---------------------------------------------------------------- errors with a known cause


def _hinted(patterns):
    """The first of `patterns` found in the learner's error message or in the lines of its
    traceback gives the hint."""
    return hinted(
        lambda err: first_hint(
            err.message + "\n" + "\n".join(str(f.get("line", "")) for f in err.frames), patterns
        )
    )


@contextlib.contextmanager
def _hinted_for(rules, judging: str):
    """grader_helpers.hinted for rules that each name the TODO whose mistake they recognise
    (pattern, make, todo): the check of `judging` fails with the hint, as its own failure when the
    mistake is its TODO's and as waiting on the other TODO otherwise (a loss code that breaks
    forward(idx) without targets is not the lookup's)."""
    try:
        yield
    except StudentError as err:
        if err.todo_pending is None:
            text = err.message + "\n" + "\n".join(str(f.get("line", "")) for f in err.frames)
            for pattern, make, todo in rules:
                found = re.search(pattern, text)
                hint = make(found) if found else None
                if hint is not None:
                    fail(
                        describe_student_error(err, None, {}),
                        hint,
                        waits_on=None if todo == judging else todo,
                    )
        raise


def loss_hints(shape, V: int, judging: str = "loss-reshape"):
    """Hints for a learner's error in BigramLanguageModel.forward, each naming its TODO; judging:
    the TODO of the calling check."""
    B, T = shape
    loss, lookup = "loss-reshape", "embedding-lookup"
    return _hinted_for(
        (
            # F.cross_entropy on (B, T, V) logits: the classes are dim 1, so it wants targets (B, V).
            (
                r"Expected target size \[\d+, \d+\], got \[\d+, \d+\]",
                lambda m: message("lesson02.hint_ce_unflattened", T=T, V=V),
                loss,
            ),
            (
                r"Expected input batch_size \((\d+)\) to match target batch_size \((\d+)\)",
                lambda m: message("lesson02.hint_ce_batch", got_in=m[1], got_t=m[2], N=B * T),
                loss,
            ),
            (r"one_hot", lambda m: message("lesson02.hint_one_hot", V=V), lookup),
            # logits never defined: the lookup's line is missing (read in the loss code or in the
            # provided `return logits, loss`)
            (
                r"local variable 'logits'|name 'logits' is not defined",
                lambda m: message("lesson02.hint_logits_undefined"),
                lookup,
            ),
            (
                r"'NoneType' object has no attribute|NoneType",
                lambda m: message("lesson02.hint_targets_none"),
                loss,
            ),
            (
                r"local variable 'loss'|cannot access local variable 'loss'|name 'loss' is not defined",
                lambda m: message("lesson02.hint_loss_undefined"),
                loss,
            ),
        ),
        judging,
    )


def position_hints(T: int, cfg: dict):
    bs = cfg["block_size"]
    return _hinted(
        (
            (
                r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)|"
                r"broadcast a dimension of length (\d+)",
                lambda m: message("lesson02.hint_positions_block_size", T=T, bs=bs) if T != bs else None,
            ),
            (
                r"index out of range",
                lambda m: message("lesson02.hint_positions_index", bs=bs, top=cfg["V"] - 1),
            ),
            (
                r"Expected all tensors to be on the same device|on device|device type",
                lambda m: message("lesson02.hint_positions_device"),
            ),
        )
    )


def generate_hints(shape, V: int, *, only_last_step: bool = False, rows_fine: bool = False):
    """Hints for a learner's error in generate. only_last_step: only the errors that say the
    logits kept by TODO [last-step] are not (B, V); any other error goes through as it is (the
    engine then says in whose TODO it was raised). rows_fine: generate worked with B > 1, so
    with B = 1 a 1-D draw is logits squeezed down to (V,)."""
    B, T = shape
    last_step = (
        (r"prob_dist must be 1 or 2 dim", lambda m: message("lesson02.hint_probs_3d")),
        (
            r"Tensors must have same number of dimensions",
            lambda m: message("lesson02.hint_last_step_squeezed", V=V) if rows_fine and B == 1 else None,
        ),
        (
            r"Sizes of tensors must match except in dimension 1\D+(\d+)\D+(\d+)",
            lambda m: (
                message("lesson02.hint_cat_sizes", B=B)
                if not only_last_step or last_step_rows(int(m[2]), B, T)
                else None
            ),
        ),
    )
    if only_last_step:
        return _hinted(last_step)
    return _hinted(
        last_step
        + (
            (
                r"Sizes of tensors must match except in dimension 1",
                lambda m: message("lesson02.hint_cat_sizes", B=B),
            ),
            (
                r"invalid multinomial distribution|probability tensor contains",
                lambda m: message("lesson02.hint_probs_negative"),
            ),
            (r"Tensors must have same number of dimensions", lambda m: message("lesson02.hint_cat_dims")),
        )
    )


def last_step_rows(rows: int, B: int, T: int) -> bool:
    """Whether `rows` new tokens per step (instead of B) is what logits kept from every position
    (B*T rows) or from the batch axis (logits[-1]: T rows) give: TODO [last-step]'s doing."""
    return rows != B and rows in (B * T, T)


def last_step_broke(err: StudentError, B: int, T: int) -> bool:
    """Whether a learner's error in generate comes from the logits TODO [last-step] keeps not
    being (B, V): torch.multinomial given a 3-D tensor, or B*T or T tokens drawn per step. The
    sampling code itself is then not at fault, and its checks cannot judge it."""
    if err.todo_pending is not None:
        return False
    if "prob_dist must be 1 or 2 dim" in err.message:
        return True
    found = re.search(r"Sizes of tensors must match except in dimension 1\D+(\d+)\D+(\d+)", err.message)
    return bool(found) and last_step_rows(int(found[2]), B, T)
