"""The one grammar of TODO regions: how a solution file marks the code a learner writes, what
the exercise shows instead, and how every reader recognises both.

In a solution file (Python or YAML) each piece of code a learner writes is a region named
after its todo in course.yml (or `quiz` for quiz answers):

        ### BEGIN SOLUTION <todo-id>
        #: hint for the learner (Spanish), one or more lines, optional
        #= code the stub keeps instead (optional; e.g. `#= return None`)
        ...solution code...
        ### END SOLUTION

In the exercise (the stub) the whole region becomes, at the BEGIN marker's indentation,

        # TODO [<todo-id>]: first hint line
        # further hint lines
        <the `#=` lines without their prefix>, or when there are none (Python only):
        raise NotImplementedError("TODO [<todo-id>] pendiente: <the todo's Spanish title>")

Writers: `make_stub` (the exercise), `strip_markers` (the finished file, the reference piece
later lessons are graded against), `revert_region` (one region back to its stub, for the
project's proofs). Readers: `parse_regions` (a solution's regions), `tag` and `tagged` (the
`TODO [id]` a learner's file keeps as a comment), `begin_id`/`is_end` (markers as loose
readers meet them, e.g. in a notebook cell), `pending_todo` (which TODO a stub's
NotImplementedError names). Readers key on the tag and on NotImplementedError, never on the
stub message's words: "pendiente" is the exercises' text, written here and only here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import yaml

from autograder.core.manifest import QUIZ_REGION

__all__ = [
    "PENDING_PATTERN",
    "REGION_SUFFIXES",
    "Region",
    "RegionError",
    "begin_id",
    "has_regions",
    "is_end",
    "make_stub",
    "parse_regions",
    "pending_message",
    "pending_todo",
    "revert_region",
    "strip_markers",
    "tag",
    "tagged",
]

# Files that may hold regions (their comment character is #); others are never stubbed.
REGION_SUFFIXES = (".py", ".yml", ".yaml")

_BEGIN = re.compile(r"^(?P<indent>[ \t]*)###[ \t]*BEGIN[ \t]+SOLUTION(?:[ \t]+(?P<id>\S+))?[ \t]*$")
_END = re.compile(r"^[ \t]*###[ \t]*END[ \t]+SOLUTION[ \t]*$")
# Anything else that looks like a marker is a typo, never a comment to keep.
_MARKER_LIKE = re.compile(r"^[ \t]*###[ \t]*(BEGIN|END)", re.IGNORECASE)
# Loose forms, for readers that meet markers inside other text (a learner's file, a cell).
_BEGIN_ANYWHERE = re.compile(r"###\s*BEGIN SOLUTION\s+([\w-]+)")
_END_ANYWHERE = re.compile(r"###\s*END SOLUTION")

_TAG = "TODO [{}]"
_TAG_COMMENT = re.compile(r"#\s*TODO \[([\w-]+)\]")
# The stub's message, in the language the exercises are written in (Spanish).
_PENDING_TEXT = "{tag} pendiente"
# A stub's NotImplementedError as source (`NotImplementedError("TODO [id]`) or as the error a
# test reports (`NotImplementedError: TODO [id]`): its TODO, whatever words follow the tag.
# A plain pattern (no flags, no named groups) so a notebook's standard-library runner can use it.
PENDING_PATTERN = r"NotImplementedError(?:\(\s*[rRfFuU]{0,2}[\"']|:\s*)TODO \[([\w-]+)\]"
_PENDING = re.compile(PENDING_PATTERN)


class RegionError(ValueError):
    """A solution file's regions are malformed, or their stub is not valid Python/YAML."""


def tag(todo: str) -> str:
    """`TODO [id]`: how a stub, a learner's file and every message name a TODO."""
    return _TAG.format(todo)


def tagged(line: str) -> str | None:
    """The TODO of a `# TODO [id]` comment in `line`, None when it holds none."""
    found = _TAG_COMMENT.search(line)
    return found.group(1) if found else None


def begin_id(line: str) -> str | None:
    """The id of a `### BEGIN SOLUTION id` marker anywhere in `line`, None when it holds none."""
    found = _BEGIN_ANYWHERE.search(line)
    return found.group(1) if found else None


def is_end(line: str) -> bool:
    """Whether `line` holds a `### END SOLUTION` marker."""
    return _END_ANYWHERE.search(line) is not None


def pending_message(todo: str, title: str | None) -> str:
    """The message of a stub's NotImplementedError: "TODO [id] pendiente: <title>"."""
    text = _PENDING_TEXT.format(tag=tag(todo))
    return f"{text}: {title}" if title else text


def pending_todo(text: str) -> str | None:
    """The TODO whose stub `text` shows raising (its source line, or the error a test
    reported); None when it shows none."""
    found = _PENDING.search(text)
    return found.group(1) if found else None


@dataclass
class Region:
    id: str
    file: str
    start_line: int  # 1-based line of `### BEGIN SOLUTION`
    end_line: int  # 1-based line of `### END SOLUTION`
    indent: str  # the BEGIN marker's indentation
    hint: list[str] = field(default_factory=list)  # the `#:` texts, in order
    stub_lines: list[str] = field(default_factory=list)  # the `#=` lines, already indented
    body: list[str] = field(default_factory=list)  # the solution lines, as written

    def stub(self, title: str | None) -> list[str]:
        """The lines that replace the region in the exercise."""
        first = self.hint[0].strip() if self.hint else ""
        lines = [f"{self.indent}# {tag(self.id)}: {first}" if first else f"{self.indent}# {tag(self.id)}"]
        lines += [f"{self.indent}# {text}".rstrip() for text in self.hint[1:]]
        if self.stub_lines:
            return lines + self.stub_lines
        # json.dumps gives a double-quoted literal that is also valid Python.
        message = json.dumps(pending_message(self.id, title), ensure_ascii=False)
        return lines + [f"{self.indent}raise NotImplementedError({message})"]


# --- one file ----------------------------------------------------------------------------------


def has_regions(text: str) -> bool:
    """Whether `text` holds any region marker (well formed or not)."""
    return any(_MARKER_LIKE.match(line) for line in _lines(text)[0])


def parse_regions(text: str, filename: str) -> list[Region]:
    """The solution regions of a file, in order; RegionError (file:line) if the markers are malformed."""
    regions: list[Region] = []
    current: Region | None = None
    for number, line in enumerate(_lines(text)[0], start=1):
        begin, end = _BEGIN.match(line), _END.match(line)
        if begin:
            if begin["id"] is None:
                raise RegionError(
                    f"{filename}:{number}: `### BEGIN SOLUTION` needs a region id (a todo id or 'quiz')"
                )
            if current is not None:
                raise RegionError(
                    f"{filename}:{number}: region {begin['id']!r} begins inside region {current.id!r} "
                    f"(opened at line {current.start_line}); regions cannot nest"
                )
            current = Region(begin["id"], filename, number, 0, begin["indent"])
        elif end:
            if current is None:
                raise RegionError(
                    f"{filename}:{number}: `### END SOLUTION` without a `### BEGIN SOLUTION` before it"
                )
            current.end_line = number
            regions.append(current)
            current = None
        elif _MARKER_LIKE.match(line):
            raise RegionError(
                f"{filename}:{number}: malformed marker {line.strip()!r}; "
                "expected `### BEGIN SOLUTION <id>` or `### END SOLUTION`"
            )
        elif current is not None:
            stripped = line.lstrip()
            if stripped.startswith("#:"):
                current.hint.append(_after_prefix(stripped))
            elif stripped.startswith("#="):
                rest = _after_prefix(stripped)
                current.stub_lines.append(current.indent + rest if rest else "")
            else:
                current.body.append(line)
    if current is not None:
        raise RegionError(
            f"{filename}:{current.start_line}: region {current.id!r} is never closed with `### END SOLUTION`"
        )
    return regions


def make_stub(text: str, filename: str, todo_titles: dict[str, str]) -> str:
    """The exercise version of a solution file: every region replaced by its stub.

    `todo_titles` maps the lesson's todo ids to their Spanish titles (the message of the
    stub's NotImplementedError); a region's id must be one of them or 'quiz'.
    """
    return _render(text, filename, todo_titles, lambda index: True)


def revert_region(text: str, filename: str, region_index: int, todo_titles: dict[str, str]) -> str:
    """The solution with only its `region_index`-th region (0-based) reverted to the stub.

    The other regions keep their solution code, without markers: what a learner who did
    every other TODO would have.
    """
    count = len(parse_regions(text, filename))
    if not 0 <= region_index < count:
        raise RegionError(f"{filename} has {count} region(s); there is no region number {region_index}")
    return _render(text, filename, todo_titles, lambda index: index == region_index)


def strip_markers(text: str, filename: str = "<text>") -> str:
    """The solution as a learner's finished file: markers, `#:` and `#=` lines removed."""
    lines, newline = _lines(text)
    return newline.join(_assemble(lines, parse_regions(text, filename), lambda index: False, {})[0])


def _render(text: str, filename: str, todo_titles: dict[str, str], stubbed: Callable[[int], bool]) -> str:
    lines, newline = _lines(text)
    regions = parse_regions(text, filename)
    _check_ids(regions, filename, todo_titles)
    out, spans = _assemble(lines, regions, stubbed, todo_titles)
    result = newline.join(out)
    _check_syntax(result, filename, spans)
    return result


def _check_ids(regions: Iterable[Region], filename: str, todo_titles: dict[str, str]) -> None:
    for region in regions:
        if region.id not in todo_titles and region.id != QUIZ_REGION:
            known = ", ".join(todo_titles) or "(none)"
            raise RegionError(
                f"{filename}:{region.start_line}: unknown region id {region.id!r}; "
                f"expected a todo id of the lesson ({known}) or {QUIZ_REGION!r}"
            )
        if not region.stub_lines and not filename.endswith(".py"):
            raise RegionError(
                f"{filename}:{region.start_line}: region {region.id!r} needs `#=` lines: outside Python "
                "files the stub cannot raise NotImplementedError, so give its lines with `#= `"
            )


def _assemble(
    lines: list[str], regions: list[Region], stubbed: Callable[[int], bool], titles: dict[str, str]
) -> tuple[list[str], list[tuple[int, int, Region]]]:
    """The output lines, and for each stubbed region its 1-based (first, last) output lines."""
    out: list[str] = []
    spans = []
    position = 0
    for index, region in enumerate(regions):
        out += lines[position : region.start_line - 1]
        if stubbed(index):
            stub = region.stub(titles.get(region.id))
            spans.append((len(out) + 1, len(out) + len(stub), region))
            out += stub
        else:
            out += region.body
        position = region.end_line
    return out + lines[position:], spans


def _check_syntax(result: str, filename: str, spans: list[tuple[int, int, Region]]) -> None:
    if filename.endswith(".py"):
        try:
            compile(result, filename, "exec", dont_inherit=True)
        except SyntaxError as exc:
            near = next((r for first, last, r in spans if first - 1 <= (exc.lineno or 0) <= last + 1), None)
            where = (
                f" in the stub of region {near.id!r} (solution lines {near.start_line}-{near.end_line})"
                if near
                else ""
            )
            raise RegionError(
                f"{filename}:{near.start_line if near else exc.lineno}: the generated stub is not valid "
                f"Python{where}: {exc.msg} at stub line {exc.lineno}"
            ) from None
    elif filename.endswith(REGION_SUFFIXES):  # YAML
        try:
            yaml.safe_load(result)
        except yaml.YAMLError as exc:
            raise RegionError(f"{filename}: the generated stub is not valid YAML: {exc}") from None


def _after_prefix(stripped: str) -> str:
    """The text of a `#:` / `#=` line: after the prefix and one optional space, kept as is."""
    rest = stripped[2:]
    return (rest[1:] if rest.startswith(" ") else rest).rstrip()


def _lines(text: str) -> tuple[list[str], str]:
    newline = "\r\n" if "\r\n" in text else "\n"
    return text.replace("\r\n", "\n").split("\n"), newline
