"""The informational check `own-pieces`: the learner's GPT with THEIR OWN lesson-03 attention
(the `own_submission` fixture), run the way training will run it. It builds, gives logits of the
right shape, does not leak the future, and its loss at initialisation is finite and near ln(V).

When something does not fit, the same probe runs with the reference attention (the `submission`
fixture): if that one fits, the learner's lesson-03 attention is to blame; if not, their
model.py. Either way the check is worth 0 points and never keeps the lesson from completion.
"""

from __future__ import annotations

import math

import pytest
import torch

from autograder.core.results import Feedback, message
from autograder.engine import recording
from autograder.engine.checks import CheckFailure, describe_student_error, fail
from autograder.engine.grader_helpers import generator, innermost_learner_file, tokens
from autograder.sandbox.client import StudentError

from .harness import Learner, attention_like_reference

OWN = {"vocab_size": 61, "block_size": 12, "n_layer": 2, "n_head": 4, "n_embd": 32, "dropout": 0.0}
OWN_T = 10
LESSON03_FILES = ("attention.py", "attention_numpy.py")
LOSS_MARGIN = 0.3  # generous: the init checks are the strict ones


def _probe(
    sub, seed: int, idx: torch.Tensor, changed: torch.Tensor, targets: torch.Tensor
) -> Feedback | None:
    """None when the pieces in `sub` fit; otherwise what went wrong. A learner's exception is
    left to the caller."""
    V = OWN["vocab_size"]
    try:
        model = Learner(sub, "GPT", OWN, seed=seed)
        logits, loss = model.logits_loss(idx, targets)
        if tuple(logits.shape) != (*idx.shape, V):
            return Feedback.of(
                message("lesson04.own_shape", got=tuple(logits.shape), expected=(*idx.shape, V))
            )
        if not bool(torch.isfinite(logits).all()):
            return Feedback.of(message("lesson04.own_not_finite"))
        other, _ = model.logits_loss(changed)
        if tuple(other.shape) == tuple(logits.shape):
            moved = float((logits[:, :-1] - other[:, :-1]).abs().max())
            if moved > 1e-5:
                return Feedback.of(message("lesson04.own_leak", T=idx.shape[1], diff=f"{moved:.3g}"))
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1 or not bool(torch.isfinite(loss).all()):
            return Feedback.of(message("lesson04.own_loss_bad"))
        if abs(float(loss) - math.log(V)) > LOSS_MARGIN:
            return Feedback.of(
                message("lesson04.own_loss_far", loss=f"{float(loss):.3f}", ln_v=f"{math.log(V):.3f}", V=V)
            )
        return None
    except CheckFailure as failure:
        return failure.feedback


def _blamed_file(err: StudentError) -> str:
    """The learner's innermost file in the traceback (model.py when none is)."""
    return innermost_learner_file(err) or next(
        (name for name in LESSON03_FILES if name in err.message), "model.py"
    )


def _crash(err: StudentError) -> list:
    file = _blamed_file(err)
    lesson = "03" if file in LESSON03_FILES else "04"
    if err.todo_pending is not None:
        return [message("lesson04.own_pending", todo=err.todo_pending, file=file, lesson=lesson)]
    return [message(f"lesson04.own_crash_{lesson}", file=file), describe_student_error(err, None, {})]


@pytest.mark.check("own-pieces")
def test_own_pieces(own_submission, submission, check_seed):
    gen = generator(check_seed)
    V = OWN["vocab_size"]
    idx, targets = tokens(2, OWN_T, V, gen), tokens(2, OWN_T, V, gen)
    changed = idx.clone()
    changed[:, -1] = (changed[:, -1] + 1) % V
    seed = check_seed % 10_000
    try:
        problem = _probe(own_submission, seed, idx, changed, targets)
    except StudentError as err:
        fail(*_crash(err), message("lesson04.own_informational"))
    if problem is None:
        return
    if recording.mode() == "replay":
        # Practice grading: no reference attention ships. When the learner's own gives what
        # the reference gives, their model.py is to blame, as officially; otherwise it cannot
        # be told here.
        blame = (
            "lesson04.own_blame_04" if attention_like_reference(submission) else "lesson04.own_blame_practice"
        )
        fail(message("lesson04.own_intro"), problem, message(blame), message("lesson04.own_informational"))
    try:
        with_reference = _probe(submission, seed, idx, changed, targets)
    except StudentError:
        with_reference = Feedback()  # their model.py fails with our attention too
    blame = "lesson04.own_blame_03" if with_reference is None else "lesson04.own_blame_04"
    fail(message("lesson04.own_intro"), problem, message(blame), message("lesson04.own_informational"))
