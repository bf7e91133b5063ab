"""torch without torch._dynamo until something really compiles.

Two of torch's own wrappers import all of torch._dynamo (~1.1 s of CPU, more than most lessons'
checks together) the first time they run, only to tell a compiler that is not running to leave
the wrapped function alone:

- `torch._compile._disable_dynamo`, around the Python kernels of the "meta" device (every
  device-contract check of lessons 02-06) and around Optimizer.add_param_group;
- `torch.optim.optimizer._use_grad_for_differentiable`, around every optimizer's step(), which
  calls `torch._dynamo.graph_break()`.

Dynamo can only trace a frame after it has been imported: its frame-evaluation hook is
installed by torch._dynamo itself. So while "torch._dynamo" is not in sys.modules, nothing is
being compiled and both wrappers may call the function directly; once anything imports dynamo
(a learner's torch.compile, say), they behave exactly as torch wrote them. `install()` puts
that rule in place by wrapping the two decorators as their modules are first executed, which is
why it must run before `import torch`. The worker calls it in prepare_libraries; it never runs
learner code. Verified against the pinned torch (tests/sandbox/test_lean_torch.py): if a later torch
renames either decorator, install() leaves torch untouched and the worker is merely slower.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import sys

DYNAMO = "torch._dynamo"


def _dynamo_loaded() -> bool:
    return DYNAMO in sys.modules


def _lean_disable_dynamo(original):
    """torch._compile._disable_dynamo, calling the function directly while dynamo is absent."""

    def _disable_dynamo(fn=None, recursive=True):
        if fn is None:  # used as @_disable_dynamo(recursive=False)
            return functools.partial(_disable_dynamo, recursive=recursive)
        disabled = original(fn, recursive)

        @functools.wraps(fn)
        def inner(*args, **kwargs):
            if not _dynamo_loaded():
                return fn(*args, **kwargs)
            return disabled(*args, **kwargs)

        return inner

    return _disable_dynamo


def _lean_use_grad(original):
    """torch.optim.optimizer._use_grad_for_differentiable without graph_break() while dynamo is
    absent: the same grad mode set around step() and restored after it."""

    def _use_grad_for_differentiable(func):
        traced = original(func)

        def _use_grad(*args, **kwargs):
            if _dynamo_loaded():
                return traced(*args, **kwargs)
            import torch

            self = args[0]
            prev_grad = torch.is_grad_enabled()
            try:
                torch.set_grad_enabled(self.defaults["differentiable"])
                return func(*args, **kwargs)
            finally:
                torch.set_grad_enabled(prev_grad)

        functools.update_wrapper(_use_grad, func)
        return _use_grad

    return _use_grad_for_differentiable


# module name -> (attribute, how to wrap it)
PATCHES = {
    "torch._compile": ("_disable_dynamo", _lean_disable_dynamo),
    "torch.optim.optimizer": ("_use_grad_for_differentiable", _lean_use_grad),
}


class _Finder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the real loader of the two modules so that each decorator is
    replaced right after its module runs, before any other torch module imports it."""

    def __init__(self) -> None:
        self.pending = dict(PATCHES)

    def find_spec(self, name, path, target=None):
        if name not in self.pending:
            return None
        attribute, wrap = self.pending.pop(name)
        if not self.pending:
            sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            original = getattr(module, attribute, None)
            if callable(original):
                setattr(module, attribute, wrap(original))

        spec.loader.exec_module = exec_module
        return spec


def install() -> bool:
    """Put the rule in place for the coming `import torch`; False when torch is already imported
    (then nothing changes)."""
    if "torch" in sys.modules or any(isinstance(f, _Finder) for f in sys.meta_path):
        return False
    sys.meta_path.insert(0, _Finder())
    return True
