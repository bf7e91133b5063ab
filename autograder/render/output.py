"""Renderers: one `CourseResult`, several presentations. A renderer only formats; it never
re-runs or re-judges a check.

    to_json_dict / render_json   the project's JSON contract (results.json)
    render_markdown              GitHub job summary and comments
    render_text                  the terminal (rich); plain and stable when not coloured

Every learner-facing label comes from the catalog (autograder/messages/<lang>/render.yml).
"""

from __future__ import annotations

import html
import io
import json
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text as RichText

from autograder.core import i18n
from autograder.core import neutral
from autograder.core.results import Block, CheckResult, CourseResult, Feedback, LessonResult, RaisedIn, Status, Text

# A check message longer than this many lines is folded into <details> in Markdown.
MARKDOWN_FOLD_LINES = 15

_TEXT_SYMBOLS = {Status.PASSED: "✔", Status.FAILED: "✘", Status.ERROR: "!", Status.SKIPPED: "–"}
_TEXT_STYLES = {Status.PASSED: "green", Status.FAILED: "red", Status.ERROR: "yellow", Status.SKIPPED: "dim"}
_MD_EMOJI = {Status.PASSED: "✅", Status.FAILED: "❌", Status.ERROR: "⚠️", Status.SKIPPED: "⏭️"}


def _num(x: float) -> int | float:
    """A score for output: 5 rather than 5.0, else rounded to 2 decimals."""
    x = float(x)
    return int(x) if x.is_integer() else round(x, 2)


def _check_lang(lang: str) -> None:
    if lang not in i18n.LANGUAGES:
        raise ValueError(f"unknown language {lang!r}; expected one of {', '.join(i18n.LANGUAGES)}")


def _t(key: str, lang: str, **params: Any) -> str:
    return i18n.translate(key, lang, **params)


def points_text(result: Any, lang: str) -> str:
    """A result's points (a CourseResult or LessonResult) on the one scale of how it was judged:
    the lesson's points with the hidden graders; practice tests passed when only the practice
    tests could run (each worth 1), so "0/8" is never read as points out of a lesson's 100."""
    lessons = result.lessons if isinstance(result, CourseResult) else [result]
    practice = bool(lessons) and all(lesson.mode == "practice" for lesson in lessons)
    return _t("render.points_practice" if practice else "render.points", lang,
              score=_num(result.score), max_score=_num(result.max_score))


def _title(lesson: LessonResult, lang: str) -> str:
    return str(i18n.localize(lesson.title, lang))


def _lesson_state(lesson: LessonResult, lang: str) -> tuple[Status, str]:
    """The lesson's state as the status whose symbol shows it, and its label."""
    tag = f" ({_t('render.practice_tag', lang)})" if lesson.mode == "practice" else ""
    if lesson.completed:
        return Status.PASSED, _t("render.completed", lang) + tag
    if all(c.status is Status.SKIPPED for c in lesson.checks):
        return Status.SKIPPED, _t("render.not_graded", lang) + tag
    return Status.FAILED, _t("render.not_completed", lang) + tag


def _check_label(check: CheckResult, lang: str) -> str:
    """ "future-leak · TODO [mask]" """
    label = check.id
    if check.todo:
        label += " · " + _t("render.todo", lang, todo=check.todo)
    if check.informational:
        label += " · " + _t("render.informational", lang)
    return label


# --- JSON -----------------------------------------------------------------------------------


def to_json_dict(result: CourseResult, lang: str) -> dict[str, Any]:
    """The project's JSON contract (results.json): course, language, xp, xp_max, score,
    max_score, seed, practice, isolation, and per lesson its id, slug, title, score, max_score,
    xp, xp_max, completed, mode, isolation and checks.

    What kind of grade it is: each lesson's `mode` is "hidden" (the course's hidden graders)
    or "practice" (only the learner-visible practice tests, each worth 1 point); the top-level
    `practice` is true when any lesson's mode is "practice". A result with `practice: true` is
    feedback, never a record: that is what a learner's own repository and machine produce (they
    hold no hidden graders), and every rendering of it says "práctica". No other top-level field
    says it: one derived flag next to the per-lesson modes is all a reader needs, and a second
    one could only disagree with them. Where an official grade comes from (`grade-all`, later
    the grading service) is the producer's record, not a claim a results.json makes about
    itself: a learner could write any such field."""
    _check_lang(lang)
    return {
        "course": result.course,
        "language": lang,
        "xp": int(result.xp),
        "xp_max": int(result.xp_max),
        "score": _num(result.score),
        "max_score": _num(result.max_score),
        "seed": int(result.seed),
        "practice": bool(result.practice),
        # What walled in the learner's code: "official" only when every wall held.
        "isolation": result.isolation,
        "lessons": [
            {
                "id": str(lesson.id),
                "slug": lesson.slug,
                "title": _title(lesson, lang),
                "score": _num(lesson.score),
                "max_score": _num(lesson.max_score),
                "xp": int(lesson.xp),
                "xp_max": int(lesson.xp_max),
                "completed": bool(lesson.completed),
                "mode": lesson.mode,
                "isolation": lesson.isolation,
                "checks": [
                    {
                        "id": check.id,
                        "todo": check.todo,
                        "status": Status(check.status).value,
                        "score": _num(check.score),
                        "max_score": _num(check.max_score),
                        "informational": bool(check.informational),
                        # Where the learner's code raised, and the other TODO this check waits on.
                        "raised_in": ({"todo": check.raised_in.todo, "file": check.raised_in.file,
                                       "line": check.raised_in.line} if check.raised_in else None),
                        "waits_on": check.waits_on,
                        "message": i18n.feedback_text(check.feedback, lang),
                        # The same message in parts, so that a renderer reading this file
                        # (the workflow's report step) can fence heatmaps and tracebacks.
                        "feedback": [{"kind": kind, "text": text}
                                     for kind, text in i18n.render_parts(check.feedback, lang)],
                    }
                    for check in lesson.checks
                ],
            }
            for lesson in result.lessons
        ],
    }


def isolation_note(result: CourseResult, lang: str) -> str | None:
    """One line saying which walls this system could not put around the learner's code; None
    when all held (or no worker ran)."""
    walls = result.isolation
    if not walls or walls.get("official"):
        return None
    if walls.get("disabled"):
        return _t("render.isolation_disabled", lang)
    names = ", ".join(_t(f"render.wall.{name}", lang) for name in walls.get("missing", []))
    if walls.get("portable"):  # autograder/sandbox/portable.py: not Linux, or asked for
        return _t("render.isolation_portable", lang, walls=names)
    return _t("render.isolation_missing", lang, walls=names)


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
                feedback = Feedback(tuple(_recovered(str(p["text"]), data["language"]) if p["kind"] == "text"
                                          else Block(str(p["text"]), str(p["kind"])) for p in parts))
                raised = check.get("raised_in")
                waits = check.get("waits_on")
                checks.append(CheckResult(str(check["id"]), check["todo"], Status(check["status"]),
                                          float(check["score"]), float(check["max_score"]), feedback,
                                          informational=bool(check.get("informational", False)),
                                          raised_in=RaisedIn(str(raised["todo"]), str(raised.get("file", "")),
                                                             int(raised.get("line", 0)))
                                          if isinstance(raised, dict) else None,
                                          waits_on=str(waits) if isinstance(waits, str) else None))
            walls = lesson.get("isolation")
            lessons.append(LessonResult(str(lesson["id"]), str(lesson["slug"]), {data["language"]: str(lesson["title"])},
                                        int(lesson["xp_max"]), checks, mode=str(lesson.get("mode", "hidden")),
                                        isolation=walls if isinstance(walls, dict) else None))
        return CourseResult(str(data["course"]), str(data["language"]), int(data["seed"]), lessons)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"not a results.json of this autograder: {type(exc).__name__}: {exc}") from None


# --- Markdown -------------------------------------------------------------------------------


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


def render_markdown(result: CourseResult, lang: str, *, progress: Any = None, run_url: str | None = None,
                    compact: bool = False) -> str:
    """A job summary: totals, a table of lessons, then what to fix in each unfinished lesson.

    With `progress` (autograder.core.history.Progress: the learner's history including this run)
    the top shows the XP earned so far and the streak, and a lesson earned before but failing
    now keeps its XP and says it is failing now. `compact` (a commit or pull request comment)
    keeps only each unfinished lesson's first failed check and links to `run_url` for the rest.
    """
    _check_lang(lang)
    points = points_text(result, lang)
    earned = {lp.id: lp for lp in progress.lessons} if progress is not None else {}
    if progress is not None:
        headline = [f"**{_t('render.xp', lang, xp=progress.xp, xp_max=progress.xp_max)}**",
                    _streak_label(progress.streak, lang), points]
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
        state, label = _lesson_state(lesson, lang)
        kept = earned.get(lesson.id)
        xp = lesson.xp
        if kept is not None and kept.earned and not lesson.completed:
            xp = lesson.xp_max  # earned XP is kept; the status says it is failing now
            label += " · " + _t("render.earned_failing_now", lang)
        cells = [
            _t("render.lesson", lang, id=lesson.id, title=_title(lesson, lang)),
            f"{_MD_EMOJI[state]} {label}",
            f"{_num(lesson.score)}/{_num(lesson.max_score)}",
            f"{xp}/{lesson.xp_max}",
        ]
        out.append("| " + " | ".join(_md_cell(c) for c in cells) + " |")

    for lesson in result.lessons:
        if lesson.completed:
            continue
        out += ["", f"## {_md_cell(_t('render.lesson', lang, id=lesson.id, title=_title(lesson, lang)))}"]
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
                + f" · {_num(check.score)}/{_num(check.max_score)}"
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


# --- terminal -------------------------------------------------------------------------------


def use_color(stream=None) -> bool:
    """Colour for a real terminal only (`stream`, default stdout); rich also honours NO_COLOR,
    FORCE_COLOR and TERM=dumb."""
    return wants_color(Console(file=stream))


def wants_color(probe: Console) -> bool:
    """Whether what `probe` writes to may get colour. The text is rendered to a buffer with
    ANSI codes (make_console) and written as it is, so a Windows console that does not
    interpret them (rich's legacy_windows: cmd.exe in the old console host) gets plain text,
    never "←[31m" litter."""
    return (probe.is_terminal and not probe.no_color and probe.color_system is not None
            and not probe.legacy_windows)


def make_console(color: bool | None, width: int | None = None) -> tuple[Console, io.StringIO]:
    """A rich console writing into a buffer: (console, buffer). Plain and stable without colour;
    color None decides by stdout."""
    if color is None:
        color = use_color()
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=width or 100,
        force_terminal=color,
        no_color=not color,
        color_system="standard" if color else None,
        highlight=False,
        emoji=False,
        markup=False,
        legacy_windows=False,
    )
    return console, buffer


def printed(buffer: io.StringIO) -> str:
    """What a console wrote, without trailing spaces."""
    return "\n".join(line.rstrip() for line in buffer.getvalue().split("\n"))


def print_feedback(console: Console, feedback: Feedback, lang: str) -> None:
    """A check's message under its line: text indented and wrapped, blocks kept as they are."""
    for kind, text in i18n.render_parts(feedback, lang):
        text = neutral.terminal(text)  # learner text: no escape sequence reaches the terminal
        if kind == "text":
            console.print(Padding(RichText(text), (0, 0, 0, 6)))
        else:  # a block keeps its layout: indented, never re-wrapped
            indented = "\n".join("      " + row for row in text.rstrip("\n").split("\n"))
            console.print(RichText(indented, style="cyan"), soft_wrap=True)


# Feedback parts that belong to one check of a group with the same cause (which TODO waits).
_PER_CHECK_PARTS = ("engine.waits_for", "engine.raised_in_other_todo")


def _cause(check: CheckResult, lang: str) -> tuple | None:
    """What made a check fail, when other checks can share it: the TODO, file and line where
    the learner's code raised (or the pending TODO) and the error's own message."""
    if check.status is Status.PASSED or not check.feedback.parts:
        return None
    first = check.feedback.parts[0]
    if check.raised_in is None:
        # The engine's own verdicts (a missing file, a worker that died at import) are the same
        # words in every check they hit: one cause. A grader's diagnosis is always its own.
        if isinstance(first, Text) and first.key.startswith("engine."):
            return ("engine", i18n.feedback_text(check.feedback, lang))
        return None
    # The exception's type, not its message: the same .view error says other sizes in each check.
    kind = (first.key, str(first.params.get("type", ""))) if isinstance(first, Text) else ()
    return (check.raised_in.todo, check.raised_in.file, check.raised_in.line, kind)


def _shared_feedback(feedback: Feedback) -> Feedback:
    return Feedback(tuple(p for p in feedback.parts if not (isinstance(p, Text) and p.key in _PER_CHECK_PARTS)))


def _group_by_cause(checks: list[CheckResult], lang: str) -> dict[int, list[CheckResult]]:
    """{index of a group's first check: the checks of the group, its leader first} for causes
    shared by 2+. The leader is a check of the TODO whose code raised, when there is one, so
    the block opens with the TODO to fix."""
    groups: dict[tuple, list[int]] = {}
    for index, check in enumerate(checks):
        cause = _cause(check, lang)
        if cause is not None:
            groups.setdefault(cause, []).append(index)
    out = {}
    for members in groups.values():
        if len(members) < 2:
            continue
        group = [checks[i] for i in members]
        leader = next((c for c in group if c.raised_in is not None and c.todo == c.raised_in.todo), group[0])
        out[members[0]] = [leader, *(c for c in group if c is not leader)]
    return out


def _pending_todo(check: CheckResult) -> str | None:
    """The TODO a failing check waits on because it is still the stub (engine.todo_pending),
    else None: such checks are work not yet started, not a mistake to explain."""
    if check.status is Status.PASSED or check.informational or check.pending is None:
        return None
    return str(check.pending.params.get("todo", "")) or None


def _quiz_blank(check: CheckResult) -> int | None:
    """The question number of a quiz check whose answer is blank, else None."""
    parts = check.feedback.parts
    if check.status is Status.PASSED or len(parts) != 1:
        return None
    part = parts[0]
    return part.params.get("n") if isinstance(part, Text) and part.key == "quiz.blank" else None


def _summaries(checks: list[CheckResult], lang: str) -> dict[int, tuple[Status, str]]:
    """{index of the first check summarised: (status, one line)} for the checks that are not
    started yet: every check waiting on a pending TODO becomes one line naming the pending
    TODOs, every blank quiz question one line naming the questions. What they hide is said in
    full by `verbose` and the JSON."""
    pending = [(i, todo, c) for i, c in enumerate(checks) if (todo := _pending_todo(c)) is not None]
    blank = [(i, n, c) for i, c in enumerate(checks) if (n := _quiz_blank(c)) is not None]
    out: dict[int, tuple[Status, str]] = {}
    if pending:
        todos = list(dict.fromkeys(todo for _, todo, _ in pending))
        named = ", ".join(_t("render.todo", lang, todo=todo) for todo in todos)
        title = pending[0][2].pending.params.get("title") or ""
        if len(todos) == 1 and title:  # one TODO left: say what it is, as its own message did
            named = _t("render.todo_titled", lang, todo=todos[0], title=title)
        waiting = _t("render.waiting_one" if len(pending) == 1 else "render.waiting_many", lang, n=len(pending))
        line = _t("render.pending_one" if len(todos) == 1 else "render.pending_many", lang, todos=named,
                  checks=waiting, points=_num(sum(c.max_score - c.score for _, _, c in pending)))
        out[pending[0][0]] = (Status.FAILED, line)
    if blank:
        numbers = ", ".join(str(n) for _, n, _ in blank)
        line = _t("render.quiz_blank_one" if len(blank) == 1 else "render.quiz_blank_many", lang,
                  numbers=numbers, points=_num(sum(c.max_score - c.score for _, _, c in blank)))
        out[blank[0][0]] = (Status.FAILED, line)
    return out


def render_text(result: CourseResult, lang: str, *, color: bool | None = None, width: int = 100,
                earned: Iterable[str] = (), verbose: bool = False, step: str | None = None) -> str:
    """Terminal text: per lesson a header, one line per check, the message under those that
    did not pass, then the totals. Checks that fail for one cause (the learner's code raised at
    one line) are one block: the first check's line, the error once, and the others named;
    checks that wait on a pending TODO are one line per lesson naming those TODOs, and blank
    quiz answers one line; `verbose` shows every check in full. `step` (one line, the next
    step in words: autograder.learner.steps.step_line) ends the text. With color False the output
    is plain and stable."""
    _check_lang(lang)
    console, buffer = make_console(color, width)
    console.print(RichText(neutral.terminal(result.course), style="bold"))  # may come from a results.json
    if result.practice:
        console.print(RichText(_t("render.practice_note", lang), style="yellow"))
    walls = isolation_note(result, lang)
    if walls:
        console.print(RichText(walls, style="yellow"))
    for lesson in result.lessons:
        console.print()
        points = points_text(lesson, lang)
        state, label = _lesson_state(lesson, lang)
        # XP is shown one way in every channel: earned XP is kept (history.Progress), and a
        # lesson earned before but failing now says so, as the Markdown report and `progress` do.
        kept = lesson.id in earned and not lesson.completed
        xp = _t("render.xp", lang, xp=lesson.xp_max if kept else lesson.xp, xp_max=lesson.xp_max)
        if kept:
            label += " · " + _t("render.earned_failing_now", lang)
        header = RichText(neutral.terminal(_t("render.lesson", lang, id=lesson.id, title=_title(lesson, lang))),
                          style="bold")
        header.append(f"  {points} · {xp} · ")
        header.append(label, style=_TEXT_STYLES[state])
        console.print(header)

        summaries = {} if verbose else _summaries(lesson.checks, lang)
        summarised = set() if verbose else {
            id(c) for c in lesson.checks if _pending_todo(c) is not None or _quiz_blank(c) is not None}
        labels = [_check_label(c, lang) for c in lesson.checks]
        scores = [f"{_num(c.score)}/{_num(c.max_score)}" for c in lesson.checks]
        shown = [i for i, c in enumerate(lesson.checks) if id(c) not in summarised]
        label_width = max((len(labels[i]) for i in shown), default=0)
        score_width = max((len(scores[i]) for i in shown), default=0)
        rest = [c for c in lesson.checks if id(c) not in summarised]
        position = {id(c): i for i, c in enumerate(lesson.checks)}
        # Grouped among the other checks, keyed by the place of the group's first check.
        groups = {} if verbose else {position[id(rest[index])]: members
                                     for index, members in _group_by_cause(rest, lang).items()}
        grouped = {id(c) for members in groups.values() for c in members}
        rows = list(zip(lesson.checks, labels, scores, strict=True))
        for index, (check, label, score) in enumerate(rows):
            if index in summaries:  # the checks not started yet: one line for them all
                status, text = summaries[index]
                row = Table.grid(padding=(0, 1))  # a wrapped line stays under its text
                row.add_column(no_wrap=True)
                row.add_column()
                row.add_row(RichText("  " + _TEXT_SYMBOLS[status], style=_TEXT_STYLES[status]), RichText(text))
                console.print(row)
                continue
            if id(check) in summarised:
                continue
            if index in groups:  # the block of a cause opens with its leader, at the first's place
                check, label, score = rows[position[id(groups[index][0])]]
            elif id(check) in grouped:
                continue  # said once, in its group's block
            line = RichText("  ")
            line.append(_TEXT_SYMBOLS[check.status], style=_TEXT_STYLES[check.status])
            line.append(f" {label.ljust(label_width)}  {score.rjust(score_width)}")
            if check.status is not Status.PASSED:
                line.append(
                    f"  {_t('render.status.' + check.status.value, lang)}", style=_TEXT_STYLES[check.status]
                )
            console.print(line)
            if check.status is Status.PASSED:
                continue
            members = groups.get(index)
            if members is None:
                print_feedback(console, check.feedback, lang)
                continue
            # The leader's own "raised in another TODO" line stays when no check of that TODO led.
            own = check.raised_in is None or check.todo == check.raised_in.todo
            print_feedback(console, _shared_feedback(check.feedback) if own else check.feedback, lang)
            lost = sum(c.max_score - c.score for c in members)
            others = ", ".join(c.id for c in members[1:])
            console.print(Padding(RichText(_t("render.same_cause", lang, n=len(members), points=_num(lost),
                                              checks=others), style="yellow"), (0, 0, 0, 6)))

    console.print()
    points = points_text(result, lang)
    total = _t(
        "render.total", lang, points=points, xp=_t("render.xp", lang, xp=result.xp, xp_max=result.xp_max)
    )
    console.print(RichText(total, style="bold"))
    if result.practice:
        console.print(RichText(_t("render.practice_tag", lang).capitalize(), style="yellow"))
    console.print(RichText(_t("render.seed", lang, seed=result.seed), style="dim"))
    if step is not None:
        # One line, never re-wrapped: a path:line must stay whole for terminals to link it.
        console.print()
        console.print(RichText(step, style="bold cyan"), soft_wrap=True)
    return printed(buffer)
