"""A learner's file that does not load, said in the learner's words.

A syntax error, an import error, or any exception Python raises while it runs the top level of
one of the learner's files means that no check that loads the file can run: the cause is one
line of one file, not a TODO. This module turns such an error (sandbox.StudentError) into ONE catalog
message naming the file as the learner sees it (relative to their course folder:
exercises/03-atencion-causal/attention.py), its line, and what Python said, without a frame,
a library's path or the worker's temporary folder:

    Error de sintaxis en exercises/03-atencion-causal/attention.py:90: '(' was never closed

    learner_paths(lesson, own)       the learner's file names in a worker's folder -> course paths
    load_error(err, paths)           that message (a `Text`, keys errors.*), or None
    while_loading(err)               whether the learner's code raised as a file was loaded
    of(check)                        a check's load error (`LoadError`), fresh or read back from a
                                     results.json, or None: what renderers and the next step use

An exception raised by the learner's code once loaded (a crash) is not this module's: it is
blamed on the TODO holding the line that raised (engine/blame.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autograder.core import i18n
from autograder.core.results import Block, Text
from autograder.engine.feedback import relative_to

KINDS = ("syntax", "import", "load")
KEYS = tuple(f"errors.{kind}" for kind in KINDS)
DETAIL_LIMIT = 300
# What Python appends to a SyntaxError's message: "(attention.py, line 90)".
_SYNTAX_PLACE = re.compile(r"\s*\([^()]*, line \d+\)\s*$")
# What an ImportError appends: the path of the module it looked in, "(/usr/lib/…/__init__.py)".
_MODULE_PATH = re.compile(r"\s*\((?:[A-Za-z]:)?[/\\][^()]*\)\s*$")
# Any other absolute path a message may quote (a library's file, the worker's folder).
_ABSOLUTE_PATH = re.compile(r"(?<![\w.])(?:[A-Za-z]:)?[/\\](?:[^\s'\"(),:]+[/\\])+([^\s'\"(),:/\\]+)")


@dataclass(frozen=True)
class LoadError:
    """A check stopped by a file that does not load: "syntax", "import" or "load" (another
    exception at the file's top level), the file's course path, its line, and the message (the
    catalog Text, also when it was read back from a results.json)."""

    kind: str
    path: str
    line: int
    part: Text

    def where(self) -> str:
        return f"{self.path}:{self.line}" if self.line > 0 else self.path


def learner_paths(lesson: Any, own: dict[str, Any] | None = None) -> dict[str, str]:
    """{file name in the worker's folder: its path in the learner's course} for the learner's
    files a worker holds: the lesson's own files and, in the worker of the check that runs the
    learner's own earlier pieces, those (`own`: {name: the learner's file})."""
    paths = {name: f"exercises/{lesson.folder}/{name}" for name in lesson.files}
    for name, path in (own or {}).items():
        paths[name] = f"exercises/{Path(path).parent.name}/{name}"
    return paths


def names_in(err: Any) -> dict[str, str]:
    """{name: name} of the files in the worker's folder that `err`'s traceback went through: the
    paths to use where only the worker's folder is known (a grader that describes the error
    itself), the file named as it is in its lesson's folder."""
    return {name: name for name, _ in _learner_frames(err)}


def _relative(filename: str, root: str) -> str | None:
    return relative_to(filename, root) if filename and root else None


def _learner_frames(err: Any) -> list[tuple[str, dict]]:
    """(name relative to the worker's folder, frame) of the frames in the learner's folder."""
    out = []
    for frame in err.frames or ():
        name = _relative(str(frame.get("filename", "")), str(err.root))
        if name is not None:
            out.append((name, frame))
    return out


def _is_syntax(err: Any) -> bool:
    """A SyntaxError (IndentationError, TabError) in one of the learner's files: its place is
    the worker's innermost frame (sandbox/worker/main.py adds it)."""
    frames = err.frames or ()
    return (
        err.is_a("SyntaxError")
        and bool(frames)
        and _relative(str(frames[-1].get("filename", "")), str(err.root)) is not None
    )


def while_loading(err: Any) -> bool:
    """Whether the learner's code raised while a file of theirs was being loaded: a syntax error
    in it, or an exception that went through a file's top level ("<module>")."""
    if err.todo_pending is not None:
        return False  # a stub's NotImplementedError at the top level is a TODO still to write
    return _is_syntax(err) or any(frame.get("name") == "<module>" for _, frame in _learner_frames(err))


def without_root(text: str, root: str) -> str:
    """`text` with the worker's folder taken out of every path in it: "attention.py", never
    "/tmp/autograder-…/submission/attention.py"."""
    base = str(root).rstrip("/\\")
    return text.replace(base + "/", "").replace(base + "\\", "") if base else text


def clean_detail(message: str, root: str) -> str:
    """Python's message on one line, without the place a SyntaxError repeats, the module path an
    ImportError adds, the worker's folder or any other absolute path (only its file name stays)."""
    text = " ".join(str(message).split())
    text = _SYNTAX_PLACE.sub("", text)
    text = _MODULE_PATH.sub("", text)
    text = without_root(text, root)
    text = _ABSOLUTE_PATH.sub(lambda found: found.group(1), text)
    return text if len(text) <= DETAIL_LIMIT else text[: DETAIL_LIMIT - 1] + "…"


def load_error(err: Any, paths: dict[str, str]) -> Text | None:
    """The one-line message for the learner's `err` when a file of theirs did not load, else
    None. `paths`: learner_paths() of the worker that raised; a frame in any other file of the
    worker's folder (a reference piece beside the learner's) is not the learner's."""
    if not while_loading(err):
        return None
    mine = [(name, frame) for name, frame in _learner_frames(err) if name in paths]
    if not mine:
        return None
    name, frame = mine[-1]  # the innermost: the syntax error's place, the import that failed
    if _is_syntax(err):
        kind = "syntax"
    elif err.is_a("ImportError"):
        kind = "import"
    else:
        kind = "load"
    return Text(
        f"errors.{kind}",
        {
            "path": paths[name],
            "line": int(frame.get("lineno") or 0),
            "type": err.type_name,
            "detail": clean_detail(err.message, str(err.root)) or err.type_name,
        },
    )


def of(check: Any) -> LoadError | None:
    """The load error that stopped `check` (a CheckResult), or None. A result read back from a
    results.json holds its messages as localised text: they are recognised in either language."""
    parts = getattr(getattr(check, "feedback", None), "parts", ())
    if not parts:
        return None
    first = parts[0]
    if isinstance(first, Text):
        if first.key not in KEYS:
            return None
        params = first.params
        return _load_error(first.key, params, first)
    if isinstance(first, Block) and first.kind == "text":
        for lang in i18n.LANGUAGES:
            for key in KEYS:
                params = i18n.recognise(key, lang, first.text)
                if params is not None and i18n.translate(key, lang, **params) == first.text:
                    return _load_error(key, params, Text(key, dict(params)))
    return None


def _load_error(key: str, params: dict, part: Text) -> LoadError | None:
    try:
        line = int(params.get("line", 0))
    except (TypeError, ValueError):
        return None
    return LoadError(key.split(".", 1)[1], str(params.get("path", "")), line, part)


def first_load_error(sandbox: Any, lesson: Any) -> Text | None:
    """The load error of the first of `lesson`'s files that does not load in `sandbox`'s worker,
    else None: for the practice tests, whose pytest only reports a module it could not collect
    as text. The learner's files it holds beside the lesson's (`sandbox.provided`: in practice
    mode, their own earlier pieces) are theirs too."""
    from autograder.sandbox.client import StudentError, WorkerDied

    paths = learner_paths(lesson, getattr(sandbox, "provided", None))
    for name in lesson.files:
        if not name.endswith(".py"):
            continue
        try:
            sandbox.module(name[: -len(".py")])
        except StudentError as err:
            broken = load_error(err, paths)
            if broken is not None:
                return broken
        except WorkerDied:
            return None
    return None
