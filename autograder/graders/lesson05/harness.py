"""Helpers shared by lesson 05's graders: the learner's train.py behind the sandbox, next to
lesson 04's reference GPT, and the worker-side objects the checks hand to it (a model with
trusted weights, a plain SGD optimizer or the learner's own AdamW, batches); and, for blame,
what reached the clipping of a train_step, seen from outside.

Everything the worker sends back is data; every expected value comes from reference.py (in
the trusted process, on the same weights; in a learner's release, from its recording), and the
comparisons of vectors are made here.

In a learner's release the worker's model.py and attention.py are the learner's own (lessons 04
and 03), not the reference ones: a mistake there shows up in these checks as well.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from autograder.core.results import message
from autograder.engine import recording
from autograder.engine.checks import CheckFailure, fail
from autograder.engine.grader_helpers import config_text, generator
from autograder.sandbox.client import Sandbox, StudentError
from autograder.sandbox.protocol import Handle

ref = recording.reference_of(__package__)


# V, C, hs, nh, T and block_size all different, nh >= 2: a tiny GPT that trains in milliseconds.
CFG = {"vocab_size": 13, "block_size": 8, "n_layer": 2, "n_head": 2, "n_embd": 12, "dropout": 0.0}
DROPOUT_CFG = {**CFG, "dropout": 0.5}
B, T = 3, 5
# A submodule of each kind whose mode matters: the embedding dropout and the attention's.
PROBE_SEED = 5_050  # the model probe's own inputs: fixed, so a recording answers them
MODE_PATHS = ("", "transformer.drop", "transformer.h.0.attn.attn_drop", "transformer.h.1.mlp.dropout")


def model_text():
    """Which GPT the checks built, for their messages: lesson 04's reference one officially; in
    practice grading (a learner's release, no reference pieces) the learner's own."""
    return message("lesson05.model_yours" if recording.mode() == "replay" else "lesson05.model_reference")


def cfg_text(cfg: dict) -> str:
    return f"GPTConfig({config_text(cfg)})"


def fmt(x: float) -> str:
    return f"{x:.6g}"


class Trainer:
    """The learner's train.py in the worker; its GPT is lesson 04's reference one."""

    def __init__(self, sub: Sandbox) -> None:
        self.sub = sub
        self.module = sub.module("train")
        self.torch = sub.library("torch")
        self._functions: dict[str, Handle] = {}
        # One check's learner code may have switched autograd off for good (estimate_loss
        # calling torch.set_grad_enabled(False)): that is its check's failure, not the next's.
        sub.call(sub.getattr(self.torch, "set_grad_enabled"), True)

    def grad_enabled(self) -> bool:
        """Whether autograd is on in the worker; switches it back on when it is not (a learner's
        code that turned it off for good fails its own check, not the next ones)."""
        enabled = self.sub.call(self.sub.getattr(self.torch, "is_grad_enabled"))
        if enabled is not True:
            self.sub.call(self.sub.getattr(self.torch, "set_grad_enabled"), True)
        return enabled is True

    def needs_reference_model(self, *, values: bool = True) -> None:
        """For the checks that assume lesson 04's reference GPT in the worker. Practice grading
        has no reference pieces: the GPT there is the learner's own (their lessons 03 and 04),
        so where it does not take the reference's weights and run, or (with `values`, for the
        checks whose expected values come from the reference) does not give the reference's
        loss for them, the check is skipped, saying why, rather than blaming a TODO of this
        lesson. Officially nothing happens; while recording, the reference's loss is recorded."""
        if self.model_like_reference(values=values) is False:
            pytest.skip("lesson05.practice_model_differs")

    def model_like_reference(self, *, values: bool = True) -> bool | None:
        """Practice grading: whether the GPT in the worker (the learner's own) takes the
        reference's weights and runs and, with `values`, gives the reference's loss for them.
        None officially and while recording (where the probe's reference loss is recorded)."""
        if recording.mode() == "official":
            return None
        gen = generator(PROBE_SEED)
        state = random_state(CFG, gen)
        x, y = random_batch(CFG, B, T, gen)
        expected = ref.loss_at(CFG, state, x, y)
        if recording.mode() != "replay":
            return None
        try:
            model = self.gpt(CFG, state, train=False)
            value = self.sub.call(model, x, y)
            loss = value[1] if isinstance(value, tuple) and len(value) == 2 else None
            got = float(loss) if isinstance(loss, torch.Tensor) and loss.numel() == 1 else None
        except StudentError:
            got = None
        return got is not None and (
            not values or (math.isfinite(got) and relative_gap(got, expected) <= 1e-6)
        )

    # ------------------------------------------------------------ the learner's functions
    def function(self, name: str) -> Handle:
        if name not in self._functions:
            try:
                self._functions[name] = self.sub.getattr(self.module, name)
            except StudentError as err:
                if err.is_a("AttributeError"):
                    fail(message("lesson05.missing_function", name=name))
                raise
        return self._functions[name]

    def call(self, name: str, *args, seed: int | None = None, **kwargs):
        """train.<name>(*args, **kwargs) in the worker."""
        if seed is None:
            return self.sub.call(self.function(name), *args, **kwargs)
        return self.sub.call_traced(self.function(name), *args, seed=seed, **kwargs)["value"]

    # ------------------------------------------------------------ worker-side objects
    def _attr(self, target: Handle, dotted: str) -> Handle:
        for name in dotted.split("."):
            target = self.sub.getattr(target, name)
        return target

    def gpt(
        self, cfg: dict, state: dict, *, double: bool = True, train: bool = True, inference: bool = False
    ) -> Handle:
        """Lesson 04's reference GPT with `state` loaded, in train or eval mode.

        `inference`: built and loaded inside torch.inference_mode, so that its parameters are
        inference tensors. A forward with autograd on then fails ("Inference tensors cannot be
        saved for backward"), and under torch.no_grad it runs: how the graders see, from the
        outside, whether a loss was computed without gradients.
        """
        models = self.sub.module("model")
        config = self.sub.call(self.sub.getattr(models, "GPTConfig"), **cfg)
        cls = self.sub.getattr(models, "GPT")
        if inference:
            mode = self.sub.call(self._attr(self.torch, "inference_mode"))
            partial = self._attr(self.sub.library("functools"), "partial")
            model = self.sub.call(self.sub.call(mode, self.sub.call(partial, cls, config)))
            load = self.sub.call(mode, self.sub.getattr(model, "load_state_dict"))
            self.sub.call(load, {k: v.float() for k, v in state.items()})
        else:
            model = self.sub.call(cls, config)
            if double:
                model = self.sub.call(model, method="double")
            self.sub.call(model, state, method="load_state_dict")
        return self.sub.call(model, method="train" if train else "eval")

    def no_zeroing(self, *targets: Handle) -> None:
        """Make zero_grad a no-op on these objects (a model, an optimizer): for checks of one
        step on a fresh model, whose gradients start as None, so that where the learner zeroes
        them (TODO [zero-grad]) cannot change what those checks see. The no-op is
        functools.partial(functools.partial, torch.is_grad_enabled): called with any arguments,
        it only builds a partial object."""
        partial = self._attr(self.sub.library("functools"), "partial")
        noop = self.sub.call(partial, partial, self._attr(self.torch, "is_grad_enabled"))
        for target in targets:
            self.sub.request("setattr", target=target, name="zero_grad", value=noop)

    def no_stepping(self, optimizer: Handle) -> None:
        """Make optimizer.step a no-op (the same partial as no_zeroing): a train_step then must
        leave the weights exactly as they were, whatever its gradients."""
        partial = self._attr(self.sub.library("functools"), "partial")
        noop = self.sub.call(partial, partial, self._attr(self.torch, "is_grad_enabled"))
        self.sub.request("setattr", target=optimizer, name="step", value=noop)

    def sgd(self, model: Handle, lr: float = 1.0) -> Handle:
        """torch.optim.SGD(model.parameters(), lr): with lr 1 the update IS the gradient."""
        params = self.sub.call(model, method="parameters")
        return self.sub.call(self._attr(self.torch, "optim.SGD"), params, lr=lr)

    def state(self, model: Handle) -> dict:
        return self.sub.call(model, method="state_dict")

    def submodule(self, model: Handle, path: str) -> Handle:
        return self.sub.call(model, path, method="get_submodule") if path else model

    def freeze(self, model: Handle, path: str) -> None:
        self.sub.call(self.submodule(model, path), False, method="requires_grad_")

    def modes(self, model: Handle) -> dict[str, bool]:
        """{submodule path: its .training} for MODE_PATHS ("" is the model itself)."""
        return {path: self.sub.getattr(self.submodule(model, path), "training") for path in MODE_PATHS}

    def grad_norm(self, model: Handle) -> float:
        """The norm of every .grad of the model (0 when no parameter has one), measured with
        clip_grad_norm_(..., max_norm=inf), which leaves the gradients as they are."""
        clip = self._attr(self.torch, "nn.utils.clip_grad_norm_")
        value = self.sub.call(clip, self.sub.call(model, method="parameters"), math.inf)
        return float(value)

    def dataset(self, xs: torch.Tensor, ys: torch.Tensor) -> Handle:
        """TensorDataset(xs, ys) in the worker: iterating it yields the pairs (xs[i], ys[i])."""
        return self.sub.call(self._attr(self.torch, "utils.data.TensorDataset"), xs, ys)

    def one_pass(self, xs: torch.Tensor, ys: torch.Tensor) -> Handle:
        """zip(list(xs), list(ys)) in the worker: the pairs (xs[i], ys[i]) as a one-pass
        iterator without len(), the kind of iterable train() hands estimate_loss (a generator)."""
        builtins = self.sub.getattr(self.sub.library("functools"), "__builtins__")
        zip_ = builtins["zip"] if isinstance(builtins, dict) else self.sub.getattr(builtins, "zip")
        return self.sub.call(zip_, list(xs.unbind(0)), list(ys.unbind(0)))

    def _builtin(self, name: str) -> Handle:
        builtins = self.sub.getattr(self.sub.library("functools"), "__builtins__")
        return builtins[name] if isinstance(builtins, dict) else self.sub.getattr(builtins, name)

    def backward(self, model: Handle, x: torch.Tensor, y: torch.Tensor) -> None:
        """model(x, y)[1].backward() in the worker, leaving each parameter's .grad there, built
        out of library callables (no code of ours runs in the worker): map(model, [x], [y])
        yields (logits, loss), dict() of that pair maps logits to loss, and
        torch.autograd.backward(that dict's values()) is loss.backward(); list() runs it all."""
        map_, dict_ = self._builtin("map"), self._builtin("dict")
        outputs = self.sub.call(map_, model, [x], [y])
        pairs = self.sub.call(map_, dict_, [outputs])
        losses = self.sub.call(map_, self.sub.getattr(dict_, "values"), pairs)
        done = self.sub.call(map_, self._attr(self.torch, "autograd.backward"), losses)
        self.sub.call(self._builtin("list"), done)

    def batch_source(self, train: tuple, val: tuple) -> Handle:
        """A get_batch for train(): get_batch("train") -> train, get_batch("val") -> val.

        functools.partial(object.__getattribute__, SimpleNamespace(train=..., val=...)): a
        callable built in the worker out of data, with no code of ours to run there."""
        partial = self._attr(self.sub.library("functools"), "partial")
        lookup = self._attr(partial, "__base__.__getattribute__")  # object.__getattribute__
        return self.sub.call(partial, lookup, SimpleNamespace(train=train, val=val))


# ---------------------------------------------------------------- a step, seen from outside


class Step:
    """One train_step of the learner's on lesson 04's reference GPT (float64, random weights)
    with a plain SGD optimizer of lr 1, so that the change of the weights is exactly the
    gradient the learner's code handed to optimizer.step()."""

    def __init__(self, trainer: Trainer, cfg: dict, state: dict, *, zeroing: bool = True) -> None:
        self.trainer, self.cfg = trainer, cfg
        self.names = ref.parameter_names(cfg)
        self.model = trainer.gpt(cfg, state)
        self.optimizer = trainer.sgd(self.model)
        if not zeroing:
            trainer.no_zeroing(self.model, self.optimizer)
        self.state = state

    def run(self, x: torch.Tensor, y: torch.Tensor, grad_clip: float) -> tuple[object, dict, torch.Tensor]:
        """(what train_step returned, the weights after it, the update: weights before - after)."""
        loss = self.trainer.call("train_step", self.model, self.optimizer, x, y, grad_clip=grad_clip)
        after = self.trainer.state(self.model)
        missing = [name for name in self.names if name not in after]
        if missing:  # the reference GPT always has them: something replaced the model's modules
            fail(message("lesson05.state_changed", names=", ".join(missing[:4])))
        recast = [name for name in self.names if after[name].dtype != self.state[name].dtype]
        if recast:  # the weights were float64: a step must not change what they are
            fail(
                message(
                    "lesson05.state_dtype_changed",
                    names=", ".join(recast[:4]),
                    got=str(after[recast[0]].dtype).removeprefix("torch."),
                    expected=str(self.state[recast[0]].dtype).removeprefix("torch."),
                )
            )
        update = flat(self.state, self.names) - flat(after, self.names)
        self.state = after
        return loss, after, update

    def called(self, x: torch.Tensor, grad_clip: float, *, again: bool = False):
        key = "lesson05.called_step_again" if again else "lesson05.called_step"
        return message(
            key, model=model_text(), cfg=cfg_text(self.cfg), shape=tuple(x.shape), clip=fmt(grad_clip)
        )


# ---------------------------------------------------------------- the learner's own optimizer

# configure_optimizer's arguments in the checks: none of them the defaults.
WD, LR, BETAS = 0.07, 4e-3, (0.85, 0.97)


def identify(tensor, state: dict, names) -> str | None:
    """Which of the named parameters `tensor` is, by its values (random_state's weights are all
    different), or None."""
    if not isinstance(tensor, torch.Tensor):
        return None
    for name in names:
        value = state[name]
        if tensor.shape == value.shape and torch.equal(tensor.double(), value.double()):
            return name
    return None


class OwnStep:
    """train_steps of the learner's on lesson 04's reference GPT (float64, random weights) with
    the optimizer their configure_optimizer returns: AdamW with their two groups. The gradient
    that reached optimizer.step() is read from AdamW's state: after a step, each parameter's
    exp_avg moved from m to m + (1 - beta1) * (g - m), so g = (exp_avg - beta1 * m) / (1 - beta1)
    (with m = 0 before its first step; a parameter whose state did not advance got none).

    Built with `OwnStep.of(...)`, which gives None where the learner's optimizer cannot serve
    that reading (configure_optimizer raises or is still pending, or returns something other
    than an AdamW without maximize whose groups hold the model's parameters at most once each):
    TODO [weight-decay-groups]'s own checks say what is wrong there, and the check that drives
    the optimizer, already judged with a plain SGD, is not charged for it. Which parameters it
    holds, and in which groups, is the learner's: only those are judged."""

    def __init__(self, trainer, cfg, state, model, optimizer, lr, held, group_of, beta1) -> None:
        self.trainer, self.cfg, self.state = trainer, cfg, state
        self.model, self.optimizer, self.lr = model, optimizer, lr
        self.held, self.group_of, self.beta1 = held, group_of, beta1
        self.names = ref.parameter_names(cfg)
        self.moments: dict[str, torch.Tensor] = {}
        self.steps: dict[str, float] = {}
        self.slices, start = {}, 0
        for name in self.names:
            self.slices[name] = slice(start, start + state[name].numel())
            start += state[name].numel()

    @classmethod
    def of(cls, trainer: Trainer, cfg: dict, state: dict, *, learning_rate: float, zeroing: bool):
        """The learner's optimizer on a fresh model, ready to step; None where it cannot serve."""
        model = trainer.gpt(cfg, state)
        try:
            optimizer = trainer.call(
                "configure_optimizer", model, weight_decay=WD, learning_rate=learning_rate, betas=BETAS
            )
            if not isinstance(optimizer, Handle) or optimizer.type != "AdamW":
                return None
            raw = trainer.sub.getattr(optimizer, "param_groups")
        except (StudentError, CheckFailure):  # raised, pending, or no configure_optimizer at all
            return None
        if not isinstance(raw, list):
            return None
        names = ref.parameter_names(cfg)
        held, group_of, beta1 = [], {}, []
        for index, group in enumerate(raw):
            betas = group.get("betas") if isinstance(group, dict) else None
            params = group.get("params") if isinstance(group, dict) else None
            if (
                group.get("maximize")
                or not isinstance(params, list)
                or not (isinstance(betas, (tuple, list)) and len(betas) == 2 and isinstance(betas[0], float))
            ):
                return None
            beta1.append(float(betas[0]))
            for tensor in params:
                name = identify(tensor, state, names)
                if name is None or name in group_of:
                    return None
                held.append(name)
                group_of[name] = index
        if not held:
            return None
        if not zeroing:
            trainer.no_zeroing(model, optimizer)
        return cls(trainer, cfg, state, model, optimizer, learning_rate, held, group_of, beta1)

    def called(self, x: torch.Tensor, grad_clip: float, *, again: bool = False):
        return message(
            "lesson05.called_own_step_again" if again else "lesson05.called_own_step",
            model=model_text(),
            cfg=cfg_text(self.cfg),
            wd=WD,
            lr=self.lr,
            betas=BETAS,
            shape=tuple(x.shape),
            clip=fmt(grad_clip),
        )

    def run(self, x: torch.Tensor, y: torch.Tensor, grad_clip: float) -> tuple[dict, torch.Tensor]:
        """One train_step: (the weights after it, the gradient that reached optimizer.step() as
        one float64 vector in parameter_names order, zeros for the parameters the optimizer does
        not hold)."""
        self.trainer.call("train_step", self.model, self.optimizer, x, y, grad_clip=grad_clip)
        after = self.trainer.state(self.model)
        if any(name not in after for name in self.names):
            fail(
                message(
                    "lesson05.state_changed", names=", ".join(n for n in self.names if n not in after)[:200]
                )
            )
        saved = self.trainer.sub.call(self.optimizer, method="state_dict")
        per_param = saved.get("state") if isinstance(saved, dict) else None
        if not isinstance(per_param, dict):
            per_param = {}  # a torch AdamW always has one: no parameter got a gradient
        reached = torch.zeros(sum(self.state[n].numel() for n in self.names), dtype=torch.float64)
        for index, name in enumerate(self.held):
            entry = per_param.get(index)
            moment = entry.get("exp_avg") if isinstance(entry, dict) else None
            count = entry.get("step") if isinstance(entry, dict) else None
            if not isinstance(moment, torch.Tensor) or moment.shape != self.state[name].shape:
                continue  # no step for it yet: no gradient reached it
            count = float(count) if isinstance(count, (torch.Tensor, int, float)) else math.nan
            if count == self.steps.get(name, 0.0):
                continue  # its state did not advance: it had no gradient this step
            b1 = self.beta1[self.group_of[name]]
            before = self.moments.get(name, torch.zeros_like(moment, dtype=torch.float64))
            reached[self.slices[name]] = ((moment.double() - b1 * before) / (1.0 - b1)).reshape(-1)
            self.moments[name] = moment.double().clone()
            self.steps[name] = count
        return after, reached

    def keep_stepped(self) -> bool:
        """After the first step on a fresh model: judge only the tensors that got a gradient.
        One that got none is not the model's parameter (a copy with its values, say
        p.detach()): TODO [weight-decay-groups]'s. (A step that reached no gradient at all is
        also the plain-SGD test's failure, judged there.) False when none is left."""
        self.held = [name for name in self.held if name in self.steps]
        return bool(self.held)

    def held_only(self, vector: torch.Tensor) -> torch.Tensor:
        """`vector` (parameter_names order) with zeros where the optimizer holds no parameter."""
        out = torch.zeros_like(vector, dtype=torch.float64)
        for name in self.held:
            out[self.slices[name]] = vector[self.slices[name]].double()
        return out

    def parts(self, names) -> dict[str, slice]:
        return {name: self.slices[name] for name in names}


# ---------------------------------------------------------------- before the clipping


def weights_moved_without_step(trainer: Trainer, cfg: dict, state: dict, x, y) -> bool:
    """Whether train_step changes the weights by itself: one train_step (grad_clip = 0, so no
    clipping code has anything to do) with an optimizer whose step() is a no-op must leave every
    weight as it was. Zeroing the weights (p.data.zero_(), p.zero_()) instead of the gradients
    moves them. False when it cannot be told (the learner's code raised)."""
    step = Step(trainer, cfg, state, zeroing=False)
    trainer.no_stepping(step.optimizer)
    try:
        _, _, update = step.run(x, y, 0.0)
    except StudentError:
        return False
    return not bool(torch.isfinite(update).all()) or norm(update) > 0


def wrong_before_clipping(trainer: Trainer, cfg: dict, state: dict, x, y, g: torch.Tensor) -> dict | None:
    """Whether the gradient was already wrong when it reached train_step's clipping, seen from
    outside: one train_step on a fresh model (SGD of lr 1, zeroing made a no-op) with
    grad_clip = 0, which by the contract clips nothing, and one with grad_clip a thousand times
    the gradient's norm, where there is nothing to clip. When both give the same update and it
    is not the batch's gradient `g`, the clipping code did not make the difference: the
    gradient came wrong from the code before it (TODO [zero-grad], the only TODO a train_step
    runs before backward: zeroing, or a loss split into parts and summed there). When one of
    them is `g`, or they differ, the clipping code depends on grad_clip where it should not,
    and the clipping checks judge it as theirs: None.

    Returns {"scale": s or None (the update is s times g, or not along g at all),
    "weights_moved": train_step changed the weights outside optimizer.step()}."""
    updates = []
    try:
        for clip in (0.0, 1e3 * norm(g)):
            _, _, update = Step(trainer, cfg, state, zeroing=False).run(x, y, clip)
            updates.append(update)
    except StudentError:
        return None  # the learner's code raised: the check's own run says where
    off, far = updates
    if not torch.isfinite(off).all() or not close(far, off) or close(off, g) or close(far, g):
        return None
    scale = float(off @ g.double()) / float(g.double() @ g.double()) if along(off, g) else None
    return {"scale": scale, "weights_moved": weights_moved_without_step(trainer, cfg, state, x, y)}


def before_clipping_text(found: dict):
    """The message of a check that waits on TODO [zero-grad] because of `found`
    (wrong_before_clipping's answer)."""
    scale = found["scale"]
    return message(
        "lesson05.wrong_before_clip",
        detail=message("lesson05.wrong_before_clip_scaled", scale=fmt(scale))
        if scale is not None
        else message("lesson05.wrong_before_clip_other"),
        moved=message("lesson05.wrong_before_clip_moved") if found["weights_moved"] else "",
    )


def expect_finite_update(update: torch.Tensor, *called) -> None:
    if not torch.isfinite(update).all():
        fail(*called, message("lesson05.update_not_finite"))


def expect_float(value, called, what) -> float:
    """A learner's returned number: a Python float (an int or a NumPy float also do)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if isinstance(value, torch.Tensor):
            fail(called, message("lesson05.returned_tensor", what=what, shape=tuple(value.shape)))
        fail(called, message("lesson05.returned_not_float", what=what, got=type(value).__name__))
    if not math.isfinite(value):
        fail(called, message("lesson05.returned_not_finite", what=what, got=value))
    return float(value)


def relative_gap(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-12)


# ---------------------------------------------------------------- inputs and vectors


def random_state(cfg: dict, generator: torch.Generator) -> dict:
    """A float64 state_dict for the model with every parameter drawn at random, so no two
    parameters hold the same values (a LayerNorm's ones and zeros would be indistinguishable)
    and gradients are not tiny. The tied weight appears under both of its names with the same
    values."""
    state = {}
    for key, shape, tied_to in ref.state_layout(cfg):
        if tied_to is not None:
            state[key] = state[tied_to]
            continue
        noise = torch.randn(shape, generator=generator, dtype=torch.float64)
        if len(shape) >= 2:
            state[key] = noise * 0.3
        elif ".ln_" in key and key.endswith("weight"):
            state[key] = 1.0 + noise * 0.2
        else:
            state[key] = noise * 0.2
    return state


def random_batch(cfg: dict, B: int, T: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randint(cfg["vocab_size"], (B, T), generator=generator)
    y = torch.randint(cfg["vocab_size"], (B, T), generator=generator)
    return x, y


def flat(tensors: dict, names: list[str]) -> torch.Tensor:
    """The named tensors as one float64 vector, in the order of `names`."""
    return torch.cat([tensors[name].detach().reshape(-1) for name in names]).double()


def norm(v: torch.Tensor) -> float:
    return float(v.norm())


def along(u: torch.Tensor, g: torch.Tensor, tol: float = 1e-6) -> bool:
    """Whether u is a positive multiple of g (same direction), up to `tol` relative error."""
    u, g = u.double(), g.double()
    gg = float(g @ g)
    if gg == 0 or not torch.isfinite(u).all():
        return False
    scale = float(u @ g) / gg
    return scale > 0 and norm(u - scale * g) <= tol * norm(u)


def close(u: torch.Tensor, v: torch.Tensor, rtol: float = 1e-5) -> bool:
    """Whether two vectors agree up to `rtol` of v's norm."""
    u, v = u.double(), v.double()
    return bool(torch.isfinite(u).all()) and norm(u - v) <= rtol * max(norm(v), 1e-12)
