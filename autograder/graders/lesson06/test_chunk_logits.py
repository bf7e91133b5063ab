"""Check of TODO [cache-alignment] in the whole model (its first check, chunk-attention,
is in test_cache_alignment.py).

chunk-logits: the learner's cached_attention in every layer of lesson 04's reference GPT,
chunk after chunk, each judged against the reference attention over the keys and values it
returns itself. The chunk sizes are drawn from the check's seed (a prefill of 3 to 6 tokens,
then two chunks of at least 2): fixed in practice, where the recording answers them, and
moving at each official grading.
"""

from __future__ import annotations

import pytest
import torch

from autograder.core.results import message
from autograder.engine import recording
from autograder.engine.checks import fail
from autograder.engine.grader_helpers import generator, tokens

from .harness import (
    ALIGN_HINTS,
    GPT_CFG,
    B,
    WorkerGPT,
    function,
    given_kv,
    hinted,
    judge_attention,
)

ref = recording.reference_of(__package__)


def _chunks(block_size: int, gen: torch.Generator) -> list[int]:
    """Three chunk sizes summing to block_size: a prefill of 3 .. block_size - 4 tokens, then
    two chunks of at least 2 each (a chunk after a cache is where a top-left mask shows). Not a
    prefill of 2: there a mask that also sees the next token sees everything, and the diagnosis
    could not tell it from no mask at all."""
    first = int(torch.randint(3, block_size - 3, (1,), generator=gen))
    rest = block_size - first
    second = int(torch.randint(2, rest - 1, (1,), generator=gen))
    return [first, second, rest - second]


@pytest.mark.check("chunk-logits")
def test_chunk_logits(submission, check_seed):
    """Chunks through every layer of the GPT (B = 2): in each layer, the learner's
    cached_attention on that layer's attention, with the reference cache and the reference
    input, gives the reference attention over the keys and values it returns itself (the
    positions and the concatenation, TODO [kv-cache], play no part)."""
    gen = generator(check_seed)
    model = WorkerGPT(submission, gen)
    bs, n_layer, nh = GPT_CFG["block_size"], GPT_CFG["n_layer"], GPT_CFG["n_head"]
    idx = tokens(B, bs, GPT_CFG["vocab_size"], gen)
    chunks = _chunks(bs, gen)
    handles = [model.attention(i) for i in range(n_layer)]
    inputs = ref.chunk_inputs(model.ref_cfg, model.state, idx, chunks)
    start = 0
    for size, layers in zip(chunks, inputs):
        for i, (h, past_k, past_v) in enumerate(layers):
            prefix = f"transformer.h.{i}.attn."
            called = message(
                "lesson06.called_chunk_layer",
                model=model.text,
                layer=i,
                first=start,
                last=start + size - 1,
                P=start,
            )
            with hinted(*ALIGN_HINTS, own="cache-alignment", called=called):
                result = submission.call(
                    function(submission, "cached_attention"), handles[i], h, past_k, past_v
                )
            expected = given_kv(model.state, nh, h, result, prefix)
            if expected is None:
                continue
            problems = judge_attention(result[0], expected, model.state, nh, h, result, prefix)
            if problems is not None:
                head = (
                    message("lesson06.prefill_wrong")
                    if start == 0
                    else message(
                        "lesson06.chunk_layer_wrong", layer=i, first=start, last=start + size - 1, P=start
                    )
                )
                fail(called, head, *problems)
        start += size
