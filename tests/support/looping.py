"""Submissions that never end, for the tests of what a hang costs (engine/hangs.py): lesson 03's
finished attention with a loop in its TODO [mask] code, and courses whose checks have small
time budgets so a test pays seconds, not the course's 10 s per check."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from autograder.core.manifest import Course, Lesson
from autograder.sandbox import cpu_clock

# In the explicit (non-fused) path only: the fused path never reaches it.
MASK_LINE = '            att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))\n'
# One line, condition and body: a stack sample may land on either, and both are this line.
LOOP = "            while att.shape[-1] > 0: att = att + 0\n"


def loop_in_mask(text: str) -> tuple[str, int]:
    """Lesson 03's finished attention.py with a loop that never ends right after the mask's line
    (only the explicit path reaches it): (text, the 1-based line of the loop)."""
    assert MASK_LINE in text, "lesson 03's solution changed: update tests/support/looping.py"
    before = text.split(MASK_LINE)[0]
    loop_line = before.count("\n") + 1 + 1  # the mask's line, then the loop's
    return text.replace(MASK_LINE, MASK_LINE + LOOP), loop_line


def with_timeouts(lesson: Lesson, seconds: float) -> Lesson:
    """`lesson` with every check's budget `seconds` (informational ones keep theirs)."""
    checks = tuple(c if c.informational else dataclasses.replace(c, timeout=seconds) for c in lesson.checks)
    return dataclasses.replace(lesson, checks=checks)


def course_with_timeouts(course: Course, lesson_id: str, seconds: float) -> Course:
    lessons = tuple(with_timeouts(x, seconds) if x.id == lesson_id else x for x in course.lessons)
    return dataclasses.replace(course, lessons=lessons)


def set_timeouts_in_course_yml(root: Path, lesson_id: str, seconds: float) -> None:
    """Give every check of `lesson_id` in `root`/course.yml a budget of `seconds` (those that
    name their own timeout, and informational ones, keep it)."""
    path = root / "course.yml"
    rows = path.read_text(encoding="utf-8").split("\n")
    inside = False
    for n, row in enumerate(rows):
        if re.match(r'\s*- id: "?(\w+)"?\s*$', row):
            inside = re.search(r'"?(\w+)"?\s*$', row).group(1) == lesson_id
        elif inside and re.match(r"\s*- \{id: [\w-]+, todo: .*points: \d+\}\s*$", row):
            if "timeout" not in row and "informational" not in row:
                rows[n] = row.rstrip().removesuffix("}") + f", timeout: {seconds:g}}}"
    path.write_text("\n".join(rows), encoding="utf-8")


def timeouts_bound(seconds: float, n: int) -> float:
    """Generous wall-clock seconds for `n` checks that each spend their whole budget `seconds`
    (its wall-clock bound, which a loaded machine may need) on top of grading everything else."""
    return n * cpu_clock.wall_bound(seconds) + 120.0
