"""Practice mode, trusted side: grade a lesson with its practice tests when the hidden graders
are not available (a student release whose workflow has no token for the instructor's graders).

Each practice test becomes one check worth 1 point, named after the test and attributed to the
TODO in its `@pytest.mark.todo("id")` marker; the lesson is completed when they all pass (a
test that skipped itself did not pass). The
tests run inside the sandboxed worker (they import the learner's code), so the engine keeps
its isolation, but their outcome is only as trustworthy as the learner's copy of the tests:
the result is marked mode="practice" and every renderer says "nota de práctica".
"""

from __future__ import annotations

import time

from autograder.core import regions
from autograder.core.manifest import Lesson
from autograder.core.results import Block, CheckResult, Feedback, LessonResult, Status, message
from autograder.engine import learner_errors, practice_errors
from autograder.sandbox.client import Sandbox, StudentError, WorkerDied

# A lesson's practice suite runs in seconds; this bounds a learner's infinite loop.
PRACTICE_TIMEOUT = 120.0
_STATUS = {"passed": Status.PASSED, "failed": Status.FAILED, "error": Status.ERROR, "skipped": Status.SKIPPED}


def has_practice_tests(lesson_dir) -> bool:
    return any(lesson_dir.glob("test_*.py"))


def grade_practice(lesson: Lesson, sandbox: Sandbox) -> LessonResult:
    titles = {todo.id: dict(todo.title) for todo in lesson.todos}
    try:
        sandbox.ensure_ready()
        sandbox.deadline = time.monotonic() + PRACTICE_TIMEOUT
        outcomes = sandbox.request("practice")
    except WorkerDied as exc:
        checks = [_whole_run_failed(Status.ERROR, exc.feedback)]
    except StudentError as exc:  # pytest itself could not run in the learner's folder
        checks = [
            _whole_run_failed(
                Status.ERROR,
                Feedback.of(message("engine.student_raised", type=exc.type_name, message=exc.message[:500])),
            )
        ]
    else:
        checks = [check_result(o, titles) for o in outcomes if isinstance(o, dict)] or [
            _whole_run_failed(Status.ERROR, Feedback.of(message("engine.practice_empty")))
        ]
        checks = file_not_loading(checks, lesson, sandbox)
        checks = practice_errors.said_as_crashes(checks, lesson, sandbox, None)
    finally:
        sandbox.deadline = None
    return LessonResult(lesson.id, lesson.slug, dict(lesson.title), lesson.xp, checks, mode="practice")


def file_not_loading(checks: list[CheckResult], lesson: Lesson, sandbox: Sandbox) -> list[CheckResult]:
    """A practice module pytest could not collect because a learner's file does not load: its
    check says that in one line (engine/learner_errors.py), not with pytest's traceback."""
    uncollected = {id(c) for c in checks if c.status is Status.ERROR and c.todo is None}
    broken = learner_errors.first_load_error(sandbox, lesson) if uncollected else None
    if broken is None:
        return checks
    return [
        CheckResult(c.id, None, Status.FAILED, 0.0, c.max_score, Feedback.of(broken), c.duration)
        if id(c) in uncollected
        else c
        for c in checks
    ]


def _whole_run_failed(status: Status, feedback: Feedback) -> CheckResult:
    return CheckResult("practica", None, status, 0.0, 1.0, feedback)


def check_result(outcome: dict, titles: dict) -> CheckResult:
    status = _STATUS.get(str(outcome.get("outcome")), Status.ERROR)
    todo = outcome.get("todo") if isinstance(outcome.get("todo"), str) else None
    name = str(outcome.get("name", "?"))[:120]
    duration = outcome.get("duration")
    duration = float(duration) if isinstance(duration, (int, float)) else 0.0
    if status is Status.PASSED:
        return CheckResult(name, todo, status, 1.0, 1.0, duration=duration)
    if status is Status.SKIPPED:
        # A practice test that did not run proved nothing: it cannot count toward completing the
        # lesson (the hidden graders' GPU check is the only check allowed to skip, and it is not
        # a practice test). Its point stays on the table, on the same 1-point scale.
        reason = str(outcome.get("message", "")).strip()
        reason = reason[len("Skipped:") :].strip() if reason.startswith("Skipped:") else reason
        return CheckResult(
            name,
            todo,
            Status.FAILED,
            0.0,
            1.0,
            Feedback.of(message("engine.practice_not_run", reason=reason[:300])),
            duration,
        )
    detail = str(outcome.get("message", ""))
    pending = regions.pending_todo(detail)
    parts = []
    if outcome.get("doc"):
        parts.append(message("engine.practice_test", doc=str(outcome["doc"])))
    if pending:
        parts.append(message("engine.todo_pending", todo=pending, title=titles.get(pending, "")))
    else:
        parts.append(message("engine.practice_failed", detail=detail))
        if outcome.get("trace"):
            parts.append(Block(str(outcome["trace"]), kind="traceback"))
    return CheckResult(name, todo, status, 0.0, 1.0, Feedback(tuple(parts)), duration)
