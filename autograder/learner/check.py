"""`autograder check`: grade the learner's lessons and say the one next step.

    autograder check [LESSON ...] [--lang es|en] [--seed N]

grades the lessons in exercises/ (the named ones, else every lesson whose folder is there) with
the hidden graders when they are available and otherwise with the lesson's practice tests (the
engine decides; this module says which), prints the usual result and ends with the ONE next
step (autograder/learner/steps.py): "Siguiente: TODO [scaling] en
exercises/03-atencion-causal/attention.py:74". Each grading is recorded in the learner's local
state (autograder/learner/store.py), which `progress` reads.

`check` exits 0 whenever grading ran, whatever the score (like `grade`); 2 for bad input.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any

from autograder.core import i18n
from autograder.core.manifest import Course, Lesson
from autograder.learner.folders import LearnerError, resolve_lessons
from autograder.learner.progress import completed_lessons, course_xp_max, earned_lessons, gather
from autograder.learner.steps import NextStep, describe_step, next_step
from autograder.learner.store import LocalStore, record_result
from autograder.learner.terminal import Spinner, streak_text, t, terminal_width

# --- grading -----------------------------------------------------------------------------------


def grade_lessons(
    course: Course,
    lessons: list[Lesson],
    lang: str,
    *,
    seed: int | None = None,
    status: Any = None,
    **live: Any,
):
    """Grade the lessons' exercise folders with the engine (hidden graders, or practice tests
    where the graders are missing); `status` (a rich Status) shows which lesson is graded.
    `live`: engine.grade's first, on_check and on_worker (what `watch` shows while grading)."""
    from autograder.engine.split import grade

    done: set[str] = set()

    def advance(result) -> None:
        # Lessons may finish out of order (two grading processes): name the first still pending.
        done.add(result.id)
        pending = [lesson.id for lesson in lessons if lesson.id not in done]
        if status is not None and pending:
            status.update(t("grading", lang, id=pending[0]))

    if status is not None:
        status.update(t("grading", lang, id=lessons[0].id))
    # Learner-side: code that ran out of time is not run again in its lesson (engine/hangs.py).
    return grade(
        course, lessons, None, lang=lang, seed=seed, on_lesson=advance, hang_policy="learner", **live
    )


# --- what check prints after the result -------------------------------------------------------


def mode_lines(result, lang: str) -> list[str]:
    """Which graders graded: the hidden ones, or the practice tests (per lesson when mixed)."""
    modes: dict[str, list[str]] = {}
    for lesson in result.lessons:
        modes.setdefault(lesson.mode, []).append(lesson.id)
    if len(modes) == 1:
        return [t("mode_practice" if "practice" in modes else "mode_hidden", lang)]
    return [
        t("mode_hidden_lessons", lang, lessons=", ".join(modes.get("hidden", []))),
        t("mode_practice_lessons", lang, lessons=", ".join(modes.get("practice", []))),
    ]


def render_footer(
    result,
    step: NextStep,
    progress,
    xp_max: int,
    lang: str,
    *,
    color: bool,
    width: int = 100,
    earned_before: Iterable[str] = (),
) -> str:
    """What `check` prints after the result: which graders, the next step, the XP so far
    (`progress`: autograder.core.history.Progress of everything recorded; `xp_max`: the course's).
    "+50 XP" is said only for a lesson not earned before (`earned_before`)."""
    from rich.text import Text as RichText

    from autograder.render.output import make_console, printed

    console, buffer = make_console(color, width)
    for line in mode_lines(result, lang):
        console.print(RichText(line, style="yellow" if result.practice else "dim"), soft_wrap=True)
    for lesson in result.lessons:
        if lesson.completed and lesson.id not in earned_before:
            console.print(
                RichText(t("lesson_done", lang, id=lesson.id, xp=lesson.xp_max), style="green"),
                soft_wrap=True,
            )
    # One line each, never re-wrapped: a path:line must stay whole for terminals to link it.
    lines = describe_step(step, lang)
    console.print(RichText(lines[0], style="bold cyan"), soft_wrap=True)
    for line in lines[1:]:
        console.print(RichText(line, style="cyan"), soft_wrap=True)
    if progress is not None:
        console.print(
            RichText(
                t(
                    "progress_line",
                    lang,
                    xp=progress.xp,
                    xp_max=xp_max,
                    streak=streak_text(progress.streak, lang),
                ),
                style="dim",
            ),
            soft_wrap=True,
        )
    return printed(buffer)


# --- the command -------------------------------------------------------------------------------


def add_parser(sub) -> None:
    from autograder.core.results import message  # help texts are catalog messages (messages/<lang>/cli.yml)

    parser = sub.add_parser(
        "check", help=message("cli.check.help"), description=message("cli.check.description")
    )
    parser.add_argument(
        "lessons", nargs="*", metavar=message("cli.metavar.lesson"), help=message("cli.check.lessons")
    )
    parser.add_argument("--lang", choices=i18n.LANGUAGES, default=None, help=message("cli.lang"))
    parser.add_argument("--seed", type=int, default=None, help=message("cli.check.seed"))
    parser.add_argument("--verbose", action="store_true", help=message("cli.check.verbose"))


def main(course: Course, args) -> int:
    from autograder.engine.feedback import redact, secrets_from_environ
    from autograder.render.output import render_text, use_color

    lang = args.lang or course.language
    try:
        lessons = resolve_lessons(course, args.lessons, lang)
    except LearnerError as exc:
        print(f"autograder check: {exc}", file=sys.stderr)
        return 2
    store = LocalStore(course.root)
    earned_before = earned_lessons(gather(course, store, fetch=False).progress)
    with Spinner(sys.stderr.isatty()) as status:
        result = grade_lessons(course, lessons, lang, seed=args.seed, status=status)
    steps = record_result(course, result, store, lang)
    known = gather(course, store, fetch=False)
    step = next_step(course, result.lessons, completed_lessons(known.latest), steps)
    color = use_color(sys.stdout)
    width = terminal_width(sys.stdout)
    text = (
        render_text(
            result, lang, color=color, width=width, earned=earned_before, verbose=args.verbose
        ).rstrip("\n")
        + "\n\n"
    )
    text += render_footer(
        result,
        step,
        known.progress,
        course_xp_max(course),
        lang,
        color=color,
        width=width,
        earned_before=earned_before,
    )
    # A learner's code may have read this process's environment; never echo a secret.
    sys.stdout.write(redact(text.rstrip("\n") + "\n", secrets_from_environ(os.environ)))
    sys.stdout.flush()
    return 0
