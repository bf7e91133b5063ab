"""A result as GitHub Markdown: the job summary of the grading workflow, and the commit or
pull request comment (`compact`). Every piece of learner text is made inert first (no HTML, no
live Markdown: autograder/core/neutral.py), and a long message folds into <details>.

    render_markdown(result, lang, *, progress=None, run_url=None, compact=False)
"""

from __future__ import annotations

import html
from typing import Any

from autograder.core import i18n, neutral
from autograder.core.i18n import translate as _t
from autograder.core.results import CheckResult, CourseResult, Status
from autograder.render.labels import (
    check_language,
    isolation_note,
    lesson_state,
    lesson_title,
    points_text,
    score_number,
)

# A check message longer than this many lines is folded into <details> in Markdown.
MARKDOWN_FOLD_LINES = 15

_MD_EMOJI = {Status.PASSED: "✅", Status.FAILED: "❌", Status.ERROR: "⚠️", Status.SKIPPED: "⏭️"}


def _md_cell(text: str) -> str:
    """Inert inside a table cell or a heading: no pipes, line breaks, HTML or live Markdown
    (autograder/core/neutral.py)."""
    return neutral.markdown_inline(text)


def _md_text(text: str) -> str:
    """A message as a paragraph, its line breaks kept (hard breaks), the learner text inside it
    inert: no HTML, no live Markdown (autograder/core/neutral.py)."""
    return neutral.markdown_text(text)


def _md_fence(text: str) -> str:
    """Verbatim in a code fence longer than any backtick run inside, so text cannot close it."""
    return neutral.markdown_fence(text)


def _md_message(check: CheckResult, lang: str) -> str:
    chunks = []
    for kind, text in i18n.render_parts(check.feedback, lang):
        chunks.append(_md_text(text) if kind == "text" else _md_fence(text))
    body = "\n\n".join(chunk for chunk in chunks if chunk)
    lines = body.count("\n") + 1
    if lines > MARKDOWN_FOLD_LINES:
        summary = html.escape(_t("render.md_details", lang, lines=lines), quote=False)
        return f"<details><summary>{summary}</summary>\n\n{body}\n\n</details>"
    return body


def render_markdown(
    result: CourseResult,
    lang: str,
    *,
    progress: Any = None,
    run_url: str | None = None,
    compact: bool = False,
) -> str:
    """A job summary: totals, a table of lessons, then what to fix in each unfinished lesson.

    With `progress` (autograder.core.history.Progress: the learner's history including this run)
    the top shows the XP earned so far and the streak, and a lesson earned before but failing
    now keeps its XP and says it is failing now. `compact` (a commit or pull request comment)
    keeps only each unfinished lesson's first failed check and links to `run_url` for the rest.
    """
    check_language(lang)
    points = points_text(result, lang)
    earned = {lp.id: lp for lp in progress.lessons} if progress is not None else {}
    if progress is not None:
        headline = [
            f"**{_t('render.xp', lang, xp=progress.xp, xp_max=progress.xp_max)}**",
            _streak_label(progress.streak, lang),
            points,
        ]
    else:
        headline = [f"**{_t('render.xp', lang, xp=result.xp, xp_max=result.xp_max)}**", points]
    out = [f"# {_md_cell(result.course)}", "", " · ".join(headline), ""]
    if result.practice:
        out += [f"> [!WARNING]\n> {_md_text(_t('render.practice_note', lang))}", ""]
    walls = isolation_note(result, lang)
    if walls:
        out += [f"> [!WARNING]\n> {_md_text(walls)}", ""]
    out += [
        "| "
        + " | ".join(_t(f"render.md_col_{c}", lang) for c in ("lesson", "status", "points", "xp"))
        + " |",
        "|---|---|---:|---:|",
    ]
    for lesson in result.lessons:
        state, label = lesson_state(lesson, lang)
        kept = earned.get(lesson.id)
        xp = lesson.xp
        if kept is not None and kept.earned and not lesson.completed:
            xp = lesson.xp_max  # earned XP is kept; the status says it is failing now
            label += " · " + _t("render.earned_failing_now", lang)
        cells = [
            _t("render.lesson", lang, id=lesson.id, title=lesson_title(lesson, lang)),
            f"{_MD_EMOJI[state]} {label}",
            f"{score_number(lesson.score)}/{score_number(lesson.max_score)}",
            f"{xp}/{lesson.xp_max}",
        ]
        out.append("| " + " | ".join(_md_cell(c) for c in cells) + " |")

    for lesson in result.lessons:
        if lesson.completed:
            continue
        out += [
            "",
            f"## {_md_cell(_t('render.lesson', lang, id=lesson.id, title=lesson_title(lesson, lang)))}",
        ]
        skipped = []
        shown = 0
        unpassed = [c for c in lesson.checks if c.status not in (Status.PASSED, Status.SKIPPED)]
        # Informational checks last: a compact comment shows the first failure that counts.
        for check in sorted(lesson.checks, key=lambda c: c.informational):
            if check.status is Status.PASSED:
                continue
            if check.status is Status.SKIPPED:
                skipped.append(check)
                continue
            if compact and shown:
                continue
            shown += 1
            heading = (
                f"### {_MD_EMOJI[check.status]} {neutral.markdown_code(check.id)}"
                + (f" · {_md_cell(_t('render.todo', lang, todo=check.todo))}" if check.todo else "")
                + (f" · {_t('render.informational', lang)}" if check.informational else "")
                + f" · {_t('render.status.' + check.status.value, lang)}"
                + f" · {score_number(check.score)}/{score_number(check.max_score)}"
            )
            out += ["", heading, ""]
            out.append(_md_message(check, lang) or _t("render.no_message", lang))
        if compact:
            if len(unpassed) > shown:
                more = _t("render.md_more", lang, n=len(unpassed) - shown)
                out += ["", f"[{_md_cell(more)}]({run_url})" if run_url else _md_cell(more)]
            continue
        if skipped:
            out += ["", f"**{_t('render.md_skipped', lang)}**", ""]
            for check in skipped:
                reason = " ".join(i18n.feedback_text(check.feedback, lang).split())
                line = f"- {_MD_EMOJI[Status.SKIPPED]} {neutral.markdown_code(check.id)}"
                out.append(line + (f": {_md_cell(reason)}" if reason else ""))
    footer = html.escape(_t("render.seed", lang, seed=result.seed), quote=False)
    if run_url:
        footer += f" · [{html.escape(_t('render.md_run_link', lang), quote=False)}]({run_url})"
    out += ["", f"<sub>{footer}</sub>"]
    return "\n".join(out) + "\n"


def _streak_label(days: int, lang: str) -> str:
    if days <= 0:
        return _t("render.streak_none", lang)
    return _t("render.streak_one" if days == 1 else "render.streak", lang, days=days)
