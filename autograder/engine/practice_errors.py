"""The practice tests' crashes in the learner's words (engine/practice.py grades with them).

pytest reports a failed practice test as text: its crash line ("RuntimeError: view size …") and
its short traceback, with the test's frame, torch's frames and the crash line again. When the
learner's code raised, the check says what the hidden graders say of a crash instead: "Tu código
lanzó RuntimeError: …" once, the frames of the learner's own files only ("attention.py:85 ·
forward()"), and the TODO whose code raised (engine/blame.py), so that the next step goes to
that line. A failure that never went through the learner's files (an assertion of the test) is
left as pytest said it.

    in_learners_words(check, lesson, root, stubs, learner_files) -> CheckResult
    frames_of(trace)        the frames of pytest's short traceback text
"""

from __future__ import annotations

import re
from pathlib import Path

from autograder.core.results import Block, CheckResult, Feedback, RaisedIn, Text, message
from autograder.engine import blame
from autograder.engine.feedback import format_traceback, truncate
from autograder.engine.learner_errors import without_root

PRACTICE_FAILED = "engine.practice_failed"
MESSAGE_LIMIT = 300
# "attention.py:85: in forward", "/usr/lib/…/module.py:1778: in _wrapped_call_impl"
_FRAME = re.compile(r"^(?P<file>\S.*?):(?P<line>\d+): in (?P<name>\S+)\s*$")
# pytest's crash line: "RuntimeError: …", "torch.OutOfMemoryError: …"
_CRASH = re.compile(r"^(?P<type>[A-Za-z_][\w.]*): (?P<message>.*)$", re.S)


def frames_of(trace: str) -> list[dict]:
    """The frames of pytest's short traceback (`--tb=short`), outermost first: file as pytest
    wrote it (relative to the learner's folder when inside it), line, function and the first
    source line below it."""
    frames: list[dict] = []
    for row in trace.splitlines():
        found = _FRAME.match(row)
        if found:
            frames.append(
                {"filename": found["file"], "lineno": int(found["line"]), "name": found["name"], "line": ""}
            )
            continue
        source = row.strip()
        if (
            frames
            and row.startswith("    ")
            and not frames[-1]["line"]
            and source
            and set(source) - set("^~ ")
        ):
            frames[-1]["line"] = source
    return frames


def in_learners_words(
    check: CheckResult, lesson, root: Path, stubs: Path | None, learner_files: list[str]
) -> CheckResult:
    """`check` (a practice test's result) as a crash of the learner's code, when its traceback
    went through `learner_files` (names in the worker's folder `root`); else `check` itself."""
    parts = check.feedback.parts
    trace = next((p for p in parts if isinstance(p, Block) and p.kind == "traceback"), None)
    failed = next((p for p in parts if isinstance(p, Text) and p.key == PRACTICE_FAILED), None)
    if trace is None or failed is None:
        return check
    mine = [frame for frame in frames_of(trace.text) if frame["filename"] in learner_files]
    if not mine:
        return check
    detail = without_root(str(failed.params.get("detail", "")), str(root)).strip()
    crash = _CRASH.match(detail)
    type_name, text = (crash["type"].rsplit(".", 1)[-1], crash["message"]) if crash else ("Exception", detail)
    said = [
        *(p for p in parts if p is not trace and p is not failed),  # the test's own description
        message(
            "engine.student_raised", type=type_name, message=truncate(" ".join(text.split()), MESSAGE_LIMIT)
        ),
        format_traceback(mine, type_name, text, final_line=False),
    ]
    raised_in = _raised_in(mine[-1], lesson, root, stubs)
    waits_on = None
    if raised_in is not None and check.todo and raised_in.todo != check.todo:
        waits_on = raised_in.todo
        said.append(
            message(
                "engine.raised_in_other_todo",
                todo=check.todo,
                other=raised_in.todo,
                file=raised_in.file,
                line=raised_in.line,
            )
        )
    result = CheckResult(
        check.id,
        check.todo,
        check.status,
        check.score,
        check.max_score,
        Feedback(tuple(said)),
        check.duration,
        informational=check.informational,
    )
    result.raised_in, result.waits_on = raised_in, waits_on
    return result


def _raised_in(frame: dict, lesson, root: Path, stubs: Path | None) -> RaisedIn | None:
    """The TODO of the lesson whose code holds the innermost learner frame's line, if any."""
    name = frame["filename"]
    if name not in lesson.files:
        return None  # a file of an earlier lesson: none of this lesson's TODOs
    text = blame.read_text(Path(root) / name)
    if text is None:
        return None
    stub = blame.read_text(Path(stubs) / name) if stubs is not None else None
    todo = blame.todo_at(text, frame["lineno"], stub, {t.id for t in lesson.todos})
    return RaisedIn(todo, name, frame["lineno"]) if todo is not None else None


def said_as_crashes(checks: list[CheckResult], lesson, sandbox, stubs: Path | None) -> list[CheckResult]:
    """Every practice check of `sandbox`'s run in_learners_words: the learner's files there are
    the lesson's and, in practice mode, their own earlier pieces beside them (`provided`)."""
    learner_files = [*lesson.files, *getattr(sandbox, "provided", {})]
    return [in_learners_words(check, lesson, sandbox.root, stubs, learner_files) for check in checks]
