"""Practice grading against official grading, for one lesson's variant submissions.

The learner release grades with the hidden graders' own checks, answered from a RECORDING of
reference values for fixed practice inputs (autograder/engine/recording.py) instead of the
reference code. This module grades a submission both ways and says whether they tell the
learner the same story:

- official: the graders as the instructor has them (reference.py, official-only checks, quiz),
  at the suite's seed (fresh inputs, as an official run has: learning the recorded values earns
  nothing there);
- practice: a copy of the graders as the release ships them (no reference.py, no
  test_official_*.py, no test_quiz.py; recording.json/.npz beside them), at the recording's
  practice seed. The recording is the committed one when it is current, else one made into the
  copy (course/record.py's record_lesson, what `autograder record` runs).

What must agree: the learner's next step (learner/steps.py: the TODO to fix first) and, check by
check, the diagnosis: the catalog keys of the failed check's feedback. A check the practice
grading could not answer (engine.official_only: a reference call on the learner's own values,
or an official-only check) is counted apart as "official only", never as agreeing.

Used by tests/lessons/test_practice_agreement.py (a CI sample per lesson) and
bench/bench_practice_agreement.py (every buggy variant of every catalog).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from autograder.core.manifest import Course, Lesson
from autograder.core.results import CheckResult, LessonResult, Status, Text
from autograder.engine import recording
from autograder.engine.grading import GRADERS_ROOT, grade
from autograder.learner.steps import lesson_next_step
from support.project import SEED
from support.variants import Variant, solution_files

OFFICIAL_ONLY_KEYS = frozenset({"engine.official_only", "engine.official_only_again"})
# The per-check verdicts of a comparison.
SAME, DIFFERENT, OFFICIAL_ONLY, PRACTICE_ONLY = "same", "different", "official-only", "practice-only"


def catalog(lesson: Lesson):
    """tests/lessons/lesson<id>_variants.py."""
    return importlib.import_module(f"lessons.lesson{lesson.id}_variants")


def practice_sample(lesson: Lesson) -> tuple[Variant, ...]:
    """The lesson's PRACTICE_SAMPLE as variants (empty when its catalog defines none); a name
    that is not a buggy variant of the catalog is an error, not a silent skip."""
    module = catalog(lesson)
    names = getattr(module, "PRACTICE_SAMPLE", ())
    buggy = {variant.name: variant for variant in module.BUGGY}
    unknown = [name for name in names if name not in buggy]
    if unknown:
        raise LookupError(f"lesson {lesson.id}: PRACTICE_SAMPLE names no buggy variant {unknown}")
    return tuple(buggy[name] for name in names)


# --------------------------------------------------------------------------- the stories


@dataclass(frozen=True)
class CheckStory:
    status: str  # "passed" | "failed" | "error" | "skipped" | OFFICIAL_ONLY
    keys: tuple[str, ...] = ()  # the catalog keys of a failed check's feedback, in order
    figures: int = 0  # pictures it leaves for `check` to save (.autograder/figuras/)

    @property
    def failing(self) -> bool:
        return self.status in (Status.FAILED.value, Status.ERROR.value)


@dataclass(frozen=True)
class Story:
    """What one grading tells the learner: the next step and each check's diagnosis."""

    step: tuple[str | None, str | None]  # (kind, todo) of learner/steps.py's next step; (None, None): done
    checks: dict[str, CheckStory]
    completed: bool


def check_story(check: CheckResult) -> CheckStory:
    keys = tuple(part.key for part in check.feedback.parts if isinstance(part, Text))
    if check.status is Status.SKIPPED and OFFICIAL_ONLY_KEYS & set(keys):
        return CheckStory(OFFICIAL_ONLY)
    if check.status in (Status.FAILED, Status.ERROR):
        return CheckStory(check.status.value, keys, len(check.figures))
    return CheckStory(check.status.value)


def story(course: Course, lesson: Lesson, result: LessonResult) -> Story:
    step = lesson_next_step(course, lesson, result)
    return Story(
        (step.kind, step.todo) if step is not None else (None, None),
        {check.id: check_story(check) for check in result.checks},
        result.completed,
    )


@dataclass
class Agreement:
    """Official and practice stories of one submission, compared."""

    variant: str
    official: Story
    practice: Story
    # check id -> SAME | DIFFERENT | OFFICIAL_ONLY | PRACTICE_ONLY, for every check that failed
    # in either grading (a check both passed, or both skipped, tells nothing).
    checks: dict[str, str] = field(default_factory=dict)
    results: tuple[LessonResult, LessonResult] | None = None  # (official, practice), by grade_both

    @property
    def same_step(self) -> bool:
        return self.official.step == self.practice.step

    @property
    def answerable(self) -> list[str]:
        """Checks failed officially that the practice grading judged."""
        return [c for c, verdict in self.checks.items() if verdict in (SAME, DIFFERENT)]

    @property
    def disagreements(self) -> list[str]:
        """One line per thing the two gradings tell differently."""
        lines = []
        if not self.same_step:
            lines.append(f"next step: official {self.official.step}, practice {self.practice.step}")
        for check, verdict in self.checks.items():
            official, practice = self.official.checks.get(check), self.practice.checks.get(check)
            if verdict == DIFFERENT:
                lines.append(
                    f"{check}: official {official.status} {list(official.keys)} ({official.figures} figures), "
                    f"practice {practice.status} {list(practice.keys)} ({practice.figures} figures)"
                )
            elif verdict == PRACTICE_ONLY:
                lines.append(
                    f"{check}: official {official.status}, practice {practice.status} {list(practice.keys)}"
                )
        return lines


def compare(variant: str, official: Story, practice: Story) -> Agreement:
    agreement = Agreement(variant, official, practice)
    for check, theirs in official.checks.items():
        ours = practice.checks.get(check, CheckStory(OFFICIAL_ONLY))
        if not (theirs.failing or ours.failing):
            continue
        if not theirs.failing:
            agreement.checks[check] = PRACTICE_ONLY  # practice fails what the official grade passes
        elif ours.status == OFFICIAL_ONLY:
            agreement.checks[check] = OFFICIAL_ONLY
        elif ours.failing and (ours.keys, ours.figures) == (theirs.keys, theirs.figures):
            agreement.checks[check] = SAME
        else:
            agreement.checks[check] = DIFFERENT
    return agreement


# --------------------------------------------------------------------------- the two gradings


@contextlib.contextmanager
def graders_at(root: Path):
    """Grading reads its graders from `root` (engine/grading.py's $AUTOGRADER_GRADERS)."""
    previous = os.environ.get("AUTOGRADER_GRADERS")
    os.environ["AUTOGRADER_GRADERS"] = str(root)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("AUTOGRADER_GRADERS", None)
        else:
            os.environ["AUTOGRADER_GRADERS"] = previous


def release_graders(course: Course, lesson: Lesson, dest: Path) -> Path | None:
    """A copy at `dest` of the graders root holding `lesson`'s graders as the learner release
    ships them, with a current recording; returns the copy's root, or None when the lesson's
    graders cannot be recorded (still import reference.py, or the solutions fail them)."""
    from autograder.course import record

    source = GRADERS_ROOT / lesson.graders
    if not recording.converted(source):
        return None
    root = Path(dest) / "graders"
    root.mkdir(parents=True, exist_ok=True)
    for name in ("__init__.py", "pytest.ini"):
        if (GRADERS_ROOT / name).is_file():
            shutil.copy2(GRADERS_ROOT / name, root / name)
    folder = root / lesson.graders
    shutil.copytree(source, folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    with graders_at(root):
        if record.status(course, lesson) != record.CURRENT:
            made = record.record_lesson(course, lesson)
            if made.state != "recorded":
                return None
    for path in folder.rglob("*"):
        if path.is_file() and not recording.shipped(path.relative_to(folder).as_posix()):
            if path.name not in (recording.JSON_NAME, recording.NPZ_NAME):
                path.unlink()
    return root


def write_lesson(course: Course, lesson: Lesson, files: dict[str, str], dest: Path) -> Path:
    """The submission as a learner's repository lays it out: `lesson`'s files in its folder, and
    beside it the solved files of the lessons it uses (the practice grading imports the
    learner's own earlier pieces, which no reference replaces there). Returns the lesson's folder."""
    root = Path(dest)
    for used in (course.lesson(u) for u in lesson.uses):
        folder = root / used.folder
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in solution_files(used).items():
            (folder / name).write_text(text, encoding="utf-8")
    folder = root / lesson.folder
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def grade_both(course: Course, lesson: Lesson, variant: Variant, release_root: Path, work: Path) -> Agreement:
    """Grade `variant` officially (the live graders, the suite's seed) and in practice (the
    release copy at `release_root`, its recording's seed) and compare the two stories."""
    files = solution_files(lesson)
    files.update(variant.apply(files))
    folder = write_lesson(course, lesson, files, Path(work) / variant.name)
    with graders_at(GRADERS_ROOT):
        official = grade(course, [lesson], folder, seed=SEED).lessons[0]
    with graders_at(release_root):
        practice = grade(course, [lesson], folder).lessons[0]
    assert practice.mode == "practice", f"{variant.name}: the release copy did not grade in practice mode"
    agreement = compare(variant.name, story(course, lesson, official), story(course, lesson, practice))
    agreement.results = (official, practice)
    return agreement


# --------------------------------------------------------------------------- the inventory


@dataclass
class Inventory:
    """Per lesson: the checks the recording answers, and those judged only officially."""

    lesson: str
    answerable: set[str] = field(default_factory=set)
    official_only: set[str] = field(default_factory=set)  # never answered in practice
    sometimes: set[str] = field(default_factory=set)  # answered for some submissions, not others

    def add(self, practice: Story) -> None:
        for check, told in practice.checks.items():
            if told.status == OFFICIAL_ONLY:
                self.official_only.add(check)
            else:
                self.answerable.add(check)
        self.sometimes = self.answerable & self.official_only


__all__ = [
    "DIFFERENT",
    "OFFICIAL_ONLY",
    "PRACTICE_ONLY",
    "SAME",
    "Agreement",
    "CheckStory",
    "Inventory",
    "Story",
    "catalog",
    "compare",
    "grade_both",
    "graders_at",
    "practice_sample",
    "release_graders",
    "solution_files",
    "story",
    "write_lesson",
]
