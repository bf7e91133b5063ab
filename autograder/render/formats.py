"""Results for other platforms: the same `CourseResult`, in the JSON that Gradescope and GitHub
Classroom read. Like autograder/render/output.py, this module only formats; it never re-judges a check.

    to_gradescope / render_gradescope     Gradescope's results.json
    to_classroom / render_classroom       GitHub Classroom's runner result (JSON)
    classroom_output                      that JSON base64-encoded, for a step output `result`

Formats matched
---------------
Gradescope: the "Output format" of the autograder specification
(https://gradescope-autograders.readthedocs.io/en/latest/specs/, source docs/specs.md in
gradescope/autograder_samples): top-level score, execution_time (seconds), output,
output_format / test_output_format / test_name_format, visibility, stdout_visibility, extra_data
and tests[]; each test has score, max_score, status ("passed" or "failed"), name, number,
output, tags and visibility.

GitHub Classroom: the runner result that classroom-resources/autograding-grading-reporter
(src/main.js) reads: the env var <RUNNER>_RESULTS holds base64 of a JSON object, the step output
`result` of a runner. The fields match what the runner actions emit, as written in
classroom-resources/autograding-io-grader src/main.js (and the same fields in
github-education-resources/autograding-command-grader src/main.js):
    {version: 1, status: "pass"|"fail"|"error", max_score,
     tests: [{name, status, message, test_code, filename, line_no, duration, score}]}
and the top-level `message` that the Python grader's results carry. The reporter's
src/notify-classroom.js sums tests[].score against the top-level max_score and skips a runner
whose max_score is 0; src/console-results.js prints each test's name, `test_code`, and the
message of tests whose status is "error". Per test, the graders report `duration` (not
execution_time); here it is in milliseconds, as the JavaScript graders measure it (Date
difference). The reporter does not read it.

Decisions
---------
* A skipped check (e.g. the GPU check on a CPU runner) is never reported as passed.
  - Gradescope: listed with score 0 of max_score 0 and an output that says it was skipped and
    why, and *no* "status" key: the format only knows "passed" and "failed", and a skip is
    neither (see _gradescope_test).
  - Classroom: left out of tests[]. Every entry there is counted by the reporter as passed or
    not ("Grand total tests passed: n/m"), so a skip listed as "pass" would be a lie and as
    "fail" would fail a learner for the runner's hardware. The skipped checks are named in the
    top-level "message" (the format's own note field) instead. Leaving them out changes no
    points: a skipped check is worth 0 of 0.
* The overall Classroom status: "error" if any check could not finish (ERROR), else "fail" if
  any failed, else "pass" (also when every check was skipped: nothing failed; the message says
  nothing was graded).
* Both outputs are deterministic (same result -> same text: no clock, no dict reordering) and
  carry the seed: in Gradescope's output text and extra_data, in Classroom's message and in
  each test's test_code, which is the command that replays that lesson with that seed.
* Learner text is plain text: Gradescope's output formats are set to "text" so a message is
  never read as HTML or Markdown.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from autograder.core import i18n
# The same score, language and label conventions as every other rendering.
from autograder.render.output import _check_label, _check_lang, _num, _t, points_text
from autograder.core.results import CheckResult, CourseResult, LessonResult, Status

CLASSROOM_VERSION = 1


def _check_name(lesson: LessonResult, check: CheckResult, lang: str) -> str:
    """ "03 · future-leak · TODO [mask]" """
    return f"{lesson.id} · {_check_label(check, lang)}"


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
        "score": _num(check.score),
        "max_score": _num(check.max_score),
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
    _check_lang(lang)
    duration = sum(float(c.duration) for lesson in result.lessons for c in lesson.checks)
    return {
        "score": _num(result.score),
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


# --- GitHub Classroom -----------------------------------------------------------------------

_CLASSROOM_STATUS = {Status.PASSED: "pass", Status.FAILED: "fail", Status.ERROR: "error"}


def _classroom_status(result: CourseResult) -> str:
    statuses = {c.status for lesson in result.lessons for c in lesson.checks if not c.informational}
    if Status.ERROR in statuses:
        return "error"
    if Status.FAILED in statuses:
        return "fail"
    return "pass"


def to_classroom(result: CourseResult, lang: str) -> dict[str, Any]:
    """The runner result GitHub Classroom's grading reporter reads (see the module docstring)."""
    _check_lang(lang)
    tests = []
    for lesson in result.lessons:
        for check in lesson.checks:
            if check.status is Status.SKIPPED:
                continue  # named in "message"; see the module docstring
            tests.append(
                {
                    "name": _check_name(lesson, check, lang),
                    "status": _CLASSROOM_STATUS[check.status],
                    "message": i18n.feedback_text(check.feedback, lang),
                    "test_code": f"autograder grade {lesson.id} --seed {int(result.seed)}",
                    "filename": "",
                    "line_no": 0,
                    "duration": int(round(float(check.duration) * 1000)),
                    "score": _num(check.score),
                }
            )
    return {
        "version": CLASSROOM_VERSION,
        "status": _classroom_status(result),
        "max_score": _num(result.max_score),
        "message": "\n".join(_summary_lines(result, lang)),
        "tests": tests,
    }


def render_classroom(result: CourseResult, lang: str) -> str:
    return _dumps(to_classroom(result, lang))


def classroom_output(result: CourseResult, lang: str) -> str:
    """Base64 of the Classroom JSON (compact, UTF-8): the value of a runner's step output
    `result`, which the reporter reads from the env var <RUNNER>_RESULTS."""
    text = json.dumps(to_classroom(result, lang), ensure_ascii=False, separators=(",", ":"))
    return base64.b64encode(text.encode("utf-8")).decode("ascii")
