"""The page of one submission (GET /s/<key>): the record a learner and an instructor read.

Plain HTML from one template below, no script and no build step: what was submitted (repository,
commit, when and how that time was known), its state, and, once graded, the grade as the
renderers lay it out (render/labels.py) with every check's message, taken from the result the
learner may see (verdict.shown_result: quiz verdicts hidden, messages capped). Every value is
HTML-escaped; while the submission waits, the page reloads itself every few seconds (a meta
refresh, not a script). Spanish or English (?lang=), the course's language by default.
"""

from __future__ import annotations

import html
from collections.abc import Collection
from datetime import datetime
from string import Template
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from autograder.core import i18n, neutral
from autograder.core.manifest import Course
from autograder.core.results import CourseResult, Status
from autograder.render.labels import check_label, lesson_state, lesson_title, points_text, score_number
from autograder.service.store import Result, Submission
from autograder.service.verdict import FINAL_STATES, error_reason, shown_result

REFRESH_S = 5
_SYMBOLS = {Status.PASSED: "✔", Status.FAILED: "✘", Status.ERROR: "!", Status.SKIPPED: "–"}

PAGE = Template("""<!doctype html>
<html lang="$lang">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex, nofollow">
<meta name="referrer" content="no-referrer">
$refresh<title>$title</title>
<style>
body { font-family: system-ui, sans-serif; max-width: 56rem; margin: 2rem auto; padding: 0 1rem;
       line-height: 1.5; color: #1f2328; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; }
dt { font-weight: 600; } dd { margin: 0; overflow-wrap: anywhere; }
code, pre { font-family: ui-monospace, monospace; font-size: .9rem; }
pre { background: #f6f8fa; padding: .6rem; overflow-x: auto; white-space: pre; }
.message { white-space: pre-wrap; margin: .3rem 0 .3rem 1.6rem; }
.note { background: #fff8c5; padding: .5rem .8rem; }
.passed { color: #1a7f37; } .failed { color: #cf222e; } .error { color: #9a6700; } .skipped { color: #59636e; }
table { border-collapse: collapse; }
td, th { padding: .2rem .8rem; border-bottom: 1px solid #d1d9e0; text-align: left; }
td.n { text-align: right; }
ul.checks { list-style: none; padding-left: 0; }
footer { margin-top: 2rem; color: #59636e; font-size: .9rem; }
</style>
</head>
<body>
<main>
<p><a href="?lang=es" hreflang="es">español</a> · <a href="?lang=en" hreflang="en">English</a></p>
<h1>$heading</h1>
$body
</main>
<footer>$footer</footer>
</body>
</html>
""")


def _e(value: object) -> str:
    return html.escape(neutral.terminal(value), quote=True)


def _t(key: str, lang: str, **params: object) -> str:
    return _e(i18n.translate(key, lang, **params))


def render_page(
    submission: Submission | None,
    result: Result | None,
    *,
    course: Course,
    lang: str,
    url: str,
    revealed: Collection[str] = (),
) -> str:
    """The page of `submission` (None: the page of a key that names none, saying nothing more)."""
    if submission is None:
        return PAGE.substitute(
            lang=lang,
            refresh="",
            title=_t("service.page.not_found_title", lang),
            heading=_t("service.page.not_found_title", lang),
            body=f"<p>{_t('service.page.not_found', lang)}</p>",
            footer="",
        )
    state = submission.state
    graded = shown_result(result, course, revealed) if result is not None else None
    if result is not None and result.status == "done":
        heading = _t("service.verdict.title", lang)
    elif state in ("error",):
        heading = _t("service.verdict.title_error", lang)
    else:
        heading = _t("service.page.heading", lang)
    body = [_facts(submission, result, lang, url, course.timezone)]
    for warning in submission.warnings:
        body.append(f'<p class="note">{_e(i18n.localize(warning, lang))}</p>')
    if result is None or state not in ("done", "error"):
        shown = state if state in ("queued", "grading", "superseded") else "grading"
        body.append(f'<p class="note">{_t("service.verdict." + shown, lang)}</p>')
    elif result.status != "done" or graded is None:
        body.append(f'<p class="note message">{_e(error_reason(result, graded, lang))}</p>')
    else:
        body.append(_grade(graded, lang))
    refresh = "" if state in FINAL_STATES else f'<meta http-equiv="refresh" content="{REFRESH_S}">\n'
    return PAGE.substitute(
        lang=lang,
        refresh=refresh,
        title=_t("service.page.title", lang, course=course.name, sha=submission.sha[:12]),
        heading=heading,
        body="\n".join(body),
        footer=_t("service.page.footer", lang),
    )


def _facts(submission: Submission, result: Result | None, lang: str, url: str, zone: str) -> str:
    rows = [
        ("service.page.learner", _e(submission.learner)),
        ("service.page.repository", _e(submission.repository)),
        ("service.page.commit", f"<code>{_e(submission.sha)}</code>"),
        (
            "service.page.submitted",
            _e(_when(submission.submitted_at, zone))
            + " · "
            + _t(f"service.page.source_{submission.time_source}", lang),
        ),
        ("service.page.received", _e(_when(submission.received_at, zone))),
        ("service.page.state", _t(f"service.page.state_{submission.state}", lang)),
    ]
    if result is not None:
        rows += [
            ("service.page.graded", _e(_when(result.created_at, zone))),
            ("service.page.graders", f"<code>{_e(result.graders_hash)}</code>"),
        ]
        if result.seed is not None:
            rows.append(("service.page.seed", f"<code>{_e(result.seed)}</code>"))
    rows.append(("service.page.address", f"<code>{_e(url)}</code>"))
    items = "\n".join(f"<dt>{_t(key, lang)}</dt><dd>{value}</dd>" for key, value in rows)
    return f"<dl>\n{items}\n</dl>"


def _when(moment: datetime, zone: str) -> str:
    """A time in the course's time zone (as deadlines will be said), and in UTC."""
    utc = moment.strftime("%H:%M:%S UTC")
    try:
        local = moment.astimezone(ZoneInfo(zone))
    except (ZoneInfoNotFoundError, ValueError):
        return moment.strftime("%Y-%m-%d ") + utc
    return f"{local.strftime('%Y-%m-%d %H:%M:%S')} ({zone}) · {utc}"


def _grade(result: CourseResult, lang: str) -> str:
    out = [
        "<p><strong>"
        + _t("render.total", lang, points=points_text(result, lang), xp=_xp(result.xp, result.xp_max, lang))
        + "</strong></p>",
        "<table>",
        "<tr>"
        + "".join(
            f"<th>{_t('render.md_col_' + col, lang)}</th>" for col in ("lesson", "status", "points", "xp")
        )
        + "</tr>",
    ]
    for lesson in result.lessons:
        state, label = lesson_state(lesson, lang)
        out.append(
            "<tr>"
            f"<td>{_t('render.lesson', lang, id=lesson.id, title=lesson_title(lesson, lang))}</td>"
            f'<td class="{state.value}">{_SYMBOLS[state]} {_e(label)}</td>'
            f'<td class="n">{score_number(lesson.score)}/{score_number(lesson.max_score)}</td>'
            f'<td class="n">{lesson.xp}/{lesson.xp_max}</td>'
            "</tr>"
        )
    out.append("</table>")
    for lesson in result.lessons:
        out.append(f"<h2>{_t('render.lesson', lang, id=lesson.id, title=lesson_title(lesson, lang))}</h2>")
        out.append('<ul class="checks">')
        for check in lesson.checks:
            status = Status(check.status)
            line = (
                f'<li><span class="{status.value}">{_SYMBOLS[status]}</span> '
                f"<code>{_e(check_label(check, lang))}</code> · "
                f"{score_number(check.score)}/{score_number(check.max_score)} · "
                f'<span class="{status.value}">{_t("render.status." + status.value, lang)}</span>'
            )
            if status is not Status.PASSED:
                for kind, text in i18n.render_parts(check.feedback, lang):
                    line += (
                        f'<div class="message">{_e(text)}</div>'
                        if kind == "text"
                        else f"<pre>{_e(text)}</pre>"
                    )
            out.append(line + "</li>")
        out.append("</ul>")
    out.append(f"<p><small>{_t('render.seed', lang, seed=result.seed)}</small></p>")
    return "\n".join(out)


def _xp(xp: int, xp_max: int, lang: str) -> str:
    return i18n.translate("render.xp", lang, xp=xp, xp_max=xp_max)
