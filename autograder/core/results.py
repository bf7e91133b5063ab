"""The result model: what grading produced, before any rendering.

Checks produce `Feedback` made of catalog messages (`Text`) and preformatted blocks (`Block`),
never final strings, so that every renderer can localise them (es/en) the same way.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class Status(str, enum.Enum):
    PASSED = "passed"
    FAILED = "failed"  # the check ran: the learner's code behaves wrongly, raised, or is pending
    ERROR = "error"  # the check could not finish: timeout, crashed worker, internal error
    SKIPPED = "skipped"  # not applicable here (e.g. no GPU); worth 0 of 0 points


@dataclass(frozen=True)
class Text:
    """A message from the catalog (autograder/messages/<lang>.yml), with its parameters.

    A parameter may itself be a `Text` or a {"es": ..., "en": ...} dict; both are localised.
    """

    key: str
    params: dict[str, Any] = field(default_factory=dict)


def message(key: str, **params: Any) -> Text:
    """Shorthand for a catalog message: message("engine.timeout", seconds=10)."""
    return Text(key, params)


@dataclass(frozen=True)
class Block:
    """Preformatted text shown verbatim: a heatmap, a trimmed traceback, a tensor excerpt."""

    text: str
    kind: str = "text"  # "text" | "heatmap" | "traceback" | "table" (every kind but "text" is verbatim)


Part = Text | Block


@dataclass(frozen=True, eq=False)
class Figure:
    """An attention matrix a failing check wants drawn where an image can be shown.

    Graders pass it to `fail()` beside the text heatmap; it travels with the check as data and
    becomes a PNG only when a caller asks for figures (autograder/render/figures.py), which then adds a
    line to the feedback saying where the picture is. Nobody who ignores figures sees a change.
    """

    weights: Any  # (T, T) or (heads, T, T) array of attention weights
    leaks: Any = None  # same shape, True where a future cell is visible; None: computed
    title: Text | None = None


@dataclass(frozen=True)
class Feedback:
    parts: tuple[Part, ...] = ()

    @classmethod
    def of(cls, *parts: Part | str) -> "Feedback":
        return cls(tuple(Text(p) if isinstance(p, str) else p for p in parts))

    def __add__(self, other: "Feedback") -> "Feedback":
        return Feedback(self.parts + other.parts)

    def __bool__(self) -> bool:
        return bool(self.parts)


@dataclass(frozen=True)
class RaisedIn:
    """Where the learner's exception was raised: the TODO whose code raised it (autograder/
    blame.py), and the file and line ("" and 0 for a pending TODO's stub)."""

    todo: str
    file: str
    line: int


@dataclass
class CheckResult:
    id: str
    todo: str | None
    status: Status
    score: float
    max_score: float
    feedback: Feedback = field(default_factory=Feedback)
    duration: float = 0.0
    # An informational check (course.yml) is reported but never counts toward completion.
    informational: bool = False
    # Pictures not yet drawn (autograder/render/figures.py draws them and points the feedback at them).
    figures: list[Figure] = field(default_factory=list)
    # The learner's code raised inside this TODO's code (None: no exception, or no claim).
    raised_in: RaisedIn | None = None
    # Set when raised_in names ANOTHER TODO: this check cannot judge its own TODO until that
    # one is fixed, and its message says so.
    waits_on: str | None = None

    @property
    def pending(self) -> Text | None:
        """The engine's "TODO [x] pendiente" message (engine.todo_pending: a TODO still the
        stub stopped this check; params todo and title) when the feedback holds it, else None."""
        return next(
            (
                part
                for part in self.feedback.parts
                if isinstance(part, Text) and part.key == "engine.todo_pending"
            ),
            None,
        )


@dataclass
class LessonResult:
    id: str
    slug: str
    title: dict[str, str]
    xp_max: int
    checks: list[CheckResult]
    # "hidden": the course's hidden graders; "practice": graded on the learner's side (the
    # release), never a record. Every renderer says so.
    mode: str = "hidden"
    # What the points count: "points", the course's checks with course.yml's points (the
    # hidden graders, or their checks answered from a recording); "tests", the lesson's own
    # practice tests, one point each (a lesson with neither graders nor a recording).
    scale: str = "points"
    # What walled in the workers that ran the learner's code (autograder/sandbox/isolation.py's
    # summary); None when no worker started (e.g. the files were missing).
    isolation: dict[str, Any] | None = None

    @property
    def score(self) -> float:
        return sum(c.score for c in self.checks)

    @property
    def max_score(self) -> float:
        return sum(c.max_score for c in self.checks)

    @property
    def counted_checks(self) -> list[CheckResult]:
        # Skipped checks (e.g. the GPU check on a CPU machine) do not count against a lesson,
        # nor do informational ones (whether the learner's own earlier pieces fit).
        return [c for c in self.checks if c.status is not Status.SKIPPED and not c.informational]

    @property
    def completed(self) -> bool:
        graded = self.counted_checks
        return bool(graded) and all(c.status is Status.PASSED for c in graded)

    @property
    def xp(self) -> int:
        return self.xp_max if self.completed else 0


@dataclass
class CourseResult:
    course: str
    language: str
    seed: int
    lessons: list[LessonResult]

    @property
    def xp(self) -> int:
        return sum(lesson.xp for lesson in self.lessons)

    @property
    def practice(self) -> bool:
        """True when any lesson was graded with the practice tests only ("nota de práctica")."""
        return any(lesson.mode == "practice" for lesson in self.lessons)

    @property
    def xp_max(self) -> int:
        return sum(lesson.xp_max for lesson in self.lessons)

    @property
    def isolation(self) -> dict[str, Any] | None:
        """The weakest walls any lesson's workers had (None when no worker ran)."""
        return combine_isolation([lesson.isolation for lesson in self.lessons])

    @property
    def score(self) -> float:
        return sum(lesson.score for lesson in self.lessons)

    @property
    def max_score(self) -> float:
        return sum(lesson.max_score for lesson in self.lessons)


# What an official grade needs, whoever runs it (autograder/sandbox/isolation.py asks the worker
# for these walls; `namespaces` and `user` come on top as root).
REQUIRED_WALLS = ("filesystem", "network", "signals", "processes")


def combine_isolation(summaries: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """Several lessons' summaries as one (the weakest wall wins); None when none was graded."""
    summaries = [s for s in summaries if s]
    if not summaries:
        return None
    enforced = [w for w in summaries[0]["enforced"] if all(w in s["enforced"] for s in summaries)]
    missing = [w for w in REQUIRED_WALLS if w not in enforced]
    # A portable worker's summary (autograder/sandbox/portable.py) may also miss "limits".
    missing += ["limits"] if any("limits" in s.get("missing", ()) for s in summaries) else []
    namespaces = sorted(set.intersection(*(set(s.get("namespaces", [])) for s in summaries)))
    combined = {
        "official": not missing,
        "enforced": enforced,
        "missing": missing,
        "landlock_abi": min(s.get("landlock_abi", 0) for s in summaries),
        "namespaces": namespaces,
        "disabled": any(s.get("disabled") for s in summaries),
    }
    if any(s.get("portable") for s in summaries):
        combined["portable"] = True  # only then: results of the Linux path keep their shape
    return combined
