"""A variant submission: one exact text substitution on a finished solution file, used to
prove a lesson's hidden graders (tests/lessons/lessonNN_variants.py hold each lesson's catalog;
tests/lessons/test_variants.py grades them all).

- BUGGY: a realistic learner mistake. The graders must catch it: the lesson is not completed
  and at least one failed check names the TODO where the mistake lives (`todo`; None when the
  mistake is outside every TODO region, and then any failed check will do). It costs only that
  TODO: every other failed check belongs to no TODO, or says it waits on this one (the
  learner's code raised in this TODO's code, or a grader could not judge past its result).
- CORRECT: a different but correct way to write the same thing. It must get full marks.

`find` must occur exactly once in the file, so that an edit of the solution cannot silently
disarm a variant (`Variant.apply` asserts it, naming the variant). A `find` may span several
lines, which is how a variant replaces a whole function body.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from autograder.course.stubs import REGION_SUFFIXES, lesson_files, strip_markers

ROOT = Path(__file__).resolve().parents[2]


def solution_files(lesson) -> dict[str, str]:
    """The finished files of a lesson: its solution folder (exercises/ overlaid with the marked
    files of solutions/) without region markers (what a variant changes; tests/conftest.py and
    bench/sweep_seeds.py use it)."""
    folder = lesson_files(ROOT, lesson.folder)
    names = [*lesson.files] + ([lesson.quiz] if lesson.quiz else [])
    return {name: strip_markers(folder[name].read_text(encoding="utf-8"), name) for name in names}


def solution_folder(lesson_folder: str, dest: Path, *, strip: bool = False) -> Path:
    """A whole solved lesson folder at `dest`: exercises/<folder>'s files overlaid with the
    marked files of solutions/<folder> (which holds only those), their markers kept or, with
    `strip`, removed."""
    for rel, source in lesson_files(ROOT, lesson_folder).items():
        target = Path(dest) / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
        if strip and rel.endswith(REGION_SUFFIXES):
            target.write_text(
                strip_markers(target.read_text(encoding="utf-8"), target.name), encoding="utf-8"
            )
    return Path(dest)


@dataclass(frozen=True)
class Variant:
    name: str
    file: str
    find: str
    replace: str
    todo: str | None = None  # the TODO a failing check must name (None: any failed check)
    note: str = ""  # what the learner did, in a few words
    also: tuple[tuple[str, str], ...] = ()  # further (find, replace) pairs in the same file

    @property
    def substitutions(self) -> tuple[tuple[str, str], ...]:
        return ((self.find, self.replace), *self.also)

    def occurrences(self, files: dict[str, str]) -> list[int]:
        """How many times each `find` occurs in the untouched file (each must be 1)."""
        return [files[self.file].count(find) for find, _ in self.substitutions]

    def apply(self, files: dict[str, str]) -> dict[str, str]:
        """{file: text} with this variant's substitutions made; only the changed file."""
        text = files[self.file]
        for find, replace in self.substitutions:
            count = text.count(find)
            assert count == 1, (
                f"variant {self.name!r}: its `find` text occurs {count} times in {self.file} "
                f"(it must occur exactly once; did the solution change?):\n{find}"
            )
            text = text.replace(find, replace)
        return {self.file: text}
