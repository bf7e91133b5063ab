"""Helpers shared by lesson 03's graders: configurations, the learner's module behind the
sandbox with trusted weights loaded, and the diagnoses that name a recognisable bug."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch

from autograder.checks import fail
from autograder.feedback import compare
from autograder.results import Block, message
from autograder.sandbox import Sandbox

from . import reference as ref

# T, nh, hs and C all different, nh >= 2, T < block_size: shape bugs cannot hide.
MAIN = dict(n_embd=24, n_head=3, block_size=11, dropout=0.0)
MAIN_T = 7
# A second shape family, used at T = 1 and T = block_size.
SMALL = dict(n_embd=20, n_head=4, block_size=6, dropout=0.0)
ATOL = RTOL = 1e-5
SDPA = "torch.nn.functional.scaled_dot_product_attention"


def generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def describe_call(cfg: dict, fused: bool) -> str:
    inside = ", ".join(f"{k}={v}" for k, v in cfg.items())
    return f"CausalSelfAttention(cfg({inside}), fused={fused})"


class LearnerAttention:
    """A learner's CausalSelfAttention in the worker, holding weights drawn by the grader."""

    def __init__(self, sub: Sandbox, cfg: dict, gen: torch.Generator, *, fused: bool = False,
                 train: bool = False) -> None:
        self.sub, self.cfg, self.fused = sub, cfg, fused
        cls = sub.getattr(sub.module("attention"), "CausalSelfAttention")
        self.handle = sub.call(cls, SimpleNamespace(**cfg), fused=fused)
        self.sd = ref.random_weights(cfg["n_embd"], gen)
        missing, _unexpected = sub.call(self.handle, self.sd, method="load_state_dict", strict=False)
        absent = [key for key in self.sd if key in missing]
        if absent:
            fail(message("lesson03.weights_missing", keys=", ".join(absent), call=self.call_text))
        sub.call(self.handle, method="train" if train else "eval")
        self.n_head = cfg["n_head"]

    @property
    def call_text(self) -> str:
        return describe_call(self.cfg, self.fused)

    def called(self, x: torch.Tensor):
        return message("lesson03.called", call=self.call_text, shape=tuple(x.shape))

    def forward(self, x: torch.Tensor, seed: int | None = None) -> torch.Tensor:
        y = self.traced(x, seed=seed)["value"]
        return y

    def traced(self, x: torch.Tensor, *, seed: int | None = None, spy: bool = False) -> dict:
        """forward(x), with the attention weights captured where they enter attn_drop."""
        result = self.sub.call_traced(self.handle, x, capture=("attn_drop",),
                                      spy=(SDPA,) if spy else (), seed=seed, no_grad=True)
        if not isinstance(result.get("value"), torch.Tensor):
            fail(self.called(x), message("lesson03.not_a_tensor", got=type(result.get("value")).__name__))
        return result

    def expect_output(self, x: torch.Tensor, expected: torch.Tensor, what, *diagnoses) -> torch.Tensor:
        y = self.forward(x)
        problem = compare(y, expected.to(y.dtype) if isinstance(y, torch.Tensor) else expected,
                          what=what, atol=ATOL, rtol=RTOL)
        if problem:
            fail(self.called(x), problem, *diagnose(y, diagnoses))
        return y


def diagnose(actual, candidates) -> list:
    """Messages for every (expected_variant, message) pair that `actual` matches."""
    found = []
    for expected, text in candidates:
        if isinstance(actual, torch.Tensor) and actual.shape == expected.shape and torch.allclose(
                actual.double(), expected.double(), atol=1e-4, rtol=1e-4):
            found.append(text)
            break
    return found


def random_input(cfg: dict, T: int, gen: torch.Generator, B: int = 2) -> torch.Tensor:
    return torch.randn(B, T, cfg["n_embd"], generator=gen)


def attention_heatmap(weights, title_key: str = "lesson03.heatmap_title"):
    """The (T, T) matrix of batch 0, head 0, drawn with its leaking cells marked."""
    from autograder.feedback import heatmap, leaking_cells

    w = np.asarray(weights, dtype=np.float64)
    while w.ndim > 2:
        w = w[0]
    return [message(title_key), heatmap(w, leaks=leaking_cells(w))]


def mask_grid(mask: np.ndarray) -> Block:
    """An additive mask drawn as '0' (visible) and '-' (masked, <= -1e9) and '?' otherwise."""
    rows = []
    for row in np.asarray(mask, dtype=np.float64):
        rows.append(" ".join("0" if v == 0 else "-" if v <= -1e9 else "?" for v in row))
    return Block("\n".join(rows), kind="heatmap")
