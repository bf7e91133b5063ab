"""What a hidden grader may use: failing with feedback, and describing learner errors.

A grader is a pytest test marked `@pytest.mark.check("id")`; its TODO, points and timeout come
from course.yml. It talks to the learner's code only through the `submission` fixture (a
`Sandbox`) and fails by raising `CheckFailure` with catalog messages, never by formatting text.
"""

from __future__ import annotations

from typing import Any

from autograder.core.results import Block, Feedback, Figure, Part, Text, message
from autograder.sandbox.client import StudentError


class CheckFailure(Exception):
    """The learner's code ran and did the wrong thing; `feedback` explains it."""

    def __init__(
        self, feedback: Feedback, figures: tuple[Figure, ...] = (), waits_on: str | None = None
    ) -> None:
        super().__init__(repr(feedback))
        self.feedback = feedback
        self.figures = figures
        # The other TODO whose result this check could not judge past (CheckResult.waits_on).
        self.waits_on = waits_on


def fail(*parts: Part | Figure | str | Feedback | None, waits_on: str | None = None) -> None:
    """Fail the current check: fail("lesson03.rows_not_normalised", heatmap_block, ...).
    A `Figure` among the parts is kept aside, to be drawn where an image can be shown.
    `waits_on`: the check cannot judge its own TODO because another TODO's result is wrong
    (e.g. sampling given logits of the wrong shape by last-step); the engine records it and
    says so, and the learner's next step goes to that TODO."""
    out: list[Part] = []
    figures: list[Figure] = []
    for part in parts:
        if part is None:
            continue
        if isinstance(part, Figure):
            figures.append(part)
        elif isinstance(part, Feedback):
            out.extend(part.parts)
        elif isinstance(part, str):
            out.append(Text(part))
        else:
            out.append(part)
    raise CheckFailure(Feedback(tuple(out)), tuple(figures), waits_on)


def expect(condition: Any, *parts: Part | str | Feedback | None) -> None:
    if not condition:
        fail(*parts)


# Recognisable error messages and what to tell the learner about them.
_ERROR_HINTS = (
    ("view size is not compatible with input tensor's size and stride", "engine.hint_contiguous"),
    ("must match the size of tensor", "engine.hint_shapes"),
    ("mat1 and mat2 shapes cannot be multiplied", "engine.hint_shapes"),
    ("shape '[", "engine.hint_shapes"),
)


def keys_not_taken(loaded: Any, weights: dict) -> list[str]:
    """The grader's weight names that `load_state_dict(weights, strict=False)` did not take.

    torch reports them as *unexpected* keys (the module has no parameter of that name: the
    learner named the layer differently or left it out); its *missing* keys are the module's own
    names, never the grader's. Whatever the learner's load_state_dict returned, this never raises.
    """
    unexpected = loaded[1] if isinstance(loaded, (list, tuple)) and len(loaded) == 2 else None
    if not isinstance(unexpected, (list, tuple)):
        return []
    names = {key for key in unexpected if isinstance(key, str)}
    return [key for key in weights if key in names]


def describe_student_error(
    err: StudentError, check_todo: str | None, todo_titles: dict, raised_in: Any = None
) -> Feedback:
    """A learner's exception as feedback: pending TODOs by name, otherwise a trimmed traceback;
    `raised_in` (results.RaisedIn) names the TODO whose code raised, when it is not this
    check's: the check waits on that one."""
    from autograder.engine import learner_errors, provenance
    from autograder.engine.feedback import format_traceback, student_frames

    if err.type_name == "MissingSubmodule" and not err.frames_in_root():
        # Raised by the worker's own capture hook, not by the learner's code.
        return Feedback.of(message("engine.missing_submodule", name=err.message[:80]))
    pending = err.todo_pending
    if pending is not None:
        parts: list[Part] = [message("engine.todo_pending", todo=pending, title=todo_titles.get(pending, ""))]
        if check_todo and pending != check_todo:
            parts.append(message("engine.waits_for", todo=check_todo, pending=pending))
        return Feedback(tuple(parts))
    if err.type_name == "FileNotFoundError" and err.message.endswith(".py") and not err.frames_in_root():
        return Feedback.of(message("engine.missing_file", file=err.message))
    broken = learner_errors.load_error(err, learner_errors.names_in(err))
    if broken is not None:  # a file that does not load: one line (engine/learner_errors.py)
        return Feedback.of(broken)
    said = learner_errors.without_root(err.message, err.root)  # never the worker's temporary folder
    parts = [message("engine.student_raised", type=err.type_name, message=_shorten(said))]
    if err.frames_in_root():
        # The error itself is in the line above ("Tu código lanzó ..."): the frames only, once.
        parts.append(
            format_traceback(
                student_frames(err.frames, err.root), err.type_name, err.message, final_line=False
            )
        )
    for needle, key in _ERROR_HINTS:
        if needle in err.message:
            parts.append(Text(key))
            break
    traced = provenance.explanation(err, check_todo)
    if traced:
        # The value that made the operation fail was made by a TODO (engine/provenance.py): say
        # which, where and what it met, rather than "the error jumps in that TODO".
        parts.extend(traced)
    elif raised_in is not None and check_todo and raised_in.todo != check_todo:
        parts.append(
            message(
                "engine.raised_in_other_todo",
                todo=check_todo,
                other=raised_in.todo,
                file=raised_in.file,
                line=raised_in.line,
            )
        )
    return Feedback(tuple(parts))


def _shorten(text: str, limit: int = 300) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


__all__ = ["CheckFailure", "fail", "expect", "describe_student_error", "Block", "Text", "message"]
