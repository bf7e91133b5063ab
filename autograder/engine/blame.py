"""Which TODO a line of the learner's file belongs to, and which TODO a learner's error is blamed on.

When the learner's code raises, the line that raised says which TODO to fix, whatever check
happened to run it: a `.view` crash in the head-reshape code is a head-reshape mistake even in
the mask's check. The learner's file is compared with the exercise stub it came from (made
from the marked solutions by engine/references.py, or the course's `exercises/`):

- a line that is given code of the stub (outside every TODO block) belongs to no TODO: its
  inputs came from somewhere else, and guessing would point at the wrong place;
- a line below a `# TODO [id]` comment the learner kept (or a `### BEGIN SOLUTION id` marker),
  in the same function, belongs to that TODO;
- otherwise the lines that replaced a stub's TODO block (found with difflib) belong to it; when
  one run of new lines replaced several adjacent blocks, one statement per block goes in order,
  else the block whose hint text shares the most names with the line wins, and a tie goes
  to the block at the line's relative place in the run (or claims nothing).

A torch error whose offending value another TODO made (scores made in float64 by `scaling` that
given code then multiplies with float32) is blamed by cause instead: the worker traces the
value back to the line that made it (engine/provenance.py says when that is certain enough), and
`raised_in` names that TODO and line.

A file that does not load (a syntax or import error, an exception at a file's top level) is
no TODO's: it is filed under the file itself (engine/learner_errors.py), and this module claims
nothing for it.

Every answer is a best effort: None means "no claim", never a guess.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from autograder.core import regions
from autograder.core.results import RaisedIn
from autograder.engine import learner_errors

_NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
_SCOPE = re.compile(r"(def|class|async def)\s")


@dataclass(frozen=True)
class StubBlocks:
    """A stub file's lines (stripped) and its TODO blocks: (first line, last line, id), 0-based."""

    lines: tuple[str, ...]
    blocks: tuple[tuple[int, int, str], ...]
    given: frozenset[str]  # stripped code lines outside every block


@lru_cache(maxsize=64)
def stub_blocks(stub_text: str) -> StubBlocks:
    raw = stub_text.splitlines()
    lines = tuple(line.strip() for line in raw)
    blocks = []
    for end, line in enumerate(lines):
        todo = regions.pending_todo(line) if "raise NotImplementedError(" in line else None
        if todo is None:
            continue
        start = end
        # The block's hint comments sit right above its raise, the first naming the TODO.
        while start > 0 and lines[start - 1].startswith("#"):
            start -= 1
            if regions.tagged(lines[start]) is not None:
                break
        blocks.append((start, end, todo))
    inside = {n for first, last, _ in blocks for n in range(first, last + 1)}
    given = frozenset(
        line for n, line in enumerate(lines) if n not in inside and line and not line.startswith("#")
    )
    return StubBlocks(lines, tuple(blocks), given)


def todo_at(text: str, lineno: int, stub_text: str | None, todos: set[str]) -> str | None:
    """The TODO (one of `todos`) that line `lineno` (1-based) of the learner's `text` belongs
    to, or None."""
    rows = text.splitlines()
    if not 1 <= lineno <= len(rows):
        return None
    line = rows[lineno - 1].strip()
    stub = stub_blocks(stub_text) if stub_text is not None else None
    if stub is not None and line in stub.given:
        return None
    marked = _by_marker(rows, lineno - 1, todos)
    if marked is not None or stub is None:
        return marked
    return _by_diff(rows, lineno - 1, stub, todos)


def _indent(row: str) -> int:
    return len(row) - len(row.lstrip())


def _by_marker(rows: list[str], index: int, todos: set[str]) -> str | None:
    own = _indent(rows[index])
    for n in range(index, -1, -1):
        row = rows[n]
        stripped = row.strip()
        if regions.is_end(stripped) and n != index:
            return None
        found = regions.begin_id(stripped) or regions.tagged(stripped)
        if found:
            return found if found in todos else None
        if n != index and stripped and _SCOPE.match(stripped) and _indent(row) < own:
            return None  # the top of the function: no marker in it
    return None


def _by_diff(rows: list[str], index: int, stub: StubBlocks, todos: set[str]) -> str | None:
    mine = [row.strip() for row in rows]
    matcher = difflib.SequenceMatcher(None, stub.lines, mine, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal" or not j1 <= index < j2:
            continue
        low, high = (i1, i2) if i2 > i1 else (i1 - 1, i1 + 1)  # an insert: the blocks around it
        hit = [b for b in stub.blocks if b[2] in todos and b[0] < high and b[1] >= low]
        if len({b[2] for b in hit}) == 1:
            return hit[0][2]
        if len(hit) > 1:
            # As many new statements as blocks replaced: the learner wrote one per block, in order.
            code = [n for n in range(j1, j2) if mine[n] and not mine[n].startswith("#")]
            if len(code) == len(hit) and index in code:
                return hit[code.index(index)][2]
            return _closest(mine[index], hit, stub, (index - j1 + 0.5) / (j2 - j1))
        return None
    return None


def _closest(line: str, blocks: list[tuple[int, int, str]], stub: StubBlocks, where: float) -> str | None:
    """Among adjacent blocks one run of new lines replaced: the block whose hint shares the
    most names with the line; on a tie, the block at the same relative place in the run
    (`where`, 0..1) as the line, the learner having written the TODOs in their order."""
    names = set(_NAME.findall(line))
    scores = [
        len(names & set(_NAME.findall(" ".join(stub.lines[first : last + 1])))) for first, last, _ in blocks
    ]
    best = max(scores)
    tied = [b for b, score in zip(blocks, scores) if score == best]
    if len(tied) == 1 and best > 0:
        return tied[0][2]
    total = sum(last - first + 1 for first, last, _ in blocks)
    edge = 0.0
    for first, last, todo in blocks:
        edge += (last - first + 1) / total
        if where <= edge:
            return todo if any(todo == b[2] for b in tied) else None
    return None


def raised_in(err, files, todos, stubs: Path | None) -> RaisedIn | None:
    """Where the learner's exception `err` (sandbox.StudentError) was raised among the TODOs
    `todos` of the lesson files `files` (names relative to the submission's root), comparing
    with the untouched stubs in the folder `stubs`: None when it claims nothing. The engine
    records it in every check's result; a grader may ask it too.

    A torch error whose offending value was made by another TODO than the line that raised
    (given code, or a later TODO) is that TODO's: the worker traced the value and
    engine/provenance.py finds where it was made. Then the answer names the line that made
    the value, and `err.traced_cause` keeps the whole Cause for the message
    (provenance.explanation)."""
    pending = err.todo_pending
    if pending is not None:
        return RaisedIn(pending, "", 0)
    if learner_errors.while_loading(err):
        return None  # the file did not load: no TODO's code ran (engine/learner_errors.py)
    crash = crash_site(err)
    todo = todo_of_site(err, crash, files, todos, stubs)
    if getattr(err, "cause", None) is not None:
        from autograder.engine import provenance

        cause = provenance.find_cause(
            err, files, set(todos), stubs, crash, todo, read_text=read_text, todo_at=todo_at
        )
        if cause is not None:
            err.traced_cause = cause
            return RaisedIn(cause.todo, cause.file, cause.line)
    return RaisedIn(todo, crash[0], crash[1]) if todo is not None and crash is not None else None


def crash_site(err) -> tuple[str, int] | None:
    """The innermost frame of `err` in the learner's folder: (file relative to it, line)."""
    frame = innermost_learner_frame(err.frames, err.root)
    if frame is None:
        return None
    try:
        name = Path(frame["filename"]).relative_to(err.root).as_posix()
    except ValueError:
        return None
    return name, int(frame.get("lineno") or 0)


def todo_of_site(err, site: tuple[str, int] | None, files, todos, stubs: Path | None) -> str | None:
    if site is None or site[0] not in files:
        return None
    text = read_text(Path(err.root) / site[0])
    if text is None:
        return None
    return todo_at(text, site[1], read_text(stubs / site[0]) if stubs is not None else None, set(todos))


def innermost_learner_frame(frames: list[dict], root: str) -> dict | None:
    """The deepest frame of the traceback in the learner's own files."""
    mine = [f for f in frames if str(f.get("filename", "")).startswith(root)]
    return mine[-1] if mine else None


def read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
