"""Lesson 05's graders: a warm-up outside the checks' time limits."""

from __future__ import annotations

import pytest

_warm: set[tuple] = set()


@pytest.fixture(autouse=True)
def _optimizer_warm_up(request):
    """The first torch.optim.AdamW a process builds imports torch._dynamo, which takes a second
    or more (several on a busy machine). Pay it in the fixture's setup, which the check's
    timeout does not count (timeout_func_only), rather than inside the first check that
    happens to call configure_optimizer."""
    for name in ("submission", "own_submission"):
        if name in request.fixturenames:
            _warm_up(request.getfixturevalue(name))


def _warm_up(sub) -> None:
    key = (id(sub), sub.generation, sub.worker_pid)
    if key in _warm:
        return
    torch = sub.library("torch")
    param = sub.call(sub.getattr(torch, "zeros"), 1)
    sub.call(sub.getattr(sub.getattr(torch, "optim"), "AdamW"), [param])
    _warm.add(key)
