"""What a check run says of one official verdict (checks.py posts it): the body of
POST /repos/{owner}/{repo}/check-runs ("REST API endpoints for check runs").

    name         the catalog's service.checks.name in the course's language (one name for every
                 verdict, so GitHub shows the newest run of it on each commit)
    head_sha     the learner's commit; status "completed"; completed_at the result's time
    conclusion   success: every check graded passed; failure: one failed or errored; neutral:
                 no grade (the worker was lost, the commit could not be fetched: not the
                 learner's failure) or nothing graded
    details_url  the submission's page (the record; its key is already the learner's)
    external_id  the result's id in the store
    output       title: the score, or that there is no grade; summary: the verdict as the
                 service's poll answer has it (verdict.py: quiz answers hidden, messages capped),
                 cut to GitHub's 65535 characters with a note

The verdict is rendered from the stored result, whatever the submission's state is now (a
regrade may have queued it again): a check run says what that result said.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from autograder.core import i18n
from autograder.core.manifest import Course
from autograder.core.results import Status
from autograder.github.texts import truncate_markdown, truncation_note, utf16_len
from autograder.service.schema import Result, Submission
from autograder.service.verdict import shown_result, verdict

SUMMARY_LIMIT = 65535  # GitHub's output.summary, in characters
TITLE_CHARS = 250


def conclusion(result: Result, course: Course) -> str:
    graded = shown_result(result, course) if result.status == "done" else None
    if graded is None:
        return "neutral"
    statuses = {check.status for lesson in graded.lessons for check in lesson.checks}
    if statuses & {Status.FAILED, Status.ERROR}:
        return "failure"
    return "success" if Status.PASSED in statuses else "neutral"


def check_run_body(
    submission: Submission, result: Result, result_id: int, *, course: Course, page: str
) -> dict[str, Any]:
    lang = course.language
    shown = verdict(replace(submission, state=result.status), result, page=page, lang=lang, course=course)
    if shown.state == "done":
        title = i18n.translate("service.checks.title", lang, score=shown.score, max=shown.max)
    else:
        title = i18n.translate("service.checks.title_error", lang)
    official = i18n.translate("service.checks.official", lang)
    summary = truncate_markdown(
        f"{shown.markdown}\n\n_{official}_\n",
        lambda text: utf16_len(text) <= SUMMARY_LIMIT,
        truncation_note("formats.truncated_comment", lang),
    )
    return {
        "name": i18n.translate("service.checks.name", lang),
        "head_sha": submission.sha,
        "status": "completed",
        "conclusion": conclusion(result, course),
        "completed_at": result.created_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "details_url": page,
        "external_id": str(result_id),
        "output": {"title": " ".join(title.split())[:TITLE_CHARS], "summary": summary},
    }
