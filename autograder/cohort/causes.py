"""Why a learner's lesson does not run at all, read back from a graded result: a file of it
does not load (a syntax error, an import that fails, an exception in its top-level code).

Such a learner fails every check that loads the file, each with the same error; the cohort
report counts them once under "no se ejecuta" with the file and line, instead of as stuck on
every TODO of the lesson (autograder/cohort/report.py).

What tells it: the engine's own message for a file that does not load (engine/learner_errors.py,
keys errors.*: the file as the learner sees it, its line, what Python said), recognised fresh
or read back from a results.json. A result written before that message existed said the
learner's exception with engine.student_raised and the learner's frames as a traceback block,
innermost last; it is read the same way when the error is a syntax error (SyntaxError,
IndentationError, TabError: Python raises them only when it compiles a file) or every one of the
learner's frames is top-level code (engine/feedback.frame_location writes a frame inside a
function as "file:line · name()", a top-level one as "file:line").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from autograder.core import i18n
from autograder.core.results import Block, CheckResult, LessonResult, Status, Text
from autograder.engine import learner_errors

# The learner's exception, as the engine words it (params: type, message).
RAISED_KEY = "engine.student_raised"
# Raised only when Python compiles a file: on import, for a learner's module.
COMPILE_ERRORS = frozenset({"SyntaxError", "IndentationError", "TabError"})
# A frame's line in a traceback block: "  attention.py:57 · forward()" or "  attention.py:3".
_FRAME = re.compile(r" {2}(?P<file>\S[^\n]*?):(?P<line>\d+)(?P<function> · .*)?")
_FAILING = (Status.FAILED, Status.ERROR)


@dataclass(frozen=True, eq=False)
class NoRun:
    """A file of a lesson that does not load: where (the learner's file and line) and why (the
    engine's message, or "Type: message")."""

    file: str
    line: int
    why: Text | str

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.line > 0 else self.file

    @property
    def says_where(self) -> bool:
        """Whether `why` names the file and line itself (the engine's message does)."""
        return isinstance(self.why, Text)

    def text(self, lang: str) -> str:
        return i18n.localize(self.why, lang) if isinstance(self.why, Text) else self.why


def check_does_not_run(check: CheckResult, lang: str) -> NoRun | None:
    """The load failure that stopped this check, or None (it ran, or failed another way)."""
    if check.status not in _FAILING:
        return None
    loaded = learner_errors.of(check)
    if loaded is not None:
        return NoRun(loaded.path, loaded.line, loaded.part)
    raised = _raised(check, lang)
    if raised is None:
        return None
    type_name, text = raised
    frame = _innermost_frame(check)
    if frame is None and type_name in COMPILE_ERRORS and check.raised_in is not None and check.raised_in.line:
        frame = (check.raised_in.file, check.raised_in.line, False)
    if frame is None:
        return None
    file, line, in_function = frame
    if in_function and type_name not in COMPILE_ERRORS:
        return None  # raised while the learner's code ran, once loaded
    return NoRun(file, line, f"{type_name}: {text}" if text else type_name)


def lesson_does_not_run(result: LessonResult, lang: str) -> dict[str, NoRun]:
    """{check id: the load failure that stopped it} for a learner's lesson."""
    found = {}
    for check in result.checks:
        cause = check_does_not_run(check, lang)
        if cause is not None:
            found[check.id] = cause
    return found


def distinct(causes) -> list[NoRun]:
    """The causes once each, by place, in order."""
    seen: dict[str, NoRun] = {}
    for cause in causes:
        seen.setdefault(cause.where, cause)
    return list(seen.values())


def _raised(check: CheckResult, lang: str) -> tuple[str, str] | None:
    """(exception type, its message) of the learner's exception the check reports, if any."""
    for part in check.feedback.parts:
        if isinstance(part, Text):
            if part.key == RAISED_KEY:
                return str(part.params.get("type", "")), str(part.params.get("message", ""))
            continue
        if part.kind != "text":
            continue
        params = i18n.recognise(RAISED_KEY, lang, part.text) if lang in i18n.LANGUAGES else None
        if params is not None:
            return str(params.get("type", "")), str(params.get("message", ""))
    return None


def _innermost_frame(check: CheckResult) -> tuple[str, int, bool] | None:
    """(file, line) of the innermost frame of the check's traceback block and whether any of its
    frames is inside a function (then the learner's code was running, not being loaded: a
    module imported by another at top level shows two top-level frames), or None when it has
    none."""
    for part in check.feedback.parts:
        if isinstance(part, Block) and part.kind == "traceback":
            frames = [m for m in map(_FRAME.fullmatch, part.text.splitlines()) if m is not None]
            if frames:
                last = frames[-1]
                return last["file"], int(last["line"]), any(m["function"] for m in frames)
    return None
