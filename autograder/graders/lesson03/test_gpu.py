"""GPU parity: the learner's module on CUDA against the float32/float64 CPU reference.

Runs only where CUDA is available; elsewhere the check is reported as skipped (0 of 0
points) and does not count against the lesson. TF32 is off in the worker, so float32 on the
GPU must match like on the CPU; half precision is compared with dtype-aware tolerances
against a float32 reference computed from the same rounded inputs and weights.

While recording (for the learner release, on a machine that may have no GPU) the inputs are
drawn and the expected outputs made all the same, so that a learner's GPU can be judged in
practice too.
"""

from __future__ import annotations

import pytest
import torch

from autograder.core.results import message
from autograder.engine import recording
from autograder.engine.checks import fail
from autograder.engine.feedback import compare
from autograder.engine.grader_helpers import generator

from .harness import MAIN, MAIN_T, LearnerAttention, random_input

ref = recording.reference_of(__package__)

TOLERANCES = {torch.float32: 1e-5, torch.float16: 5e-3, torch.bfloat16: 2e-2}


@pytest.mark.check("gpu-parity")
def test_gpu_parity(submission, check_seed):
    cuda = torch.cuda.is_available()
    if not cuda and not recording.eager():
        pytest.skip("lesson03.no_cuda")
    gen = generator(check_seed)
    for fused in (False, True):
        for dtype, tol in TOLERANCES.items():
            attn = LearnerAttention(submission, MAIN, gen, fused=fused)
            x = random_input(MAIN, MAIN_T, gen)
            # The reference sees exactly the rounded values the GPU sees.
            sd = {k: v.to(dtype).double() for k, v in attn.sd.items()}
            x_cast = x.to(dtype)
            expected = ref.attention_forward(x_cast.double(), sd, MAIN["n_head"])
            if not cuda:
                continue  # recording without a GPU: the expected values are what the replay needs
            submission.call(attn.handle, "cuda", method="to")
            if dtype is not torch.float32:
                submission.call(attn.handle, dtype, method="to")
            y = submission.call(attn.handle, x_cast.to("cuda"))
            if not isinstance(y, torch.Tensor):
                fail(attn.called(x), message("lesson03.not_a_tensor", got=type(y).__name__))
            if y.dtype != dtype:
                fail(attn.called(x), message("lesson03.dtype_wrong", got=str(y.dtype), expected=str(dtype)))
            problem = compare(
                y.float(),
                expected.float(),
                what=message("lesson03.what_output_gpu", dtype=str(dtype)),
                atol=tol,
                rtol=tol,
            )
            if problem:
                fail(attn.called(x), problem)
    if not cuda:
        pytest.skip("lesson03.no_cuda")
