"""Informational check (0 points): the learner's generate.py with THEIR OWN lesson 04 model and
lesson 03 attention (the `own_submission` fixture), instead of the reference pieces the other
checks use. Their GPT must give the reference logits for the same weights, forward_cached must
agree with their full forward, and greedy decoding must give the same tokens with and without
the cache. When something does not fit, the message says which lesson to look at."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from autograder.core.results import message
from autograder.engine import recording
from autograder.engine.checks import describe_student_error, fail
from autograder.engine.feedback import ATOL, RTOL, compare
from autograder.engine.grader_helpers import generator, innermost_learner_file, load_weights, tokens
from autograder.sandbox.client import StudentError

from .harness import ATTN_CFG, GPT_CFG, TIE, described, function, heads_differ

ref = recording.reference_of(__package__)

LESSON_OF_FILE = {"attention.py": "03", "model.py": "04", "generate.py": "06"}


def _blame(err: StudentError) -> str:
    """The lesson whose file the error comes from (its innermost frame among the learner's files)."""
    return LESSON_OF_FILE.get(innermost_learner_file(err), "06")


def _run(what, fn):
    """fn() in the learner's own pieces; an error fails with the lesson it comes from."""
    try:
        return fn()
    except StudentError as err:
        lesson = _blame(err)
        if err.todo_pending is not None:
            fail(
                message("lesson06.own_pending", what=message(what), todo=err.todo_pending, lesson=lesson),
                message("lesson06.own_not_counted"),
            )
        # Queries and keys whose heads differ: the cache's concatenation, wherever it raised.
        cat_dim = message("lesson06.hint_cat_dim") if heads_differ(err) else None
        fail(
            message("lesson06.own_raised", what=message(what), lesson=lesson),
            described(err) if cat_dim else describe_student_error(err, None, {}),
            cat_dim,
            message("lesson06.own_not_counted"),
        )


def _attention_case(gen: torch.Generator) -> tuple:
    """(weights, input, reference output) of lesson 03's attention alone, drawn from a copy of
    `gen` (which does not move): the same whether computed to judge or only while recording."""
    copy = torch.Generator()
    copy.set_state(gen.get_state())
    state = ref.random_state("attention", ATTN_CFG, copy)
    x = torch.randn(2, 5, ATTN_CFG["n_embd"], generator=copy)
    expected, _, _ = ref.attend(state, x, None, None, ATTN_CFG["n_head"])
    return state, x, expected


def _their_attention_is_right(own, case: tuple) -> bool:
    """Whether the learner's own lesson-03 attention alone matches the reference."""
    state, x, expected = case
    try:
        handle = own.call(
            own.getattr(own.module("attention"), "CausalSelfAttention"), SimpleNamespace(**ATTN_CFG)
        )
        own.call(handle, state, method="load_state_dict", strict=False)
        own.call(handle, method="eval")
        y = own.call(handle, x)
    except StudentError:
        return False
    return isinstance(y, torch.Tensor) and compare(y, expected.float(), what="", atol=ATOL, rtol=RTOL) is None


@pytest.mark.check("own-pieces")
def test_own_pieces(own_submission, check_seed):
    own, gen = own_submission, generator(check_seed)
    cfg = GPT_CFG
    V, bs = cfg["vocab_size"], cfg["block_size"]
    mod = _run("lesson06.own_what_import", lambda: own.module("model"))

    def build():
        config = own.call(own.getattr(mod, "GPTConfig"), **cfg)
        return own.call(own.getattr(mod, "GPT"), config)

    handle = _run("lesson06.own_what_build", build)
    state = ref.random_state("gpt", cfg, gen)
    absent = _run("lesson06.own_what_build", lambda: load_weights(own, handle, state))
    if absent:
        fail(
            message("lesson06.own_weights_missing", keys=", ".join(absent[:6])),
            message("lesson06.own_not_counted"),
        )
    own.call(handle, method="eval")

    # 1. Their GPT (lessons 03 + 04) against the reference with the same weights.
    idx = tokens(2, bs, V, gen)
    result = _run("lesson06.own_what_forward", lambda: own.call(handle, idx))
    logits = result[0] if isinstance(result, tuple) and result else result
    full = ref.logits(cfg, state, idx)
    problem = compare(logits, full.float(), what=message("lesson06.what_logits"), atol=ATOL, rtol=RTOL)
    if recording.eager():
        _attention_case(gen)  # what a learner whose GPT differs is asked next
    if problem:
        lesson = "04" if _their_attention_is_right(own, _attention_case(gen)) else "03"
        fail(
            message("lesson06.own_model_differs", lesson=lesson), problem, message("lesson06.own_not_counted")
        )

    # 2. Their forward_cached on their model, one token at a time and then a chunk.
    def feed():
        cache = own.call(function(own, "KVCache"), cfg["n_layer"])
        outs = [own.call(function(own, "forward_cached"), handle, idx[:, t : t + 1], cache) for t in range(4)]
        outs.append(own.call(function(own, "forward_cached"), handle, idx[:, 4:], cache))
        return outs

    outs = _run("lesson06.own_what_cached", feed)
    if not all(isinstance(o, torch.Tensor) for o in outs) or tuple(torch.cat(outs, dim=1).shape) != tuple(
        full.shape
    ):
        fail(message("lesson06.own_cached_differs"), message("lesson06.own_not_counted"))
    problem = compare(
        torch.cat(outs, dim=1), full.float(), what=message("lesson06.what_logits"), atol=ATOL, rtol=RTOL
    )
    if problem:
        fail(message("lesson06.own_cached_differs"), problem, message("lesson06.own_not_counted"))

    # 3. generate with their pieces: greedy, with and without the cache, past block_size.
    prompt = tokens(2, 3, V, gen)
    steps = bs + 2

    def run(use_cache):
        return own.call(function(own, "generate"), handle, prompt, steps, temperature=0, use_cache=use_cache)

    without, with_cache = (
        _run("lesson06.own_what_generate", lambda: run(False)),
        _run("lesson06.own_what_generate", lambda: run(True)),
    )
    if not (
        isinstance(without, torch.Tensor)
        and isinstance(with_cache, torch.Tensor)
        and without.shape == with_cache.shape == (2, 3 + steps)
    ):
        fail(message("lesson06.own_generate_differs", step="?"), message("lesson06.own_not_counted"))
    differ = (without != with_cache).any(dim=0).nonzero().view(-1)
    if len(differ):
        t = int(differ[0])
        # A near-tie may be broken differently by the two float32 paths: not a mistake. (On the
        # learner's own tokens: a replay answers it only where they are the recorded ones.)
        if ref.greedy_far_from_tie(cfg, state, with_cache, t, [with_cache[:, t], without[:, t]], TIE):
            fail(message("lesson06.own_generate_differs", step=t - 3), message("lesson06.own_not_counted"))
