"""Checks of BigramLanguageModel (TODOs embedding-lookup and loss-reshape).

The model holds a table drawn by the grader (loaded with load_state_dict); the logits are
judged against a one-hot reference on that table, and the loss against a float64
cross-entropy of the learner's own logits, so that a lookup bug is not reported as a loss bug.

In the learner release the reference's answers come from a recording: those about the
grader's own table and tokens always; those about the learner's logits (the loss checks) when
they are the right logits, which is what a learner working on the loss has, or those of a
known lookup slip. What the known mistakes give is asked for even when a check passes while
recording (recording.eager()); where the learner's logits are none of those, the loss checks
are judged only in the official grade. test_official_sizes.py adds randomized sizes to
logits-lookup and loss-value in official grading only.
"""

from __future__ import annotations

import math

import pytest
import torch

from autograder.core.results import message
from autograder.engine import recording
from autograder.engine.checks import fail
from autograder.engine.feedback import ATOL, RTOL, compare
from autograder.engine.grader_helpers import generator, tokens

from .harness import BIGRAM, LearnerBigram, every_target, forked, random_table

ref = recording.reference_of(__package__)

LOOKUP_DIAGNOSES = {
    "transposed": "lesson02.diag_lookup_transposed",
    "columns": "lesson02.diag_lookup_columns",
    "softmax": "lesson02.diag_lookup_softmax",
    "log_softmax": "lesson02.diag_lookup_softmax",
    "whole_table": "lesson02.diag_lookup_whole_table",
}
LOSS_DIAGNOSES = {
    "classes_T": "lesson02.diag_loss_classes_T",
    "targets_transposed": "lesson02.diag_loss_targets_transposed",
    "logits_time_major": "lesson02.diag_loss_logits_transposed",
    "sum": "lesson02.diag_loss_sum",
    "no_log_softmax": "lesson02.diag_loss_no_log_softmax",
}


def _model(submission, gen, V=BIGRAM["V"], judging: str = "embedding-lookup"):
    return LearnerBigram(submission, V, random_table(V, V, gen), judging)


def _matches(actual: torch.Tensor, expected: torch.Tensor) -> bool:
    return (
        isinstance(actual, torch.Tensor)
        and tuple(actual.shape) == tuple(expected.shape)
        and bool(torch.allclose(actual.double(), expected.double(), atol=1e-5, rtol=1e-5))
    )


def _lookup_diagnoses(logits, W, idx):
    """Messages for the lookups `logits` matches (shape-wise or value-wise)."""
    B, T = idx.shape
    V = W.shape[0]
    for name, expected in ref.lookup_mistakes(W, idx).items():
        if _matches(logits, expected):
            return [message(LOOKUP_DIAGNOSES[name], V=V, B=B, T=T)]
    return []


def _unflatten_if_loss_did_it(logits, B, T, V):
    """(B*T, V) logits come from the loss code flattening them (loss-reshape's business, see
    loss-none); for the lookup, judge them as (B, T, V)."""
    if isinstance(logits, torch.Tensor) and tuple(logits.shape) == (B * T, V):
        return logits.reshape(B, T, V)
    return logits


# ---------------------------------------------------------------- TODO [embedding-lookup]


@pytest.mark.check("logits-shape")
def test_logits_shape(submission, check_seed):
    gen = generator(check_seed)
    V = BIGRAM["V"]
    model = _model(submission, gen)
    # The last case uses only the lower half of the vocabulary: a lookup that sizes the
    # one-hot from the tokens it sees (F.one_hot without num_classes) shows up there.
    for B, T, high in ((BIGRAM["B"], BIGRAM["T"], V), (1, 1, V), (4, 2, V // 2)):
        idx = tokens(B, T, high, gen)
        if recording.eager():
            ref.lookup_mistakes(model.table, idx)  # for a failing learner's replay
        logits, _ = model.logits(idx, with_targets=False, pair=False)
        called = model.called(idx)
        shaped = _unflatten_if_loss_did_it(logits, B, T, V)
        if tuple(shaped.shape) != (B, T, V):
            fail(
                called,
                message("lesson02.logits_shape", got=tuple(logits.shape), expected=(B, T, V)),
                *_lookup_diagnoses(logits, model.table, idx),
                message("lesson02.lookup_hint"),
            )
        if logits.dtype != torch.float32:
            fail(called, message("lesson02.logits_dtype", got=str(logits.dtype)))


@pytest.mark.check("logits-lookup")
def test_logits_lookup(submission, check_seed):
    judge_lookup(submission, generator(check_seed), BIGRAM["V"], BIGRAM["B"], BIGRAM["T"])


def judge_lookup(submission, gen, V: int, B: int, T: int) -> None:
    """BigramLanguageModel(V) on a table drawn from gen, called on idx (B, T): fails unless its
    logits are the table's rows at idx and carry the table's gradient."""
    model = _model(submission, gen, V)
    idx = _top_tokens(B, T, V, gen)
    expected = ref.bigram_logits(model.table, idx)
    if recording.eager():
        ref.lookup_mistakes(model.table, idx)  # for a failing learner's replay
    logits, _ = model.logits(idx, with_targets=False, pair=False)
    shaped = _unflatten_if_loss_did_it(logits, B, T, V)
    if tuple(shaped.shape) != (B, T, V):
        fail(
            model.called(idx),
            message("lesson02.logits_shape", got=tuple(logits.shape), expected=(B, T, V)),
            *_lookup_diagnoses(logits, model.table, idx),
            message("lesson02.lookup_hint"),
        )
    problem = compare(shaped, expected.float(), what=message("lesson02.what_logits"), atol=ATOL, rtol=RTOL)
    if problem:
        fail(
            model.called(idx),
            problem,
            *_lookup_diagnoses(logits, model.table, idx),
            message("lesson02.lookup_hint"),
        )
    _expect_lookup_gradient(model, idx, logits, gen)


def _expect_lookup_gradient(model: LearnerBigram, idx: torch.Tensor, logits: torch.Tensor, gen) -> None:
    """Training moves the table only if the logits carry its gradient: <logits, v> differentiated
    with respect to the table is v's rows added up at each token's row (a .detach(), .data or
    torch.tensor(...) in the lookup gives zero, and the model never learns)."""
    v = torch.randn(logits.shape, generator=gen)
    # forward(idx) may return (logits, None) or, wrongly (loss-none's business), logits alone.
    got = next((g for g in model.table_grads(idx, None, [(v, None), v]) if g is not None), None)
    # v as (B, T, V) whatever shape the logits came back in: the same call for every learner.
    expected = ref.lookup_gradient(model.V, idx, v.reshape(*idx.shape, model.V))
    called = model.called_grad(idx)
    if got is None or not bool(got.abs().sum() > 0):
        fail(called, message("lesson02.logits_no_gradient"), message("lesson02.lookup_hint"))
    problem = compare(got, expected.float(), what=message("lesson02.what_table_grad"), atol=ATOL, rtol=RTOL)
    if problem:
        fail(called, problem, message("lesson02.logits_gradient_wrong"))


# ---------------------------------------------------------------- TODO [loss-reshape]


def _expect_unflattened_logits(logits, B, T, V, called, with_targets: bool) -> None:
    """forward returns (B, T, V) logits with or without targets; flattened ones are the loss
    code's doing. Any other shape is embedding-lookup's business: the loss cannot be judged."""
    if tuple(logits.shape) == (B, T, V):
        return
    if tuple(logits.shape) == (B * T, V):
        fail(called, message("lesson02.logits_flattened", got=tuple(logits.shape), expected=(B, T, V)))
    if with_targets:
        fail(
            called,
            message("lesson02.logits_shape", got=tuple(logits.shape), expected=(B, T, V)),
            message("lesson02.loss_waits_for_lookup"),
        )


def _expect_scalar_loss(loss, called, B: int, T: int) -> None:
    if loss is None:
        fail(called, message("lesson02.loss_none_with_targets"))
    if not isinstance(loss, torch.Tensor):
        hint = "lesson02.loss_is_number" if isinstance(loss, (int, float)) else None
        fail(
            called,
            message("lesson02.not_a_tensor", what=message("lesson02.what_loss"), got=type(loss).__name__),
            message(hint) if hint else None,
        )
    if loss.device.type == "meta":
        fail(
            called,
            message("lesson02.not_a_tensor", what=message("lesson02.what_loss"), got="Tensor(device=meta)"),
        )
    if loss.dim() != 0:
        hint = "lesson02.loss_not_reduced" if loss.numel() in (B * T, B) else None
        fail(called, message("lesson02.loss_shape", got=tuple(loss.shape)), message(hint) if hint else None)


def _top_tokens(B: int, T: int, V: int, gen) -> torch.Tensor:
    """Random tokens with V - 1 among them, so that a lookup that sizes a one-hot from the
    tokens it sees still gives V logits: logits-shape alone judges that (on tokens below V // 2),
    whatever tokens a seed draws for the other checks."""
    idx = tokens(B, T, V, gen)
    idx.view(-1)[int(torch.randint(0, B * T, (1,), generator=gen))] = V - 1
    return idx


# Where the lookup's logits are not (B, T, V), the loss is judged with B = T = V: any 3-D
# lookup result then has the sizes a right loss code needs, and is taken as the learner's
# logits (a lookup that indexes the table's columns gives (V, B, T) there).
CUBE = 5


def _loss_check(submission, gen, V: int, B: int, T: int) -> None:
    model = _model(submission, gen, V, "loss-reshape")
    idx, targets = _top_tokens(B, T, V, gen), every_target(B, T, V, gen)
    if recording.eager():
        _record_loss_of_lookup_slips(model, idx, targets, gen)
    # How the lookup alone shapes the logits (forward without targets).
    plain, _ = model.logits(idx, with_targets=False, pair=False)
    if tuple(plain.shape) not in ((B, T, V), (B * T, V)):
        V = B = T = CUBE
        model = _model(submission, gen, V, "loss-reshape")
        idx, targets = _top_tokens(B, T, V, gen), every_target(B, T, V, gen)
    called = model.called(idx, targets)
    logits, loss = model.logits(idx, targets)
    _expect_scalar_loss(loss, called, B, T)
    returned_shape = tuple(logits.shape)
    if tuple(logits.shape) == (B * T, V):
        # Flattened in place and returned so: loss-none reports it; the value is judged here.
        logits = logits.reshape(B, T, V)
    elif logits.dim() != 3 or logits.shape[0] * logits.shape[1] != B * T:
        fail(
            called,
            message("lesson02.logits_shape", got=tuple(logits.shape), expected=(B, T, V)),
            message("lesson02.loss_waits_for_lookup"),
        )
    # Judged on the learner's own logits: only how the loss is formed counts here. As float32,
    # whatever dtype they came in (logits-shape judges that), so that the recording answers
    # every learner whose logits are right.
    judged = logits.detach().float()
    expected = ref.cross_entropy(judged, targets)
    if recording.eager():
        ref.loss_mistakes(judged, targets)  # for a failing learner's replay
    # In the logits' own dtype: float64 logits (logits-shape's business) give a float64 loss.
    dtype = logits.dtype if logits.is_floating_point() else torch.float32
    problem = compare(loss, expected.to(dtype), what=message("lesson02.what_loss"), atol=ATOL, rtol=RTOL)
    if problem is None:
        _expect_loss_gradient(model, idx, targets, judged, returned_shape)
        return
    diagnoses = [
        message(LOSS_DIAGNOSES[name], T=T, V=V, B=B)
        for name, value in ref.loss_mistakes(judged, targets).items()
        if math.isclose(float(loss), float(value), rel_tol=1e-5, abs_tol=1e-6)
    ]
    fail(called, problem, *diagnoses[:1], message("lesson02.loss_hint", N=B * T, V=V))


def _loss_answers(logits: torch.Tensor, targets: torch.Tensor) -> None:
    """Every reference answer _loss_check may ask about these logits (float32, as it judges them)."""
    ref.cross_entropy(logits, targets)
    ref.loss_mistakes(logits, targets)
    ref.cross_entropy_grad(logits, targets)


def _record_loss_of_lookup_slips(model: LearnerBigram, idx, targets, gen) -> None:
    """While recording: the loss answers for the logits a known lookup slip gives, on these
    inputs and on the cube's (see CUBE), drawn next from gen. A learner still on TODO
    [embedding-lookup] is then judged in practice on how their loss is formed, as officially,
    instead of being left to the official grade."""
    B, T = idx.shape
    for logits in ref.lookup_mistakes(model.table, idx).values():
        if tuple(logits.shape) == (B, T, model.V):
            _loss_answers(logits.float(), targets)
    ahead = forked(gen)
    table = random_table(CUBE, CUBE, ahead)
    cube_idx, cube_targets = _top_tokens(CUBE, CUBE, CUBE, ahead), every_target(CUBE, CUBE, CUBE, ahead)
    for logits in ref.lookup_mistakes(table, cube_idx).values():
        if logits.dim() == 3:
            _loss_answers(logits.float(), cube_targets)


def _expect_loss_gradient(
    model: LearnerBigram, idx, targets, logits: torch.Tensor, returned_shape: tuple
) -> None:
    """The loss must carry the gradient training needs: what reaches the table from the loss
    is what reaches it from the learner's own logits with the cross-entropy's gradient
    (softmax - one-hot) / N as their cotangent. A loss rebuilt from a number (.item(),
    torch.tensor(...)) or detached has none. Logits that carry no gradient at all are the
    lookup's business (logits-lookup says so), not the loss's."""
    through_logits = ref.cross_entropy_grad(logits, targets).reshape(returned_shape).float()
    via_logits, via_loss = model.table_grads(
        idx, targets, [(through_logits, None), (None, torch.tensor(1.0))]
    )
    if via_logits is None or not bool(via_logits.abs().sum() > 0):
        return
    called = model.called_grad(idx, targets)
    if via_loss is None or not bool(via_loss.abs().sum() > 0):
        fail(called, message("lesson02.loss_no_gradient"))
    problem = compare(via_loss, via_logits, what=message("lesson02.what_table_grad"), atol=ATOL, rtol=1e-4)
    if problem:
        fail(called, problem, message("lesson02.loss_gradient_wrong"))


@pytest.mark.check("loss-value")
def test_loss_value(submission, check_seed):
    _loss_check(submission, generator(check_seed), BIGRAM["V"], BIGRAM["B"], BIGRAM["T"])


@pytest.mark.check("loss-classes")
def test_loss_classes(submission, check_seed):
    """T == V: F.cross_entropy on unflattened (B, T, V) logits then runs without an error,
    taking the T positions as the classes; only the value shows the mistake."""
    _loss_check(submission, generator(check_seed), 5, 3, 5)


@pytest.mark.check("loss-none")
def test_loss_none(submission, check_seed):
    """Besides the loss's value: forward(idx) and forward(idx, None) give (logits, None), and
    the logits come back (B, T, V) with targets too (flattening them is the loss code's)."""
    gen = generator(check_seed)
    V, B, T = BIGRAM["V"], BIGRAM["B"], BIGRAM["T"]
    model = _model(submission, gen, judging="loss-reshape")
    idx = _top_tokens(B, T, V, gen)
    for with_targets in (False, True):  # forward(idx), then forward(idx, None)
        called = (
            model.called(idx)
            if not with_targets
            else message("lesson02.called_bigram_none", call=model.call_text, shape=(B, T))
        )
        logits, loss = model.logits(idx, None, with_targets=with_targets)
        if loss is not None:
            shown = (
                f"{float(loss):.4g}"
                if isinstance(loss, torch.Tensor) and loss.numel() == 1 and loss.device.type != "meta"
                else type(loss).__name__
            )
            fail(called, message("lesson02.loss_without_targets", got=shown))
        _expect_unflattened_logits(logits, B, T, V, called, with_targets=False)
    if tuple(logits.shape) != (B, T, V):
        return  # the lookup's shape (logits-shape says what it is): the loss code cannot be seen
    targets = tokens(B, T, V, gen)
    logits, _ = model.logits(idx, targets)
    _expect_unflattened_logits(logits, B, T, V, model.called(idx, targets), with_targets=False)
