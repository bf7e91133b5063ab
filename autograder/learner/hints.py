"""`autograder hint LESSON [TODO] [--level N]`: progressive hints, one TODO at a time.

Each lesson keeps its hints beside its other learner text, in pistas.yml (written in
solutions/NN-slug/ and copied to exercises/ by `autograder stubs`, like the README):

    scaling:            # a TODO id of the lesson in course.yml
      es:               # three levels per language, from a nudge to nearly the answer;
        - "..."         # never a line of the solution (a project test enforces it)
        - "..."
        - "..."
      en: [...]

The first `hint 03 scaling` shows level 1, each later call the next level, up to 3; --level N
shows level N. The level reached is remembered per TODO in .autograder/state.json. Without a
TODO, the hint is for the lesson's next step: remembered from the last `check` or `watch`
while the lesson's files are unchanged, else found by grading the lesson now.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from autograder.core import i18n, yaml_loader
from autograder.core.manifest import Course, Lesson
from autograder.learner.check import grade_lessons
from autograder.learner.folders import HINTS_FILE, LearnerError, lesson_dir, resolve_lessons
from autograder.learner.steps import describe_step, locate_step
from autograder.learner.store import LocalStore, known_step, record_result
from autograder.learner.terminal import Spinner, t, terminal_width

LEVELS = 3


class HintError(ValueError):
    """A hints file is missing, unreadable or malformed; the message names the file and field."""


def hints_path(course: Course, lesson: Lesson) -> Path:
    return lesson_dir(course, lesson) / HINTS_FILE


def read_hints(path: Path) -> Any:
    """The parsed YAML of a hints file; HintError when it cannot be read."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise HintError(f"{path}: not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise HintError(f"{path}: cannot be read ({exc})") from None
    try:
        return yaml_loader.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise HintError(f"{path}: invalid YAML{where}: {getattr(exc, 'problem', None) or exc}") from None


def entry_problems(data: Any, todo: str) -> list[str]:
    """What is wrong with one TODO's hints (empty: it has LEVELS non-empty texts per language)."""
    if not isinstance(data, dict):
        return ["the file must be a mapping of TODO ids to hints"]
    if todo not in data:
        return [f"{todo}: no hints for this TODO"]
    entry = data[todo]
    if not isinstance(entry, dict):
        return [f"{todo}: expected a mapping with the languages {', '.join(i18n.LANGUAGES)}"]
    problems = [f"{todo}.{lang}: missing" for lang in i18n.LANGUAGES if lang not in entry]
    problems += [
        f"{todo}.{key}: unknown language (expected {', '.join(i18n.LANGUAGES)})"
        for key in entry
        if key not in i18n.LANGUAGES
    ]
    for lang in i18n.LANGUAGES:
        levels = entry.get(lang)
        if lang not in entry:
            continue
        if not isinstance(levels, list):
            problems.append(f"{todo}.{lang}: expected a list of {LEVELS} hints")
        elif len(levels) != LEVELS:
            problems.append(f"{todo}.{lang}: expected {LEVELS} hints, found {len(levels)}")
        else:
            problems += [
                f"{todo}.{lang}[{i}]: expected a non-empty text"
                for i, level in enumerate(levels)
                if not isinstance(level, str) or not level.strip()
            ]
    return problems


def file_problems(data: Any, lesson: Lesson) -> list[str]:
    """Every problem of a lesson's hints file: each TODO of course.yml has LEVELS hints in each
    language, and there is nothing else."""
    if not isinstance(data, dict):
        return ["the file must be a mapping of TODO ids to hints"]
    todos = [todo.id for todo in lesson.todos]
    problems = [p for todo in todos for p in entry_problems(data, todo)]
    problems += [
        f"{key}: not a TODO of lesson {lesson.id} (its TODOs: {', '.join(todos)})"
        for key in data
        if key not in todos
    ]
    return problems


def load_lesson_hints(path: Path, lesson: Lesson) -> dict[str, dict[str, list[str]]]:
    """A lesson's hints, validated whole; HintError lists every problem."""
    data = read_hints(path)
    problems = file_problems(data, lesson)
    if problems:
        raise HintError(f"{path}: " + "; ".join(problems))
    return {
        todo: {lang: [text.strip() for text in data[todo][lang]] for lang in i18n.LANGUAGES} for todo in data
    }


def todo_hints(path: Path, todo: str, lang: str) -> list[str]:
    """One TODO's hints in one language. Only that entry must be valid: a learner is never
    refused a good hint because another TODO's entry is broken."""
    data = read_hints(path)
    problems = entry_problems(data, todo)
    if problems:
        raise HintError("; ".join(problems))
    return [text.strip() for text in data[todo][lang]]


# --- levels ------------------------------------------------------------------------------------


def next_level(state: dict[str, Any], lesson: Lesson, todo: str, asked: int | None) -> int:
    """The level to show: `asked`, else one more than the last shown (at most LEVELS)."""
    seen = state["hints"].get(lesson.id, {}).get(todo, 0)
    seen = seen if isinstance(seen, int) and 0 <= seen <= LEVELS else 0
    return asked if asked is not None else min(seen + 1, LEVELS)


def remember_level(state: dict[str, Any], lesson: Lesson, todo: str, level: int) -> None:
    lessons = state["hints"]
    if not isinstance(lessons.get(lesson.id), dict):
        lessons[lesson.id] = {}
    seen = lessons[lesson.id].get(todo, 0)
    lessons[lesson.id][todo] = max(level, seen if isinstance(seen, int) else 0)


# --- the command -------------------------------------------------------------------------------


def add_parser(sub) -> None:
    from autograder.core.results import message  # help texts are catalog messages (messages/<lang>/cli.yml)

    parser = sub.add_parser(
        "hint", help=message("cli.hint.help"), description=message("cli.hint.description", levels=LEVELS)
    )
    parser.add_argument("lesson", metavar=message("cli.metavar.lesson"), help=message("cli.hint.lesson"))
    parser.add_argument("todo", nargs="?", default=None, metavar="TODO", help=message("cli.hint.todo"))
    parser.add_argument(
        "--level", type=int, default=None, metavar="N", help=message("cli.hint.level", levels=LEVELS)
    )
    parser.add_argument("--lang", choices=i18n.LANGUAGES, default=None, help=message("cli.lang"))


def main(course: Course, args) -> int:
    lang = args.lang or course.language
    lesson = course.lesson(args.lesson)
    store = LocalStore(course.root)
    try:
        return _hint(course, lesson, args, lang, store)
    except LearnerError as exc:
        print(f"autograder hint: {exc}", file=sys.stderr)
        return 2


def _hint(course: Course, lesson: Lesson, args, lang: str, store: LocalStore) -> int:
    from autograder.render.output import make_console, printed, use_color

    if args.level is not None and not 1 <= args.level <= LEVELS:
        raise LearnerError(t("hint_bad_level", lang, level=args.level))
    resolve_lessons(course, [lesson.id], lang)  # its folder must be there
    color = use_color(sys.stdout)
    console, buffer = make_console(color, terminal_width(sys.stdout))
    todo = args.todo
    if todo is None:
        step = _current_step(course, lesson, lang, store)
        if step is None:
            example = lesson.todos[0].id if lesson.todos else "TODO"
            print(t("hint_lesson_done", lang, lesson=lesson.id, example=example))
            return 0
        if step.kind == "fix":  # a file that does not load: no TODO can be judged before it loads
            print(i18n.translate("errors.hint_first", lang, lesson=lesson.id))
            print("\n".join(describe_step(step, lang)))
            return 0
        if step.kind != "todo":
            print(t("hint_not_a_todo", lang, lesson=lesson.id))
            print("\n".join(describe_step(step, lang)))
            return 0
        todo = step.todo
        console.print(t("hint_for_step", lang, lesson=lesson.id, todo=todo), style="dim")
    known = [item.id for item in lesson.todos]
    if todo not in known:
        raise LearnerError(t("hint_unknown_todo", lang, lesson=lesson.id, todo=todo, todos=", ".join(known)))
    path = hints_path(course, lesson)
    shown_path = f"exercises/{lesson.folder}/{HINTS_FILE}"
    try:
        texts = todo_hints(path, todo, lang)
    except HintError as exc:
        if not path.exists():
            raise LearnerError(t("hint_no_file", lang, lesson=lesson.id, path=shown_path)) from None
        raise LearnerError(t("hint_bad_file", lang, path=shown_path, detail=str(exc))) from None

    state = store.load_state(lang)
    level = next_level(state, lesson, todo, args.level)
    store.update_state(lang, lambda fresh: remember_level(fresh, lesson, todo, level))

    from rich.padding import Padding
    from rich.text import Text as RichText

    title = i18n.localize(lesson.todo(todo).title, lang)
    console.print(RichText(t("hint_header", lang, todo=todo, title=title), style="bold"))
    path_in_repo, line = locate_step(course, lesson, todo, todo)
    where = f"{path_in_repo}:{line}" if line else path_in_repo
    console.print(RichText(t("hint_where", lang, where=where), style="dim"))
    console.print()
    console.print(RichText(t("hint_level", lang, level=level, total=LEVELS), style="bold cyan"))
    console.print(Padding(RichText(texts[level - 1]), (0, 0, 0, 2)))
    console.print()
    if level < LEVELS:
        command = f"autograder hint {lesson.id} {todo}"
        console.print(RichText(t("hint_more", lang, command=command), style="dim"))
    else:
        console.print(RichText(t("hint_last", lang), style="dim"))
    sys.stdout.write(printed(buffer).rstrip("\n") + "\n")
    return 0


def _current_step(course: Course, lesson: Lesson, lang: str, store: LocalStore):
    """The lesson's next step: remembered while its files are unchanged, else graded now."""
    known, step = known_step(course, lesson, store, lang)
    if known:
        return step
    with Spinner(sys.stderr.isatty()) as status:
        result = grade_lessons(course, [lesson], lang, status=status)
    return record_result(course, result, store, lang)[lesson.id]
