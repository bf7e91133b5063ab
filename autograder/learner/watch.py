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
"""

from __future__ import annotations

import difflib
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from autograder.core import i18n
from autograder.core.manifest import Course, Lesson
from autograder.learner.check import grade_lessons
from autograder.learner.folders import (
    LearnerError,
    exercises_dir,
    is_graded_input,
    lesson_dir,
    present_lessons,
    resolve_lessons,
)
from autograder.learner.progress import completed_lessons, earned_lessons, gather
from autograder.learner.steps import NextStep, describe_step, lesson_after
from autograder.learner.store import LocalStore, record_result
from autograder.learner.terminal import Spinner, bar, t, terminal_width

# An editor's save is a burst of events within a few milliseconds; wait for this much quiet
# before grading, but never group changes for longer than DEBOUNCE_MS. (watchfiles looks every
# QUIET_MS and yields once a look finds nothing new: a save waits one to two of them.)
QUIET_MS = 50
DEBOUNCE_MS = 1600
POLL_DELAY_MS = 300
# How often the watcher hands control back while nothing changes (it yields an empty set).
WAKE_MS = 1000


def iter_changes(
    paths: Iterable[Path],
    *,
    force_polling: bool | None,
    on_fallback: Callable[[Exception], None],
    timeout_ms: int | None = None,
) -> Iterator[set[Path]]:
    """Sets of changed paths under `paths`, one set per debounced burst of changes.

    With `timeout_ms`, an empty set is yielded after that long without changes (so a caller can
    look up between changes). When notifications cannot be set up, `on_fallback(error)` is
    called and polling takes over; with force_polling True, such an error is raised instead.
    """
    import watchfiles

    paths = [str(path) for path in paths]
    options = {
        "debounce": DEBOUNCE_MS,
        "step": QUIET_MS,
        "poll_delay_ms": POLL_DELAY_MS,
        "raise_interrupt": True,
    }
    if timeout_ms is not None:
        options.update(rust_timeout=timeout_ms, yield_on_timeout=True)
    try:
        for changes in watchfiles.watch(*paths, force_polling=force_polling, **options):
            yield {Path(path) for _, path in changes}
        return
    except (OSError, RuntimeError) as exc:  # watchfiles' internal error is a RuntimeError
        if force_polling:
            raise
        on_fallback(exc)
    for changes in watchfiles.watch(*paths, force_polling=True, **options):
        yield {Path(path) for _, path in changes}


def changed_lessons(course: Course, paths: Iterable[Path], lessons: list[Lesson]) -> dict[str, list[str]]:
    """{lesson id: names of its changed graded files} among `lessons`, in course order."""
    root = exercises_dir(course).resolve()
    folders = {lesson.folder: lesson for lesson in lessons}
    found: dict[str, set[str]] = {}
    for path in paths:
        try:
            rel = Path(path).resolve().relative_to(root)
        except (ValueError, OSError):
            continue
        if len(rel.parts) < 2 or rel.parts[0] not in folders:
            continue
        inside = Path(*rel.parts[1:])
        if is_graded_input(inside):
            found.setdefault(folders[rel.parts[0]].id, set()).add(inside.as_posix())
    return {lesson.id: sorted(found[lesson.id]) for lesson in course.lessons if lesson.id in found}


# --- what a save changed -----------------------------------------------------------------------


@dataclass(frozen=True)
class Unit:
    """A part of a lesson judged on its own while the rest is graded: a TODO, or the quiz
    (`todo` None), with the ids of its checks (informational ones left out)."""

    todo: str | None
    checks: tuple[str, ...]


def read_inputs(course: Course, lesson: Lesson) -> dict[str, str]:
    """{name: text} of the lesson's graded files as saved now (missing ones left out)."""
    texts = {}
    for name in lesson.handed_in:
        try:
            texts[name] = (lesson_dir(course, lesson) / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            pass
    return texts


def edited_todos(
    lesson: Lesson, before: dict[str, str], after: dict[str, str], stubs: Path | None
) -> list[str]:
    """The TODOs holding a line that changed from `before` to `after` ({name: text}), in file
    order: the new lines in the saved file, the old ones (a deletion) in the previous one, each
    placed by blame.todo_at against the stub in `stubs`; "quiz" first when the quiz changed."""
    from autograder.engine import blame

    found: list[str] = []
    if lesson.quiz and before.get(lesson.quiz) != after.get(lesson.quiz):
        found.append("quiz")
    for name in lesson.files:
        old, new = before.get(name), after.get(name)
        if old is None or new is None or old == new:
            continue
        todos = {todo.id for todo in lesson.todos if todo.file == name}
        stub = blame.read_text(stubs / name) if stubs is not None else None
        old_rows, new_rows = old.splitlines(), new.splitlines()
        matcher = difflib.SequenceMatcher(None, old_rows, new_rows, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                continue
            places = [(new, n) for n in range(j1, j2)] + [(old, n) for n in range(i1, i2)]
            for text, n in places:
                todo = blame.todo_at(text, n + 1, stub, todos)
                if todo is not None and todo not in found:
                    found.append(todo)
    return found


def units_of(lesson: Lesson, todos: Iterable[str]) -> list[Unit]:
    """The units of `todos` ("quiz": the quiz) that have checks, in that order."""
    units = []
    for todo in todos:
        if todo == "quiz":
            checks = tuple(s.id for s in lesson.checks if s.todo is None and lesson.is_quiz_check(s.id))
            unit = Unit(None, checks)
        else:
            unit = Unit(todo, tuple(s.id for s in lesson.checks if s.todo == todo and not s.informational))
        if unit.checks:
            units.append(unit)
    return units


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
