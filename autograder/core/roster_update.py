"""Updating a roster file in place: one learner's fields, written atomically.

`update(path, learner_id, **fields)` sets fields of one learner and rewrites the file
atomically, keeping the instructor's comments and layout: in YAML the new lines are inserted (or
one value replaced) as text and the result is parsed back and compared with what was meant;
only where that fails is the whole file dumped again (update says so). A CSV file is rewritten
by the csv module (cells are re-quoted where needed; new columns go last). Reading and
validating, and the schema, are roster.py's.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import yaml

from autograder.core.roster import CSV_ALIASES, Roster, RosterError, compose_yaml, parse, yaml_child

__all__ = ["update"]


def update(path: Path, learner_id: str, **fields: Any) -> bool | None:
    """Set `fields` of one learner in the roster file and rewrite it atomically. Returns None
    when nothing changed (the file is left as it was, byte for byte), True when the change was
    written in place (comments and layout kept), False when a YAML file had to be dumped whole
    (its comments are lost: the caller says so)."""
    path = Path(path)
    raw = path.read_bytes()
    text = raw.decode("utf-8-sig")
    roster = parse(text, path)
    current = roster.learner(learner_id)
    changes = {name: value for name, value in fields.items() if getattr(current, name) != value}
    if not changes:
        return None
    wanted = dataclasses.replace(
        roster,
        learners=tuple(
            dataclasses.replace(learner, **changes) if learner.id == learner_id else learner
            for learner in roster.learners
        ),
    )
    bom = raw.startswith(b"\xef\xbb\xbf")
    if roster.encoding == "csv":
        new_text, in_place = _csv_updated(text, learner_id, changes), True
    else:
        new_text, in_place = _yaml_updated(text, path, learner_id, changes), True
    try:
        ok = new_text is not None and parse(new_text, path).shape() == wanted.shape()
    except RosterError:
        ok = False
    if not ok:
        if roster.encoding == "csv":  # the csv module wrote it: a mismatch is a bug, not a layout
            raise RuntimeError(f"{path}: the updated CSV roster does not read back as written")
        new_text, in_place = _dump(wanted), False
        if parse(new_text, path).shape() != wanted.shape():
            raise RuntimeError(f"{path}: the roster dump does not read back as written")
    _write_atomically(path, ("\ufeff" if bom else "") + new_text)
    return in_place


def _scalar(value: Any) -> str:
    """`value` as a YAML scalar: plain where it reads back as itself, else double-quoted."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"a roster field is text or a number, not {value!r}")
    if isinstance(value, int):
        return str(value)
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_./@+-]*", value) and yaml.safe_load(value) == value:
        return value
    return json.dumps(value, ensure_ascii=False)


def _yaml_updated(text: str, path: Path, learner_id: str, changes: dict[str, Any]) -> str | None:
    """The text with `changes` made as text edits inside the learner's block mapping, or None
    where the layout does not allow it (flow style, a multi-line value)."""
    node, _ = compose_yaml(text, path)
    learners = (yaml_child(node, "learners") or (None, None))[1]
    item = next(
        (
            entry
            for entry in getattr(learners, "value", [])
            if isinstance(entry, yaml.MappingNode)
            and (yaml_child(entry, "id") or (None, None))[1] is not None
            and yaml_child(entry, "id")[1].value == learner_id
        ),
        None,
    )
    if item is None or item.flow_style or not item.value:
        return None
    edits: list[tuple[int, int, str]] = []
    missing = []
    for name, value in changes.items():
        found = yaml_child(item, name)
        if found is None:
            missing.append((name, value))
            continue
        value_node = found[1]
        if (
            not isinstance(value_node, yaml.ScalarNode)
            or value_node.start_mark.line != value_node.end_mark.line
        ):
            return None
        edits.append((value_node.start_mark.index, value_node.end_mark.index, _scalar(value)))
    if missing:
        indent = item.value[0][0].start_mark.column
        end = item.value[-1][1].end_mark
        if end.column == 0:  # a block scalar ends at the start of the next line
            at, prefix = end.index, ""
        else:
            newline = text.find("\n", end.index)
            at, prefix = (newline + 1, "") if newline >= 0 else (len(text), "\n")
        lines = "".join(f"{' ' * indent}{name}: {_scalar(value)}\n" for name, value in missing)
        edits.append((at, at, prefix + lines))
    for start, stop, replacement in sorted(edits, reverse=True):
        text = text[:start] + replacement + text[stop:]
    return text


def _dump(roster: Roster) -> str:
    return yaml.safe_dump(
        roster.document(), sort_keys=False, allow_unicode=True, default_flow_style=False, width=1000
    )


def _csv_updated(text: str, learner_id: str, changes: dict[str, Any]) -> str:
    newline = "\r\n" if "\r\n" in text else "\n"
    rows = list(csv.reader(io.StringIO(text, newline="")))
    header_index = next(i for i, row in enumerate(rows) if any(cell.strip() for cell in row))
    header = rows[header_index]
    fields = [CSV_ALIASES.get(cell.strip().lower()) for cell in header]
    id_column = fields.index("id")
    for name in changes:
        if name not in fields:
            header.append(name)
            fields.append(name)
    for index, row in enumerate(rows):
        if index <= header_index or not any(cell.strip() for cell in row):
            continue
        row.extend([""] * (len(header) - len(row)))
        if row[id_column].strip() == learner_id:
            for name, value in changes.items():
                row[fields.index(name)] = "" if value is None else str(value)
    out = io.StringIO()
    plain = csv.writer(out, lineterminator=newline)
    # The csv module quotes a cell holding CR only when CR is part of the line terminator: with
    # "\n" endings a bare CR would go out unquoted and split the row for the next reader.
    quoted = csv.writer(out, lineterminator=newline, quoting=csv.QUOTE_ALL)
    for row in rows:
        (quoted if any("\r" in cell for cell in row) else plain).writerow(row)
    return out.getvalue()


def _write_atomically(path: Path, text: str) -> None:
    """A temporary file in the same folder, flushed, then renamed over `path`: a run killed at
    any moment leaves the old roster or the new one, never half of one."""
    mode = path.stat().st_mode & 0o7777
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(name, mode)
        os.replace(name, path)
    except BaseException:
        try:
            os.unlink(name)
        except OSError:
            pass
        raise
