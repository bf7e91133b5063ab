"""Official-only check of TODO [top-k] (a `test_official_*` file never ships: the learner
release has no recording for it, and it stays part of what is hidden).

top-k-support: over 300 rows of nearly flat logits, the learner's sample_next draws only among
the k best of each row and draws each of them, for a k drawn afresh at each official grading
and for k = 1. The ranks come from reference.py; the draws are the learner's own.
"""

from __future__ import annotations

import pytest
import torch

from autograder.core.results import message
from autograder.engine import recording
from autograder.engine.checks import fail
from autograder.engine.grader_helpers import generator

from .harness import draw_seed, learner_sample, wait_for_sampling

ref = recording.reference_of(__package__)

V = 19


@pytest.mark.check("top-k-support")
def test_top_k_support(submission, check_seed):
    """Over 300 rows of nearly flat logits at temperature 1 (so TODO [temperature] plays no
    part), only the k best of each row are ever drawn, and each of the k ranks is drawn at
    least once (k drawn from 3 .. 6, and k = 1)."""
    gen = generator(check_seed)
    wait_for_sampling(submission, gen)  # it samples at temperature 1 through sample_next
    B = 300
    for k in (int(torch.randint(3, 7, (1,), generator=gen)), 1):
        logits = torch.randn(B, V, generator=gen) * 0.15
        seed = draw_seed(gen)
        out, called = learner_sample(submission, logits, 1.0, k, seed, own="top-k")
        rank = ref.ranks(logits).gather(-1, out)  # (B, 1): 0 = the row's best
        outside = (rank >= k).view(-1)
        if outside.any():
            b = int(outside.nonzero()[0])
            worst = int(rank.max()) + 1
            hint = (
                message("lesson06.diag_topk_one_more", k=k)
                if worst == k + 1
                else message("lesson06.diag_topk_no_filter")
            )
            fail(
                called,
                message(
                    "lesson06.topk_outside",
                    count=int(outside.sum()),
                    B=B,
                    k=k,
                    row=b,
                    token=int(out[b, 0]),
                    rank=int(rank[b, 0]) + 1,
                ),
                hint,
                message("lesson06.topk_hint"),
            )
        seen = set(rank.view(-1).tolist())
        never = [r + 1 for r in range(k) if r not in seen]
        if never:
            fail(
                called,
                message("lesson06.topk_rank_never", k=k, B=B, ranks=str(never)),
                message("lesson06.diag_topk_one_less", k=k) if never == [k] else None,
                message("lesson06.topk_hint"),
            )
