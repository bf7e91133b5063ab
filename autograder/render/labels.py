"""What every rendering of a result says the same way: a score's number, points on the scale
they were judged on, a lesson's title and state, a check's label, which walls were missing,
which quiz answer was left blank, the one line of every TODO left to write. Each format
(results_json.py, markdown.py, terminal.py, formats.py) and the cohort's report take these from
here, so no two of them can disagree.
"""

from __future__ import annotations

from typing import Any

from autograder.core import i18n
from autograder.core.i18n import translate as _t
from autograder.core.results import CheckResult, CourseResult, LessonResult, Status, Text


def score_number(x: float) -> int | float:
    """A score for output: 5 rather than 5.0, else rounded to 2 decimals."""
    x = float(x)
    return int(x) if x.is_integer() else round(x, 2)


def check_language(lang: str) -> None:
    """A ValueError for a language the catalogs do not have, before anything is rendered."""
    if lang not in i18n.LANGUAGES:
        raise ValueError(f"unknown language {lang!r}; expected one of {', '.join(i18n.LANGUAGES)}")


def points_text(result: Any, lang: str) -> str:
    """A result's points (a CourseResult or LessonResult) on the one scale of how it was judged:
    the course's points (the hidden graders, or their checks answered from a recording);
    practice tests passed when only the practice tests could run (each worth 1), so "0/8" is
    never read as points out of a lesson's 100."""
    lessons = result.lessons if isinstance(result, CourseResult) else [result]
    practice = bool(lessons) and all(lesson.scale == "tests" for lesson in lessons)
    return _t(
        "render.points_practice" if practice else "render.points",
        lang,
        score=score_number(result.score),
        max_score=score_number(result.max_score),
    )


def lesson_title(lesson: LessonResult, lang: str) -> str:
    """The lesson's title in `lang` (course.yml gives one per language)."""
    return str(i18n.localize(lesson.title, lang))


def lesson_state(lesson: LessonResult, lang: str) -> tuple[Status, str]:
    """The lesson's state as the status whose symbol shows it, and its label."""
    tag = f" ({_t('render.practice_tag', lang)})" if lesson.mode == "practice" else ""
    if lesson.completed:
        return Status.PASSED, _t("render.completed", lang) + tag
    if all(c.status is Status.SKIPPED for c in lesson.checks):
        return Status.SKIPPED, _t("render.not_graded", lang) + tag
    return Status.FAILED, _t("render.not_completed", lang) + tag


def check_label(check: CheckResult, lang: str) -> str:
    """ "future-leak · TODO [mask]" """
    label = check.id
    if check.todo:
        label += " · " + _t("render.todo", lang, todo=check.todo)
    if check.informational:
        label += " · " + _t("render.informational", lang)
    return label


def isolation_note(result: CourseResult, lang: str) -> str | None:
    """One line saying which walls this system could not put around the learner's code; None
    when all held (or no worker ran)."""
    walls = result.isolation
    if not walls:
        return None
    if walls.get("official"):
        # A PID namespace is a wall on top of the required ones: without it the seccomp filter
        # still keeps the learner's code off every other process, so the grade stays official,
        # but the learner hears which wall this system could not add.
        if "pid" not in walls.get("namespaces", []):
            return _t("render.isolation_no_pid_namespace", lang)
        return None
    if walls.get("disabled"):
        return _t("render.isolation_disabled", lang)
    names = ", ".join(_t(f"render.wall.{name}", lang) for name in walls.get("missing", []))
    if walls.get("portable"):  # autograder/sandbox/portable.py: not Linux, or asked for
        return _t("render.isolation_portable", lang, walls=names)
    return _t("render.isolation_missing", lang, walls=names)


def quiz_blank(check: CheckResult) -> int | None:
    """The question number of a quiz check whose answer is blank, else None."""
    parts = check.feedback.parts
    if check.status is Status.PASSED or len(parts) != 1:
        return None
    part = parts[0]
    return part.params.get("n") if isinstance(part, Text) and part.key == "quiz.blank" else None


def pending_todo(check: CheckResult) -> str | None:
    """The TODO a failing check waits on because it is still the stub (engine.todo_pending),
    else None: such checks are work not yet started, not a mistake to explain."""
    if check.status is Status.PASSED or check.informational or check.pending is None:
        return None
    return str(check.pending.params.get("todo", "")) or None


def pending_line(checks: list[CheckResult], lang: str) -> str | None:
    """The one line that stands for every check waiting on work not started (None when none
    does): the TODOs still the stub that stopped them, in the order the checks meet them, and
    the TODOs behind those, none of whose checks could run yet because each stopped at one of
    them. So every TODO left to write is named, though a check meets only the first stub on its
    way (a stub lesson 03 names its 9 TODOs, not the 5 its checks stop at)."""
    waiting = [(check, todo) for check in checks if (todo := pending_todo(check)) is not None]
    if not waiting:
        return None
    stubs = list(dict.fromkeys(todo for _, todo in waiting))
    judged = {c.todo for c in checks if c.status is not Status.SKIPPED and pending_todo(c) is None}
    behind = [
        todo
        for todo in dict.fromkeys(check.todo for check, _ in waiting if check.todo)
        if todo not in stubs and todo not in judged
    ]
    named = ", ".join(_t("render.todo", lang, todo=todo) for todo in stubs)
    title = waiting[0][0].pending.params.get("title") or ""
    if len(stubs) == 1 and title:  # one TODO left: say what it is, as its own message did
        named = _t("render.todo_titled", lang, todo=stubs[0], title=title)
    if behind:
        named = _t(
            "render.pending_behind",
            lang,
            todos=named,
            behind=", ".join(_t("render.todo", lang, todo=todo) for todo in behind),
        )
    return _t(
        "render.pending_one" if len(stubs) == 1 and not behind else "render.pending_many",
        lang,
        todos=named,
        checks=_t("render.waiting_one" if len(waiting) == 1 else "render.waiting_many", lang, n=len(waiting)),
        points=score_number(sum(check.max_score - check.score for check, _ in waiting)),
    )
