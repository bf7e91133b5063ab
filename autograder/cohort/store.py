"""The output folder of `autograder grade-all`, and how a run resumes.

    DIR/run.json            the run: course, language, seed, lessons, grading fingerprint, shard
                            and its learners, in order
    DIR/results/<id>.json   each learner's result: exactly what `autograder grade --format json`
                            writes for the same files and seed
    DIR/records/<id>.json   what the batch knows about that learner: the resume key, name and
                            email, the graded commit, what was graded as the observation log
                            knows it (`observed`) and when grade-all first saw it (`timestamp`),
                            status ("graded" or "error"), and which checks stopped at a pending
                            TODO (for the cohort report)
    DIR/observations.jsonl  when grade-all first saw each learner's commit (fetched from the
                            roster's repository) or files (found in SUBMISSIONS): one line per
                            first sighting, appended, kept across runs and combined by --merge
                            (earliest wins); see autograder/cohort/observations.py. With its lock's
                            side file, observations.jsonl.lock
    DIR/attempts/<id>/<kind>-<sha>.<fingerprint>.json
                            with deadlines (course.yml's term block): every result grade-all
                            recorded for that learner, one per submission graded ("commit:<sha>"
                            or "content:<sha256>") and grading fingerprint: the term grade
                            (autograder/cohort/term_grades.py) may count an older submission
                            than the latest
    DIR/term.json           with deadlines (course.yml's term block): each learner's counting
                            submission per lesson, its lateness and grade
    DIR/gradebook.db, grades.csv, cohort.csv, report.md, report.png   derived from the above

Submission time: a record's timestamp (and so the CSVs' and the gradebook's) is the first
sighting of what was graded in DIR/observations.jsonl, on grade-all's own clock; never a commit's
date nor a file's time, which the learner sets.

Resuming: a learner's key hashes the files grading reads (its lesson folders, see `content_hash`)
with the grading fingerprint (course.yml's entries of those lessons, the hidden graders, the
engine, the seed and language). A learner is done when its record is "graded" under the same key.
The result is written before the record, each atomically (a temporary file, then a rename), so a
run killed at any moment leaves whole files only, and the next run regrades exactly the learners
without a matching record. Errors (a grading process that crashed or ran out of time, a
repository that could not be fetched) are retried by the next run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import autograder
from autograder.core.manifest import Course, Lesson
from autograder.core.neutral import terminal
from autograder.core.results import Text, message
from autograder.engine.grading import GRADERS_ROOT, graders_root, lesson_submission_dir, solutions_dir
from autograder.sandbox.intake import contained, read_files, refused, submission_files

RUN_FILE = "run.json"
RESULTS = "results"
RECORDS = "records"
ATTEMPTS = "attempts"
# The engine's own code and catalogs: a change there may change a result. Paths in the package:
# what grades (engine, sandbox with its worker, core's model and catalogs), what writes the
# result (render) and the grading processes (cohort/pool.py).
_ENGINE_FILES = ("engine", "sandbox", "core", "render", "cohort/pool.py")
_ENGINE_CATALOGS = ("engine", "feedback", "render", "quiz")


class BatchError(Exception):
    """Input grade-all cannot use (a roster, a folder, shards to merge); `text` is a catalog
    message naming the file and what to do."""

    def __init__(self, key: str, **params: Any) -> None:
        super().__init__(key)
        self.text = message(key, **params)


# ------------------------------------------------------------------------------ hashing


def _hash_tree(
    digest: "hashlib._Hash", label: str, folder: Path, files: Iterable[Path] | None = None
) -> None:
    """Hash a folder's files: a learner's as the sandbox copies them (the same no-follow reads,
    autograder/sandbox/intake.py), or the trusted `files` given."""
    digest.update(f"\0tree {label}\0".encode())
    entries = (
        read_files(folder)
        if files is None
        else ((path.relative_to(folder).as_posix(), path.read_bytes()) for path in files)
    )
    for rel, data in entries:
        digest.update(f"{rel}\0{len(data)}\0".encode())
        digest.update(data)


def graded_folders(
    course: Course, lessons: list[Lesson], exercises: Path, *, boundary: Path | None = None
) -> list[tuple[str, Path]]:
    """(label, folder) of everything grading `lessons` reads from a learner's `exercises`: each
    lesson's folder, as the engine finds it, and the learner's own folders of the lessons it
    uses (the informational own-pieces check runs them). A folder that is a symlink, or below
    one, under `boundary` is, as for the engine, a folder that does not exist."""
    single = len(lessons) == 1
    found: dict[str, Path] = {}
    for lesson in lessons:
        folder = lesson_submission_dir(course, lesson, exercises, single, boundary=boundary)
        found[lesson.folder] = folder
        around = folder.parent if boundary is None else boundary  # as engine.own_files checks them
        for used in lesson.uses:
            name = course.lesson(used).folder
            own = folder.parent / name
            found.setdefault(name, own if contained(around, own) else refused(own))
    return list(found.items())


def content_hash(
    course: Course, lessons: list[Lesson], exercises: Path, *, boundary: Path | None = None
) -> str:
    digest = hashlib.sha256()
    for label, folder in graded_folders(course, lessons, exercises, boundary=boundary):
        _hash_tree(digest, label, folder)
    return digest.hexdigest()


def grading_fingerprint(course: Course, lessons: list[Lesson], *, seed: int, lang: str) -> str:
    """What, besides the learner's files, decides a result: the seed and language, the lessons'
    course.yml entries, their hidden graders and reference pieces, and the engine."""
    digest = hashlib.sha256()
    digest.update(
        json.dumps(
            {
                "autograder": autograder.__version__,
                "course": course.name,
                "seed": seed,
                "lang": lang,
                # A lesson's due date and late policy decide which submission counts, never
                # what a submission earns: moving a deadline must not regrade the cohort.
                "lessons": [repr(_without_deadline(lesson)) for lesson in lessons],
            },
            sort_keys=True,
        ).encode()
    )
    graders = graders_root()
    sources = solutions_dir(course) or course.root / "solutions"  # where the reference pieces come from
    for lesson in lessons:
        _hash_tree(digest, f"graders {lesson.graders}", graders / lesson.graders)
        for used in (course.lesson(u) for u in lesson.uses):
            folder = sources / used.folder
            _hash_tree(
                digest,
                f"reference {used.folder}",
                folder,
                [folder / name for name in used.files if (folder / name).is_file()],
            )
    package = Path(autograder.__file__).parent
    _hash_tree(digest, "pytest.ini", GRADERS_ROOT, [GRADERS_ROOT / "pytest.ini"])
    for name in _ENGINE_FILES:
        path = package / name
        if not path.exists():  # a name that no longer exists would leave the engine out unseen
            raise FileNotFoundError(f"grading_fingerprint: {path} is gone; update store._ENGINE_FILES")
        _hash_tree(digest, name, package, [path] if path.is_file() else submission_files(path))
    catalogs = [
        package / "messages" / language / f"{name}.yml"
        for language in sorted({"es", lang})
        for name in (*_ENGINE_CATALOGS, *(lesson.graders for lesson in lessons))
    ]
    _hash_tree(digest, "messages", package, [path for path in catalogs if path.is_file()])
    return digest.hexdigest()


def _without_deadline(lesson: Lesson) -> Lesson:
    fields = {name: None for name in ("due", "late") if hasattr(lesson, name)}
    return dataclasses.replace(lesson, **fields) if fields else lesson


def learner_key(fingerprint: str, content: str) -> str:
    return hashlib.sha256(f"{fingerprint}:{content}".encode()).hexdigest()


# ------------------------------------------------------------------------------ the folder


def private_folder(path: Path) -> None:
    """Make DIR (grade-all's, --merge's or the service export's output folder) and leave it
    readable by its owner only: it holds learners' names, e-mails, grades and code (issue 32:
    reports and exports never readable by other users of the machine). A folder someone else
    owns keeps its mode: its owner chose it, and this user could not change it anyway."""
    path.mkdir(parents=True, exist_ok=True)
    try:
        if path.stat().st_uid == os.getuid():
            os.chmod(path, 0o700)
    except (OSError, AttributeError):  # AttributeError: no os.getuid on Windows (ACLs decide there)
        pass


def write_atomic(path: Path, text: str | bytes) -> None:
    """Write `path` whole or not at all: a temporary file in the same folder, then a rename.
    Owner-only (0600), as the folder: every output names learners."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(text.encode("utf-8") if isinstance(text, str) else text)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_json(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


@dataclass
class Record:
    """What the batch knows about one learner (DIR/records/<id>.json)."""

    learner: str
    key: str
    status: str  # "graded" | "error"
    first_name: str = ""
    last_name: str = ""
    email: str = ""
    commit: str | None = None  # the graded commit, when the learner's folder is a git clone
    # When grade-all first saw what it graded, Unix seconds (observations.py), and what that was
    # in the observation log: "commit:<sha>" (fetched) or "content:<sha256>" (found in a folder).
    timestamp: int | None = None
    observed: str | None = None
    error: str | None = None  # "timeout" | "crashed" | "internal" | "fetch" | "folder" | "link"
    # The error's own words (git's message, the last lines of a traceback); for a timeout, the
    # limit in seconds and, on a second line, "<lesson> <check>": the check that was running.
    detail: str = ""
    # {lesson id: {check id: TODO id}}: checks that stopped at work not started (a stub's
    # NotImplementedError, a missing file): the cohort report tells "not started" from "stuck".
    pending: dict[str, dict[str, str]] = field(default_factory=dict)
    seconds: float = 0.0

    def error_summary(self) -> str:
        """One line of the error's detail, for the learner and the report (the whole detail,
        such as a grading process's last words, stays here for the instructor)."""
        lines = [line for line in (self.detail or "").strip().splitlines() if line.strip()]
        if not lines:
            return ""
        # Learner text (a crashed worker's last words, git's message): no escape sequence.
        return terminal(lines[-1] if self.error == "internal" else lines[0])

    def error_reason(self) -> Text:
        """Why grading failed, as a catalog message (for the learner's result, the progress
        lines and the report); a timeout names the check that was running when it struck."""
        if self.error == "timeout":
            seconds, _, running = (self.detail or "").partition("\n")
            lesson, _, check = running.strip().partition(" ")
            if check:
                return message(
                    "batch.error_timeout_in", seconds=seconds, lesson=terminal(lesson), check=terminal(check)
                )
            return message("batch.error_timeout", seconds=seconds, detail="")
        return message(f"batch.error_{self.error}", seconds=self.detail, detail=self.error_summary())

    @classmethod
    def from_dict(cls, data: dict) -> "Record":
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        return cls(**known)


class Store:
    """DIR: its run description, results and records."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def result_path(self, learner: str) -> Path:
        return self.root / RESULTS / f"{learner}.json"

    def record_path(self, learner: str) -> Path:
        return self.root / RECORDS / f"{learner}.json"

    def read_run(self) -> dict | None:
        try:
            data = json.loads((self.root / RUN_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def write_run(self, run: dict) -> None:
        write_json(self.root / RUN_FILE, run)

    def read_record(self, learner: str) -> Record | None:
        try:
            return Record.from_dict(json.loads(self.record_path(learner).read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            return None

    def read_result(self, learner: str) -> dict | None:
        try:
            return json.loads(self.result_path(learner).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def is_done(self, learner: str, key: str) -> bool:
        record = self.read_record(learner)
        return (
            record is not None
            and record.status == "graded"
            and record.key == key
            and self.result_path(learner).is_file()
        )

    def save(self, record: Record, result_json: str) -> None:
        """The result first, then the record that marks it done (see the module docstring)."""
        write_atomic(self.result_path(record.learner), result_json)
        self.save_record(record)

    def save_record(self, record: Record) -> None:
        write_json(self.record_path(record.learner), asdict(record))

    def attempt_path(self, learner: str, what: str, fingerprint: str) -> Path:
        kind, _, digest = what.partition(":")
        return self.root / ATTEMPTS / learner / f"{kind}-{digest}.{fingerprint[:16]}.json"

    def save_attempt(
        self, learner: str, what: str, fingerprint: str, result_json: str, pending: dict | None = None
    ) -> None:
        """Keep this submission's result for the term grade (a later run may count it) and, when
        given, the checks that stopped at a pending TODO (its record's `pending`, beside it as
        .pending: with it, the result can stand for a grading of the same submission)."""
        path = self.attempt_path(learner, what, fingerprint)
        write_atomic(path, result_json)
        if pending is not None:
            write_json(path.with_suffix(".pending"), pending)

    def read_archived(self, learner: str, what: str, fingerprint: str) -> tuple[str, dict] | None:
        """(result JSON, pending) of a submission archived with its pending checks, else None."""
        path = self.attempt_path(learner, what, fingerprint)
        try:
            pending = json.loads(path.with_suffix(".pending").read_text(encoding="utf-8"))
            return path.read_text(encoding="utf-8"), pending if isinstance(pending, dict) else {}
        except (OSError, ValueError):
            return None

    def read_attempt(self, learner: str, what: str, fingerprint: str) -> dict | None:
        try:
            return json.loads(self.attempt_path(learner, what, fingerprint).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def remove_leftovers(self) -> int:
        """Temporary files a killed run left behind (never a whole result)."""
        removed = 0
        for folder in (self.root, self.root / RESULTS, self.root / RECORDS):
            for path in folder.glob(".*.tmp") if folder.is_dir() else ():
                path.unlink(missing_ok=True)
                removed += 1
        return removed
