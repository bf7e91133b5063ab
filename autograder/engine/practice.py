"""Practice mode, trusted side: grade a lesson with its practice tests when the hidden graders
are not available (a student release whose workflow has no token for the instructor's graders).

Each practice test becomes one check worth 1 point, named after the test and attributed to the
TODO in its `@pytest.mark.todo("id")` marker; the lesson is completed when they all pass (a
test that skipped itself did not pass). The
tests run inside the sandboxed worker (they import the learner's code), so the engine keeps
its isolation, but their outcome is only as trustworthy as the learner's copy of the tests:
the result is marked mode="practice" and every renderer says "nota de práctica".

The worker streams each test's outcome as soon as it is known, and says when each test starts:
every test gets its own budget (PRACTICE_TIMEOUT), and a test that never ends costs one budget,
never the outcomes of the tests before it. It is said where the learner's code was when it was
stopped (engine/hangs.py), and the tests that had not run yet say they wait on that same cause.
"""

from __future__ import annotations

from pathlib import Path

from autograder.core import regions
from autograder.core.manifest import Lesson
from autograder.core.results import Block, CheckResult, Feedback, LessonResult, Status, message
from autograder.engine import hangs, learner_errors, practice_errors
from autograder.sandbox.client import Sandbox, StudentError, WorkerDied

# A practice test runs in well under a second; this many CPU seconds (of the worker: a wall-clock
# bound above it stops a sleeping one) bound each test, and the collection of them, when the
# learner's code never ends.
PRACTICE_TIMEOUT = 10.0
_STATUS = {"passed": Status.PASSED, "failed": Status.FAILED, "error": Status.ERROR, "skipped": Status.SKIPPED}


def has_practice_tests(lesson_dir) -> bool:
    return any(lesson_dir.glob("test_*.py"))


class _Stream:
    """The practice run as the worker tells it: the tests collected, the one running, and the
    outcomes of those over (in the order they ended). Each test's start renews the budget."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.collected: list[dict] = []
        self.running: dict | None = None
        self.outcomes: dict[str, dict] = {}

    def __call__(self, event: object) -> None:
        if not isinstance(event, dict):
            return
        if isinstance(event.get("collected"), list):
            self.collected = [e for e in event["collected"][:1000] if isinstance(e, dict)]
        elif "started" in event:
            self.running = event
            self.sandbox.begin_check(PRACTICE_TIMEOUT)
        elif "outcome" in event:
            self.outcomes[str(event.get("name", "?"))[:120]] = event
            self.running = None


def grade_practice(lesson: Lesson, sandbox: Sandbox, *, stubs: Path | None = None) -> LessonResult:
    titles = {todo.id: dict(todo.title) for todo in lesson.todos}
    stream = _Stream(sandbox)
    try:
        sandbox.ensure_ready()
        sandbox.begin_check(PRACTICE_TIMEOUT)  # collecting the tests imports the learner's code
        outcomes = sandbox.request("practice", on_progress=stream)
    except WorkerDied as exc:
        checks = _after_stop(lesson, sandbox, stream, exc, titles, stubs)
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
        checks = practice_errors.said_as_crashes(checks, lesson, sandbox, stubs)
    finally:
        sandbox.end_check()
    return LessonResult(
        lesson.id, lesson.slug, dict(lesson.title), lesson.xp, checks, mode="practice", scale="tests"
    )


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


def _after_stop(
    lesson: Lesson, sandbox: Sandbox, stream: _Stream, exc: WorkerDied, titles: dict, stubs: Path | None
) -> list[CheckResult]:
    """The run stopped (out of time, or the worker died): the outcomes streamed before are kept,
    the test running then says why it stopped (and where the learner's code was), and the tests
    not run yet wait on that same cause."""
    feedback, place = exc.feedback, None
    stopped = sandbox.stopped
    if stopped is not None:
        todos = [todo.id for todo in lesson.todos]
        place = hangs.locate(stopped.frames, sandbox.root, lesson.files, todos, stubs)
        if place is not None:
            feedback = Feedback((*hangs.place_parts(place), *exc.feedback.parts))
    raised_in = place.raised_in if place is not None else None
    checks = [check_result(stream.outcomes[name], titles) for name in stream.outcomes]
    if stream.running is None and not stream.collected:
        whole = _whole_run_failed(Status.ERROR, feedback)  # stopped while collecting the tests
        whole.raised_in = raised_in
        return [*checks, whole]
    culprit = stream.running or {}
    name = str(culprit.get("started", "practica"))[:120]
    todo = culprit.get("todo") if isinstance(culprit.get("todo"), str) else None
    checks.append(_stopped_check(name, todo, feedback, raised_in))
    shown = hangs.place_parts(place) if place is not None else ()
    waiting = Feedback((*shown, message("hang.practice_waiting", test=name)))
    for entry in stream.collected:
        other = str(entry.get("name", "?"))[:120]
        if other in stream.outcomes or other == name:
            continue
        other_todo = entry.get("todo") if isinstance(entry.get("todo"), str) else None
        checks.append(_stopped_check(other, other_todo, waiting, raised_in))
    return checks


def _stopped_check(name: str, todo: str | None, feedback: Feedback, raised_in) -> CheckResult:
    check = CheckResult(name, todo, Status.ERROR, 0.0, 1.0, feedback)
    check.raised_in = raised_in
    if raised_in is not None and raised_in.todo != todo:
        check.waits_on = raised_in.todo
    return check


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
