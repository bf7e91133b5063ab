"""Hidden checks of configure_optimizer (TODO [weight-decay-groups]).

The model is lesson 04's reference GPT with random weights drawn here, so that no two
parameters hold the same values: each tensor the optimizer's groups hold is then recognised,
by its values, as one named parameter of the model (or as none)."""

from __future__ import annotations

import math

import pytest

from autograder.core.results import message
from autograder.engine import recording
from autograder.engine.checks import fail
from autograder.engine.grader_helpers import generator
from autograder.sandbox.client import StudentError
from autograder.sandbox.protocol import Handle

from .harness import (
    BETAS,
    CFG,
    LR,
    WD,
    B,
    T,
    Trainer,
    cfg_text,
    identify,
    model_text,
    random_batch,
    random_state,
)

ref = recording.reference_of(__package__)

TIED = "transformer.wte.weight"  # named_parameters() gives the tied weight this name


class Groups:
    """What configure_optimizer returned, with each group's tensors named."""

    def __init__(self, submission, check_seed: int, frozen: tuple[str, ...] = ()) -> None:
        self.trainer = Trainer(submission)
        self.trainer.needs_reference_model(values=False)
        self.state = random_state(CFG, generator(check_seed))
        self.dims = ref.parameter_dims(CFG)
        self.model = model = self.trainer.gpt(CFG, self.state)
        for path in frozen:
            self.trainer.freeze(model, path)
        self.frozen = {name for name in self.dims if any(name.startswith(path + ".") for path in frozen)}
        self.trainable = [name for name in self.dims if name not in self.frozen]
        self.called = message(
            "lesson05.called_optimizer",
            model=model_text(),
            cfg=cfg_text(CFG),
            wd=WD,
            lr=LR,
            betas=BETAS,
            frozen=message("lesson05.frozen_note", paths=", ".join(frozen)) if frozen else "",
        )
        self.optimizer = self.trainer.call(
            "configure_optimizer", model, weight_decay=WD, learning_rate=LR, betas=BETAS
        )
        if not isinstance(self.optimizer, Handle):  # data (None, a list of groups...), not an object
            fail(self.called, message("lesson05.not_an_optimizer", got=type(self.optimizer).__name__))
        try:
            raw = self.trainer.sub.getattr(self.optimizer, "param_groups")
        except StudentError:
            fail(self.called, message("lesson05.not_an_optimizer", got=self.optimizer.type))
        if not isinstance(raw, list) or not all(
            isinstance(g, dict) and isinstance(g.get("params"), list) for g in raw
        ):
            fail(self.called, message("lesson05.param_groups_unreadable"))
        self.raw = raw
        self.names = [[self._identify(t) for t in group["params"]] for group in raw]

    def _identify(self, tensor) -> str | None:
        return identify(tensor, self.state, self.dims)

    def expect_two(self) -> None:
        if len(self.raw) != 2:
            fail(
                self.called,
                message("lesson05.group_count", count=len(self.raw)),
                message("lesson05.group_count_one") if len(self.raw) == 1 else None,
            )

    def expect_each_once(self, names: list[str], *, frozen_hint: bool = False) -> None:
        """Every name in `names` in exactly one group, once; nothing else in any group."""
        seen = [name for group in self.names for name in group]
        strangers = sum(1 for name in seen if name is None)
        if strangers:
            fail(self.called, message("lesson05.not_parameters", count=strangers))
        twice = sorted({name for name in seen if seen.count(name) > 1})
        if twice:
            fail(
                self.called,
                message("lesson05.param_twice", names=", ".join(twice)),
                message("lesson05.tied_twice") if TIED in twice else None,
            )
        outsiders = sorted(self.frozen & set(seen))
        if outsiders:
            fail(self.called, message("lesson05.frozen_included", names=", ".join(outsiders)))
        missing = [name for name in names if name not in seen]
        if missing:
            hint = message("lesson05.frozen_hint") if frozen_hint else None
            fail(
                self.called,
                message(
                    "lesson05.param_missing",
                    count=len(missing),
                    total=len(names),
                    names=", ".join(missing[:5]) + (" …" if len(missing) > 5 else ""),
                ),
                hint,
            )

    def expect_the_parameters_themselves(self) -> None:
        """The groups' tensors are the model's parameters, not copies with their values
        (p.detach(), p.clone(), nn.Parameter(p.data)): an optimizer of copies never moves the
        model. Seen from outside: with every parameter's .grad set by one backward of a batch's
        loss on the model, one optimizer.step() gives each tensor that has a .grad an Adam state;
        a copy has none. Judged for Adam-family optimizers only (an SGD keeps no state;
        optimizer-settings says it is not AdamW)."""
        if self.optimizer.type not in ("AdamW", "Adam"):
            return
        sub = self.trainer.sub
        x, y = random_batch(CFG, B, T, generator(0))
        try:
            # (In practice grading the model is the learner's own GPT: where its forward cannot
            # give a loss to differentiate, this is not what the check judges.)
            self.trainer.backward(self.model, x, y)
            sub.call(self.optimizer, method="step")
            saved = sub.call(self.optimizer, method="state_dict")
        except StudentError:
            return  # a step that raises is not what this check judges either
        state = saved.get("state") if isinstance(saved, dict) else None
        if not isinstance(state, dict):
            return
        flat = [name for group in self.names for name in group]
        copies = sorted({name for index, name in enumerate(flat) if name is not None and index not in state})
        if copies:
            fail(
                self.called,
                message(
                    "lesson05.param_copies",
                    count=len(copies),
                    names=", ".join(copies[:5]) + (" …" if len(copies) > 5 else ""),
                ),
            )


@pytest.mark.check("param-groups")
def test_param_groups(submission, check_seed):
    groups = Groups(submission, check_seed)
    groups.expect_two()
    groups.expect_each_once(groups.trainable)
    groups.expect_the_parameters_themselves()


@pytest.mark.check("decay-by-dim")
def test_decay_by_dim(submission, check_seed):
    groups = Groups(submission, check_seed)
    groups.expect_two()
    wanted = [
        {n for n in groups.trainable if groups.dims[n] >= 2},
        {n for n in groups.trainable if groups.dims[n] < 2},
    ]
    got = [set(filter(None, names)) for names in groups.names]
    if got == wanted[::-1]:
        fail(groups.called, message("lesson05.groups_swapped"))
    if got != wanted:
        wrong_in_decay = sorted(got[0] & wanted[1])
        wrong_out = sorted(got[1] & wanted[0])
        parts = [groups.called]
        if wrong_in_decay:
            parts.append(message("lesson05.decay_on_1d", names=", ".join(wrong_in_decay[:6])))
            if all(name.endswith("weight") for name in wrong_in_decay):
                parts.append(message("lesson05.diag_decay_by_name"))
        if wrong_out:
            parts.append(message("lesson05.no_decay_on_2d", names=", ".join(wrong_out[:6])))
            if all(name.startswith(("transformer.wte", "transformer.wpe")) for name in wrong_out):
                parts.append(message("lesson05.diag_embeddings_excluded"))
        if len(parts) == 1:  # parameters missing or repeated: param-groups says which
            parts.append(message("lesson05.groups_incomplete"))
        fail(*parts)
    decays = [group.get("weight_decay") for group in groups.raw]
    for index, expected in enumerate((WD, 0.0)):
        value = decays[index]
        if not isinstance(value, (int, float)) or not math.isclose(
            value, expected, rel_tol=1e-9, abs_tol=1e-12
        ):
            hint = message("lesson05.diag_default_decay") if index == 1 and value == 0.01 else None
            fail(
                groups.called,
                message("lesson05.group_decay", index=index, got=value, expected=expected),
                hint,
            )


@pytest.mark.check("frozen-params")
def test_frozen_params(submission, check_seed):
    groups = Groups(submission, check_seed, frozen=("transformer.wpe", "transformer.ln_f"))
    groups.expect_two()
    groups.expect_each_once(groups.trainable, frozen_hint=True)


@pytest.mark.check("optimizer-settings")
def test_optimizer_settings(submission, check_seed):
    groups = Groups(submission, check_seed)
    kind = groups.optimizer.type
    if kind != "AdamW":
        fail(
            groups.called,
            message("lesson05.not_adamw", got=kind),
            message("lesson05.adam_is_l2") if kind == "Adam" else None,
        )
    for index, group in enumerate(groups.raw):
        lr, betas = group.get("lr"), group.get("betas")
        if not isinstance(lr, (int, float)) or not math.isclose(lr, LR, rel_tol=1e-9):
            fail(groups.called, message("lesson05.group_lr", index=index, got=lr, expected=LR))
        if not isinstance(betas, (tuple, list)) or tuple(betas) != BETAS:
            fail(groups.called, message("lesson05.group_betas", index=index, got=betas, expected=BETAS))
