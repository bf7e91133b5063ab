"""`autograder watch [LESSON ...] [--poll]`: grade a lesson again each time one of its files is saved.

Without LESSON it watches every lesson folder in exercises/ and starts by grading the lesson the
learner is on (the first one not known to be completed, from the local history and the grades
branch). A save in a lesson folder re-grades that lesson only; a lesson already completed is
never graded again unless asked for by name (`autograder watch 02`), which always re-grades it.
After each grading it shows the lesson's progress (a bar, points, checks passed, the change
since the previous grading), the first failing check and the one next step, as `check` does,
and records the grading in the local history.

File events come from watchfiles (inotify, FSEvents, ReadDirectoryChangesW). `--poll` makes it
poll instead (network drives, some containers and virtual machines), and when the system refuses
notifications (the inotify watch or instance limits, too many open files) it falls back to
polling by itself, with a one-line warning. Saves are debounced: an editor's burst of events
(temporary file, rename, chmod) is one change, and saves made during a grading are graded once
it ends. Ctrl-C exits with status 0 and one line, also in the middle of a grading.

Fast by staying warm: this process (the trusted one, graders already imported) and the warm
pool's zygote (autograder/sandbox/pool.py: torch imported once) live as long as watch does. Each grading
still gets a fresh copy of the lesson's files and a fresh worker forked from the zygote, walled
in and limited as any worker: no worker that ran the learner's code serves a later save. The
save is compared with the previous one: the checks of the TODOs whose lines it changed (blame.py
says which TODO a line belongs to; else the TODO of the last next step) run first, and each
such TODO's verdict is shown as soon as its checks are over; then the whole lesson's summary.
With AUTOGRADER_WATCH_TRACE=FILE, each grading appends one JSON line to FILE (the TODOs run
first, the checks in the order they ended, the zygote's and the workers' pids, timings): for
the tests and bench/bench_watch.py.

Here: the session (what it knows between saves, what it grades and when) and the command.
watch_changes.py tells what changed (file events, lessons, edited TODOs); watch_render.py
writes what a learner reads after each save.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from autograder.core import i18n
from autograder.core.manifest import Course, Lesson
from autograder.learner.check import grade_lessons
from autograder.learner.folders import (
    LearnerError,
    exercises_dir,
    lesson_dir,
    present_lessons,
    resolve_lessons,
)
from autograder.learner.progress import completed_lessons, earned_lessons, gather
from autograder.learner.steps import NextStep, describe_step, lesson_after
from autograder.learner.store import LocalStore, record_result
from autograder.learner.terminal import Spinner, t, terminal_width
from autograder.learner.watch_changes import (
    POLL_DELAY_MS,
    WAKE_MS,
    Unit,
    changed_lessons,
    edited_todos,
    iter_changes,
    read_inputs,
    units_of,
)
from autograder.learner.watch_render import first_failing, render_lesson, render_unit

# --- the session -------------------------------------------------------------------------------


class WatchSession:
    """What a running `watch` knows: which lessons it may grade, which are completed, the last
    score of each (for the change in points)."""

    def __init__(self, course: Course, lang: str, named: list[Lesson], out=None) -> None:
        from autograder.render.output import use_color

        self.course, self.lang, self.named = course, lang, named
        self.out = out or sys.stdout
        self.store = LocalStore(course.root, warn=self.say)
        self.color = use_color(self.out)
        self.lessons = named or present_lessons(course)
        known = gather(course, self.store, fetch=False, lang=lang)
        self.completed = completed_lessons(known.latest)
        self.earned = earned_lessons(known.progress)  # XP kept: "+50 XP" is said once per lesson
        self.scores: dict[str, float] = {}
        # Each lesson's files as last graded (or as found at the start), to tell what a save
        # changed; and its last next step.
        self.texts = {lesson.id: read_inputs(course, lesson) for lesson in self.lessons}
        self.steps: dict[str, NextStep | None] = {}
        self.trace = os.environ.get("AUTOGRADER_WATCH_TRACE") or None

    def say(self, text: str, style: str | None = None) -> None:
        if style and self.color:
            from rich.text import Text as RichText

            from autograder.render.output import make_console, printed

            console, buffer = make_console(True, terminal_width(self.out))
            console.print(RichText(text, style=style), soft_wrap=True)
            text = printed(buffer).rstrip("\n")
        self.out.write(text + "\n")
        self.out.flush()

    def start(self) -> None:
        """Grade the named lessons, else the lesson the learner is on."""
        if self.named:
            for lesson in self.named:
                self.grade(lesson)
            return
        for lesson in self.lessons:
            if lesson.id not in self.completed:
                self.grade(lesson)
                if lesson.id not in self.completed:
                    return
        self.say(t("watch_all_complete", self.lang), "green")
        self.say("\n".join(describe_step(self._after(self.lessons[-1]), self.lang)), "bold cyan")

    def on_changes(self, paths: set[Path]) -> bool:
        """Grade (or skip) the lessons with changed files; False when none of them matter."""
        # Without named lessons, a lesson folder that appeared since the start (git pull) counts too.
        lessons = self.named or present_lessons(self.course)
        groups = changed_lessons(self.course, paths, lessons)
        for lesson_id, names in groups.items():
            lesson = self.course.lesson(lesson_id)
            self.say("")
            self.say(
                t(
                    "watch_saved",
                    self.lang,
                    time=time.strftime("%H:%M:%S"),
                    files=", ".join(f"{lesson.folder}/{name}" for name in names),
                ),
                "dim",
            )
            if not self.named and lesson.id in self.completed:
                self.say(t("watch_skip_complete", self.lang, id=lesson.id), "dim")
                continue
            self.grade(lesson)
        return bool(groups)

    def first_units(self, lesson: Lesson) -> list[Unit]:
        """What to grade first: the TODOs (or quiz) this save changed, else the TODO of the
        lesson's last next step when its file changed; none for a lesson not seen before."""
        from autograder.engine.grading import stub_folder

        before, after = self.texts.get(lesson.id), read_inputs(self.course, lesson)
        self.texts[lesson.id] = after
        if before is None:
            return []
        folder = lesson_dir(self.course, lesson)
        todos = edited_todos(lesson, before, after, stub_folder(self.course, lesson, folder))
        step = self.steps.get(lesson.id)
        if not todos and step is not None and step.todo is not None:
            name = next((todo.file for todo in lesson.todos if todo.id == step.todo), None)
            if name is not None and before.get(name) != after.get(name):
                todos = [step.todo]
        return units_of(lesson, todos)

    def grade(self, lesson: Lesson) -> None:
        started = time.monotonic()
        live = LiveVerdicts(self, lesson, self.first_units(lesson))
        with Spinner(sys.stderr.isatty()) as status:
            live.status = status
            result = grade_lessons(
                self.course,
                [lesson],
                self.lang,
                status=status,
                first={lesson.id: live.first},
                on_check=live.on_check,
                on_worker=live.on_worker,
            )
        steps = record_result(self.course, result, self.store, self.lang)
        graded = result.lessons[0]
        if graded.completed:
            self.completed.add(lesson.id)
        else:
            self.completed.discard(lesson.id)
        step = steps[lesson.id]
        earned_before = lesson.id in self.earned
        if graded.completed:
            self.earned.add(lesson.id)
        text = render_lesson(
            graded,
            step,
            self._after(lesson),
            self.scores.get(lesson.id),
            self.lang,
            color=self.color,
            width=terminal_width(self.out),
            earned_before=earned_before,
            shown=live.shown,
        )
        self.scores[lesson.id] = graded.score
        self.steps[lesson.id] = step
        self.out.write(text.rstrip("\n") + "\n")
        self.out.flush()
        if self.trace:
            live.write_trace(self.trace, started)

    def _after(self, lesson: Lesson) -> NextStep:
        """The step once `lesson` is completed: the next lesson not completed yet (after it,
        else before it), else done: the course is complete only when every lesson is."""
        index = [item.id for item in self.course.lessons].index(lesson.id)
        return lesson_after(self.course, index, self.completed | {lesson.id})


class LiveVerdicts:
    """One grading's results as they come (engine.grade's on_check and on_worker): each unit
    run first is shown as soon as its last check is over."""

    def __init__(self, session: WatchSession, lesson: Lesson, units: list[Unit]) -> None:
        self.session, self.lesson, self.units = session, lesson, units
        self.first = [check for unit in units for check in unit.checks]
        self.status = None  # the spinner, paused while a verdict is written
        self.results: dict[str, object] = {}
        self.order: list[str] = []
        self.workers: list[int] = []
        self.shown: set[str] = set()  # checks whose message is on screen
        self.early: list[str | None] = []  # units shown, by TODO (None: the quiz)
        self.first_verdict: float | None = None

    def on_worker(self, lesson: Lesson, pid: int) -> None:
        self.workers.append(pid)

    def on_check(self, lesson: Lesson, check) -> None:
        self.results[check.id] = check
        self.order.append(check.id)
        for unit in self.units:
            if unit.todo in self.early or check.id not in unit.checks:
                continue
            if all(c in self.results for c in unit.checks):
                self.show(unit)

    def show(self, unit: Unit) -> None:
        session = self.session
        checks = [self.results[c] for c in unit.checks]
        text = render_unit(
            self.lesson, unit, checks, session.lang, color=session.color, width=terminal_width(session.out)
        )
        failing = first_failing(checks)
        if failing is not None:
            self.shown.add(failing.id)
        self.early.append(unit.todo)
        if self.status is not None:
            self.status.stop()  # a live spinner line would be drawn over what we write
        session.out.write(text.rstrip("\n") + "\n")
        session.out.flush()
        if self.first_verdict is None:
            self.first_verdict = time.monotonic()
        if self.status is not None:
            self.status.start()

    def write_trace(self, path: str, started: float) -> None:
        from autograder.sandbox.pool import zygote_pid

        now = time.monotonic()
        entry = {
            "lesson": self.lesson.id,
            "first": [unit.todo or "quiz" for unit in self.units],
            "shown_first": [todo or "quiz" for todo in self.early],
            "order": self.order,
            "zygote": zygote_pid(),
            "workers": self.workers,
            "first_verdict_s": None if self.first_verdict is None else round(self.first_verdict - started, 3),
            "lesson_s": round(now - started, 3),
        }
        try:
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(entry) + "\n")
        except OSError:
            pass


# --- the command -------------------------------------------------------------------------------


def add_parser(sub) -> None:
    from autograder.core.results import message  # help texts are catalog messages (messages/<lang>/cli.yml)

    parser = sub.add_parser(
        "watch", help=message("cli.watch.help"), description=message("cli.watch.description")
    )
    parser.add_argument(
        "lessons", nargs="*", metavar=message("cli.metavar.lesson"), help=message("cli.watch.lessons")
    )
    parser.add_argument("--poll", action="store_true", help=message("cli.watch.poll"))
    parser.add_argument("--lang", choices=i18n.LANGUAGES, default=None, help=message("cli.lang"))


def main(course: Course, args) -> int:
    lang = args.lang or course.language
    try:
        named = resolve_lessons(course, args.lessons, lang) if args.lessons else []
        if not named:
            resolve_lessons(course, [], lang)  # at least one lesson folder, or say so
    except LearnerError as exc:
        print(f"autograder watch: {exc}", file=sys.stderr)
        return 2
    session = WatchSession(course, lang, named)
    folders = [lesson_dir(course, lesson) for lesson in named] or [exercises_dir(course)]
    shown = ", ".join(f"exercises/{lesson.folder}/" for lesson in named) or "exercises/"

    def fallback(exc: Exception) -> None:
        session.say(t("watch_fallback", lang, detail=str(exc)[:200]), "yellow")

    try:
        session.say(t("watch_start", lang, folders=shown), "bold")
        if args.poll:
            session.say(t("watch_polling", lang, ms=POLL_DELAY_MS), "dim")
        changes = iter_changes(
            folders, force_polling=True if args.poll else None, on_fallback=fallback, timeout_ms=WAKE_MS
        )
        # The watcher is set up before the first grading, so a save made during it is not lost.
        early = next(changes)
        session.start()
        if early:
            session.on_changes(early)
        session.say(t("watch_waiting", lang), "dim")
        for paths in changes:
            if paths and session.on_changes(paths):
                session.say(t("watch_waiting", lang), "dim")
    except KeyboardInterrupt:
        # Ctrl-C is how a learner stops watching: not an error. A grading it interrupted has
        # already stopped its workers (the engine cleans up before re-raising).
        session.say("")
        session.say(t("watch_bye", lang))
        return 0
    return 0
