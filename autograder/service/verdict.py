"""What a learner is shown of a submission: its state and, once graded, the official grade as a
copy ("nota oficial según el servicio") linked to the submission's page, which is the record.

    shown_result(result, course, revealed=())  the stored result as the learner may see it
    verdict(submission, result, ...)            the answer of GET /submissions/<key>: state,
                                                score, and the verdict as Markdown and as text

The stored result is exactly what `autograder grade --format json` writes (the worker records
it); it is read back (render/results_json.from_json_dict) and rendered with the renderers every
other channel uses (render/markdown.py, render/terminal.py), so the service says what `grade`
says. Before that, two things are taken out:

- quiz verdicts: each question's right/wrong would make the service a key oracle (submit, read
  which answer is wrong, change it, resubmit). A lesson's quiz questions are shown as one line,
  how many are right, until the lesson's due date; course.yml has no due dates yet, so they are
  always hidden (`revealed` names the lessons whose date has passed, once there are dates).
  What a question's message says about the file rather than the key (blank, not a letter,
  quiz.yml unreadable or missing) is still shown;
- bulk: each part of a check's message is cut at MESSAGE_CHARS characters, and a check keeps at
  most MESSAGE_PARTS parts, so no reference tensor or runaway output reaches the page whole.
  The graders' messages already hold no grader source or reference code (expected values are
  those of the run's fresh inputs; tracebacks are trimmed to the learner's own files by the
  engine); the cap bounds what a message can carry.

The check messages are in the language the submission was graded in (the course's); `lang`
changes the service's own words and the renderers' labels.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from autograder.core import i18n, neutral
from autograder.core.manifest import Course, ManifestError
from autograder.core.results import CheckResult, CourseResult, Feedback, LessonResult, Status, Text, message
from autograder.render.output import from_json_dict, render_markdown, render_text
from autograder.service.store import Result, Submission

MESSAGE_CHARS = 4000  # a part of a check's message: a traceback or a diff fits; a tensor does not
MESSAGE_PARTS = 8
FINAL_STATES = ("done", "error", "superseded")
# Quiz messages that speak of the answers file, not of the key: shown per question.
_QUIZ_FORM = ("quiz.blank", "quiz.not_letter", "quiz.unreadable", "quiz.too_big", "engine.missing_file")


@dataclass(frozen=True)
class Verdict:
    state: str  # queued | grading | done | error | superseded
    page: str
    score: float | None
    max: float | None
    markdown: str
    text: str
    official: bool = True  # the service's own grade, never a learner's claim

    def as_json(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "page": self.page,
            "official": self.official,
            "score": self.score,
            "max": self.max,
            "markdown": self.markdown,
            "text": self.text,
        }


# ------------------------------------------------------------------------------ the result


def shown_result(result: Result, course: Course, revealed: Collection[str] = ()) -> CourseResult | None:
    """The recorded result as the learner may see it (see the module docstring); None when the
    record is not a grade (a result without lessons, or one this engine cannot read)."""
    try:
        data = json.loads(result.result_json)
        if not isinstance(data, dict) or "lessons" not in data:
            return None
        lang = data.get("language") if data.get("language") in i18n.LANGUAGES else course.language
        for lesson in data["lessons"]:
            for check in lesson["checks"]:
                _cap_check(check, lang)
        graded = from_json_dict(data)
    except (ValueError, TypeError, KeyError):
        return None
    for index, lesson in enumerate(graded.lessons):
        if lesson.id not in revealed:
            graded.lessons[index] = hide_quiz(lesson, course, graded.language)
    return graded


def _cap_check(check: dict[str, Any], lang: str) -> None:
    parts = check.get("feedback")
    if isinstance(parts, list):
        kept = parts[:MESSAGE_PARTS]
        if len(parts) > MESSAGE_PARTS:
            kept.append({"kind": "text", "text": i18n.translate("service.verdict.parts_cut", lang)})
        for part in kept:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                part["text"] = cut(part["text"], lang)
        check["feedback"] = kept
    if isinstance(check.get("message"), str):
        check["message"] = cut(check["message"], lang)


def cut(text: str, lang: str, limit: int = MESSAGE_CHARS) -> str:
    """`text` whole when it fits in `limit` characters; else its start and a line that says so."""
    if len(text) <= limit:
        return text
    return text[:limit].rstrip() + "\n" + i18n.translate("service.verdict.cut", lang, chars=len(text) - limit)


def hide_quiz(lesson: LessonResult, course: Course, lang: str) -> LessonResult:
    """The lesson with its quiz questions as one check: how many are right, nothing of which."""
    try:
        is_quiz = course.lesson(lesson.id).is_quiz_check
    except ManifestError:  # a lesson course.yml no longer has: every quiz-N is a question
        is_quiz = lambda check_id: check_id.startswith("quiz-")  # noqa: E731
    questions = [check for check in lesson.checks if is_quiz(check.id)]
    if not questions:
        return lesson
    statuses = {check.status for check in questions}
    right = sum(check.status is Status.PASSED for check in questions)
    if statuses == {Status.PASSED}:
        status = Status.PASSED
    elif statuses == {Status.SKIPPED}:
        status = Status.SKIPPED
    elif statuses == {Status.ERROR}:
        status = Status.ERROR
    else:
        status = Status.FAILED
    parts: list[Any] = [message("service.verdict.quiz_hidden", right=right, total=len(questions))]
    seen: set[str] = set()
    for check in questions:
        for part in check.feedback.parts:
            said = (
                str(i18n.localize(part, lang)) if isinstance(part, Text) else str(getattr(part, "text", ""))
            )
            if (check.status is Status.ERROR or _about_the_file(said, lang)) and said not in seen:
                seen.add(said)
                parts.append(part)
    merged = CheckResult(
        "quiz",
        None,
        status,
        sum(check.score for check in questions),
        sum(check.max_score for check in questions),
        Feedback(tuple(parts)),
    )
    first = lesson.checks.index(questions[0])
    checks = [check for check in lesson.checks if check not in questions]
    checks.insert(first, merged)
    return LessonResult(
        lesson.id,
        lesson.slug,
        lesson.title,
        lesson.xp_max,
        checks,
        mode=lesson.mode,
        isolation=lesson.isolation,
    )


def _about_the_file(text: str, lang: str) -> bool:
    return any(i18n.recognise(key, lang, text) is not None for key in _QUIZ_FORM)


# ------------------------------------------------------------------------------ the verdict


def verdict(
    submission: Submission,
    result: Result | None,
    *,
    page: str,
    lang: str,
    course: Course,
    revealed: Collection[str] = (),
) -> Verdict:
    """What GET /submissions/<key> answers (see the module docstring)."""
    warnings = [str(i18n.localize(text, lang)) for text in submission.warnings]
    state = submission.state
    if result is None or state not in ("done", "error"):
        # queued, grading, superseded; or done a moment before its result is readable
        state = state if state in ("queued", "grading", "superseded") else "grading"
        return _note(state, i18n.translate(f"service.verdict.{state}", lang), page, lang, warnings)
    graded = shown_result(result, course, revealed)
    if result.status != "done" or graded is None:
        # Not graded: every check of the error result says the same reason; it is said once.
        title = i18n.translate("service.verdict.title_error", lang)
        return _note("error", title, page, lang, warnings, detail=error_reason(result, graded, lang))
    title = i18n.translate("service.verdict.title", lang)
    markdown = _markdown_head(title, page, lang, warnings) + "\n" + render_markdown(graded, lang)
    text = _text_head(title, page, lang, warnings) + "\n" + render_text(graded, lang, color=False)
    return Verdict("done", page, _number(graded.score), _number(graded.max_score), markdown, text)


def _note(state: str, said: str, page: str, lang: str, warnings: list[str], detail: str = "") -> Verdict:
    """The verdict of a submission without a grade to show (yet): what it is, the link, and why."""
    markdown = _markdown_head(said, page, lang, warnings)
    text = _text_head(said, page, lang, warnings)
    if detail:
        markdown += "\n" + neutral.markdown_text(detail) + "\n"
        text += "\n" + neutral.terminal(detail) + "\n"
    return Verdict(state, page, None, None, markdown, text)


def _markdown_head(title: str, page: str, lang: str, warnings: list[str]) -> str:
    link = i18n.translate("service.verdict.page_link", lang)
    out = f"> **{neutral.markdown_inline(title)}** · [{neutral.markdown_inline(link)}]({page})\n"
    for warning in warnings:
        out += f">\n> {neutral.markdown_text(warning)}\n"
    return out


def _text_head(title: str, page: str, lang: str, warnings: list[str]) -> str:
    lines = [title, i18n.translate("service.verdict.page_line", lang, page=page)]
    return "\n".join(neutral.terminal(line) for line in [*lines, *warnings]) + "\n"


def error_reason(result: Result, graded: CourseResult | None, lang: str) -> str:
    """Why a submission has no grade: the message its error result gives every check (the
    worker's, grade-shaped), or the reason recorded without that shape."""
    for lesson in graded.lessons if graded is not None else ():
        for check in lesson.checks:
            if check.feedback.parts:
                return i18n.feedback_text(check.feedback, lang)
    try:
        error = json.loads(result.result_json).get("error") or {}
        return i18n.translate(str(error["key"]), lang, **dict(error.get("params") or {}))
    except (ValueError, TypeError, KeyError, AttributeError):
        return i18n.translate("service.verdict.no_grade", lang, reason=result.error or "?")


def _number(value: float) -> float | int:
    value = float(value)
    return int(value) if value.is_integer() else round(value, 2)
