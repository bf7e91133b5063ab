"""Practice grading against official grading, for one lesson's variant submissions.

The learner release grades with the hidden graders' own checks, answered from a RECORDING of
reference values for fixed practice inputs (autograder/engine/recording.py) instead of the
reference code. This module grades a submission both ways and says whether they tell the
learner the same story:

- official: the graders as the instructor has them (reference.py, official-only checks, quiz),
  at the suite's seed (fresh inputs, as an official run has: learning the recorded values earns
  nothing there);
- practice: a copy of the graders as the release ships them (no reference.py, no
  test_official_*.py, no test_quiz.py; recording.json/.npz beside them), grading a learner's
  repository (course.yml and exercises/, no solutions/) as `autograder check` does, at the
  recording's practice seed. The recording is the committed one when it is current, else one
  made into the copy (course/record.py's record_lesson, what `autograder record` runs).

The learner's files are the finished lesson with each TODO's stub comments kept above its code
(as a learner who filled in the stub has them), the variant's substitutions made there.

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

from autograder.core import regions
from autograder.core.manifest import Course, Lesson, load_course
from autograder.core.results import CheckResult, LessonResult, Status, Text
from autograder.course.stubs import lesson_files
from autograder.engine import recording
from autograder.engine.grading import GRADERS_ROOT, grade
from autograder.learner.steps import lesson_next_step
from support.project import ROOT, SEED
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


def learner_files(lesson: Lesson, variant: Variant | None = None, *, comments: bool = True) -> dict[str, str]:
    """A finished lesson as a learner's files, with `variant`'s substitutions. With `comments`
    (the default) each TODO's comment lines from the stub stay above the learner's code, as in
    a file a learner filled in (engine/blame.py then knows a line's TODO from them, as it must in
    a learner's repository, where no stubs are made from solutions); without, the solution with
    its markers stripped (the catalogs' own form). A variant whose `find` texts do not each occur
    once in the commented form is applied to the stripped one."""
    stripped = solution_files(lesson)
    files = dict(stripped)
    if comments:
        folder = lesson_files(ROOT, lesson.folder)
        titles = {todo.id: todo.title["es"] for todo in lesson.todos}
        for name in lesson.files:
            if name.endswith(".py"):
                files[name] = commented(folder[name].read_text(encoding="utf-8"), name, titles)
    if variant is None:
        return files
    if any(files[variant.file].count(find) != 1 for find, _ in variant.substitutions):
        files[variant.file] = stripped[variant.file]
    files.update(variant.apply(files))
    return files


def commented(marked: str, filename: str, titles: dict[str, str]) -> str:
    """A marked solution file with each region's markers replaced by the comment lines its stub
    shows (`# TODO [id]: ...`), its code kept: what a learner who wrote every TODO has."""
    lines = marked.split("\n")  # solutions/ is committed with \n line ends
    out, position = [], 0
    for region in regions.parse_regions(marked, filename):
        out += lines[position : region.start_line - 1]
        out += [line for line in region.stub(titles.get(region.id)) if line.lstrip().startswith("#")]
        out += region.body
        position = region.end_line
    return "\n".join(out + lines[position:])


def learner_repository(course: Course, lesson: Lesson, files: dict[str, str], dest: Path) -> Course:
    """A learner's repository at `dest`, as the release hands it out and a learner fills it in:
    course.yml and exercises/ (every lesson's stubs), no solutions/; `lesson`'s folder holds
    `files`, and the lessons it uses their finished files (the practice grading imports the
    learner's own earlier pieces: no reference replaces them there). Returns its course."""
    root = Path(dest)
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy2(course.root / "course.yml", root / "course.yml")
    shutil.copytree(course.root / "exercises", root / "exercises", dirs_exist_ok=True)
    for used in (course.lesson(u) for u in lesson.uses):
        for name, text in learner_files(used).items():
            (root / "exercises" / used.folder / name).write_text(text, encoding="utf-8")
    for name, text in files.items():
        (root / "exercises" / lesson.folder / name).write_text(text, encoding="utf-8")
    return load_course(root / "course.yml")


def grade_both(
    course: Course, lesson: Lesson, variant: Variant, release_root: Path, work: Path, *, comments: bool = True
) -> Agreement:
    """Grade `variant` officially (the live graders, the instructor's checkout with solutions/,
    the suite's seed) and in practice (the release copy at `release_root`, in a learner's
    repository without solutions/, as `autograder check` grades it, at the recording's seed),
    and compare the two stories."""
    files = learner_files(lesson, variant, comments=comments)
    mine = learner_repository(course, lesson, files, Path(work) / variant.name)
    folder = mine.root / "exercises" / lesson.folder
    with graders_at(GRADERS_ROOT):
        official = grade(course, [lesson], folder, seed=SEED).lessons[0]
    with graders_at(release_root):
        practice = grade(mine, [mine.lesson(lesson.id)]).lessons[0]
    assert practice.mode == "practice", f"{variant.name}: the release copy did not grade in practice mode"
    agreement = compare(
        variant.name, story(course, lesson, official), story(mine, mine.lesson(lesson.id), practice)
    )
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
    "commented",
    "graders_at",
    "learner_files",
    "learner_repository",
    "practice_sample",
    "release_graders",
    "solution_files",
    "story",
]
