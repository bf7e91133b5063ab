"""The roster: the course's learners, one schema for every tool that reads it (grade-all,
handout; the grading service and the term's deadlines extend it, never fork it).

Canonical encoding, YAML (the fields are documented in roster.schema.json, next to this file):

    version: 1
    organization: curso-tdc              # where `autograder handout` creates the repositories
    template: curso-tdc/plantilla        # OWNER/REPO of the learner template
    repository_prefix: tdc-              # default repository: {organization}/{prefix}{github}
    learners:
      - id: ana                          # required: the name of the learner's grade files
        name: Ana García López           # or first_name / last_name
        email: ana@example.org
        github: ana-garcia               # the GitHub login
        repository: curso-tdc/tdc-ana-garcia   # written by handout (default as above)
        repository_id: 123456789               # written by handout: survives a rename
        url: https://github.com/curso-tdc/tdc-ana-garcia.git   # default from repository
        ref: entrega-1                   # what grade-all grades (default: the remote's HEAD)
    extensions:                          # optional: deadline extensions (issue 32)
      - {learner: ana, lesson: "03", due: "2026-12-27 23:59"}   # a new due date (course zone)
      - {learner: ana, lesson: all, extra: 2d}                   # or time added to every due date

CSV is a second encoding of the `learners` list alone (spreadsheets, LMS exports): a header row
of the same field names, case-insensitive, with grade-all's older aliases: student_id for id,
git_url for url, and repo or repository, which older CSV rosters used for the git URL. A cell of
a repo/repository column is told apart by its shape: OWNER/NAME is a repository, anything else
(https://..., git@host:...) a URL. Empty cells are absent fields. A CSV roster has no course-level
keys: `autograder handout` takes them from its command line.

Extensions: exactly one of due (a wall-clock time in course.yml's zone, kept as written here:
the zone is the course's) and extra (a duration); the learner must be in `learners`; one
extension per learner and lesson. Whether the lesson exists and has a due date needs course.yml:
autograder/term/deadlines.py checks that (check_extensions, called by due_dates) and raises this
module's RosterError. A CSV roster has no extensions, and no side file is read for them: a
deadline is course-level data, like `organization`, and an extension a file does not show
could silently change a grade. A course with extensions keeps its roster in YAML.

Every problem is a RosterError naming the file, the line and the field, and what to do; unknown
fields (typos) and an unknown `version` are errors; ids and e-mails a spreadsheet would read as
a formula are refused (core.neutral.formula_like).

Writing a roster (one learner's fields, in place, keeping comments and layout) is
roster_update.py's job.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml

from autograder.core.json_schema import ValidationError, schema, validator
from autograder.core.manifest import WallTimeError, format_duration, parse_duration, parse_wall_time
from autograder.core.neutral import formula_like
from autograder.core.results import Text, message
from autograder.core.yaml_loader import SafeLoader

__all__ = [
    "LEARNER_FIELDS",
    "LEARNER_ID",
    "SCHEMA_PATH",
    "VERSION",
    "Extension",
    "Learner",
    "Roster",
    "RosterError",
    "compose_yaml",
    "is_csv",
    "is_repository",
    "load",
    "parse",
    "valid_course_field",
    "valid_learner_id",
    "yaml_child",
]

SCHEMA_PATH = Path(__file__).with_name("roster.schema.json")
VERSION = 1
COURSE_FIELDS = ("organization", "template", "repository_prefix")
LEARNER_FIELDS = (
    "id",
    "name",
    "first_name",
    "last_name",
    "email",
    "github",
    "repository",
    "repository_id",
    "url",
    "ref",
)
# CSV header names (lower case) -> field; "repo" and "repository" are resolved per cell (_parse_csv).
CSV_ALIASES = {
    **{name: name for name in LEARNER_FIELDS},
    "student_id": "id",
    "git_url": "url",
    "repo": "repository",
}


def _pattern(*path: str) -> re.Pattern:
    node: Any = schema(SCHEMA_PATH)
    for key in path:
        node = node[key]
    return re.compile(
        node["pattern"][1:-1]
    )  # without ^ $: used with fullmatch, which a trailing \n cannot pass


# A learner id names files: letters (any script), digits and . _ @ + - only, not starting with a
# dot, a dash or another sign. The rule is written once, in the schema.
LEARNER_ID = _pattern("$defs", "learner", "properties", "id")
_REPOSITORY = _pattern("$defs", "repository")


def valid_learner_id(text: str) -> bool:
    return bool(LEARNER_ID.fullmatch(text))


def valid_course_field(field: str, value: str) -> bool:
    """Whether `value` is a valid course-level `field` (organization, template,
    repository_prefix) by the schema's rule: for values given on a command line."""
    probe = {"version": VERSION, field: value, "learners": []}
    return not any(True for _ in validator(SCHEMA_PATH).iter_errors(probe))


def is_repository(text: str) -> bool:
    """Whether `text` is a GitHub OWNER/NAME (not a URL)."""
    return bool(_REPOSITORY.fullmatch(text))


class RosterError(Exception):
    """A roster that cannot be used; `text` is a catalog message (messages/<lang>/batch.yml)
    naming the file, the line and the field, and what to do."""

    def __init__(self, key: str, **params: Any) -> None:
        super().__init__(key)
        self.text: Text = message(key, **params)


@dataclass(frozen=True)
class Learner:
    """One learner as the roster gives them: the fields as written (None where absent); the
    defaults that depend on the course (repository, url) are the Roster's to compute."""

    id: str
    name: str | None = None
    first_name: str | None = None
    last_name: str | None = None
    email: str | None = None
    github: str | None = None
    repository: str | None = None
    repository_id: int | None = None
    url: str | None = None
    ref: str | None = None
    line: int = dataclasses.field(default=0, compare=False)  # where the learner starts in the file

    @property
    def names(self) -> tuple[str, str]:
        """(first name, last name): `name` split at its first space, unless they are given."""
        if self.first_name or self.last_name:
            return (self.first_name or "").strip(), (self.last_name or "").strip()
        first, _, last = (self.name or "").strip().partition(" ")
        return first.strip(), last.strip()

    def fields(self) -> dict[str, Any]:
        """The fields given, in the schema's order."""
        return {name: getattr(self, name) for name in LEARNER_FIELDS if getattr(self, name) is not None}


@dataclass(frozen=True)
class Extension:
    """One learner's deadline extension for one lesson ("all": every lesson with a due date).
    `due` is the wall-clock text as written (the course's zone makes it an instant:
    term/deadlines.py); `extra` the time added to the course's due date."""

    learner: str
    lesson: str  # a two-digit lesson id or "all"
    due: str | None = None
    extra: timedelta | None = None
    line: int = dataclasses.field(default=0, compare=False)  # where it starts in the file

    def fields(self) -> dict[str, Any]:
        """The extension as the roster writes it."""
        out: dict[str, Any] = {"learner": self.learner, "lesson": self.lesson}
        if self.due is not None:
            out["due"] = self.due
        if self.extra is not None:
            out["extra"] = format_duration(self.extra)
        return out


@dataclass(frozen=True)
class Roster:
    path: Path
    encoding: str  # "yaml" or "csv"
    learners: tuple[Learner, ...]
    version: int = VERSION
    organization: str | None = None
    template: str | None = None
    repository_prefix: str | None = None
    csv_fields: frozenset[str] = frozenset()  # CSV: the fields its header can give
    csv_header: tuple[int, tuple[str, ...]] = (0, ())  # CSV: the header's line and cells
    csv_url_in_repository: bool = False  # CSV: a repo/repository cell held a git URL
    extensions: tuple[Extension, ...] = ()  # YAML only

    def extensions_of(self, ident: str) -> tuple[Extension, ...]:
        """The extensions of one learner, in the file's order."""
        return tuple(extension for extension in self.extensions if extension.learner == ident)

    def learner(self, ident: str) -> Learner:
        for learner in self.learners:
            if learner.id == ident:
                return learner
        raise KeyError(f"{self.path}: no learner with id {ident!r}")

    def repository(self, learner: Learner) -> str | None:
        """OWNER/NAME of the learner's repository: as written, else from the course's
        organization, prefix and the learner's GitHub user; None when neither is known."""
        if learner.repository:
            return learner.repository
        if self.organization and learner.github:
            return f"{self.organization}/{self.repository_prefix or ''}{learner.github}"
        return None

    def url(self, learner: Learner) -> str | None:
        """The git URL to fetch: as written, else GitHub's HTTPS URL of the repository."""
        if learner.url:
            return learner.url
        repository = self.repository(learner)
        return f"https://github.com/{repository}.git" if repository else None

    def shape(self) -> tuple:
        """What the roster says, without where it says it (line numbers, encoding)."""
        return (
            self.version,
            self.organization,
            self.template,
            self.repository_prefix,
            tuple(learner.fields() for learner in self.learners),
            tuple((e.learner, e.lesson, e.due, e.extra) for e in self.extensions),
        )

    def document(self) -> dict[str, Any]:
        """The roster as its canonical YAML document."""
        doc: dict[str, Any] = {"version": self.version}
        doc.update({name: getattr(self, name) for name in COURSE_FIELDS if getattr(self, name) is not None})
        doc["learners"] = [learner.fields() for learner in self.learners]
        if self.extensions:
            doc["extensions"] = [extension.fields() for extension in self.extensions]
        return doc


# ------------------------------------------------------------------------------ reading


def load(path: Path) -> Roster:
    """Read and validate a roster (YAML, or CSV by its .csv suffix); RosterError if unusable."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        text = raw.decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise RosterError("batch.roster_unreadable", where=str(path), detail=str(exc)) from None
    return parse(text, path)


def parse(text: str, path: Path) -> Roster:
    if is_csv(path):
        return _parse_csv(text, path)
    return _parse_yaml(text, path)


def is_csv(path: Path) -> bool:
    return Path(path).suffix.lower() == ".csv"


def _where(path: Path, line: int) -> str:
    return f"{path}:{line}"


# --- YAML


def compose_yaml(text: str, path: Path) -> tuple[Any, Any]:
    """(node tree, data) of a YAML document; the nodes keep the lines the errors name."""
    loader = SafeLoader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        raise RosterError(
            "batch.roster_yaml", where=_where(path, line), detail=" ".join(str(exc.problem or exc).split())
        ) from None
    except yaml.YAMLError as exc:
        raise RosterError(
            "batch.roster_yaml", where=_where(path, 1), detail=" ".join(str(exc).split())
        ) from None
    finally:
        loader.dispose()
    return node, data


def _line(node: Any) -> int:
    return node.start_mark.line + 1


def _pairs(node: Any) -> list[tuple[Any, Any]]:
    return list(node.value) if isinstance(node, yaml.MappingNode) else []


def yaml_child(node: Any, key: Any) -> tuple[Any, Any] | None:
    """(key node, value node) of a mapping's key, or (None, item node) of a sequence's index."""
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == str(key):
                return key_node, value_node
    elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
        return None, node.value[key]
    return None


def _parse_yaml(text: str, path: Path) -> Roster:
    node, data = compose_yaml(text, path)
    if data is None:
        raise RosterError("batch.roster_empty", where=str(path))
    if not isinstance(data, dict):
        raise RosterError("batch.roster_not_mapping", where=_where(path, _line(node)))
    _refuse_duplicate_keys(node, path)

    def line_of(at: list[Any], key_line: bool = False) -> int:
        current, line = node, _line(node)
        for key in at:
            found = yaml_child(current, key)
            if found is None:
                break
            key_node, current = found
            line = _line(key_node if key_line and key_node is not None else current)
        return line

    learners_node = (yaml_child(node, "learners") or (None, None))[1]
    items = learners_node.value if isinstance(learners_node, yaml.SequenceNode) else []
    lines = [_line(item) for item in items]
    extensions_node = (yaml_child(node, "extensions") or (None, None))[1]
    extension_lines = (
        [_line(item) for item in extensions_node.value]
        if isinstance(extensions_node, yaml.SequenceNode)
        else []
    )
    _check(data, path, line_of, lines, extension_lines)
    learners = tuple(_learner(item, line) for item, line in zip(data["learners"], lines))
    return Roster(
        path,
        "yaml",
        learners,
        data["version"],
        data.get("organization"),
        data.get("template"),
        data.get("repository_prefix"),
        extensions=tuple(
            Extension(
                item["learner"],
                item["lesson"],
                item.get("due"),
                parse_duration(item["extra"]) if "extra" in item else None,
                line,
            )
            for item, line in zip(data.get("extensions") or [], extension_lines)
        ),
    )


def _refuse_duplicate_keys(node: Any, path: Path) -> None:
    # PyYAML keeps the last of two equal keys without a word: a pasted learner would lose a field.
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, yaml.MappingNode):
            seen: set[str] = set()
            for key_node, value_node in current.value:
                if isinstance(key_node, yaml.ScalarNode):
                    if key_node.value in seen:
                        raise RosterError(
                            "batch.roster_field_twice",
                            where=_where(path, _line(key_node)),
                            field=key_node.value,
                        )
                    seen.add(key_node.value)
                stack.append(value_node)
        elif isinstance(current, yaml.SequenceNode):
            stack.extend(current.value)


def _learner(item: dict[str, Any], line: int) -> Learner:
    return Learner(**{name: item[name] for name in LEARNER_FIELDS if name in item}, line=line)


# --- CSV


def _csv_rows(text: str) -> list[tuple[int, list[str]]]:
    """(line where the row starts, cells) of every row with a non-blank cell."""
    reader = csv.reader(io.StringIO(text, newline=""))
    rows, start = [], 1
    for row in reader:
        if any(cell.strip() for cell in row):
            rows.append((start, row))
        start = reader.line_num + 1
    return rows


def _csv_header(path: Path, line: int, header: list[str]) -> list[str | None]:
    """Each column's field (None for a blank header cell over blank cells); unknown names are
    an error naming the column."""
    fields: list[str | None] = []
    for cell in header:
        name = cell.strip().lower()
        if not name:
            fields.append(None)
            continue
        if name not in CSV_ALIASES:
            raise RosterError(
                "batch.roster_unknown_field",
                where=_where(path, line),
                field=cell.strip(),
                allowed=", ".join(LEARNER_FIELDS),
            )
        fields.append(CSV_ALIASES[name])
    return fields


def _parse_csv(text: str, path: Path) -> Roster:
    try:
        rows = _csv_rows(text)
    except csv.Error as exc:
        raise RosterError("batch.roster_unreadable", where=str(path), detail=str(exc)) from None
    if not rows:
        raise RosterError("batch.roster_empty", where=str(path))
    header_line, header = rows[0]
    columns = _csv_header(path, header_line, header)
    if "id" not in columns:
        raise RosterError(
            "batch.roster_header",
            where=_where(path, header_line),
            missing="id",
            found=", ".join(cell.strip() for cell in header),
        )
    learners, lines, url_in_repository = [], [], False
    for line, row in rows[1:]:
        if len(row) > len(header) and any(cell.strip() for cell in row[len(header) :]):
            raise RosterError("batch.roster_extra_cells", where=_where(path, line))
        item: dict[str, Any] = {}
        for column, cell in zip(columns, row):
            # Spaces around a cell are layout; a leading tab or carriage return in an id or an
            # e-mail is kept, for the formula check to refuse.
            value = cell.lstrip(" ").rstrip() if column in ("id", "email") else cell.strip()
            if column is None or not value.strip():
                continue
            field = column
            if column == "repository" and not is_repository(value):
                field, url_in_repository = "url", True  # an older roster's git URL
            if field in item:
                raise RosterError("batch.roster_field_twice", where=_where(path, line), field=field)
            item[field] = int(value) if field == "repository_id" and value.isdigit() else value
        learners.append(item)
        lines.append(line)
    data = {"version": VERSION, "learners": learners}

    def line_of(at: list[Any], key_line: bool = False) -> int:
        return lines[at[1]] if len(at) > 1 and isinstance(at[1], int) else header_line

    _check(data, path, line_of, lines)
    return Roster(
        path,
        "csv",
        tuple(_learner(item, line) for item, line in zip(learners, lines)),
        csv_fields=frozenset(field for field in columns if field)
        | ({"url"} if "repository" in columns else set()),
        csv_header=(header_line, tuple(cell.strip() for cell in header)),
        csv_url_in_repository=url_in_repository,
    )


# --- validation


def _check(
    data: dict[str, Any], path: Path, line_of, lines: list[int], extension_lines: list[int] = ()
) -> None:
    """The first problem of the file (the one on the lowest line) as a RosterError."""
    problems: list[tuple[int, int, RosterError]] = []
    for index, item in enumerate(data.get("learners") if isinstance(data.get("learners"), list) else []):
        if not isinstance(item, dict):
            continue
        for field in ("id", "email"):
            value = item.get(field)
            if isinstance(value, str) and formula_like(value):
                line = line_of(["learners", index, field])
                problems.append(
                    (
                        line,
                        0,
                        RosterError(
                            "batch.roster_formula", where=_where(path, line), field=field, value=value
                        ),
                    )
                )
    for error in validator(SCHEMA_PATH).iter_errors(data):
        problems.append(_schema_problem(error, path, line_of))
    if not problems:
        problems = _semantic_problems(data["learners"], path, lines, line_of)
        problems += _extension_problems(data, path, extension_lines, line_of)
    if problems:
        raise min(problems, key=lambda problem: problem[:2])[2]


def _schema_problem(error: ValidationError, path: Path, line_of) -> tuple[int, int, RosterError]:
    at = list(error.absolute_path)
    instance = error.instance
    if error.validator == "additionalProperties" and isinstance(instance, dict):
        allowed = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
        unknown = next((key for key in instance if key not in allowed), "?")
        line = line_of([*at, unknown], key_line=True)
        return (
            line,
            1,
            RosterError(
                "batch.roster_unknown_field",
                where=_where(path, line),
                field=unknown,
                allowed=", ".join(allowed),
            ),
        )
    if error.validator == "required" and isinstance(instance, dict):
        missing = next((key for key in error.validator_value if key not in instance), "?")
        line = line_of(at)
        return line, 1, RosterError("batch.roster_missing_field", where=_where(path, line), field=missing)
    field = next((str(key) for key in reversed(at) if isinstance(key, str)), "learners")
    line = line_of(at)
    where = _where(path, line)
    if at and at[0] == "extensions":  # the term's rules are in term.yml
        rule = {"due": "term.rule_due", "extra": "term.rule_duration"}.get(field, f"term.roster_rule_{field}")
        return (
            line,
            1,
            RosterError(
                "batch.roster_bad_value", where=where, field=field, value=_shown(instance), rule=message(rule)
            ),
        )
    if field == "version":
        return line, 1, RosterError("batch.roster_version", where=where, version=instance, supported=VERSION)
    if field == "id" and len(at) == 3:
        return line, 1, RosterError("batch.bad_learner_id", where=where, id=instance)
    if field in ("url", "ref") and isinstance(instance, str) and instance.startswith("-"):
        # git would read a leading dash as an option
        return line, 1, RosterError("batch.roster_dash", where=where, column=field, value=instance)
    return (
        line,
        1,
        RosterError(
            "batch.roster_bad_value",
            where=where,
            field=field,
            value=_shown(instance),
            rule=message(f"batch.roster_rule_{field}"),
        ),
    )


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 80 else text[:79] + "…"


def _semantic_problems(learners: list[dict[str, Any]], path: Path, lines: list[int], line_of) -> list:
    problems = []
    first: dict[tuple[str, Any], int] = {}
    for index, (item, line) in enumerate(zip(learners, lines)):
        where = _where(path, line)
        if item.get("name") is not None and ("first_name" in item or "last_name" in item):
            problems.append((line, 2, RosterError("batch.roster_name_twice", where=where)))
        for field in ("id", "github", "repository", "repository_id"):
            if item.get(field) is None:
                continue
            value, at = item[field], line_of(["learners", index, field])
            key = (
                field,
                value.lower() if field in ("github", "repository") else value,
            )  # GitHub ignores case
            if key in first:
                error = (
                    RosterError("batch.roster_duplicate", where=_where(path, at), id=value)
                    if field == "id"
                    else RosterError(
                        "batch.roster_duplicate_field",
                        where=_where(path, at),
                        field=field,
                        value=value,
                        first=first[key],
                    )
                )
                problems.append((at, 2, error))
            first.setdefault(key, at)
    return problems


def _extension_problems(data: dict[str, Any], path: Path, lines: list[int], line_of) -> list:
    """Exactly one of due and extra; a due date on the calendar; a learner of the roster; one
    extension per learner and lesson. (The lesson against course.yml: term/deadlines.py.)"""
    problems = []
    ids = [item["id"] for item in data["learners"]]
    first: dict[tuple[str, str], int] = {}
    for index, (item, line) in enumerate(zip(data.get("extensions") or [], lines)):
        where = _where(path, line)
        if ("due" in item) == ("extra" in item):
            problems.append((line, 2, RosterError("term.roster_due_or_extra", where=where)))
        if "due" in item and item["lesson"] == "all":
            at = line_of(["extensions", index, "due"])
            problems.append((at, 2, RosterError("term.roster_all_due", where=_where(path, at))))
        elif "due" in item:
            try:
                parse_wall_time(item["due"])
            except WallTimeError as exc:
                at = line_of(["extensions", index, "due"])
                problems.append(
                    (at, 2, RosterError("term.roster_bad_due", where=_where(path, at), detail=exc.text))
                )
        if item["learner"] not in ids:
            at = line_of(["extensions", index, "learner"])
            problems.append(
                (
                    at,
                    2,
                    RosterError(
                        "term.roster_unknown_learner",
                        where=_where(path, at),
                        learner=item["learner"],
                        known=", ".join(ids) or "-",
                    ),
                )
            )
        key = (item["learner"], item["lesson"])
        if key in first:
            problems.append(
                (
                    line,
                    2,
                    RosterError(
                        "term.roster_extension_twice",
                        where=where,
                        learner=item["learner"],
                        lesson=item["lesson"],
                        first=first[key],
                    ),
                )
            )
        first.setdefault(key, line)
    return problems
