"""The learner's local state, in <course root>/.autograder/ (it ignores itself for git):

history.jsonl  one record per grading, in the format of the `grades` branch
               (autograder.core.history), so `progress` merges both with the same XP/streak rules
state.json     the hint level reached per TODO and the last next step per lesson, keyed by a
               digest of the lesson's files (so `hint` needs no new grading while nothing changed;
               a file that does not load is remembered with its place and its own digest)
figuras/       the attention matrix of a failing mask check as a PNG (the feedback names it)
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from autograder.core.file_lock import LockTimeout, append_line, exclusive
from autograder.core.files import display_path
from autograder.core.manifest import Course, Lesson
from autograder.engine.learner_errors import KINDS
from autograder.learner.folders import lesson_digest, lesson_dir
from autograder.learner.steps import NextStep, lesson_next_step, locate_step
from autograder.learner.terminal import t

STATE_DIR = ".autograder"
HISTORY_FILE = "history.jsonl"
STATE_FILE = "state.json"
FIGURES_DIR = "figuras"  # PNGs of the failing mask checks' attention matrices (autograder.render.figures)
STATE_VERSION = 1


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
            ignore.write_text(
                "# Local state of `autograder` (history, hints); never committed.\n*\n", encoding="utf-8"
            )

    # figures ------------------------------------------------------------------------------
    def write_figures(self, result, lang: str) -> None:
        """Draw the failing checks' pictures into figuras/ (the feedback then names each file)."""
        from autograder.render.figures import write_figures

        try:
            self._ensure_folder()
            write_figures(result, self.folder / FIGURES_DIR, lang)
        except OSError as exc:
            self.warn(
                t(
                    "figures_not_saved",
                    lang,
                    path=display_path(self.folder / FIGURES_DIR),
                    detail=failure_detail(exc, lang),
                )
            )

    # history ------------------------------------------------------------------------------
    def append(self, record) -> None:
        """Append one record (raises OSError, core.file_lock.LockTimeout included). One
        unbuffered write in append mode, under the history's lock: `check` and `watch` recording
        at once never interleave their lines, nor glue one to a line the other is writing."""
        from autograder.core.history import dump_line

        self._ensure_folder()
        data = dump_line(record).encode("utf-8")
        append_line(self.history, data)

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
        if not (
            isinstance(state, dict)
            and isinstance(state.get("hints"), dict)
            and isinstance(state.get("next"), dict)
        ):
            return self._set_aside(ValueError("not an autograder state file"), lang)
        return state

    def _set_aside(self, exc: Exception, lang: str) -> dict[str, Any]:
        # Keep the damaged file for the learner to look at: never overwrite what we cannot read.
        backup = self.state_path.with_name(f"{STATE_FILE}.{time.strftime('%Y%m%d-%H%M%S')}.broken")
        try:
            self.state_path.replace(backup)
        except OSError:
            pass
        self.warn(
            t(
                "state_broken",
                lang,
                path=display_path(self.state_path),
                detail=str(exc)[:200],
                backup=display_path(backup),
            )
        )
        return _empty_state()

    def save_state(self, state: dict[str, Any]) -> None:
        self._ensure_folder()
        tmp = self.state_path.with_name(f"{STATE_FILE}.{os.getpid()}.tmp")
        tmp.write_text(
            json.dumps(state, indent=2, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8"
        )
        tmp.replace(self.state_path)

    def update_state(self, lang: str, change: Callable[[dict[str, Any]], None]) -> None:
        """Read, change and write state.json; a state that cannot be written only warns."""
        try:
            self._ensure_folder()
            # Under the state's lock from read to write: `check` and `watch` updating at once
            # would otherwise each write back their own copy and lose the other's hint levels.
            with exclusive(self.state_path):
                state = self.load_state(lang)
                change(state)
                self.save_state(state)
        except OSError as exc:
            self.warn(
                t(
                    "history_not_saved",
                    lang,
                    path=display_path(self.state_path),
                    detail=failure_detail(exc, lang),
                )
            )


def failure_detail(exc: OSError, lang: str) -> str:
    """Why a file of .autograder/ could not be written, in the learner's language where the
    reason is ours (another check or watch holding the lock), else the system's words."""
    if isinstance(exc, LockTimeout):
        return t("file_locked", lang)
    return str(exc.strerror or exc)


def _empty_state() -> dict[str, Any]:
    return {"v": STATE_VERSION, "hints": {}, "next": {}}


# --- recording a grading -----------------------------------------------------------------------


def record_result(course: Course, result, store: LocalStore, lang: str) -> dict[str, NextStep | None]:
    """Draw the failing checks' pictures, append the grading to the local history and remember
    each lesson's next step; returns those steps by lesson id (None: nothing failing in it), so
    that no caller works them out again."""
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
        store.warn(
            t("history_not_saved", lang, path=display_path(store.history), detail=failure_detail(exc, lang))
        )

    steps: dict[str, NextStep | None] = {}
    saved = {}
    for lesson_result in result.lessons:
        lesson = course.lesson(lesson_result.id)
        step = steps[lesson.id] = lesson_next_step(course, lesson, lesson_result)
        saved[lesson.id] = {
            "digest": lesson_digest(lesson_dir(course, lesson)),
            "mode": lesson_result.mode,
            "step": step.to_state() if step else None,
        }
        if step is not None and step.kind == "fix" and step.path:
            # The file that does not load may be another lesson's (lesson 04 imports 03's).
            saved[lesson.id]["fix_digest"] = _file_digest(course.root / step.path)
    store.update_state(lang, lambda state: state["next"].update(saved))
    return steps


def known_step(course: Course, lesson: Lesson, store: LocalStore, lang: str) -> tuple[bool, NextStep | None]:
    """The lesson's next step remembered from its last grading, if its files have not changed
    since: (True, step or None when it was complete), else (False, None)."""
    entry = store.load_state(lang)["next"].get(lesson.id)
    if not isinstance(entry, dict) or entry.get("digest") != lesson_digest(lesson_dir(course, lesson)):
        return False, None
    saved = entry.get("step")
    if saved is None:
        return True, None
    if isinstance(saved, dict) and saved.get("kind") == "fix":
        return _known_fix(course, lesson, entry, saved)
    if not isinstance(saved, dict) or saved.get("kind") not in ("todo", "quiz", "check"):
        return False, None
    todo, check = saved.get("todo"), saved.get("check")
    if saved["kind"] == "todo" and todo not in {t.id for t in lesson.todos}:
        return False, None
    if not isinstance(check, str):
        return False, None
    path, line = locate_step(course, lesson, todo if saved["kind"] == "todo" else None, check)
    return True, NextStep(saved["kind"], lesson, todo=todo, check=check, path=path, line=line)


def _known_fix(course: Course, lesson: Lesson, entry: dict, saved: dict) -> tuple[bool, NextStep | None]:
    """A remembered "fix the file that does not load" step, while that file is unchanged too."""
    path, line, error, check = (saved.get(key) for key in ("path", "line", "error", "check"))
    if not (
        isinstance(path, str)
        and path
        and error in KINDS
        and isinstance(check, str)
        and (line is None or (isinstance(line, int) and line > 0))
        and isinstance(entry.get("fix_digest"), str)
        and entry["fix_digest"] == _file_digest(course.root / path)
    ):
        return False, None
    return True, NextStep("fix", lesson, check=check, path=path, line=line, error=error)


def _file_digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None
