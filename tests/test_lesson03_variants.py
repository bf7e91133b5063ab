"""Prove lesson 03's hidden graders against a catalog of variant submissions.

Every buggy variant (tests/lesson03_variants.py) must be caught by a check of the TODO where
the mistake lives, with a message a learner can read (no raw Python traceback), and where the
catalog says so, without failing checks of unrelated TODOs; every correct-but-different
variant must get full marks. Each grading runs the real engine with real worker processes
(~4 s each).
"""

from __future__ import annotations

import pytest
from conftest import failed, solution_files
from lesson03_variants import BUGGY, CORRECT, Variant

from autograder.i18n import feedback_text
from autograder.results import Status

TRACEBACK_HEADER = "Traceback (most recent call last)"


def _report(result) -> str:
    lines = []
    for check in failed(result):
        text = feedback_text(check.feedback, "es")
        lines.append(f"--- {check.id} [{check.todo}] {check.status.value}\n{text}")
    return "\n".join(lines) or "(no failed checks)"


def test_catalog_is_well_formed(lesson03):
    files = solution_files(lesson03)
    names = [v.name for v in BUGGY + CORRECT]
    assert len(names) == len(set(names)), "variant names must be unique"
    todos = {todo.id for todo in lesson03.todos}
    problems = []
    for variant in BUGGY + CORRECT:
        assert variant.file in files, f"variant {variant.name!r}: unknown file {variant.file}"
        counts = variant.occurrences(files)
        if variant.todo is not None and variant.todo not in todos:
            problems.append(f"{variant.name}: unknown TODO {variant.todo!r}")
        if counts != [1] * len(counts):
            problems.append(f"{variant.name}: a `find` text occurs {counts} times in {variant.file} (must be once)")
        elif variant.apply(files)[variant.file] == files[variant.file]:
            problems.append(f"{variant.name}: the substitution changes nothing")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("variant", BUGGY, ids=lambda v: v.name)
def test_buggy_variant_is_caught(variant: Variant, lesson03, grade_files):
    result = grade_files(variant.apply(solution_files(lesson03)))
    assert not result.completed, f"{variant.name} ({variant.note}) escaped: the lesson was completed"
    caught = [c for c in failed(result) if variant.todo is None or c.todo == variant.todo]
    assert caught, (f"{variant.name} ({variant.note}): no failed check names TODO [{variant.todo}]; "
                    f"failed checks:\n{_report(result)}")
    for check in caught:
        text = feedback_text(check.feedback, "es")
        assert text.strip(), f"{variant.name}: check {check.id} failed with an empty message"
        assert TRACEBACK_HEADER not in text, f"{variant.name}: check {check.id} shows a raw traceback:\n{text}"
    if variant.collateral is not None:
        allowed = {variant.todo, None, *variant.collateral}
        misattributed = [c for c in failed(result) if c.todo not in allowed]
        assert not misattributed, (
            f"{variant.name} ({variant.note}) also fails checks of other TODOs "
            f"({', '.join(f'{c.id} [{c.todo}]' for c in misattributed)}):\n{_report(result)}")


@pytest.mark.parametrize("variant", CORRECT, ids=lambda v: v.name)
def test_correct_variant_gets_full_marks(variant: Variant, lesson03, grade_files):
    result = grade_files(variant.apply(solution_files(lesson03)))
    assert result.completed and result.score == result.max_score, (
        f"{variant.name} ({variant.note}) lost points "
        f"({result.score}/{result.max_score}):\n{_report(result)}")
    assert not any(c.status is Status.ERROR for c in result.checks)
