"""Results for other platforms: the same `CourseResult`, in the JSON that Gradescope reads.
Like the other renderings (results_json.py, markdown.py, terminal.py), this module only formats;
it never re-judges a check.

    to_gradescope / render_gradescope     Gradescope's results.json

GitHub Classroom's runner result (`--format classroom`) is gone: GitHub Classroom was retired on
2026-08-28, and its grading reporter with it. `autograder grade` says so
(RETIRED_FORMATS in autograder/learner/grade.py).

Format matched
--------------
Gradescope: the "Output format" of the autograder specification
(https://gradescope-autograders.readthedocs.io/en/latest/specs/, source docs/specs.md in
gradescope/autograder_samples): top-level score, execution_time (seconds), output,
output_format / test_output_format / test_name_format, visibility, stdout_visibility, extra_data
and tests[]; each test has score, max_score, status ("passed" or "failed"), name, number,
output, tags and visibility.

Decisions
---------
* A skipped check (e.g. the GPU check on a CPU runner) is never reported as passed: it is
  listed with score 0 of max_score 0 and an output that says it was skipped and why, and *no*
  "status" key: the format only knows "passed" and "failed", and a skip is neither (see
  _gradescope_test).
* The output is deterministic (same result -> same text: no clock, no dict reordering) and
  carries the seed, in the output text and in extra_data.
* A practice grade says so: the output text carries the practice note and extra_data.practice
  is true.
* Learner text is plain text: Gradescope's output formats are set to "text" so a message is
  never read as HTML or Markdown.
"""

from __future__ import annotations

import json
from typing import Any

from autograder.core import i18n
from autograder.core.i18n import translate as _t
from autograder.core.results import CheckResult, CourseResult, LessonResult, Status

# The same score, language and label conventions as every other rendering.
from autograder.render.labels import check_label, check_language, points_text, score_number


def _check_name(lesson: LessonResult, check: CheckResult, lang: str) -> str:
    """ "03 · future-leak · TODO [mask]" """
    return f"{lesson.id} · {check_label(check, lang)}"


def _skipped_text(check: CheckResult, lang: str) -> str:
    """That the check was skipped and does not count, then its own message (the reason)."""
    reason = i18n.feedback_text(check.feedback, lang).strip("\n")
    return _t("formats.skipped", lang) + ("\n" + reason if reason else "")


def _skipped(result: CourseResult) -> list[tuple[LessonResult, CheckResult]]:
    return [(lesson, c) for lesson in result.lessons for c in lesson.checks if c.status is Status.SKIPPED]


def _summary_lines(result: CourseResult, lang: str) -> list[str]:
    """Course, totals, the practice notice, the skipped checks, the seed."""
    points = points_text(result, lang)
    xp = _t("render.xp", lang, xp=result.xp, xp_max=result.xp_max)
    lines = [result.course, _t("render.total", lang, points=points, xp=xp)]
    if result.practice:
        lines.append(_t("formats.practice_note", lang))
    skipped = _skipped(result)
    if skipped:
        names = ", ".join(f"{lesson.id} · {check.id}" for lesson, check in skipped)
        lines.append(_t("formats.skipped_list", lang, checks=names))
    if not any(c.status is not Status.SKIPPED for lesson in result.lessons for c in lesson.checks):
        lines.append(_t("formats.nothing_graded", lang))
    lines.append(_t("render.seed", lang, seed=result.seed))
    return lines


def _dumps(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


# --- Gradescope -----------------------------------------------------------------------------


def _gradescope_test(lesson: LessonResult, index: int, check: CheckResult, lang: str) -> dict[str, Any]:
    test: dict[str, Any] = {
        "name": _check_name(lesson, check, lang),
        "number": f"{lesson.id}.{index}",
        "score": score_number(check.score),
        "max_score": score_number(check.max_score),
    }
    if check.status is Status.SKIPPED:
        # No "status": Gradescope's test status is "passed" or "failed" and a skipped check is
        # neither. Saying "passed" would claim the learner's code was checked here when it was
        # not; "failed" would blame it for the runner (no GPU). The 0/0 score keeps it out of
        # the total and the output says it was skipped, and why.
        test["output"] = _skipped_text(check, lang)
    else:
        # ERROR (the check could not finish) is not a pass either: Gradescope shows it failed.
        test["status"] = "passed" if check.status is Status.PASSED else "failed"
        test["output"] = i18n.feedback_text(check.feedback, lang)
    if check.todo:
        test["tags"] = [check.todo]
    test["visibility"] = "visible"
    return test


def to_gradescope(result: CourseResult, lang: str) -> dict[str, Any]:
    """Gradescope's results.json for `result`, with learner text in `lang`."""
    check_language(lang)
    duration = sum(float(c.duration) for lesson in result.lessons for c in lesson.checks)
    return {
        "score": score_number(result.score),
        "execution_time": int(round(duration)),
        "output": "\n".join(_summary_lines(result, lang)),
        "output_format": "text",
        "test_output_format": "text",
        "test_name_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "extra_data": {
            "course": result.course,
            "language": lang,
            "seed": int(result.seed),
            "practice": bool(result.practice),
            "xp": int(result.xp),
            "xp_max": int(result.xp_max),
        },
        "tests": [
            _gradescope_test(lesson, index, check, lang)
            for lesson in result.lessons
            for index, check in enumerate(lesson.checks, start=1)
        ],
    }


def render_gradescope(result: CourseResult, lang: str) -> str:
    return _dumps(to_gradescope(result, lang))
