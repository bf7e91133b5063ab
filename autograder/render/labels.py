"""What every rendering of a result says the same way: a score's number, points on the scale
they were judged on, a lesson's title and state, a check's label, which walls were missing,
which quiz answer was left blank. Each format (results_json.py, markdown.py, terminal.py,
formats.py) and the cohort's report take these from here, so no two of them can disagree.
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
    the lesson's points with the hidden graders; practice tests passed when only the practice
    tests could run (each worth 1), so "0/8" is never read as points out of a lesson's 100."""
    lessons = result.lessons if isinstance(result, CourseResult) else [result]
    practice = bool(lessons) and all(lesson.mode == "practice" for lesson in lessons)
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
