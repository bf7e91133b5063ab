"""A result as GitHub Markdown: the job summary of the grading workflow, and the commit or
pull request comment (`compact`). The checks a learner's file that does not load kept from
running are said once, as that error's one line (engine/learner_errors.py). Every piece of
learner text is made inert first (no HTML, no live Markdown: autograder/core/neutral.py), and a
long message folds into <details>.

    render_markdown(result, lang, *, progress=None, run_url=None, compact=False)
"""

from __future__ import annotations

import html
from typing import Any

from autograder.core import i18n, neutral
from autograder.core.i18n import translate as _t
from autograder.core.results import CheckResult, CourseResult, Feedback, Status
from autograder.engine import learner_errors
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
        broken = _not_loading(unpassed)
        said: set[tuple] = set()
        # Informational checks last: a compact comment shows the first failure that counts.
        for check in sorted(lesson.checks, key=lambda c: c.informational):
            if check.status is Status.PASSED:
                continue
            if check.status is Status.SKIPPED:
                skipped.append(check)
                continue
            if id(check) in broken:
                # A file that does not load: its one line once, with the checks it kept from running.
                cause, members = broken[id(check)]
                if cause in said or (compact and shown):
                    continue
                said.add(cause)
                shown += len(members)
                out += ["", _not_loading_block(members, lang)]
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


def _not_loading(checks: list[CheckResult]) -> dict[int, tuple[tuple, list[CheckResult]]]:
    """{id(check): (cause, the checks of that cause)} for the checks a learner's file that does
    not load kept from running (engine/learner_errors.py)."""
    groups: dict[tuple, list[CheckResult]] = {}
    for check in checks:
        error = learner_errors.of(check)
        if error is not None:
            groups.setdefault((error.kind, error.where()), []).append(check)
    return {id(c): (cause, members) for cause, members in groups.items() for c in members}


def _not_loading_block(members: list[CheckResult], lang: str) -> str:
    """The error's one line as a heading, what to do, then the checks it kept from running."""
    error = learner_errors.of(members[0])
    line = i18n.render_parts(Feedback.of(error.part), lang)[0][1]
    step = _t(f"errors.next_{error.kind}", lang, where=error.where())
    blocked = _t(
        "errors.blocked",
        lang,
        n=len(members),
        points=score_number(sum(c.max_score - c.score for c in members)),
        checks=", ".join(c.id for c in members),
    )
    return f"### {_MD_EMOJI[Status.FAILED]} {_md_cell(line)}\n\n{_md_text(step)}\n\n{_md_text(blocked)}"


def _streak_label(days: int, lang: str) -> str:
    if days <= 0:
        return _t("render.streak_none", lang)
    return _t("render.streak_one" if days == 1 else "render.streak", lang, days=days)
