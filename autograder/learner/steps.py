"""The one next step: where the learner works next, after `check`, `watch`, `hint` or `grade`.

"Siguiente: TODO [scaling] en exercises/03-atencion-causal/attention.py:74"

A learner's file that does not load comes first: "Siguiente: corrige el error de sintaxis en
exercises/03-atencion-causal/attention.py:90" (engine/learner_errors.py). Otherwise the next
step is the first failing check in the lesson's TODO order. A check that could not run
because an earlier TODO is still pending (the engine's `engine.todo_pending` message) counts for
that pending TODO, not for its own: the learner must write that one first. The step points at
the `# TODO [id]` comment of the TODO in the learner's file (autograder.core.locate, the same
line GitHub annotations use), preferring the region that still raises NotImplementedError when a
TODO has several. A lesson without failing TODO checks points at its quiz or whole-lesson check;
a completed lesson points at the next lesson's README.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autograder.core import i18n, regions
from autograder.core.locate import first_row, marker, read_rows
from autograder.core.manifest import Course, Lesson
from autograder.engine import learner_errors
from autograder.engine.learner_errors import LoadError
from autograder.learner.folders import exercises_dir, lesson_dir, shown
from autograder.learner.terminal import t


@dataclass(frozen=True)
class NextStep:
    # "fix" (a file that does not load) | "todo" | "quiz" | "check" | "lesson" (the next
    # lesson) | "done" (the course)
    kind: str
    lesson: Lesson | None
    todo: str | None = None
    check: str | None = None
    path: str | None = None  # posix, relative to the course root; None: nothing to open
    line: int | None = None  # None: the file has no line to point at (the TODO comment is gone)
    error: str | None = None  # a "fix" step's error: "syntax", "import" or "load"

    def where(self) -> str:
        return f"{self.path}:{self.line}" if self.line else str(self.path)

    def to_state(self) -> dict[str, Any]:
        state = {"kind": self.kind, "todo": self.todo, "check": self.check}
        if self.kind == "fix":  # the error's place as graded: nothing to look up again
            state.update(path=self.path, line=self.line, error=self.error)
        return state


def _failing(check) -> bool:
    from autograder.core.results import Status

    return check.status in (Status.FAILED, Status.ERROR) and not check.informational


def not_loading(checks) -> tuple[LoadError, Any] | None:
    """(the load error, the check) of the first of `checks` that a learner's file that does not
    load stopped (engine/learner_errors.py), else None."""
    from autograder.core.results import Status

    for check in checks:
        if check.status is not Status.PASSED:
            error = learner_errors.of(check)
            if error is not None:
                return error, check
    return None


def error_line(error: LoadError, lang: str) -> str:
    """A load error's one line, in `lang`."""
    from autograder.core.results import Feedback

    return i18n.render_parts(Feedback.of(error.part), lang)[0][1]


def blocking_todo(check, todo_ids: list[str]) -> str | None:
    """The TODO a failing check waits on: the TODO whose code raised (results.RaisedIn: the
    learner's mistake, whichever check ran into it), the pending TODO the engine names in its
    feedback (a later check cannot run while an earlier TODO raises NotImplementedError), else
    its own."""
    raised = getattr(check, "raised_in", None)
    if raised is not None and raised.todo in todo_ids:
        return raised.todo
    waits = getattr(check, "waits_on", None)
    if waits in todo_ids:  # a grader said it cannot judge past that TODO's wrong result
        return waits
    pending = check.pending
    if pending is not None and pending.params.get("todo") in todo_ids:
        return pending.params["todo"]
    return check.todo if check.todo in todo_ids else None


def lesson_next_step(course: Course, lesson: Lesson, result) -> NextStep | None:
    """Where to work next in `lesson` after `result`; None when nothing in it is failing."""
    if result.completed:
        return None
    order = [todo.id for todo in lesson.todos]
    failing = [check for check in result.checks if _failing(check)]
    # A file that does not load stops every check: nothing else can be judged before it loads.
    broken = not_loading(failing)
    if broken is not None:
        error, check = broken
        return NextStep(
            "fix", lesson, check=check.id, path=error.path, line=error.line or None, error=error.kind
        )
    # An error the learner's code raised is the mistake to fix first, at the line that raised.
    raised = [
        (order.index(c.raised_in.todo), index, c)
        for index, c in enumerate(failing)
        if c.raised_in is not None
        and c.raised_in.todo in order
        and c.raised_in.line > 0
        and c.raised_in.file in lesson.files
    ]
    if raised:
        _, _, check = min(raised, key=lambda item: item[:2])
        path = (Path("exercises") / lesson.folder / check.raised_in.file).as_posix()
        return NextStep(
            "todo", lesson, todo=check.raised_in.todo, check=check.id, path=path, line=check.raised_in.line
        )
    pointed = [
        (order.index(todo), index, check, todo)
        for index, check in enumerate(failing)
        if (todo := blocking_todo(check, order)) is not None
    ]
    if pointed:
        _, _, check, todo = min(pointed, key=lambda item: item[:2])
        path, line = locate_step(course, lesson, todo, check.id)
        return NextStep("todo", lesson, todo=todo, check=check.id, path=path, line=line)
    if not failing:
        return None
    # No TODO to blame: the lesson-wide checks first, the quiz last (it needs no code).
    quiz = [c for c in failing if lesson.is_quiz_check(c.id)]
    check = next((c for c in failing if c not in quiz), None) or quiz[0]
    path, line = locate_step(course, lesson, None, check.id)
    return NextStep("quiz" if check in quiz else "check", lesson, check=check.id, path=path, line=line)


def next_step(
    course: Course,
    results: Iterable,
    completed: Iterable[str] = (),
    known: Mapping[str, NextStep | None] | None = None,
) -> NextStep:
    """The one next step after grading `results` (LessonResults): the first unfinished lesson's
    step, else the first lesson after the last one graded that is not `completed` (the ids the
    learner's history says are done), else the first such lesson before it; the course is done
    only when every lesson is. `known`: the lessons' steps already worked out (record_result's),
    by lesson id."""
    known = known or {}
    by_id = {result.id: result for result in results}
    done = set(completed) | {result.id for result in by_id.values() if result.completed}
    last = -1
    for index, lesson in enumerate(course.lessons):
        if lesson.id in by_id:
            last = index
            step = (
                known[lesson.id] if lesson.id in known else lesson_next_step(course, lesson, by_id[lesson.id])
            )
            if step is not None:
                return step
    return lesson_after(course, last, done)


def lesson_after(course: Course, index: int, done: Iterable[str]) -> NextStep:
    """Start the first lesson not `done` after the lesson at `index` of the course (-1: from the
    first), else the first one before it, that lesson itself last; the course is done when
    every lesson is."""
    done = set(done)
    lessons = course.lessons
    for lesson in [*lessons[index + 1 :], *lessons[: index + 1]]:
        if lesson.id not in done:
            return lesson_step(course, lesson)
    return NextStep("done", None)


def lesson_step(course: Course, lesson: Lesson) -> NextStep:
    """Start `lesson`: its README, when its folder is there."""
    readme = lesson_dir(course, lesson) / "README.md"
    if not lesson_dir(course, lesson).is_dir():
        return NextStep("lesson", lesson)
    target = readme if readme.is_file() else lesson_dir(course, lesson) / lesson.files[0]
    return NextStep("lesson", lesson, path=shown(course, target))


def locate_step(course: Course, lesson: Lesson, todo: str | None, check_id: str) -> tuple[str, int | None]:
    """The file and line a step points at: the marker core.locate names (the `TODO [id]`
    comment, or the quiz question), at the region that still raises when a TODO has several;
    the line is None when the file no longer holds the marker, or for a lesson-wide check."""
    path, needle = marker(lesson, todo, check_id)
    if needle is None:
        return path, None  # a lesson-wide check: the file, no particular line
    rows = read_rows(course.root, path)
    if rows is None:
        return path, None
    if todo is not None:
        pending = next((n for n, row in enumerate(rows) if regions.pending_todo(row) == todo), None)
        if pending is not None:
            comment = next(
                (n for n in range(pending, -1, -1) if needle in rows[n] and rows[n].lstrip().startswith("#")),
                pending,
            )
            return path, comment + 1
    return path, first_row(rows, needle)


def hint_command(step: NextStep) -> str | None:
    if step.kind != "todo" or step.lesson is None:
        return None
    return f"autograder hint {step.lesson.id} {step.todo}"


def describe_step(step: NextStep, lang: str) -> list[str]:
    """The next step in words: "Siguiente: TODO [scaling] en exercises/…/attention.py:74", and
    for a TODO a second line with its title and the command that gives a hint."""
    if step.kind == "fix":
        return [i18n.translate(f"errors.next_{step.error}", lang, where=step.where())]
    if step.kind == "todo":
        title = i18n.localize(step.lesson.todo(step.todo).title, lang)
        return [
            t("next_todo", lang, todo=step.todo, where=step.where()),
            "  " + t("next_todo_detail", lang, title=title, command=hint_command(step)),
        ]
    if step.kind == "quiz":
        return [t("next_quiz", lang, n=step.check.split("-", 1)[1], where=step.where())]
    if step.kind == "check":
        return [t("next_check", lang, check=step.check, where=step.where())]
    if step.kind == "lesson":
        title = i18n.localize(step.lesson.title, lang)
        if step.path is None:
            return [
                t(
                    "next_lesson_missing",
                    lang,
                    id=step.lesson.id,
                    title=title,
                    folder=f"exercises/{step.lesson.folder}/",
                )
            ]
        return [t("next_lesson", lang, id=step.lesson.id, title=title, where=step.path)]
    return [t("course_done", lang)]


# --- the step `autograder grade` ends with -----------------------------------------------------


def grade_step(course: Course, result, submission: Any = None) -> NextStep | None:
    """The next step after `grade` (next_step, the rule `check` follows), or None when the
    graded folder is not the course's own exercises/: the step names its files."""
    if submission is not None and Path(submission).resolve() != exercises_dir(course).resolve():
        return None
    return next_step(course, result.lessons)


def step_line(step: NextStep, result, lang: str) -> str:
    """The one line `grade` ends with (render_text's `step`): "Empieza por: lección 01, TODO
    [vocab] en exercises/01-tokens-y-lotes/data.py:12 · autograder watch 01" while nothing in
    `result` scores yet, "Siguiente: …" after; other kinds of step as `check` says them."""
    if step.kind != "todo":
        return describe_step(step, lang)[0]
    started = result.score > 0 or any(lesson.completed for lesson in result.lessons)
    return i18n.translate(
        "render.next_todo" if started else "render.start_todo",
        lang,
        id=step.lesson.id,
        todo=step.todo,
        where=step.where(),
    )
