"""The project's JSON contract, results.json, both ways: a `CourseResult` written as JSON
(the workflow's artifact, `grade --format json`, the cohort's store) and read back, already
localised, so every other rendering gives the same output from the file as from the result.

    to_json_dict / render_json   a result as results.json
    from_json_dict               results.json as a result (ValueError for a file off the contract)
"""

from __future__ import annotations

import json
from typing import Any

from autograder.core import i18n
from autograder.core.results import (
    Block,
    CheckResult,
    CourseResult,
    Feedback,
    LessonResult,
    RaisedIn,
    Status,
    Text,
)
from autograder.render.labels import check_language, lesson_title, score_number


def to_json_dict(result: CourseResult, lang: str) -> dict[str, Any]:
    """The project's JSON contract (results.json): course, language, xp, xp_max, score,
    max_score, seed, practice, isolation, and per lesson its id, slug, title, score, max_score,
    xp, xp_max, completed, mode, scale, isolation and checks.

    What kind of grade it is: each lesson's `mode` is "hidden" (the course's hidden graders)
    or "practice" (graded on the learner's side: the course's checks answered from recorded
    reference values, or the lesson's own practice tests); its `scale` says what the points
    count: "points" (course.yml's) or "tests" (practice tests, each worth 1); the top-level
    `practice` is true when any lesson's mode is "practice". A result with `practice: true` is
    feedback, never a record: that is what a learner's own repository and machine produce (they
    hold no hidden graders), and every rendering of it says "práctica". No other top-level field
    says it: one derived flag next to the per-lesson modes is all a reader needs, and a second
    one could only disagree with them. Where an official grade comes from (`grade-all`, later
    the grading service) is the producer's record, not a claim a results.json makes about
    itself: a learner could write any such field."""
    check_language(lang)
    return {
        "course": result.course,
        "language": lang,
        "xp": int(result.xp),
        "xp_max": int(result.xp_max),
        "score": score_number(result.score),
        "max_score": score_number(result.max_score),
        "seed": int(result.seed),
        "practice": bool(result.practice),
        # What walled in the learner's code: "official" only when every wall held.
        "isolation": result.isolation,
        "lessons": [
            {
                "id": str(lesson.id),
                "slug": lesson.slug,
                "title": lesson_title(lesson, lang),
                "score": score_number(lesson.score),
                "max_score": score_number(lesson.max_score),
                "xp": int(lesson.xp),
                "xp_max": int(lesson.xp_max),
                "completed": bool(lesson.completed),
                "mode": lesson.mode,
                "scale": lesson.scale,
                "isolation": lesson.isolation,
                "checks": [
                    {
                        "id": check.id,
                        "todo": check.todo,
                        "status": Status(check.status).value,
                        "score": score_number(check.score),
                        "max_score": score_number(check.max_score),
                        "informational": bool(check.informational),
                        # Where the learner's code raised, and the other TODO this check waits on.
                        "raised_in": (
                            {
                                "todo": check.raised_in.todo,
                                "file": check.raised_in.file,
                                "line": check.raised_in.line,
                            }
                            if check.raised_in
                            else None
                        ),
                        "waits_on": check.waits_on,
                        "message": i18n.feedback_text(check.feedback, lang),
                        # The same message in parts, so that a renderer reading this file
                        # (the workflow's report step) can fence heatmaps and tracebacks.
                        "feedback": [
                            {"kind": kind, "text": text}
                            for kind, text in i18n.render_parts(check.feedback, lang)
                        ],
                    }
                    for check in lesson.checks
                ],
            }
            for lesson in result.lessons
        ],
    }


def render_json(result: CourseResult, lang: str) -> str:
    return json.dumps(to_json_dict(result, lang), indent=2, ensure_ascii=False) + "\n"


# Messages the terminal summarises (a pending TODO, a blank quiz answer): read back from a
# results.json as the catalog message they were, so the summary is the same from either.
_RECOVERABLE = ("engine.todo_pending", "quiz.blank")


def _recovered(text: str, lang: str) -> Text | Block:
    """A localised message part as its catalog Text when it is one of _RECOVERABLE, else a
    text Block."""
    for key in _RECOVERABLE:
        params = i18n.recognise(key, lang, text)
        if params is not None and i18n.translate(key, lang, **params) == text:
            return Text(key, params)
    return Block(text, "text")


def from_json_dict(data: dict[str, Any]) -> CourseResult:
    """The inverse of `to_json_dict`, already localised: messages come back as blocks of their
    kind, so every renderer gives the same output as from the original result. Raises
    ValueError on a file that does not follow the contract."""
    try:
        lessons = []
        for lesson in data["lessons"]:
            checks = []
            for check in lesson["checks"]:
                parts = check.get("feedback")
                if parts is None:  # an older results.json: the message as one paragraph
                    parts = [{"kind": "text", "text": check["message"]}] if check["message"] else []
                feedback = Feedback(
                    tuple(
                        _recovered(str(p["text"]), data["language"])
                        if p["kind"] == "text"
                        else Block(str(p["text"]), str(p["kind"]))
                        for p in parts
                    )
                )
                raised = check.get("raised_in")
                waits = check.get("waits_on")
                checks.append(
                    CheckResult(
                        str(check["id"]),
                        check["todo"],
                        Status(check["status"]),
                        float(check["score"]),
                        float(check["max_score"]),
                        feedback,
                        informational=bool(check.get("informational", False)),
                        raised_in=RaisedIn(
                            str(raised["todo"]), str(raised.get("file", "")), int(raised.get("line", 0))
                        )
                        if isinstance(raised, dict)
                        else None,
                        waits_on=str(waits) if isinstance(waits, str) else None,
                    )
                )
            walls = lesson.get("isolation")
            lessons.append(
                LessonResult(
                    str(lesson["id"]),
                    str(lesson["slug"]),
                    {data["language"]: str(lesson["title"])},
                    int(lesson["xp_max"]),
                    checks,
                    mode=str(lesson.get("mode", "hidden")),
                    scale="tests" if lesson.get("scale") == "tests" else "points",
                    isolation=walls if isinstance(walls, dict) else None,
                )
            )
        return CourseResult(str(data["course"]), str(data["language"]), int(data["seed"]), lessons)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"not a results.json of this autograder: {type(exc).__name__}: {exc}") from None
