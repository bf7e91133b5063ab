"""A result as terminal text (rich), and the console helpers the learner's commands print
with: colour only for a real terminal, plain and stable text otherwise.

    render_text(result, lang, *, color=None, width=100, earned=(), verbose=False, step=None)
    use_color / wants_color      whether a stream or console may get colour
    make_console / printed       a rich console writing into a buffer, and what it wrote
    print_feedback               a check's message under its line

A check's line with its message under it; checks that fail for one cause, checks a file that
does not load kept from running, checks waiting on a pending TODO and blank quiz answers are
said once (`verbose` shows each in full).
"""

from __future__ import annotations

import io
from collections.abc import Iterable

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text as RichText

from autograder.core import i18n, neutral
from autograder.core.i18n import translate as _t
from autograder.core.results import CheckResult, CourseResult, Feedback, Status, Text
from autograder.engine import learner_errors
from autograder.render.labels import (
    check_label,
    check_language,
    isolation_note,
    lesson_state,
    lesson_title,
    pending_line,
    points_text,
    quiz_blank,
    score_number,
)

_TEXT_SYMBOLS = {Status.PASSED: "✔", Status.FAILED: "✘", Status.ERROR: "!", Status.SKIPPED: "–"}
_TEXT_STYLES = {Status.PASSED: "green", Status.FAILED: "red", Status.ERROR: "yellow", Status.SKIPPED: "dim"}


def use_color(stream=None) -> bool:
    """Colour for a real terminal only (`stream`, default stdout); rich also honours NO_COLOR,
    FORCE_COLOR and TERM=dumb."""
    return wants_color(Console(file=stream))


def wants_color(probe: Console) -> bool:
    """Whether what `probe` writes to may get colour. The text is rendered to a buffer with
    ANSI codes (make_console) and written as it is, so a Windows console that does not
    interpret them (rich's legacy_windows: cmd.exe in the old console host) gets plain text,
    never "←[31m" litter."""
    return (
        probe.is_terminal
        and not probe.no_color
        and probe.color_system is not None
        and not probe.legacy_windows
    )


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
    if check.status in (Status.PASSED, Status.SKIPPED) or not check.feedback.parts:
        return None  # a skipped check (judged only officially, no GPU) fails for no cause
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
    return Feedback(
        tuple(p for p in feedback.parts if not (isinstance(p, Text) and p.key in _PER_CHECK_PARTS))
    )


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


def _not_loading(check: CheckResult) -> learner_errors.LoadError | None:
    """The learner's file that did not load and stopped this check (engine/learner_errors.py)."""
    return None if check.status is Status.PASSED else learner_errors.of(check)


def _summarised(check: CheckResult) -> bool:
    return (
        _pending_todo(check) is not None or quiz_blank(check) is not None or _not_loading(check) is not None
    )


def _summaries(checks: list[CheckResult], lang: str) -> dict[int, tuple[Status, str, str | None]]:
    """{index of the first check summarised: (status, one line, a second line or None)} for
    the checks that are not started yet: the checks a learner's file that does not load kept
    from running become that error's one line (and a line naming them), every check waiting on
    a pending TODO one line naming the pending TODOs, every blank quiz question one line naming
    the questions. What they hide is said in full by `verbose` and the JSON."""
    pending = [(i, todo, c) for i, c in enumerate(checks) if (todo := _pending_todo(c)) is not None]
    blank = [(i, n, c) for i, c in enumerate(checks) if (n := quiz_blank(c)) is not None]
    out: dict[int, tuple[Status, str, str | None]] = {}
    broken: dict[tuple, list[tuple[int, CheckResult]]] = {}
    for index, check in enumerate(checks):
        error = _not_loading(check)
        if error is not None:
            broken.setdefault((error.kind, error.where()), []).append((index, check))
    for members in broken.values():
        first_index, first = members[0]
        line = i18n.render_parts(Feedback.of(learner_errors.of(first).part), lang)[0][1]
        blocked = _t(
            "errors.blocked",
            lang,
            n=len(members),
            points=score_number(sum(c.max_score - c.score for _, c in members)),
            checks=", ".join(c.id for _, c in members),
        )
        out[first_index] = (Status.FAILED, line, blocked)
    if pending:
        line = pending_line(checks, lang)  # every TODO left to write (labels.pending_line)
        out.setdefault(pending[0][0], (Status.FAILED, line, None))
    if blank:
        numbers = ", ".join(str(n) for _, n, _ in blank)
        line = _t(
            "render.quiz_blank_one" if len(blank) == 1 else "render.quiz_blank_many",
            lang,
            numbers=numbers,
            points=score_number(sum(c.max_score - c.score for _, _, c in blank)),
        )
        out.setdefault(blank[0][0], (Status.FAILED, line, None))
    return out


def render_text(
    result: CourseResult,
    lang: str,
    *,
    color: bool | None = None,
    width: int = 100,
    earned: Iterable[str] = (),
    verbose: bool = False,
    step: str | None = None,
) -> str:
    """Terminal text: per lesson a header, one line per check, the message under those that
    did not pass, then the totals. Checks that fail for one cause (the learner's code raised at
    one line) are one block: the first check's line, the error once, and the others named;
    checks that wait on a pending TODO are one line per lesson naming those TODOs, and blank
    quiz answers one line; `verbose` shows every check in full. `step` (one line, the next
    step in words: autograder.learner.steps.step_line) ends the text. With color False the output
    is plain and stable."""
    check_language(lang)
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
        state, label = lesson_state(lesson, lang)
        # XP is shown one way in every channel: earned XP is kept (history.Progress), and a
        # lesson earned before but failing now says so, as the Markdown report and `progress` do.
        kept = lesson.id in earned and not lesson.completed
        xp = _t("render.xp", lang, xp=lesson.xp_max if kept else lesson.xp, xp_max=lesson.xp_max)
        if kept:
            label += " · " + _t("render.earned_failing_now", lang)
        header = RichText(
            neutral.terminal(_t("render.lesson", lang, id=lesson.id, title=lesson_title(lesson, lang))),
            style="bold",
        )
        header.append(f"  {points} · {xp} · ")
        header.append(label, style=_TEXT_STYLES[state])
        console.print(header)

        summaries = {} if verbose else _summaries(lesson.checks, lang)
        summarised = set() if verbose else {id(c) for c in lesson.checks if _summarised(c)}
        labels = [check_label(c, lang) for c in lesson.checks]
        scores = [f"{score_number(c.score)}/{score_number(c.max_score)}" for c in lesson.checks]
        shown = [i for i, c in enumerate(lesson.checks) if id(c) not in summarised]
        label_width = max((len(labels[i]) for i in shown), default=0)
        score_width = max((len(scores[i]) for i in shown), default=0)
        rest = [c for c in lesson.checks if id(c) not in summarised]
        position = {id(c): i for i, c in enumerate(lesson.checks)}
        # Grouped among the other checks, keyed by the place of the group's first check.
        groups = (
            {}
            if verbose
            else {
                position[id(rest[index])]: members for index, members in _group_by_cause(rest, lang).items()
            }
        )
        grouped = {id(c) for members in groups.values() for c in members}
        rows = list(zip(lesson.checks, labels, scores, strict=True))
        for index, (check, label, score) in enumerate(rows):
            if index in summaries:  # the checks not started yet: one line for them all
                status, text, more = summaries[index]
                row = Table.grid(padding=(0, 1))  # a wrapped line stays under its text
                row.add_column(no_wrap=True)
                row.add_column()
                row.add_row(
                    RichText("  " + _TEXT_SYMBOLS[status], style=_TEXT_STYLES[status]),
                    RichText(neutral.terminal(text)),
                )
                console.print(row)
                if more is not None:
                    console.print(Padding(RichText(more, style="yellow"), (0, 0, 0, 6)))
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
            console.print(
                Padding(
                    RichText(
                        _t(
                            "render.same_cause",
                            lang,
                            n=len(members),
                            points=score_number(lost),
                            checks=others,
                        ),
                        style="yellow",
                    ),
                    (0, 0, 0, 6),
                )
            )

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
