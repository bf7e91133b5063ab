"""When `grade-all` first saw each learner's submission: the observation log, DIR/observations.jsonl.

A submission's time is the one thing about it a learner must not be able to set. A commit's
dates are whatever the learner's clock or GIT_COMMITTER_DATE said, and a copied folder's file
times are whatever the copy kept; so grade-all never reads either. It writes down, the first
time it sees a submission, the time on its own clock, and that time is the submission's from
then on (the record's `timestamp`, hence grades.csv, cohort.csv and the nbgrader gradebook).

One JSON object a line, appended, never rewritten:

    {"learner": "ana", "how": "fetch", "commit": "<sha>", "content": null, "seen": "2026-12-07T08:03:58Z"}
    {"learner": "bea", "how": "folder", "commit": null, "content": "<sha256>", "seen": "2026-12-07T08:04:02Z"}

    learner   the learner's id
    how       "fetch": grade-all fetched this commit from the roster's repository and checked it
              out (the files graded are exactly the commit's); the sighting is the commit.
              "folder": grade-all found these files in SUBMISSIONS (a folder without git, or a
              clone it did not fetch itself); the sighting is the hash of the files graded
              (store.content_hash, so it covers the lessons that run graded), because such a
              folder's files need not match its HEAD: a commit seen early must not lend its
              time to files changed since. A clone's HEAD is noted in `commit`, for reference.
    seen      UTC, ISO 8601, rounded up to the whole second: never earlier than the moment it
              was seen. For "fetch", the moment that learner's fetch finished (the commit was on
              the remote by then); for "folder", the moment the run read the files.

The first sighting of a (learner, commit) or (learner, content) counts: a later run that sees
it again writes nothing, a new commit or new content gets a line of its own, and going back to
something seen before keeps its old time. Where the same thing appears on two lines (logs
combined by `grade-all --merge`, which appends what the shards saw and the merged folder did
not), the earliest time wins.

Two more kinds of sighting, for deadlines (issue 32; autograder/cohort/term_grades.py):

    snapshot  `grade-all --snapshot` (a scheduled run at a deadline) fetched the learner's
              repository and found `commit` at its head; `seen` is the moment that fetch
              finished, on grade-all's clock. Written on every snapshot, even of a commit seen
              before: it says what the head was at that moment, which a force push back to an
              older commit would otherwise hide.
    push      GitHub's repository activity (GET /repos/{owner}/{repo}/activity, a push, a force
              push, a merge) says the branch got `commit` at `seen`: GitHub's record of the push,
              which the learner cannot write either (a commit's dates they can). Written once per
              (commit, time).

So a commit's submission time is its earliest sighting of any kind (`first_seen`), and the
learner's submission as of a moment (`grade-all --at`) is the commit of their latest fetch,
snapshot or push at or before it (`head_at`). Folder sightings have no commit to check out and
take no part in --at.

Written safely: each line is one unbuffered append under the log's lock (core/file_lock.py;
the side file observations.jsonl.lock stays next to it), flushed to disk before grading goes
on, and never glued to a damaged last line. Read tolerantly: a line that is not a sighting is
skipped and reported with its line number, and a last line cut short by a run killed while
writing it is reported as such; nothing else is lost, and nothing is ever deleted.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from autograder.core.file_lock import append_line
from autograder.core.history import parse_time
from autograder.core.roster import valid_learner_id

LOG_FILE = "observations.jsonl"
HOW = ("fetch", "folder", "snapshot", "push")
COMMITS = ("fetch", "snapshot", "push")  # the kinds that name a commit grade-all can check out
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # a git object id, SHA-1 or SHA-256
_CONTENT = re.compile(r"[0-9a-f]{64}")  # store.content_hash: SHA-256
_FIELDS = ("learner", "how", "commit", "content", "seen")


def now() -> datetime:
    """This machine's clock, UTC, rounded up to the whole second."""
    return datetime.fromtimestamp(math.ceil(time.time()), timezone.utc)


def format_time(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Sighting:
    """One line of the log: `learner`'s submission, seen at `seen` (aware, UTC)."""

    learner: str
    how: str
    commit: str | None
    content: str | None
    seen: datetime

    @property
    def what(self) -> str:
        """What was seen, as the record keeps it (Record.observed): "commit:<sha>" for a
        fetch, "content:<sha256>" for a folder."""
        return f"content:{self.content}" if self.how == "folder" else f"commit:{self.commit}"

    @property
    def timestamp(self) -> int:
        return int(self.seen.timestamp())

    def line(self) -> str:
        data = {
            "learner": self.learner,
            "how": self.how,
            "commit": self.commit,
            "content": self.content,
            "seen": format_time(self.seen),
        }
        return json.dumps(data, ensure_ascii=False, separators=(", ", ": ")) + "\n"

    @classmethod
    def from_json(cls, data: object) -> "Sighting":
        """A sighting from a parsed line; ValueError saying what is wrong otherwise."""
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        missing = [name for name in _FIELDS if name not in data]
        if missing:
            raise ValueError(f"missing {', '.join(missing)}")
        learner, how, commit, content, seen = (data[name] for name in _FIELDS)
        if not isinstance(learner, str) or not valid_learner_id(learner):
            raise ValueError(f"learner {learner!r} is not a learner id")
        if how not in HOW:
            raise ValueError(f"how {how!r} is not one of {', '.join(HOW)}")
        if commit is not None and not (isinstance(commit, str) and _SHA.fullmatch(commit)):
            raise ValueError(f"commit {commit!r} is not a git object id")
        if content is not None and not (isinstance(content, str) and _CONTENT.fullmatch(content)):
            raise ValueError(f"content {content!r} is not a SHA-256 in hex")
        if how in COMMITS and commit is None:
            raise ValueError(f"a {how} with no commit")
        if how == "folder" and content is None:
            raise ValueError("a folder with no content hash")
        return cls(learner, how, commit, content, parse_time(seen, "seen").astimezone(timezone.utc))


@dataclass(frozen=True)
class Problem:
    """A line of a log that is not a sighting: `cut` when it is the last line and has no end
    (a run killed while writing it), else a line that does not read as one."""

    path: Path
    line: int
    cut: bool
    detail: str


def parse(data: bytes, path: Path) -> tuple[list[Sighting], list[Problem]]:
    """The sightings of a log's bytes, in file order, and the lines that are not one."""
    sightings, problems = [], []
    lines = data.split(b"\n")
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            sightings.append(Sighting.from_json(json.loads(raw.decode("utf-8"))))
        except UnicodeDecodeError:
            problems.append(Problem(path, number, number == len(lines), "not UTF-8"))
        except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
            # Only the last piece of the file can lack its newline: a line cut short.
            problems.append(Problem(path, number, number == len(lines), str(exc)))
    return sightings, problems


class ObservationLog:
    """DIR/observations.jsonl, read once (`load`) and appended to as a run sees submissions."""

    def __init__(self, folder: Path) -> None:
        self.path = Path(folder) / LOG_FILE
        self._first: dict[tuple[str, str], Sighting] = {}
        self._lines: list[Sighting] = []  # every sighting, in file order (snapshots and pushes too)
        self._known: set[Sighting] = set()

    def load(self) -> list[Problem]:
        """Read the log (none yet: empty); the lines that are not sightings come back, to be
        reported. Raises OSError when the file exists and cannot be read."""
        self._first.clear()
        self._lines.clear()
        self._known.clear()
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        sightings, problems = parse(data, self.path)
        for sighting in sightings:
            self._keep(sighting)
        return problems

    def sightings(self) -> list[Sighting]:
        """The first sighting of everything in the log, oldest first."""
        return sorted(self._first.values(), key=lambda s: (s.seen, s.learner, s.what))

    def first_seen(self, learner: str, what: str) -> Sighting | None:
        return self._first.get((learner, what))

    def head_at(self, learner: str, moment: datetime) -> Sighting | None:
        """The learner's submission as of `moment` (aware): their latest fetch, snapshot or push
        at or before it (of two at the same second, the later line); None when nothing of
        theirs was recorded by then."""
        latest = None
        for sighting in self._lines:
            if sighting.learner == learner and sighting.how in COMMITS and sighting.seen <= moment:
                if latest is None or sighting.seen >= latest.seen:
                    latest = sighting
        return latest

    def submissions(self, learner: str, until: datetime | None = None) -> list[Sighting]:
        """Each commit (or folder content) of `learner` with its first sighting, oldest first;
        with `until`, only those first seen at or before it."""
        found = [
            sighting
            for (who, _), sighting in self._first.items()
            if who == learner and (until is None or sighting.seen <= until)
        ]
        return sorted(found, key=lambda s: (s.seen, s.what))

    def learners(self) -> set[str]:
        return {sighting.learner for sighting in self._lines}

    def record(self, sightings: Iterable[Sighting]) -> int:
        """Append each of `sightings` (snapshots, pushes) that is not already a line of the log,
        whatever was seen before; how many were appended."""
        new = []
        for sighting in sightings:
            sighting = Sighting(
                sighting.learner,
                sighting.how,
                sighting.commit,
                sighting.content,
                sighting.seen.astimezone(timezone.utc).replace(microsecond=0),
            )
            if sighting not in self._known and sighting not in new:
                new.append(sighting)
        if new:
            self._append(new)
        return len(new)

    def observe(
        self, learner: str, how: str, *, commit: str | None, content: str | None, seen: datetime
    ) -> Sighting:
        """The first sighting of this submission: the logged one, or this one, appended now.
        Raises OSError (core.file_lock.LockTimeout included) when it cannot be written."""
        sighting = Sighting(
            learner, how, commit, content, seen.astimezone(timezone.utc).replace(microsecond=0)
        )
        known = self.first_seen(learner, sighting.what)
        if known is not None:
            return known
        self._append([sighting])
        return sighting

    def add(self, sightings: Iterable[Sighting]) -> int:
        """Append each of `sightings` the log does not know, or knows only from later (another
        log's lines, for --merge), oldest first; how many were appended."""
        new, taken = [], set()
        for sighting in sorted(sightings, key=lambda s: (s.seen, s.learner, s.what)):
            if sighting.how in ("snapshot", "push"):  # facts of their own moment: each line kept
                if sighting not in self._known and sighting not in new:
                    new.append(sighting)
                continue
            key, known = (sighting.learner, sighting.what), self.first_seen(sighting.learner, sighting.what)
            if key not in taken and (known is None or sighting.seen < known.seen):
                new.append(sighting)
                taken.add(key)
        if new:
            self._append(new)
        return len(new)

    def _keep(self, sighting: Sighting) -> None:
        self._lines.append(sighting)
        self._known.add(sighting)
        key = (sighting.learner, sighting.what)
        known = self._first.get(key)
        if known is None or sighting.seen < known.seen:
            self._first[key] = sighting

    def _append(self, sightings: list[Sighting]) -> None:
        data = "".join(sighting.line() for sighting in sightings).encode("utf-8")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        append_line(self.path, data)  # never glued to a line a killed run cut short
        for sighting in sightings:
            self._keep(sighting)
