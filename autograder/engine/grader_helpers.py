"""What the hidden graders of several lessons share (autograder/graders/lessonNN/).

Each lesson's harness.py holds what only that lesson needs; what two or more lessons did the
same way lives here once: seeded inputs, a generator in the worker, weights loaded into a
learner's module, which of the learner's files an error came from, a learner's error turned
into a hint, and a matrix drawn as a heatmap with its figure.

Graders import this module absolutely (`from autograder.engine.grader_helpers import ...`): a
graders folder checked out elsewhere (AUTOGRADER_GRADERS) runs with the release's engine, so
what is here is part of the engine's contract with graders. Like the rest of `engine`, it
imports only `core` and `sandbox`.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Collection, Iterable, Iterator
from pathlib import PurePath

import torch

from autograder.core.results import Figure, Part
from autograder.engine.checks import describe_student_error, fail, keys_not_taken
from autograder.engine.feedback import heatmap
from autograder.sandbox.client import Sandbox, StudentError
from autograder.sandbox.protocol import Handle

# A hint rule: (regex, make); make(match) gives the hint, or None when the match is no evidence.
HintRule = tuple[str, Callable[[re.Match], Part | None]]


# ---------------------------------------------------------------- inputs the grader draws


def generator(seed: int) -> torch.Generator:
    """A CPU generator seeded `seed`: every input a check draws comes from one, so a failure
    replays from the seed recorded in the result."""
    return torch.Generator().manual_seed(seed)


def tokens(B: int, T: int, V: int, gen: torch.Generator) -> torch.Tensor:
    """(B, T) token indices in [0, V), int64."""
    return torch.randint(0, V, (B, T), generator=gen)


def config_text(cfg: dict) -> str:
    """A configuration as keyword arguments, "n_embd=24, n_head=3", for the call a learner reads."""
    return ", ".join(f"{k}={v}" for k, v in cfg.items())


# ---------------------------------------------------------------- objects in the worker


def worker_generator(sub: Sandbox, seed: int) -> Handle:
    """A torch.Generator built in the worker and seeded `seed`, to hand to the learner's code."""
    gen = sub.call(sub.getattr(sub.library("torch"), "Generator"))
    return sub.call(gen, seed, method="manual_seed")


def load_weights(sub: Sandbox, module: Handle, weights: dict) -> list[str]:
    """module.load_state_dict(weights, strict=False) in the worker; the names in `weights` the
    learner's module did not take (it has no parameter of that name), for the caller to report."""
    loaded = sub.call(module, weights, method="load_state_dict", strict=False)
    return keys_not_taken(loaded, weights)


# ---------------------------------------------------------------- where a learner's error came from


def learner_frames(err: StudentError) -> list[dict]:
    """The frames of `err`'s traceback in the learner's own files (those under the folder their
    code runs from), outermost first, each with its file name relative to that folder."""
    frames = []
    for frame in err.frames:
        filename = str(frame.get("filename", ""))
        if filename.startswith(err.root):
            relative = PurePath(filename[len(err.root) :].lstrip("/\\")).as_posix()
            frames.append({**frame, "filename": relative})
    return frames


def innermost_learner_file(err: StudentError, among: Collection[str] | None = None) -> str | None:
    """The learner's file ("model.py") of the innermost frame of `err` in their files (only
    those in `among`, when given); None when the error never went through one."""
    files = [f["filename"] for f in learner_frames(err) if among is None or f["filename"] in among]
    return files[-1] if files else None


# ---------------------------------------------------------------- errors with a known cause


def first_hint(text: str, rules: Iterable[HintRule]) -> Part | None:
    """The hint of the first rule whose regex is found in `text` and whose make gives one."""
    for pattern, make in rules:
        found = re.search(pattern, text)
        if found:
            hint = make(found)
            if hint is not None:
                return hint
    return None


@contextlib.contextmanager
def hinted(hint_of: Callable[[StudentError], Part | None], called: Part | None = None) -> Iterator[None]:
    """A learner's error that names a recognisable mistake becomes the check's failure: what
    was called (when given), what they raised, and the hint `hint_of` gives it. A pending TODO's
    error, and one `hint_of` has nothing for (None), go on to the engine as they were raised."""
    try:
        yield
    except StudentError as err:
        hint = hint_of(err) if err.todo_pending is None else None
        if hint is not None:
            fail(called, describe_student_error(err, None, {}), hint)
        raise


# ---------------------------------------------------------------- matrices shown to the learner


def scaled_heatmap(
    matrix: torch.Tensor,
    *,
    leaks=None,
    title: Part | None = None,
    legend: Part | None = None,
    figure_title: Part | None = None,
) -> list:
    """Feedback parts that show a non-negative (T, T) matrix divided by its maximum (so its
    largest cell is 1): [title], the text heatmap with the `leaks` cells marked, [legend], and
    [a Figure of it, titled `figure_title`, drawn where an image can be shown]."""
    scaled = (matrix / matrix.max().clamp_min(1e-12)).numpy()
    parts = [title, heatmap(scaled, leaks=leaks), legend]
    if figure_title is not None:
        parts.append(Figure(scaled, leaks=leaks, title=figure_title))
    return [part for part in parts if part is not None]
