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

The term (issue 32): the optional `term` block (which submission counts, the grace, the default
late policy) and each lesson's `due` and `late` become `Course.term`, `Lesson.due` (a UTC
instant) and `Lesson.late`. A due date is a wall-clock time in the course's `timezone`, turned
into an instant with zoneinfo: a time the clocks skip (the hour lost when summer time starts) is
an error naming the line; a time they show twice (the hour repeated when it ends) is its first
occurrence, the earlier instant. A day is 24 hours of elapsed time, across a DST change too.
A problem in these fields names the file, the LINE and the field (`course.yml:12:
lessons[0].due: ...`), in words from the catalogs (messages/<lang>/term.yml), in the language of
$AUTOGRADER_LANG, else of the course; the rest of this module's messages are English, as above.
What the deadlines mean for a grade is autograder/term/'s (deadlines, policy, counting).
"""

from __future__ import annotations

import json
import os
import re
import zoneinfo
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import yaml

from autograder.core import i18n, yaml_loader
from autograder.core.files import display_path
from autograder.core.json_schema import ValidationError, best_match, schema, validator
from autograder.core.results import Text, message

__all__ = [
    "ENV_VAR",
    "SCHEMA_PATH",
    "NO_TERM",
    "REFUSED",
    "CheckSpec",
    "Course",
    "LatePolicy",
    "Lesson",
    "ManifestError",
    "Term",
    "Todo",
    "WallTimeError",
    "find_course_file",
    "format_duration",
    "load_course",
    "parse_duration",
    "parse_wall_time",
    "wall_time",
]

COURSE_FILE = "course.yml"
ENV_VAR = "AUTOGRADER_COURSE"
SCHEMA_PATH = Path(__file__).with_name("course.schema.json")
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]
# Reserved region id for quiz answers in solution files (see stubs.py); never a todo id.
QUIZ_REGION = "quiz"


class ManifestError(Exception):
    """course.yml is missing or invalid, or something asked for isn't in it."""


# --- the term's model (issue 32): plain data, read by autograder/term/ --------------------------


@dataclass(frozen=True)
class LatePolicy:
    """What happens to a submission after its due date (+ the grace): course.schema.json's
    `latePolicy`. autograder/term/policy.py computes a submission's lateness from it."""

    accepted: bool  # False: nothing after due (+ grace) counts
    period: timedelta = timedelta(0)  # how long after due a late submission is still accepted
    per: str | None = None  # "hour" | "day": the penalty is per started unit
    percent: float = 0.0  # penalty per started unit, % of the earned points
    floor: float = 0.0  # % of the earned points a late submission always keeps (0..100)

    @property
    def unit(self) -> timedelta | None:
        """The penalty's unit as elapsed time (a day is 24 hours); None when not accepted."""
        return {"hour": timedelta(hours=1), "day": timedelta(days=1)}.get(self.per or "")


REFUSED = LatePolicy(accepted=False)  # the default: a late submission does not count


@dataclass(frozen=True)
class Term:
    """course.yml's `term` block: which accepted submission counts, the grace for Actions'
    queueing, and the late policy of every lesson that does not set its own."""

    counting: str = "latest"  # "latest" | "best"
    grace: timedelta = timedelta(minutes=10)
    late: LatePolicy = REFUSED


NO_TERM = Term()  # a course.yml without `term`: the schema's defaults (a test keeps them equal)


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
    # The due date as a UTC instant (written as a wall-clock time in the course's zone); None:
    # no deadline. `late`: this lesson's own late policy, None for the term's (Course.late_policy).
    due: datetime | None = None
    late: LatePolicy | None = None

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
    term: Term = field(default=NO_TERM)

    def late_policy(self, lesson: Lesson) -> LatePolicy:
        """The late policy of `lesson`: its own `late`, else the term's."""
        return lesson.late if lesson.late is not None else self.term.late

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
    text = _read(path, shown, origin)
    data = _parse_yaml(text, shown)
    problems = _schema_problems(data)
    if not problems:  # the semantic checks assume the shapes the schema guarantees
        problems = _semantic_problems(data)
    if problems:
        raise ManifestError(_report(problems, shown, text, data))
    return _build(data, path.resolve().parent)


def _report(problems: list[tuple[str, str | Text]], shown: str, text: str, data: Any) -> str:
    """Every problem, one a line. A term problem (a catalog Text) also names its line, found
    from the YAML node tree, composed only here: a good course.yml never pays for it."""
    tree = _node_tree(text) if any(isinstance(msg, Text) for _, msg in problems) else None
    lang = _language(data)
    lines = []
    for where, msg in problems:
        if isinstance(msg, Text):
            line = _node_line(tree, _path_of(where))
            lines.append(_format(f"{shown}:{line}" if line else shown, where, i18n.localize(msg, lang)))
        else:
            lines.append(_format(shown, where, msg))
    return "\n".join(lines)


def _language(data: Any) -> str:
    """The language of the term's messages: $AUTOGRADER_LANG's, else the course's, else Spanish
    (cli_language's order, without --lang, which core never sees)."""
    wanted = os.environ.get("AUTOGRADER_LANG", "").strip()
    if wanted in i18n.LANGUAGES:
        return wanted
    course_language = data.get("language") if isinstance(data, dict) else None
    return course_language if course_language in i18n.LANGUAGES else i18n.DEFAULT_LANGUAGE


def _node_tree(text: str) -> Any:
    loader = yaml_loader.SafeLoader(text)
    try:
        return loader.get_single_node()
    except yaml.YAMLError:  # it parsed a moment ago; without a tree, no line is named
        return None
    finally:
        loader.dispose()


def _path_of(where: str) -> list[str | int]:
    """lessons[0].late.period -> ["lessons", 0, "late", "period"] (the inverse of _where)."""
    return [int(index) if index else name for name, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", where)]


def _node_line(node: Any, path: list[str | int]) -> int | None:
    """The 1-based line of the deepest node of `path` in the tree (the key's line for a
    mapping's value, which is where the field is written)."""
    line = None
    for key in path:
        if isinstance(node, yaml.MappingNode):
            found = next(
                (
                    pair
                    for pair in node.value
                    if isinstance(pair[0], yaml.ScalarNode) and pair[0].value == key
                ),
                None,
            )
            if found is None:
                break
            line, node = found[0].start_mark.line + 1, found[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            break
    return line


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
    return [_term_problem(e) or (_where(e.absolute_path), _describe(e)) for e in ordered]


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


def _semantic_problems(data: dict[str, Any]) -> list[tuple[str, str | Text]]:
    problems: list[tuple[str, str | Text]] = []
    tz_problem = _timezone_problem(data["timezone"])
    if tz_problem:
        problems.append(("timezone", tz_problem))
    else:
        problems += _term_problems(data)
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


# --- the term: due dates, durations, late policies ----------------------------------------------

_DURATION = re.compile(r"([0-9]+)([mhd])")
_DURATION_UNITS = {"m": timedelta(minutes=1), "h": timedelta(hours=1), "d": timedelta(days=1)}
_WALL_TIME = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})[ T]([0-9]{2}):([0-9]{2})(?::([0-9]{2}))?")
# A term field's schema rule, by the field's name (the last name in its path), in the catalogs.
_TERM_RULES = {
    "due": "term.rule_due",
    "grace": "term.rule_duration",
    "period": "term.rule_duration",
    "counting": "term.rule_counting",
    "per": "term.rule_per",
    "percent": "term.rule_percent",
    "floor": "term.rule_floor",
    "accepted": "term.rule_accepted",
    "late": "term.rule_late",
    "penalty": "term.rule_penalty",
    "term": "term.rule_term",
}


class WallTimeError(ValueError):
    """A due date that is no wall-clock time of the course's zone. `text` is the catalog
    message (term.yml) saying why; `kind` is "format", "calendar", "nonexistent" or "no-zone"."""

    def __init__(self, kind: str, text: Text) -> None:
        super().__init__(kind)
        self.kind = kind
        self.text = text


def parse_duration(text: str) -> timedelta:
    """'90m', '36h', '3d' (a whole number and one unit; a day is 24 hours) as a timedelta;
    ValueError for anything else."""
    found = _DURATION.fullmatch(text) if isinstance(text, str) else None
    if found is None:
        raise ValueError(f"{text!r} is not a duration such as 90m, 36h or 3d")
    return int(found[1]) * _DURATION_UNITS[found[2]]


def format_duration(value: timedelta) -> str:
    """A duration as course.yml writes it, in the largest unit that divides it ('2d', '36h')."""
    minutes = int(value.total_seconds() // 60)
    for unit, size in (("d", 24 * 60), ("h", 60)):
        if minutes and minutes % size == 0:
            return f"{minutes // size}{unit}"
    return f"{minutes}m"


def parse_wall_time(text: str) -> datetime:
    """'2026-12-20 23:59' (seconds optional, T allowed for the space) as a naive datetime;
    WallTimeError ("format" or "calendar") otherwise."""
    found = _WALL_TIME.fullmatch(text) if isinstance(text, str) else None
    if found is None:
        raise WallTimeError(
            "format", message("term.bad_value", value=str(text), rule=message("term.rule_due"))
        )
    try:
        return datetime(*(int(part) for part in found.groups(default="0")))
    except ValueError:
        raise WallTimeError("calendar", message("term.not_a_calendar_date", value=text)) from None


def wall_time(text: str, zone: str) -> datetime:
    """The UTC instant of the wall-clock time `text` in the IANA `zone`. A time the clocks skip
    (spring forward) is a WallTimeError ("nonexistent"); a time they show twice (fall back) is
    its first occurrence, the earlier instant (summer time)."""
    naive = parse_wall_time(text)
    try:
        tz = zoneinfo.ZoneInfo(zone)
    except (KeyError, ValueError, OSError):
        raise WallTimeError("no-zone", message("term.no_tzdata", value=text, zone=zone)) from None
    first = naive.replace(tzinfo=tz, fold=0).astimezone(timezone.utc)
    second = naive.replace(tzinfo=tz, fold=1).astimezone(timezone.utc)
    if first.astimezone(tz).replace(tzinfo=None) != naive:
        # In a gap zoneinfo reads the time with the offset from before the change: that
        # instant, shown after the jump, is the time to suggest.
        after = first.astimezone(tz).strftime("%Y-%m-%d %H:%M")
        raise WallTimeError(
            "nonexistent", message("term.nonexistent_time", value=text, zone=zone, after=after)
        )
    return min(first, second)


def _is_term_path(path: list[str | int]) -> bool:
    """Whether a field belongs to the term: the `term` block, a lesson's due or late."""
    return bool(path) and (
        path[0] == "term" or (len(path) > 2 and path[0] == "lessons" and path[2] in ("due", "late"))
    )


def _term_problem(error: ValidationError) -> tuple[str, Text] | None:
    """A schema error in a term field as (where, catalog message); None for any other field.
    An unknown field is named in `where` itself, so that its own line is the one shown."""
    path = list(error.absolute_path)
    if not _is_term_path(path):
        return None
    instance, rule_of = error.instance, error.schema if isinstance(error.schema, dict) else {}
    if error.validator == "additionalProperties" and isinstance(instance, dict):
        allowed = rule_of.get("properties", {})
        unknown = next((key for key in instance if key not in allowed), "?")
        return _where([*path, unknown]), message(
            "term.unknown_field", field=unknown, allowed=_listing(allowed)
        )
    return _where(path), _term_text(error, path, instance)


def _term_text(error: ValidationError, path: list[str | int], instance: Any) -> Text:
    name = next((str(key) for key in reversed(path) if isinstance(key, str)), "term")
    if error.validator == "required" and isinstance(instance, dict):
        missing = next((key for key in error.validator_value if key not in instance), "?")
        return message(
            "term.missing_field", field=missing, rule=message(_TERM_RULES.get(missing, "term.rule_late"))
        )
    if error.validator in ("oneOf", "maxProperties", "not"):  # the two forms of a late policy
        name = "late"
    # An unquoted timestamp is a date to YAML: shown as written, the rule says to quote it.
    shown = str(instance) if isinstance(instance, (str, date)) else json.dumps(instance, ensure_ascii=False)
    return message("term.bad_value", value=shown, rule=message(_TERM_RULES.get(name, "term.rule_term")))


def _term_problems(data: dict[str, Any]) -> list[tuple[str, str | Text]]:
    """What the schema cannot say of the term: a due date exists in the course's zone, a late
    period is longer than 0."""
    problems: list[tuple[str, str | Text]] = []
    policies = [("term.late", (data.get("term") or {}).get("late"))]
    for i, lesson in enumerate(data["lessons"]):
        if "due" in lesson:
            try:
                wall_time(lesson["due"], data["timezone"])
            except WallTimeError as exc:
                problems.append((f"lessons[{i}].due", exc.text))
        policies.append((f"lessons[{i}].late", lesson.get("late")))
    for where, policy in policies:
        if policy and "period" in policy and parse_duration(policy["period"]) <= timedelta(0):
            problems.append((f"{where}.period", message("term.period_zero")))
    return problems


def _policy(raw: dict[str, Any] | None) -> LatePolicy | None:
    if raw is None:
        return None
    if raw.get("accepted") is False:
        return REFUSED
    return LatePolicy(
        accepted=True,
        period=parse_duration(raw["period"]),
        per=raw["penalty"]["per"],
        percent=float(raw["penalty"]["percent"]),
        floor=float(raw.get("floor", 0)),
    )


def _term(data: dict[str, Any]) -> Term:
    raw = data.get("term")
    if raw is None:
        return NO_TERM
    return Term(
        counting=raw.get("counting", NO_TERM.counting),
        grace=parse_duration(raw["grace"]) if "grace" in raw else NO_TERM.grace,
        late=_policy(raw.get("late")) or NO_TERM.late,
    )


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
            due=wall_time(raw["due"], data["timezone"]) if "due" in raw else None,
            late=_policy(raw.get("late")),
        )
        for raw in data["lessons"]
    )
    return Course(data["course"], data["language"], data["timezone"], lessons, root, _term(data))


# --- small helpers ---------------------------------------------------------------------------


def _where(path: Iterable[str | int]) -> str:
    """A field path as written in messages: lessons[0].checks[3].points."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _format(shown: str, where: str, text: str) -> str:
    return f"{shown}: {where}: {text}" if where else f"{shown}: {text}"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _listing(items: Iterable[str]) -> str:
    items = list(items)
    return ", ".join(items) if items else "(none)"
