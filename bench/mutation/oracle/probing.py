"""Helpers the probes_NN.py modules share: loading a lesson's files, seeded generators, hooks
that see what passes through a module, and counters around a function.

Runs inside the probe child only (imports torch). Imports nothing of the project.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import SimpleNamespace

import torch

from bench.mutation.oracle.probe import patch

SEEDS = (0, 1, 2)


def load_modules(folder: Path, names: list[str]) -> SimpleNamespace:
    """Import the lesson files `names` (module names) from `folder`, which probe.py put first on
    sys.path; returns them as attributes, plus `folder`."""
    mods = {name: importlib.import_module(name) for name in names}
    return SimpleNamespace(folder=Path(folder), **mods)


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def next_draw(generator: torch.Generator | None = None) -> torch.Tensor:
    """What `generator` (None: torch's global one) gives next: an extra or missing draw by the
    lesson's code shows up here."""
    return torch.randint(1 << 30, (4,), generator=generator)


def capture_inputs(module: torch.nn.Module) -> list:
    """A list that receives the first positional input of every call of `module`."""
    seen: list = []

    def hook(_mod, args):
        seen.append(args[0].detach().clone() if isinstance(args[0], torch.Tensor) else args[0])

    module.register_forward_pre_hook(hook)
    return seen


def count_calls(owner, attr: str) -> list:
    """Wrap owner.attr (for the current probe) so that each call appends its (args, kwargs)."""
    calls: list = []
    original = getattr(owner, attr)

    def wrapper(*args, **kwargs):
        calls.append((args, kwargs))
        return original(*args, **kwargs)

    patch(owner, attr, wrapper)
    return calls


def params_by_name(model: torch.nn.Module) -> dict:
    """{name: tensor} of every parameter, the tied ones under each of their names."""
    return {name: p.detach().clone() for name, p in model.named_parameters(remove_duplicate=False)}


def grads_by_name(model: torch.nn.Module) -> dict:
    return {
        name: (None if p.grad is None else p.grad.detach().clone())
        for name, p in model.named_parameters(remove_duplicate=False)
    }


def training_flags(model: torch.nn.Module) -> dict:
    return {name or "<root>": m.training for name, m in model.named_modules()}
