"""Grading history: one record per graded commit, and the XP and streak derived from them.

Pure functions, no I/O: gitstore.py reads and writes the history on the learner's `grades`
branch (`history.jsonl`, one `dump_line` per graded commit). That branch is writable by the
learner, so `parse_history` never raises: a malformed line is skipped and reported.

Rules (tests/core/test_history.py pins each one):

XP
- A lesson's XP, once earned (completed in any record), is kept: a lesson that breaks again
  does not take it back. `Progress.xp` is the sum of the earned lessons' xp_max, each at its
  most recently graded value; `Progress.xp_max` comes from the most recent record (or
  `current`). A lesson earned before but missing from the latest record (removed from the
  course) still counts its XP.
- `passing_now`: the lesson is completed in `current` if given, else in the latest record (by
  committed_at, then graded_at); None when that run did not grade it (never graded, or no
  longer in the course). `Progress.regressions` lists the lessons earned but not passing now
  ("failing now" in the summary).
- `Progress.practice` is True when some earned lesson was only ever completed in mode
  "practice" (graded without the course's hidden graders).

Days and streaks
- The day of a record is its committed_at (the graded commit's committer date) in the course
  time zone `tz`. Committer date, not grading time: a push graded late (Actions enabled later,
  a manual re-run) counts on the day the work was done.
- Records are considered in order of (committed_at, graded_at). A record makes progress when
  some lesson's score beats that lesson's best score in all earlier records (the best starts at
  0) or a lesson is completed for the first time. A progress day has at least one such record;
  several runs in a day count once.
- `streak`: the number of consecutive progress days ending at the latest one, if that day is
  today or yesterday in `tz` (or later: a committer clock ahead of ours); else 0.
  `longest_streak`: the longest such run ever.
- `current`, the grading in progress, counts as if appended; if its commit is already recorded
  it decides passing_now but is not counted twice (the stored record keeps its place).
- A commit recorded twice keeps its first record.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from autograder.core import i18n

VERSION = 1
MODES = ("hidden", "practice")
# SHA-1 object names; SHA-256 repositories (64 hex digits) are accepted too.
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_RECORD_KEYS = {"v", "commit", "committed_at", "graded_at", "xp", "xp_max", "lessons"}
_LESSON_KEYS = {"id", "score", "max_score", "completed", "xp", "xp_max", "mode"}
# Scores are rounded to 2 decimals in the results JSON; anything smaller is not progress.
_EPS = 1e-9


def _num(x: float) -> int | float:
    """A score for JSON: 5 rather than 5.0, so that dump/parse/dump is stable."""
    return int(x) if float(x).is_integer() else float(x)


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x: Any) -> bool:
    if _is_int(x):
        return abs(x) < 2**53  # exactly representable as a float
    return isinstance(x, float) and math.isfinite(x)


def _aware(value: Any, what: str) -> datetime:
    if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{what} must be a timezone-aware datetime, got {value!r}")
    return value


def parse_time(value: Any, what: str) -> datetime:
    """An ISO 8601 date-time that carries its UTC offset (a ValueError naming `what` otherwise)."""
    if not isinstance(value, str):
        raise ValueError(f"{what} must be an ISO 8601 string with an offset, got {value!r}")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{what} is not an ISO 8601 date-time: {value!r}") from None
    if parsed.tzinfo is None:
        raise ValueError(f"{what} has no time zone (no UTC offset; write UTC as Z): {value!r}")
    return parsed


@dataclass(frozen=True)
class LessonEntry:
    """One lesson as graded in one run (a slice of the results JSON's lesson)."""

    id: str
    score: float
    max_score: float
    completed: bool
    xp: int
    xp_max: int
    mode: str  # "hidden" | "practice"

    def __post_init__(self) -> None:
        where = f"lesson {self.id!r}"
        if not isinstance(self.id, str) or not self.id:
            raise ValueError(f"a lesson id must be a non-empty string, got {self.id!r}")
        for name in ("score", "max_score"):
            value = getattr(self, name)
            if not _is_number(value) or value < 0:
                raise ValueError(f"{where}: {name} must be a finite number >= 0, got {value!r}")
            object.__setattr__(self, name, float(value))
        if self.score > self.max_score + _EPS:
            raise ValueError(f"{where}: score {self.score} is above max_score {self.max_score}")
        if not isinstance(self.completed, bool):
            raise ValueError(f"{where}: completed must be true or false, got {self.completed!r}")
        for name in ("xp", "xp_max"):
            value = getattr(self, name)
            if not _is_int(value) or value < 0:
                raise ValueError(f"{where}: {name} must be an integer >= 0, got {value!r}")
        # The results contract: a lesson's XP is all or nothing.
        if self.xp != (self.xp_max if self.completed else 0):
            raise ValueError(
                f"{where}: xp {self.xp} does not match completed={self.completed} and xp_max={self.xp_max}"
            )
        if self.mode not in MODES:
            raise ValueError(f"{where}: mode must be one of {', '.join(MODES)}, got {self.mode!r}")

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "score": _num(self.score),
            "max_score": _num(self.max_score),
            "completed": self.completed,
            "xp": self.xp,
            "xp_max": self.xp_max,
            "mode": self.mode,
        }

    @classmethod
    def from_json(cls, data: Any) -> LessonEntry:
        if not isinstance(data, dict):
            raise ValueError(f"a lesson must be a JSON object, got {type(data).__name__}")
        _check_keys(data, _LESSON_KEYS, f"lesson {data.get('id')!r}")
        return cls(**{key: data[key] for key in _LESSON_KEYS})


def _check_keys(data: dict, expected: set[str], what: str) -> None:
    missing = sorted(expected - set(data))
    unknown = sorted(set(data) - expected)
    if missing:
        raise ValueError(f"{what}: missing field(s) {', '.join(missing)}")
    if unknown:
        raise ValueError(f"{what}: unknown field(s) {', '.join(map(str, unknown))}")


@dataclass(frozen=True)
class Record:
    """One graded commit: when it was committed and graded, and each lesson's outcome."""

    commit: str
    committed_at: datetime  # the graded commit's committer date
    graded_at: datetime
    xp: int
    xp_max: int
    lessons: tuple[LessonEntry, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.commit, str) or not _SHA.fullmatch(self.commit):
            raise ValueError(f"commit must be a full lower-case hex object name, got {self.commit!r}")
        _aware(self.committed_at, "committed_at")
        _aware(self.graded_at, "graded_at")
        if not isinstance(self.lessons, tuple) or not all(isinstance(x, LessonEntry) for x in self.lessons):
            raise ValueError("lessons must be a tuple of LessonEntry")
        ids = [lesson.id for lesson in self.lessons]
        if len(set(ids)) != len(ids):
            raise ValueError(f"a lesson appears twice in the record: {ids}")
        for name, total in (
            ("xp", sum(x.xp for x in self.lessons)),
            ("xp_max", sum(x.xp_max for x in self.lessons)),
        ):
            value = getattr(self, name)
            if not _is_int(value) or value != total:
                raise ValueError(f"{name} must be the sum of the lessons' {name} ({total}), got {value!r}")

    @classmethod
    def from_results(
        cls, results: dict[str, Any], *, commit: str, committed_at: datetime, graded_at: datetime
    ) -> Record:
        """A record from the project's results JSON (render.to_json_dict)."""
        try:
            lessons = tuple(
                LessonEntry.from_json({key: lesson[key] for key in _LESSON_KEYS})
                for lesson in results["lessons"]
            )
            return cls(commit, committed_at, graded_at, results["xp"], results["xp_max"], lessons)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a results JSON: {type(exc).__name__}: {exc}") from None

    def to_json(self) -> dict[str, Any]:
        return {
            "v": VERSION,
            "commit": self.commit,
            "committed_at": self.committed_at.isoformat(),
            "graded_at": self.graded_at.isoformat(),
            "xp": self.xp,
            "xp_max": self.xp_max,
            "lessons": [lesson.to_json() for lesson in self.lessons],
        }

    @classmethod
    def from_json(cls, data: Any) -> Record:
        """Validate a stored record strictly; ValueError says what is wrong."""
        if not isinstance(data, dict):
            raise ValueError(f"a record must be a JSON object, got {type(data).__name__}")
        if "v" in data and data["v"] != VERSION:
            raise ValueError(f"unsupported record version {data['v']!r} (this grader reads v{VERSION})")
        _check_keys(data, _RECORD_KEYS, "record")
        if not isinstance(data["v"], int) or isinstance(data["v"], bool):
            raise ValueError(f"unsupported record version {data['v']!r}")
        if not isinstance(data["lessons"], list):
            raise ValueError("record: lessons must be a list")
        return cls(
            commit=data["commit"],
            committed_at=parse_time(data["committed_at"], "committed_at"),
            graded_at=parse_time(data["graded_at"], "graded_at"),
            xp=data["xp"],
            xp_max=data["xp_max"],
            lessons=tuple(LessonEntry.from_json(lesson) for lesson in data["lessons"]),
        )


def dump_line(record: Record) -> str:
    """One compact JSON line, newline-terminated: a line of history.jsonl."""
    return json.dumps(record.to_json(), ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n"


def parse_history(text: str | bytes) -> tuple[list[Record], list[str]]:
    """Records of a history.jsonl, in file order, and the problems found ("line 7: ...").

    Never raises on content: blank lines are ignored, malformed lines skipped and reported, and
    a commit recorded twice keeps its first record.
    """
    records: list[Record] = []
    problems: list[str] = []
    seen: dict[str, int] = {}
    lines = text.split(b"\n") if isinstance(text, bytes) else text.split("\n")
    for number, raw in enumerate(lines, start=1):
        if isinstance(raw, bytes):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                problems.append(f"line {number}: not valid UTF-8")
                continue
        else:
            line = raw
        if not line.strip():
            continue
        try:
            record = Record.from_json(json.loads(line))
        except (
            ValueError,
            TypeError,
            OverflowError,
            RecursionError,
        ) as exc:  # JSONDecodeError is a ValueError
            problems.append(f"line {number}: {exc}")
            continue
        if record.commit in seen:
            problems.append(
                f"line {number}: commit {record.commit} already on line {seen[record.commit]}; keeping that one"
            )
            continue
        seen[record.commit] = number
        records.append(record)
    return records, problems


# --- Progress --------------------------------------------------------------------------------


@dataclass(frozen=True)
class LessonProgress:
    id: str
    earned: bool  # completed in some record: its XP is kept
    earned_on: date | None  # the day (course time zone) of the first record completing it
    best_score: float
    max_score: float  # from the latest record that graded it
    xp_max: int  # from the latest record that graded it
    passing_now: bool | None  # None: not graded in the current/latest run
    practice: bool  # earned, but only ever completed without the hidden graders

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "earned": self.earned,
            "earned_on": self.earned_on.isoformat() if self.earned_on else None,
            "best_score": _num(self.best_score),
            "max_score": _num(self.max_score),
            "xp": self.xp_max if self.earned else 0,
            "xp_max": self.xp_max,
            "passing_now": self.passing_now,
            "practice": self.practice,
        }


@dataclass(frozen=True)
class Progress:
    xp: int
    xp_max: int
    streak: int
    longest_streak: int
    last_progress_day: date | None
    progress_days: int
    practice: bool
    lessons: tuple[LessonProgress, ...]
    regressions: tuple[str, ...]  # earned, but failing now
    today: date  # in the course time zone: the streak is as of this day
    graded_commits: int

    def to_json(self) -> dict[str, Any]:
        """progress.json on the grades branch."""
        return {
            "v": VERSION,
            "xp": self.xp,
            "xp_max": self.xp_max,
            "streak": self.streak,
            "longest_streak": self.longest_streak,
            "last_progress_day": self.last_progress_day.isoformat() if self.last_progress_day else None,
            "progress_days": self.progress_days,
            "as_of": self.today.isoformat(),
            "practice": self.practice,
            "graded_commits": self.graded_commits,
            "regressions": list(self.regressions),
            "lessons": [lesson.to_json() for lesson in self.lessons],
        }


def _zone(tz: str) -> ZoneInfo:
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise ValueError(
            f"unknown time zone {tz!r} (expected an IANA name such as 'Europe/Madrid')"
        ) from None


def _streaks(days: list[date]) -> list[tuple[date, int]]:
    """(last day, length) of each run of consecutive days; `days` sorted and distinct."""
    runs: list[tuple[date, int]] = []
    for day in days:
        if runs and day - runs[-1][0] == timedelta(days=1):
            runs[-1] = (day, runs[-1][1] + 1)
        else:
            runs.append((day, 1))
    return runs


def compute_progress(
    records: Iterable[Record], tz: str, *, now: datetime | None = None, current: Record | None = None
) -> Progress:
    """XP, streaks and per-lesson state of a history (rules in the module docstring)."""
    zone = _zone(tz)
    now = datetime.now(timezone.utc) if now is None else _aware(now, "now")
    today = now.astimezone(zone).date()

    unique: dict[str, Record] = {}
    for record in records:
        unique.setdefault(record.commit, record)
    if current is not None:
        unique.setdefault(current.commit, current)
    ordered = sorted(unique.values(), key=lambda r: (r.committed_at, r.graded_at))
    reference = current if current is not None else (ordered[-1] if ordered else None)

    best: dict[str, float] = {}
    earned_on: dict[str, date] = {}
    earned_hidden: set[str] = set()
    latest: dict[str, LessonEntry] = {}  # the lesson in the latest record that graded it
    days: set[date] = set()
    for record in ordered:
        day = record.committed_at.astimezone(zone).date()
        progressed = False
        for lesson in record.lessons:
            if lesson.score > best.get(lesson.id, 0.0) + _EPS:
                progressed = True
            if lesson.completed and lesson.id not in earned_on:
                progressed = True
                earned_on[lesson.id] = day
            if lesson.completed and lesson.mode == "hidden":
                earned_hidden.add(lesson.id)
            best[lesson.id] = max(best.get(lesson.id, 0.0), lesson.score)
            latest[lesson.id] = lesson
        if progressed:
            days.add(day)

    now_graded = {lesson.id: lesson for lesson in reference.lessons} if reference else {}
    # Course order: the reference run's lessons first, then any no longer graded, by first sight.
    order = list(now_graded) + [lesson_id for lesson_id in latest if lesson_id not in now_graded]
    lessons = []
    for lesson_id in order:
        last = now_graded.get(lesson_id) or latest[lesson_id]
        passing = now_graded[lesson_id].completed if lesson_id in now_graded else None
        earned = lesson_id in earned_on
        lessons.append(
            LessonProgress(
                id=lesson_id,
                earned=earned,
                earned_on=earned_on.get(lesson_id),
                best_score=max(best.get(lesson_id, 0.0), last.score),
                max_score=last.max_score,
                xp_max=last.xp_max,
                passing_now=passing,
                practice=earned and lesson_id not in earned_hidden,
            )
        )

    runs = _streaks(sorted(days))
    last_day = runs[-1][0] if runs else None
    streak = runs[-1][1] if runs and last_day >= today - timedelta(days=1) else 0
    return Progress(
        xp=sum(lesson.xp_max for lesson in lessons if lesson.earned),
        xp_max=reference.xp_max if reference else 0,
        streak=streak,
        longest_streak=max((length for _, length in runs), default=0),
        last_progress_day=last_day,
        progress_days=len(days),
        practice=any(lesson.practice for lesson in lessons),
        lessons=tuple(lessons),
        regressions=tuple(lesson.id for lesson in lessons if lesson.earned and lesson.passing_now is False),
        today=today,
        graded_commits=len(ordered),
    )


# --- Badge -----------------------------------------------------------------------------------


def badge(progress: Progress, lang: str, course: str) -> dict[str, Any]:
    """A shields.io endpoint badge (https://shields.io/badges/endpoint-badge) for badge.json."""
    i18n.catalog(lang)  # an unknown language is the caller's bug: fail loudly
    message = i18n.translate("progress.badge_xp", lang, xp=progress.xp, xp_max=progress.xp_max)
    if progress.practice:
        message += " " + i18n.translate("progress.badge_practice", lang)
    if progress.streak > 0:
        key = "progress.badge_streak_one" if progress.streak == 1 else "progress.badge_streak_many"
        message += " · " + i18n.translate(key, lang, days=progress.streak)
    if progress.xp == 0:
        color = "lightgrey"
    elif progress.xp >= progress.xp_max:
        color = "brightgreen"
    else:
        color = "yellow"
    return {"schemaVersion": 1, "label": course, "message": message, "color": color, "cacheSeconds": 300}
