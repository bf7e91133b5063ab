"""The helpers the hidden graders of several lessons share (autograder/engine/grader_helpers.py),
run against a real worker holding a small learner folder: real modules, real tensors, and the
learner's errors as the sandbox reports them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from autograder.core.results import Block, Figure, message
from autograder.engine.checks import CheckFailure
from autograder.engine.feedback import heatmap
from autograder.engine.grader_helpers import (
    config_text,
    first_hint,
    generator,
    hinted,
    innermost_learner_file,
    learner_frames,
    load_weights,
    scaled_heatmap,
    tokens,
    worker_generator,
)
from autograder.sandbox.client import Sandbox, StudentError

MODEL = """\
import torch
from torch import nn

import helpers


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)

    def forward(self, x):
        return self.lin(x)


def draw(generator):
    return torch.randint(0, 1000, (5,), generator=generator)


def through_helpers():
    return helpers.broadcast()


def pending():
    raise NotImplementedError("TODO [mask] build the mask")


def in_place():
    raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
"""

HELPERS = """\
import numpy as np


def broadcast():
    return np.ones((2, 3)) + np.ones((4,))
"""


@pytest.fixture(scope="module")
def box(tmp_path_factory):
    folder = tmp_path_factory.mktemp("learner")
    (folder / "model.py").write_text(MODEL, encoding="utf-8")
    (folder / "helpers.py").write_text(HELPERS, encoding="utf-8")
    with Sandbox(folder) as sandbox:
        yield sandbox


def learner(box: Sandbox, name: str):
    return box.getattr(box.module("model"), name)


def raised(box: Sandbox, name: str) -> StudentError:
    with pytest.raises(StudentError) as caught:
        box.call(learner(box, name))
    return caught.value


# ---------------------------------------------------------------- inputs the grader draws


def test_generator_replays_its_draws_from_the_seed():
    assert torch.equal(torch.randn(4, generator=generator(7)), torch.randn(4, generator=generator(7)))
    assert not torch.equal(torch.randn(4, generator=generator(7)), torch.randn(4, generator=generator(8)))


def test_tokens_are_int64_indices_below_the_vocabulary():
    idx = tokens(3, 5, 4, generator(1))
    assert idx.shape == (3, 5) and idx.dtype == torch.int64
    assert int(idx.min()) >= 0 and int(idx.max()) < 4
    assert torch.equal(idx, tokens(3, 5, 4, generator(1)))


def test_config_text_reads_as_keyword_arguments():
    assert config_text({"n_embd": 24, "n_head": 3, "dropout": 0.0}) == "n_embd=24, n_head=3, dropout=0.0"
    assert config_text({}) == ""


# ---------------------------------------------------------------- objects in the worker


def test_worker_generator_draws_what_the_same_seed_draws_here(box):
    drawn = box.call(learner(box, "draw"), worker_generator(box, 1234))
    assert torch.equal(drawn, torch.randint(0, 1000, (5,), generator=generator(1234)))


def test_load_weights_loads_what_fits_and_lists_the_names_the_module_lacks(box):
    module = box.call(learner(box, "Tiny"))
    gen = generator(3)
    weights = {
        "lin.weight": torch.randn(2, 3, generator=gen),
        "lin.bias": torch.randn(2, generator=gen),
        "head.weight": torch.randn(2, 2, generator=gen),
        "head.bias": torch.randn(2, generator=gen),
    }
    assert load_weights(box, module, weights) == ["head.weight", "head.bias"]
    x = torch.randn(4, 3, generator=gen)
    expected = torch.nn.functional.linear(x, weights["lin.weight"], weights["lin.bias"])
    assert torch.allclose(box.call(module, x), expected, atol=1e-6)


def test_load_weights_lists_nothing_when_every_name_is_taken(box):
    module = box.call(learner(box, "Tiny"))
    assert load_weights(box, module, {"lin.weight": torch.zeros(2, 3), "lin.bias": torch.zeros(2)}) == []


# ---------------------------------------------------------------- where a learner's error came from


def test_learner_frames_name_the_learners_files_outermost_first(box):
    frames = learner_frames(raised(box, "through_helpers"))
    assert [(f["filename"], f["name"]) for f in frames] == [
        ("model.py", "through_helpers"),
        ("helpers.py", "broadcast"),
    ]
    assert "np.ones((4,))" in frames[-1]["line"]


def test_innermost_learner_file_is_where_the_error_surfaced(box):
    err = raised(box, "through_helpers")
    assert innermost_learner_file(err) == "helpers.py"
    # Only the files a caller knows: the innermost of those.
    assert innermost_learner_file(err, among={"model.py", "train.py"}) == "model.py"
    assert innermost_learner_file(err, among={"train.py"}) is None


def test_an_error_outside_the_learners_files_has_no_learner_file(box):
    with pytest.raises(StudentError) as caught:
        box.call(box.getattr(box.library("torch"), "zeros"), "not a size")
    assert learner_frames(caught.value) == []
    assert innermost_learner_file(caught.value) is None


# ---------------------------------------------------------------- errors with a known cause


def test_first_hint_takes_the_first_rule_that_gives_one():
    rules = (
        (r"size (\d+)", lambda m: None if m[1] == "3" else message("a", size=m[1])),
        (r"broadcast", lambda m: message("b")),
        (r"size", lambda m: message("c")),
    )
    assert first_hint("could not broadcast size 3", rules) == message("b")
    assert first_hint("size 4", rules) == message("a", size="4")
    assert first_hint("size 3", rules) == message("c")
    assert first_hint("nothing known", rules) is None


def test_hinted_fails_with_what_was_called_the_error_and_the_hint(box):
    called = message("lesson03.called_fn", call="through_helpers()")
    hint = message("lesson03.np_softmax_keepdims")
    with pytest.raises(CheckFailure) as caught:
        with hinted(lambda err: hint if "could not be broadcast" in err.message else None, called):
            box.call(learner(box, "through_helpers"))
    parts = caught.value.feedback.parts
    assert parts[0] == called and parts[-1] == hint
    shown = " ".join(str(p) for p in parts)
    assert "helpers.py" in shown and "ValueError" in shown


def test_hinted_without_a_call_starts_with_the_error(box):
    with pytest.raises(CheckFailure) as caught:
        with hinted(lambda err: message("lesson04.diag_in_place") if "in-place" in err.message else None):
            box.call(learner(box, "in_place"))
    assert caught.value.feedback.parts[0] != message("lesson04.diag_in_place")
    assert caught.value.feedback.parts[-1] == message("lesson04.diag_in_place")


def test_hinted_lets_an_error_without_a_hint_through_as_it_was_raised(box):
    with pytest.raises(StudentError, match="could not be broadcast"):
        with hinted(lambda err: message("lesson04.diag_in_place") if "in-place" in err.message else None):
            box.call(learner(box, "through_helpers"))


def test_hinted_never_hints_a_pending_todo(box):
    asked = []

    def hint_of(err):
        asked.append(err)
        return message("lesson03.hint_mask_not_cropped", T=1, bs=2)

    with pytest.raises(StudentError) as caught:
        with hinted(hint_of):
            box.call(learner(box, "pending"))
    assert caught.value.todo_pending == "mask" and asked == []


# ---------------------------------------------------------------- matrices shown to the learner


def test_scaled_heatmap_shows_the_matrix_over_its_maximum_with_its_figure():
    matrix = torch.tensor([[2.0, 0.0], [1.0, 4.0]])
    leaks = np.array([[False, False], [False, True]])
    title, legend, figure_title = message("t"), message("l"), message("f")
    parts = scaled_heatmap(matrix, leaks=leaks, title=title, legend=legend, figure_title=figure_title)
    scaled = np.array([[0.5, 0.0], [0.25, 1.0]])
    assert parts[0] == title and parts[2] == legend
    assert isinstance(parts[1], Block) and parts[1] == heatmap(scaled, leaks=leaks)
    assert isinstance(parts[3], Figure) and parts[3].title == figure_title
    assert np.array_equal(parts[3].weights, scaled) and parts[3].leaks is leaks


def test_scaled_heatmap_leaves_out_what_was_not_asked_for():
    matrix = torch.tensor([[3.0, 0.0], [0.0, 6.0]])
    parts = scaled_heatmap(matrix, legend=message("l"))
    assert parts == [heatmap(np.array([[0.5, 0.0], [0.0, 1.0]])), message("l")]


def test_scaled_heatmap_of_an_all_zero_matrix_stays_zero():
    (block,) = scaled_heatmap(torch.zeros(2, 2))
    assert block == heatmap(np.zeros((2, 2)))
