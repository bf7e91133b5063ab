"""The course manifest: finding course.yml, validating it, and the typed model built from it.

course.yml is the one description of the course; everything else (the check list, points,
XP, the exercise stubs) is derived from it. This module is machinery for the engine and for
the course's developers, so its messages are in English. A bad manifest is reported as a
`ManifestError` that names the file and the field (`course.yml: lessons[0].checks[3].points:
'x' is not of type 'number'`), every problem at once.

Which course.yml (first match wins):
  1. the `path` given to `load_course`;
  2. the environment variable AUTOGRADER_COURSE (a path to a course.yml);
  3. course.yml in the current directory or one of its parents;
  4. course.yml at the repository root, next to the autograder package.

Validation: YAML (safe_load only), then autograder/core/course.schema.json (where every field is
documented), then what a schema cannot say: the time zone exists; lesson ids and slugs,
todo ids and check ids are unique; a check's todo is one of its lesson's todos; a todo's
file is one of its lesson's files; an informational check is worth 0 points; a lesson `uses`
only earlier lessons.
"""

from __future__ import annotations

import os
import zoneinfo
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from autograder.core import yaml_loader
from autograder.core.files import display_path
from autograder.core.json_schema import ValidationError, best_match, schema, validator

__all__ = [
    "ENV_VAR",
    "SCHEMA_PATH",
    "CheckSpec",
    "Course",
    "Lesson",
    "ManifestError",
    "Todo",
    "find_course_file",
    "load_course",
]

COURSE_FILE = "course.yml"
ENV_VAR = "AUTOGRADER_COURSE"
SCHEMA_PATH = Path(__file__).with_name("course.schema.json")
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]
# Reserved region id for quiz answers in solution files (see stubs.py); never a todo id.
QUIZ_REGION = "quiz"


class ManifestError(Exception):
    """course.yml is missing or invalid, or something asked for isn't in it."""


@dataclass(frozen=True)
class Todo:
    id: str
    file: str
    title: dict[str, str]  # {"es": ..., "en": ...}


@dataclass(frozen=True)
class CheckSpec:
    id: str
    todo: str | None  # None: a check of the lesson as a whole
    points: float
    timeout: float  # seconds for the check itself, not counting the worker's start
    # Reports without counting toward completion or XP (always 0 points): e.g. own-pieces.
    informational: bool = False


@dataclass(frozen=True)
class Lesson:
    id: str  # two digits, e.g. "03"
    slug: str
    section: dict[str, str]
    title: dict[str, str]
    minutes: int
    xp: int
    files: tuple[str, ...]
    quiz: str | None
    graders: str  # package under autograder/graders/
    todos: tuple[Todo, ...]
    checks: tuple[CheckSpec, ...]
    # Earlier lessons whose files this lesson's files import (graded against their reference).
    uses: tuple[str, ...] = ()

    @property
    def folder(self) -> str:
        """The lesson's folder name under exercises/ and solutions/, e.g. 03-atencion-causal."""
        return f"{self.id}-{self.slug}"

    @property
    def handed_in(self) -> tuple[str, ...]:
        """What a learner hands in for this lesson: its files, then its quiz answers file."""
        return (*self.files, *((self.quiz,) if self.quiz else ()))

    def is_quiz_check(self, check_id: str) -> bool:
        """Whether `check_id` is one of the lesson's quiz questions (quiz-1, quiz-2, ...)."""
        return bool(self.quiz) and check_id.startswith("quiz-")

    def todo(self, id: str) -> Todo:
        return self._find(self.todos, id, "todo")

    def check(self, id: str) -> CheckSpec:
        return self._find(self.checks, id, "check")

    def _find(self, items, id: str, kind: str):
        for item in items:
            if item.id == id:
                return item
        raise ManifestError(
            f"lesson {self.folder} has no {kind} {id!r}; its {kind}s: {_listing(i.id for i in items)}"
        )


@dataclass(frozen=True)
class Course:
    name: str
    language: str
    timezone: str
    lessons: tuple[Lesson, ...]
    root: Path  # the folder holding course.yml, exercises/ and solutions/

    def lesson(self, key: str | int) -> Lesson:
        """A lesson by id ("03", or "3"), slug ("atencion-causal") or folder ("03-atencion-causal")."""
        wanted = str(key).strip()
        for lesson in self.lessons:
            if wanted in (lesson.id, lesson.slug, lesson.folder):
                return lesson
        if wanted.isascii() and wanted.isdigit():
            for lesson in self.lessons:
                if int(lesson.id) == int(wanted):
                    return lesson
        raise ManifestError(
            f"unknown lesson {key!r}: name a lesson by its id, slug or folder; the course has "
            + _listing(f"{lsn.id} / {lsn.slug} / {lsn.folder}" for lsn in self.lessons)
        )


# --- finding and loading ---------------------------------------------------------------------


def find_course_file() -> Path:
    """The course.yml to use when none is given (see the module docstring for the order)."""
    return _locate()[0]


def load_course(path: Path | str | None = None) -> Course:
    """Load and validate a course.yml (found with `find_course_file` when `path` is None)."""
    if path is None:
        path, origin = _locate()
    else:
        path, origin = Path(path), None
    shown = display_path(path)
    data = _parse_yaml(_read(path, shown, origin), shown)
    problems = _schema_problems(data)
    if not problems:  # the semantic checks assume the shapes the schema guarantees
        problems = _semantic_problems(data)
    if problems:
        raise ManifestError("\n".join(_format(shown, where, msg) for where, msg in problems))
    return _build(data, path.resolve().parent)


def _locate() -> tuple[Path, str]:
    """The course.yml to use and where that choice came from (for 'not found' messages)."""
    from_env = os.environ.get(ENV_VAR, "").strip()
    if from_env:
        path = Path(from_env).expanduser()
        if path.is_dir():
            path = path / COURSE_FILE
        return path, f"from ${ENV_VAR}"
    cwd = Path.cwd()
    for folder in (cwd, *cwd.parents):
        if (folder / COURSE_FILE).is_file():
            return folder / COURSE_FILE, "found from the current directory"
    return _PACKAGE_ROOT / COURSE_FILE, (
        f"not in {cwd} or its parents, nor next to the autograder package; "
        f"run from the course repository or set {ENV_VAR}"
    )


def _read(path: Path, shown: str, origin: str | None) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ManifestError(f"{shown} not found" + (f" ({origin})" if origin else "")) from None
    except UnicodeDecodeError as exc:
        raise ManifestError(f"{shown}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise ManifestError(f"{shown}: cannot be read ({exc.strerror or exc})") from None


def _parse_yaml(text: str, shown: str) -> Any:
    try:
        data = yaml_loader.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        context = getattr(exc, "context", None)
        detail = f"{problem} ({context})" if context else problem
        if mark is None:
            raise ManifestError(f"{shown}: invalid YAML: {detail}") from None
        raise ManifestError(
            f"{shown}:{mark.line + 1}:{mark.column + 1}: invalid YAML at line {mark.line + 1}, "
            f"column {mark.column + 1}: {detail}"
        ) from None
    if data is None:
        raise ManifestError(f"{shown}: the file is empty; expected course, language, timezone and lessons")
    return data


# --- validation ------------------------------------------------------------------------------


def _default_timeout() -> float:
    # The default lives in the schema, next to the field's documentation.
    return schema(SCHEMA_PATH)["$defs"]["check"]["properties"]["timeout"]["default"]


def _schema_problems(data: Any) -> list[tuple[str, str]]:
    errors = list(validator(SCHEMA_PATH).iter_errors(data))
    if not errors:
        return []
    best = best_match(errors)
    ordered = [best] + [e for e in errors if e is not best]
    return [(_where(e.absolute_path), _describe(e)) for e in ordered]


def _describe(error: ValidationError) -> str:
    """jsonschema's message, plus what to do where the message alone would not say."""
    message = error.message
    instance, schema = error.instance, error.schema if isinstance(error.schema, dict) else {}
    if error.validator == "type" and error.validator_value == "string" and _is_number(instance):
        path = list(error.absolute_path)
        if path and path[-1] == "id" and isinstance(instance, int):
            message += f'; write it quoted, with two digits: id: "{instance:02d}"'
        else:
            message += "; quote it in YAML to make it a string"
    elif error.validator == "additionalProperties" and "properties" in schema:
        message += f"; allowed fields: {_listing(schema['properties'])}"
    elif error.validator == "pattern" and "description" in schema:
        # The description says it better than the regular expression does.
        message = f"{instance!r} is not valid here: {schema['description']}"
    return message


def _semantic_problems(data: dict[str, Any]) -> list[tuple[str, str]]:
    problems = []
    tz_problem = _timezone_problem(data["timezone"])
    if tz_problem:
        problems.append(("timezone", tz_problem))
    first_id: dict[str, int] = {}
    first_slug: dict[str, int] = {}
    for i, lesson in enumerate(data["lessons"]):
        at = f"lessons[{i}]"
        problems += _already(first_id, lesson["id"], i, "lessons", "id")
        problems += _already(first_slug, lesson["slug"], i, "lessons", "slug")
        for k, used in enumerate(lesson.get("uses", [])):
            if used not in first_id or first_id[used] >= i:
                problems.append(
                    (
                        f"{at}.uses[{k}]",
                        f"{used!r} is not the id of an earlier lesson; a lesson "
                        "can only build on lessons listed before it",
                    )
                )
        problems += _lesson_problems(lesson, at)
    return problems


def _already(seen: dict[str, int], value: str, index: int, where: str, key: str) -> list[tuple[str, str]]:
    """A problem when `value` was already the `key` of an earlier item of the list `where`;
    remembers where each value came first."""
    first = seen.setdefault(value, index)
    if first == index:
        return []
    return [(f"{where}[{index}].{key}", f"{value!r} is already the {key} of {where}[{first}]")]


def _lesson_problems(lesson: dict[str, Any], at: str) -> list[tuple[str, str]]:
    problems = []
    files = lesson["files"]
    todo_index: dict[str, int] = {}
    for j, todo in enumerate(lesson["todos"]):
        where = f"{at}.todos[{j}]"
        repeated = _already(todo_index, todo["id"], j, f"{at}.todos", "id")
        problems += repeated
        if not repeated and todo["id"] == QUIZ_REGION:
            problems.append(
                (f"{where}.id", f"{QUIZ_REGION!r} is reserved for quiz regions in solution files")
            )
        if todo["file"] not in files:
            problems.append(
                (f"{where}.file", f"{todo['file']!r} is not one of {at}.files ({_listing(files)})")
            )
    check_index: dict[str, int] = {}
    for j, check in enumerate(lesson["checks"]):
        where = f"{at}.checks[{j}]"
        problems += _already(check_index, check["id"], j, f"{at}.checks", "id")
        if check.get("informational") and check["points"] != 0:
            problems.append((f"{where}.points", "an informational check never counts: its points must be 0"))
        if check["todo"] is not None and check["todo"] not in todo_index:
            problems.append(
                (
                    f"{where}.todo",
                    f"{check['todo']!r} is not a todo of this lesson; "
                    f"use null or one of {_listing(todo_index)}",
                )
            )
    return problems


def _timezone_problem(name: str) -> str | None:
    try:
        zoneinfo.ZoneInfo(name)
        return None
    except (KeyError, ValueError, OSError):  # ZoneInfoNotFoundError is a KeyError
        if not zoneinfo.available_timezones():
            # No time zone database on this machine (Windows without the tzdata package):
            # the name cannot be judged here, and a learner's grading must not fail for it.
            return None
        return f"{name!r} is not a known IANA time zone name (e.g. Europe/Madrid, UTC)"


# --- building the model ----------------------------------------------------------------------


def _build(data: dict[str, Any], root: Path) -> Course:
    default_timeout = _default_timeout()
    lessons = tuple(
        Lesson(
            id=raw["id"],
            slug=raw["slug"],
            section=dict(raw["section"]),
            title=dict(raw["title"]),
            minutes=int(raw["minutes"]),
            xp=int(raw["xp"]),
            files=tuple(raw["files"]),
            quiz=raw.get("quiz"),
            graders=raw["graders"],
            todos=tuple(Todo(t["id"], t["file"], dict(t["title"])) for t in raw["todos"]),
            checks=tuple(
                CheckSpec(
                    c["id"],
                    c["todo"],
                    c["points"],
                    c.get("timeout", default_timeout),
                    bool(c.get("informational", False)),
                )
                for c in raw["checks"]
            ),
            uses=tuple(raw.get("uses", ())),
        )
        for raw in data["lessons"]
    )
    return Course(data["course"], data["language"], data["timezone"], lessons, root)


# --- small helpers ---------------------------------------------------------------------------


def _where(path: Iterable[str | int]) -> str:
    """A field path as written in messages: lessons[0].checks[3].points."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _format(shown: str, where: str, message: str) -> str:
    return f"{shown}: {where}: {message}" if where else f"{shown}: {message}"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _listing(items: Iterable[str]) -> str:
    items = list(items)
    return ", ".join(items) if items else "(none)"
