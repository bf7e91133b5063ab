"""`autograder check`, and what the learner's loop (check, watch, hint, progress) shares.

    autograder check [LESSON ...] [--lang es|en] [--seed N]

grades the lessons in exercises/ (the named ones, else every lesson whose folder is there) with
the hidden graders when they are available and otherwise with the lesson's practice tests (the
engine decides; this module says which), prints the usual result and ends with the ONE next
step: "Siguiente: TODO [scaling] en exercises/03-atencion-causal/attention.py:74".

The next step is the first failing check in the lesson's TODO order. A check that could not run
because an earlier TODO is still pending (the engine's `engine.todo_pending` message) counts for
that pending TODO, not for its own: the learner must write that one first. The step points at
the `# TODO [id]` comment of the TODO in the learner's file (autograder.github.steps.locate, the same line
GitHub annotations use), preferring the region that still raises NotImplementedError when a TODO
has several. A lesson without failing TODO checks points at its quiz or whole-lesson check; a
completed lesson points at the next lesson's README.

Local state lives in <course root>/.autograder/ (it ignores itself for git):
  history.jsonl  one record per grading, in the format of the `grades` branch
                 (autograder.core.history), so `progress` merges both with the same XP/streak rules
  state.json     the hint level reached per TODO and the last next step per lesson, keyed by a
                 digest of the lesson's files (so `hint` needs no new grading while nothing changed)
  figuras/       the attention matrix of a failing mask check as a PNG (the feedback names it)

`check` exits 0 whenever grading ran, whatever the score (like `grade`); 2 for bad input.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from autograder.core import i18n
from autograder.core.manifest import Course, Lesson, _shown as _shown_path
from autograder.core.files import CACHE_DIRS

STATE_DIR = ".autograder"
HISTORY_FILE = "history.jsonl"
STATE_FILE = "state.json"
FIGURES_DIR = "figuras"  # PNGs of the failing mask checks' attention matrices (autograder.render.figures)
STATE_VERSION = 1
# The files of a lesson folder that grading reads (the learner's code, quiz answers, practice
# tests): a change to one of them is worth a new grading, a change to a README is not.
GRADED_SUFFIXES = (".py", ".yml", ".yaml")
HINTS_FILE = "pistas.yml"  # the lesson's hints (autograder/learner/hints.py): learner text, never graded
BAR_WIDTH = 20


class LearnerError(Exception):
    """Bad input from the learner, already phrased in their language (exit 2)."""


def t(key: str, lang: str, **params: Any) -> str:
    return i18n.translate(f"learner.{key}", lang, **params)


# --- lessons on disk ---------------------------------------------------------------------------


def exercises_dir(course: Course) -> Path:
    return course.root / "exercises"


def lesson_dir(course: Course, lesson: Lesson) -> Path:
    return exercises_dir(course) / lesson.folder


def present_lessons(course: Course) -> list[Lesson]:
    """The lessons whose folder exists in exercises/, in course order."""
    return [lesson for lesson in course.lessons if lesson_dir(course, lesson).is_dir()]


def resolve_lessons(course: Course, keys: Iterable[str], lang: str) -> list[Lesson]:
    """The named lessons (each must have its folder), else every present one; in course order."""
    keys = list(keys)
    if not keys:
        lessons = present_lessons(course)
        if not lessons:
            raise LearnerError(t("no_lessons_present", lang, folder=_shown(course, exercises_dir(course)),
                                 example=f"exercises/{course.lessons[0].folder}/"))
        return lessons
    wanted = {course.lesson(key).id for key in keys}  # ManifestError names an unknown lesson
    lessons = [lesson for lesson in course.lessons if lesson.id in wanted]
    for lesson in lessons:
        if not lesson_dir(course, lesson).is_dir():
            raise LearnerError(t("lesson_folder_missing", lang, id=lesson.id,
                                 folder=_shown(course, lesson_dir(course, lesson))))
    return lessons


def is_graded_input(path: Path) -> bool:
    """Whether a file of a lesson folder is read by grading (see GRADED_SUFFIXES)."""
    return (path.suffix in GRADED_SUFFIXES and path.name != HINTS_FILE
            and not any(part in CACHE_DIRS for part in path.parts))


def lesson_digest(folder: Path) -> str:
    """A digest of the graded inputs of a lesson folder: equal digests, equal grading input."""
    digest = hashlib.sha256()
    if folder.is_dir():
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            rel = path.relative_to(folder)
            if is_graded_input(rel):
                digest.update(rel.as_posix().encode() + b"\0")
                try:
                    digest.update(path.read_bytes())
                except OSError:
                    digest.update(b"<unreadable>")
                digest.update(b"\0")
    return digest.hexdigest()


def _shown(course: Course, path: Path) -> str:
    """A path as the learner reads it: relative to the course root, posix."""
    try:
        return path.relative_to(course.root).as_posix()
    except ValueError:
        return str(path)


# --- the next step -----------------------------------------------------------------------------


@dataclass(frozen=True)
class NextStep:
    kind: str  # "todo" | "quiz" | "check" | "lesson" (the next lesson) | "done" (the course)
    lesson: Lesson | None
    todo: str | None = None
    check: str | None = None
    path: str | None = None  # posix, relative to the course root; None: nothing to open
    line: int | None = None  # None: the file has no line to point at (the TODO comment is gone)

    def where(self) -> str:
        return f"{self.path}:{self.line}" if self.line else str(self.path)

    def to_state(self) -> dict[str, Any]:
        return {"kind": self.kind, "todo": self.todo, "check": self.check}


def _failing(check) -> bool:
    from autograder.core.results import Status

    return check.status in (Status.FAILED, Status.ERROR) and not check.informational


def blocking_todo(check, todo_ids: list[str]) -> str | None:
    """The TODO a failing check waits on: the TODO whose code raised (results.RaisedIn: the
    learner's mistake, whichever check ran into it), the pending TODO the engine names in its
    feedback (a later check cannot run while an earlier TODO raises NotImplementedError), else
    its own."""
    raised = getattr(check, "raised_in", None)
    if raised is not None and raised.todo in todo_ids:
        return raised.todo
    waits = getattr(check, "waits_on", None)
    if waits in todo_ids:  # a grader said it cannot judge past that TODO's wrong result
        return waits
    pending = check.pending
    if pending is not None and pending.params.get("todo") in todo_ids:
        return pending.params["todo"]
    return check.todo if check.todo in todo_ids else None


def lesson_next_step(course: Course, lesson: Lesson, result) -> NextStep | None:
    """Where to work next in `lesson` after `result`; None when nothing in it is failing."""
    if result.completed:
        return None
    order = [todo.id for todo in lesson.todos]
    failing = [check for check in result.checks if _failing(check)]
    # An error the learner's code raised is the mistake to fix first, at the line that raised.
    raised = [(order.index(c.raised_in.todo), index, c) for index, c in enumerate(failing)
              if c.raised_in is not None and c.raised_in.todo in order and c.raised_in.line > 0
              and c.raised_in.file in lesson.files]
    if raised:
        _, _, check = min(raised, key=lambda item: item[:2])
        path = (Path("exercises") / lesson.folder / check.raised_in.file).as_posix()
        return NextStep("todo", lesson, todo=check.raised_in.todo, check=check.id, path=path,
                        line=check.raised_in.line)
    pointed = [(order.index(todo), index, check, todo) for index, check in enumerate(failing)
               if (todo := blocking_todo(check, order)) is not None]
    if pointed:
        _, _, check, todo = min(pointed, key=lambda item: item[:2])
        path, line = locate_step(course, lesson, todo, check.id)
        return NextStep("todo", lesson, todo=todo, check=check.id, path=path, line=line)
    if not failing:
        return None
    # No TODO to blame: the lesson-wide checks first, the quiz last (it needs no code).
    quiz = [c for c in failing if lesson.is_quiz_check(c.id)]
    check = next((c for c in failing if c not in quiz), None) or quiz[0]
    path, line = locate_step(course, lesson, None, check.id)
    return NextStep("quiz" if check in quiz else "check", lesson, check=check.id, path=path, line=line)


def next_step(course: Course, results: Iterable, completed: Iterable[str] = ()) -> NextStep:
    """The one next step after grading `results` (LessonResults): the first unfinished lesson's
    step, else the first lesson after the last one graded that is not `completed` (the ids the
    learner's history says are done), else the first such lesson before it; the course is done
    only when every lesson is."""
    by_id = {result.id: result for result in results}
    done = set(completed) | {result.id for result in by_id.values() if result.completed}
    last = -1
    for index, lesson in enumerate(course.lessons):
        if lesson.id in by_id:
            last = index
            step = lesson_next_step(course, lesson, by_id[lesson.id])
            if step is not None:
                return step
    for lesson in [*course.lessons[last + 1:], *course.lessons[:last + 1]]:
        if lesson.id not in done:
            return lesson_step(course, lesson)
    return NextStep("done", None)


def lesson_step(course: Course, lesson: Lesson) -> NextStep:
    """Start `lesson`: its README, when its folder is there."""
    readme = lesson_dir(course, lesson) / "README.md"
    if not lesson_dir(course, lesson).is_dir():
        return NextStep("lesson", lesson)
    target = readme if readme.is_file() else lesson_dir(course, lesson) / lesson.files[0]
    return NextStep("lesson", lesson, path=_shown(course, target))


def locate_step(course: Course, lesson: Lesson, todo: str | None, check_id: str) -> tuple[str, int | None]:
    """The file and line a step points at: ci.locate's answer (the `TODO [id]` comment, or the
    quiz question), refined to the region that still raises when a TODO has several; the line
    is None when the file no longer holds the marker (locate then says line 1)."""
    from autograder.github.steps import locate

    path, line = locate(course, lesson, todo, check_id, course.root)
    if todo in {t.id for t in lesson.todos}:
        needle = f"TODO [{todo}]"
    elif lesson.is_quiz_check(check_id):
        needle = f"pregunta_{check_id.split('-', 1)[1]}:"
    else:
        return path, None  # a lesson-wide check: the file, no particular line
    try:
        rows = (course.root / path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return path, None
    if todo is not None:
        pending = next((n for n, row in enumerate(rows) if f"{needle} pendiente" in row
                        and "NotImplementedError" in row), None)
        if pending is not None:
            comment = next((n for n in range(pending, -1, -1)
                            if needle in rows[n] and rows[n].lstrip().startswith("#")), pending)
            return path, comment + 1
    if not (1 <= line <= len(rows) and needle in rows[line - 1]):
        return path, None
    return path, line


def hint_command(step: NextStep) -> str | None:
    if step.kind != "todo" or step.lesson is None:
        return None
    return f"autograder hint {step.lesson.id} {step.todo}"


def describe_step(step: NextStep, lang: str) -> list[str]:
    """The next step in words: "Siguiente: TODO [scaling] en exercises/…/attention.py:74", and
    for a TODO a second line with its title and the command that gives a hint."""
    if step.kind == "todo":
        title = i18n.localize(step.lesson.todo(step.todo).title, lang)
        return [t("next_todo", lang, todo=step.todo, where=step.where()),
                "  " + t("next_todo_detail", lang, title=title, command=hint_command(step))]
    if step.kind == "quiz":
        return [t("next_quiz", lang, n=step.check.split("-", 1)[1], where=step.where())]
    if step.kind == "check":
        return [t("next_check", lang, check=step.check, where=step.where())]
    if step.kind == "lesson":
        title = i18n.localize(step.lesson.title, lang)
        if step.path is None:
            return [t("next_lesson_missing", lang, id=step.lesson.id, title=title,
                      folder=f"exercises/{step.lesson.folder}/")]
        return [t("next_lesson", lang, id=step.lesson.id, title=title, where=step.path)]
    return [t("course_done", lang)]


# --- local state: history and state.json -----------------------------------------------------


class LocalStore:
    """The learner's .autograder/ folder in the course root."""

    def __init__(self, root: Path, warn: Callable[[str], None] | None = None) -> None:
        self.folder = Path(root) / STATE_DIR
        self.history = self.folder / HISTORY_FILE
        self.state_path = self.folder / STATE_FILE
        self.warn = warn or (lambda text: print(text, file=sys.stderr))

    def _ensure_folder(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        ignore = self.folder / ".gitignore"
        if not ignore.exists():
            # The folder ignores itself, so a learner's `git add .` never commits it and the
            # repository's own .gitignore needs no entry.
            ignore.write_text("# Local state of `autograder` (history, hints); never committed.\n*\n",
                              encoding="utf-8")

    # figures ------------------------------------------------------------------------------
    def write_figures(self, result, lang: str) -> None:
        """Draw the failing checks' pictures into figuras/ (the feedback then names each file)."""
        from autograder.render.figures import write_figures

        try:
            self._ensure_folder()
            write_figures(result, self.folder / FIGURES_DIR, lang)
        except OSError as exc:
            self.warn(t("figures_not_saved", lang, path=_shown_path(self.folder / FIGURES_DIR),
                        detail=exc.strerror or exc))

    # history ------------------------------------------------------------------------------
    def append(self, record) -> None:
        """Append one record (raises OSError). One unbuffered write in append mode: two commands
        recording at once never interleave their lines."""
        from autograder.core.history import dump_line

        self._ensure_folder()
        data = dump_line(record).encode("utf-8")
        with open(self.history, "a+b", buffering=0) as fh:
            size = fh.seek(0, os.SEEK_END)
            if size:
                fh.seek(size - 1)
                if fh.read(1) != b"\n":
                    data = b"\n" + data  # never glue a record to a damaged last line
            fh.write(data)

    def records(self) -> tuple[list, list[str]]:
        """The records of the local history and the problems found (never raises on content)."""
        from autograder.core.history import parse_history

        try:
            text = self.history.read_bytes()
        except FileNotFoundError:
            return [], []
        except OSError as exc:
            return [], [str(exc)]
        return parse_history(text)

    # state.json ---------------------------------------------------------------------------
    def load_state(self, lang: str) -> dict[str, Any]:
        try:
            text = self.state_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return _empty_state()
        except (OSError, UnicodeDecodeError) as exc:
            return self._set_aside(exc, lang)
        try:
            state = json.loads(text)
        except json.JSONDecodeError as exc:
            return self._set_aside(exc, lang)
        if not (isinstance(state, dict) and isinstance(state.get("hints"), dict)
                and isinstance(state.get("next"), dict)):
            return self._set_aside(ValueError("not an autograder state file"), lang)
        return state

    def _set_aside(self, exc: Exception, lang: str) -> dict[str, Any]:
        # Keep the damaged file for the learner to look at: never overwrite what we cannot read.
        backup = self.state_path.with_name(f"{STATE_FILE}.{time.strftime('%Y%m%d-%H%M%S')}.broken")
        try:
            self.state_path.replace(backup)
        except OSError:
            pass
        self.warn(t("state_broken", lang, path=_shown_path(self.state_path), detail=str(exc)[:200],
                    backup=_shown_path(backup)))
        return _empty_state()

    def save_state(self, state: dict[str, Any]) -> None:
        self._ensure_folder()
        tmp = self.state_path.with_name(f"{STATE_FILE}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(state, indent=2, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
        tmp.replace(self.state_path)

    def update_state(self, lang: str, change: Callable[[dict[str, Any]], None]) -> None:
        """Read, change and write state.json; a state that cannot be written only warns."""
        state = self.load_state(lang)
        change(state)
        try:
            self.save_state(state)
        except OSError as exc:
            self.warn(t("history_not_saved", lang, path=_shown_path(self.state_path), detail=exc.strerror or exc))


def _empty_state() -> dict[str, Any]:
    return {"v": STATE_VERSION, "hints": {}, "next": {}}


# --- grading and recording ---------------------------------------------------------------------


def grade_lessons(course: Course, lessons: list[Lesson], lang: str, *, seed: int | None = None,
                  status: Any = None, **live: Any):
    """Grade the lessons' exercise folders with the engine (hidden graders, or practice tests
    where the graders are missing); `status` (a rich Status) shows which lesson is graded.
    `live`: engine.grade's first, on_check and on_worker (what `watch` shows while grading)."""
    from autograder.engine.grading import grade

    def advance(result) -> None:
        done = [lesson.id for lesson in lessons].index(result.id)
        if status is not None and done + 1 < len(lessons):
            status.update(t("grading", lang, id=lessons[done + 1].id))

    if status is not None:
        status.update(t("grading", lang, id=lessons[0].id))
    return grade(course, lessons, None, lang=lang, seed=seed, on_lesson=advance, **live)


def record_result(course: Course, result, store: LocalStore, lang: str) -> None:
    """Draw the failing checks' pictures, append the grading to the local history and remember
    each lesson's next step."""
    from autograder.core.history import Record
    from autograder.render.output import to_json_dict

    store.write_figures(result, lang)

    now = datetime.now(timezone.utc)
    # A local grading has no commit: its id is random (each grading is one record) and its
    # day is when it ran, the day the work was done.
    run_id = hashlib.sha1(os.urandom(20)).hexdigest()
    record = Record.from_results(to_json_dict(result, lang), commit=run_id, committed_at=now, graded_at=now)
    try:
        store.append(record)
    except OSError as exc:
        store.warn(t("history_not_saved", lang, path=_shown_path(store.history), detail=exc.strerror or exc))

    steps = {}
    for lesson_result in result.lessons:
        lesson = course.lesson(lesson_result.id)
        step = lesson_next_step(course, lesson, lesson_result)
        steps[lesson.id] = {"digest": lesson_digest(lesson_dir(course, lesson)), "mode": lesson_result.mode,
                            "step": step.to_state() if step else None}
    store.update_state(lang, lambda state: state["next"].update(steps))


def known_step(course: Course, lesson: Lesson, store: LocalStore, lang: str) -> tuple[bool, NextStep | None]:
    """The lesson's next step remembered from its last grading, if its files have not changed
    since: (True, step or None when it was complete), else (False, None)."""
    entry = store.load_state(lang)["next"].get(lesson.id)
    if not isinstance(entry, dict) or entry.get("digest") != lesson_digest(lesson_dir(course, lesson)):
        return False, None
    saved = entry.get("step")
    if saved is None:
        return True, None
    if not isinstance(saved, dict) or saved.get("kind") not in ("todo", "quiz", "check"):
        return False, None
    todo, check = saved.get("todo"), saved.get("check")
    if saved["kind"] == "todo" and todo not in {t.id for t in lesson.todos}:
        return False, None
    if not isinstance(check, str):
        return False, None
    path, line = locate_step(course, lesson, todo if saved["kind"] == "todo" else None, check)
    return True, NextStep(saved["kind"], lesson, todo=todo, check=check, path=path, line=line)


def earned_lessons(progress) -> set[str]:
    """The lessons whose XP the learner has earned (history.Progress; kept after a regression)."""
    return {lp.id for lp in progress.lessons if lp.earned} if progress is not None else set()


def completed_lessons(latest: dict) -> set[str]:
    """The lessons whose latest grading (progress.Gathered.latest) completed them."""
    return {lesson_id for lesson_id, entry in latest.items() if entry.completed}


def course_xp_max(course: Course) -> int:
    return sum(lesson.xp for lesson in course.lessons)


def bar(fraction: float, width: int = BAR_WIDTH) -> str:
    """A text bar: filled and empty cells are different characters, so it reads without colour."""
    fraction = min(max(fraction, 0.0), 1.0)
    filled = round(fraction * width)
    return "█" * filled + "░" * (width - filled)


def streak_text(days: int, lang: str) -> str:
    if days <= 0:
        return t("streak_none", lang)
    return t("streak_one", lang) if days == 1 else t("streak_many", lang, days=days)


def terminal_width(stream) -> int:
    try:
        return max(60, min(os.get_terminal_size(stream.fileno()).columns, 120)) if stream.isatty() else 100
    except (OSError, ValueError, AttributeError):
        return 100


def mode_lines(result, lang: str) -> list[str]:
    """Which graders graded: the hidden ones, or the practice tests (per lesson when mixed)."""
    modes: dict[str, list[str]] = {}
    for lesson in result.lessons:
        modes.setdefault(lesson.mode, []).append(lesson.id)
    if len(modes) == 1:
        return [t("mode_practice" if "practice" in modes else "mode_hidden", lang)]
    return [t("mode_hidden_lessons", lang, lessons=", ".join(modes.get("hidden", []))),
            t("mode_practice_lessons", lang, lessons=", ".join(modes.get("practice", [])))]


def render_footer(result, step: NextStep, progress, xp_max: int, lang: str, *, color: bool,
                  width: int = 100, earned_before: Iterable[str] = ()) -> str:
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
            console.print(RichText(t("lesson_done", lang, id=lesson.id, xp=lesson.xp_max), style="green"),
                          soft_wrap=True)
    # One line each, never re-wrapped: a path:line must stay whole for terminals to link it.
    lines = describe_step(step, lang)
    console.print(RichText(lines[0], style="bold cyan"), soft_wrap=True)
    for line in lines[1:]:
        console.print(RichText(line, style="cyan"), soft_wrap=True)
    if progress is not None:
        console.print(RichText(t("progress_line", lang, xp=progress.xp, xp_max=xp_max,
                                 streak=streak_text(progress.streak, lang)), style="dim"), soft_wrap=True)
    return printed(buffer)


class Spinner:
    """A transient "grading lesson 03…" line on stderr in a terminal; nothing when redirected."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._status = None

    def __enter__(self):
        if self.enabled:
            from rich.console import Console

            self._status = Console(stderr=True).status("")
            self._status.start()
        return self._status

    def __exit__(self, *exc) -> None:
        if self._status is not None:
            self._status.stop()


# --- the command -------------------------------------------------------------------------------


def add_parser(sub) -> None:
    from autograder.core.results import message  # help texts are catalog messages (messages/<lang>/cli.yml)

    parser = sub.add_parser("check", help=message("cli.check.help"), description=message("cli.check.description"))
    parser.add_argument("lessons", nargs="*", metavar=message("cli.metavar.lesson"), help=message("cli.check.lessons"))
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
    from autograder.learner.progress import gather

    store = LocalStore(course.root)
    earned_before = earned_lessons(gather(course, store, fetch=False).progress)
    with Spinner(sys.stderr.isatty()) as status:
        result = grade_lessons(course, lessons, lang, seed=args.seed, status=status)
    record_result(course, result, store, lang)
    known = gather(course, store, fetch=False)
    step = next_step(course, result.lessons, completed_lessons(known.latest))
    color = use_color(sys.stdout)
    width = terminal_width(sys.stdout)
    text = render_text(result, lang, color=color, width=width, earned=earned_before,
                       verbose=args.verbose).rstrip("\n") + "\n\n"
    text += render_footer(result, step, known.progress, course_xp_max(course), lang,
                          color=color, width=width, earned_before=earned_before)
    # A learner's code may have read this process's environment; never echo a secret.
    sys.stdout.write(redact(text.rstrip("\n") + "\n", secrets_from_environ(os.environ)))
    sys.stdout.flush()
    return 0
