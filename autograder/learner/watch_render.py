"""What `autograder watch` writes after a save: each TODO run first, as soon as its checks are over
(render_unit), and the lesson's summary once it is graded (render_lesson): its bar, points and
XP, the change since the previous grading, the first failing check not already on screen, and
the next step. Text only: the session (watch.py) decides when each is written.
"""

from __future__ import annotations

from collections.abc import Iterable

from autograder.core import i18n
from autograder.core.manifest import Lesson
from autograder.learner.steps import NextStep, describe_step, error_line, not_loading
from autograder.learner.terminal import bar, t
from autograder.learner.watch_changes import Unit


def first_failing(checks: list):
    """The first of `checks` that neither passed nor was skipped, else None."""
    from autograder.core.results import Status

    return next((c for c in checks if c.status not in (Status.PASSED, Status.SKIPPED)), None)


def render_unit(lesson: Lesson, unit: Unit, checks: list, lang: str, *, color: bool, width: int) -> str:
    """One unit's verdict, shown while the rest of the lesson is graded: ✔/✘, the TODO and its
    title, how many of its checks pass and, when one fails, that check (first_failing) with its
    message."""
    from rich.text import Text as RichText

    from autograder.core.results import Status
    from autograder.render.labels import score_number
    from autograder.render.output import make_console, print_feedback, printed

    console, buffer = make_console(color, width)
    counted = [c for c in checks if c.status is not Status.SKIPPED]
    passed = sum(c.status is Status.PASSED for c in counted)
    failing = first_failing(checks)
    broken = not_loading(checks)
    if broken is not None:  # a file that does not load is no TODO's verdict: its one line
        console.print(RichText(f"  ✘ {error_line(broken[0], lang)}", style="bold red"), soft_wrap=True)
        return printed(buffer)
    if unit.todo is None:
        label = t("watch_quiz", lang)
    else:
        label = f"TODO [{unit.todo}] {i18n.localize(lesson.todo(unit.todo).title, lang)}"
    counts = t("watch_checks", lang, passed=passed, total=len(counted))
    console.print(
        RichText(
            f"  {'✘' if failing else '✔'} {label} · {counts}", style="bold red" if failing else "bold green"
        ),
        soft_wrap=True,
    )
    if failing is not None:
        status = i18n.translate(f"render.status.{failing.status.value}", lang)
        console.print(
            RichText(
                f"    ✘ {failing.id}  {score_number(failing.score)}/{score_number(failing.max_score)}  {status}",
                style="red",
            )
        )
        print_feedback(console, failing.feedback, lang)
    return printed(buffer)


# --- one lesson's summary ----------------------------------------------------------------------


def render_lesson(
    result,
    step: NextStep | None,
    next_after: NextStep,
    previous: float | None,
    lang: str,
    *,
    color: bool,
    width: int,
    earned_before: bool = False,
    shown: Iterable[str] = (),
) -> str:
    """The lesson after a grading: header with a bar, the change in points, the first failing
    check with its message, and the next step (`next_after` once the lesson is completed).
    `earned_before`: its XP was earned in an earlier grading (kept; "+50 XP" is not said again).
    `shown`: checks whose message is already on screen (render_unit): not said again."""
    from rich.text import Text as RichText

    from autograder.core.results import Status
    from autograder.render.labels import score_number
    from autograder.render.output import make_console, points_text, print_feedback, printed

    console, buffer = make_console(color, width)
    counted = result.counted_checks
    passed = sum(c.status is Status.PASSED for c in counted)
    fraction = result.score / result.max_score if result.max_score else 0.0
    style = "green" if result.completed else "yellow"
    header = RichText(
        i18n.translate("render.lesson", lang, id=result.id, title=i18n.localize(result.title, lang)),
        style="bold",
    )
    console.print(header)
    line = RichText("  ")
    line.append(bar(fraction), style=style)
    line.append(
        "  "
        + " · ".join(
            [
                points_text(result, lang),
                t("watch_checks", lang, passed=passed, total=len(counted)),
                i18n.translate(
                    "render.xp", lang, xp=result.xp_max if earned_before else result.xp, xp_max=result.xp_max
                ),
            ]
        )
    )
    if earned_before and not result.completed:
        line.append(" · " + i18n.translate("render.earned_failing_now", lang), style="yellow")
    if result.mode == "practice":
        line.append(" · " + i18n.translate("render.practice_tag", lang), style="yellow")
    console.print(line)
    if previous is not None and abs(result.score - previous) > 1e-9:
        delta = result.score - previous
        console.print(
            RichText(
                "  " + t("watch_delta", lang, delta=f"{delta:+g}"), style="green" if delta > 0 else "red"
            )
        )
    if result.completed:
        if not earned_before:
            console.print(
                RichText(t("lesson_done", lang, id=result.id, xp=result.xp_max), style="bold green")
            )
        step = next_after
    elif step is not None and step.kind == "fix":
        # A file that does not load: its one line, unless a TODO's verdict above said it.
        broken = not_loading([c for c in result.checks if c.id in set(shown)])
        if broken is None:
            broken = not_loading(result.checks)
            if broken is not None:
                console.print(RichText(f"  ✘ {error_line(broken[0], lang)}", style="red"), soft_wrap=True)
    elif step is not None and step.check is not None:
        check = next((c for c in result.checks if c.id == step.check), None)
        shown = set(shown)
        # Already on screen: this check, or a failing check of the TODO the step names (the
        # same error, when this check only waits on that TODO).
        above = check is not None and (
            check.id in shown
            or step.todo is not None
            and any(c.id in shown and c.todo == step.todo for c in result.checks)
        )
        if above:
            label = f"TODO [{step.todo}]" if step.todo else check.id
            console.print(RichText("  " + t("watch_first_failure_above", lang, label=label), style="dim"))
        elif check is not None:
            console.print(RichText("  " + t("watch_first_failure", lang), style="dim"))
            label = check.id + (f" · TODO [{check.todo}]" if check.todo else "")
            status = i18n.translate(f"render.status.{check.status.value}", lang)
            console.print(
                RichText(
                    f"  ✘ {label}  {score_number(check.score)}/{score_number(check.max_score)}  {status}",
                    style="red",
                )
            )
            print_feedback(console, check.feedback, lang)
    if step is not None:
        lines = describe_step(step, lang)
        console.print(RichText(lines[0], style="bold cyan"), soft_wrap=True)
        for extra in lines[1:]:
            console.print(RichText(extra, style="cyan"), soft_wrap=True)
    return printed(buffer)
