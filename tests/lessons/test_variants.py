"""Prove every lesson's hidden graders against its catalog of variant submissions.

Every buggy variant (tests/lessons/lessonNN_variants.py, one module per lesson in course.yml) must be caught
by a check of the TODO where the mistake lives, with a message a learner can read (no raw Python
traceback), without failing checks of other TODOs (unless they say they wait on that one); every
correct-but-different variant must get full marks. Each grading runs the real engine with real
worker processes (~4 s each).
"""

from __future__ import annotations

import importlib

import pytest
from support.grading import failed
from support.project import ROOT
from support.variants import Variant, solution_files

from autograder.core.i18n import feedback_text
from autograder.core.manifest import load_course
from autograder.core.results import Status

LESSONS = load_course(ROOT / "course.yml").lessons
# Each lesson's catalog: tests/lessons/lesson<id>_variants.py with BUGGY and CORRECT lists.
CATALOGS = {lesson.id: importlib.import_module(f"lessons.lesson{lesson.id}_variants") for lesson in LESSONS}
BUGGY = [
    pytest.param(lesson, v, id=f"{lesson.id}:{v.name}")
    for lesson in LESSONS
    for v in CATALOGS[lesson.id].BUGGY
]
CORRECT = [
    pytest.param(lesson, v, id=f"{lesson.id}:{v.name}")
    for lesson in LESSONS
    for v in CATALOGS[lesson.id].CORRECT
]
# The floor for every lesson's catalog: enough realistic slips per lesson that a grader gap shows.
MIN_BUGGY, MIN_CORRECT = 40, 12

TRACEBACK_HEADER = "Traceback (most recent call last)"


def _report(result) -> str:
    lines = []
    for check in failed(result):
        text = feedback_text(check.feedback, "es")
        lines.append(f"--- {check.id} [{check.todo}] {check.status.value}\n{text}")
    return "\n".join(lines) or "(no failed checks)"


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.id)
def test_catalog_is_well_formed(lesson):
    catalog = CATALOGS[lesson.id]
    assert len(catalog.BUGGY) >= MIN_BUGGY and len(catalog.CORRECT) >= MIN_CORRECT
    files = solution_files(lesson)
    names = [v.name for v in catalog.BUGGY + catalog.CORRECT]
    assert len(names) == len(set(names)), "variant names must be unique"
    todos = {todo.id for todo in lesson.todos}
    problems = []
    for variant in catalog.BUGGY + catalog.CORRECT:
        assert variant.file in files, f"variant {variant.name!r}: unknown file {variant.file}"
        counts = variant.occurrences(files)
        if variant.todo is not None and variant.todo not in todos:
            problems.append(f"{variant.name}: unknown TODO {variant.todo!r}")
        if counts != [1] * len(counts):
            problems.append(
                f"{variant.name}: a `find` text occurs {counts} times in {variant.file} (must be once)"
            )
        elif variant.apply(files)[variant.file] == files[variant.file]:
            problems.append(f"{variant.name}: the substitution changes nothing")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("lesson, variant", BUGGY)
def test_buggy_variant_is_caught(lesson, variant: Variant, grade_files):
    _assert_caught(grade_files(variant.apply(solution_files(lesson)), lesson=lesson), variant)


# (lesson, variant, seed): the suite proves each variant under one fixed seed, learners are
# graded under any. bench/sweep_seeds.py --buggy found these seeds where a variant was caught
# but also cost another TODO (a cascade): each replays here under the same assertions, and the
# check of the variant's TODO must not send the learner to another TODO.
SEED_SENSITIVE = [("01", "offsets-whole-length", 7000), ("01", "offsets-whole-length", 7001)]


@pytest.mark.parametrize(
    "lesson_id, name, seed",
    SEED_SENSITIVE,
    ids=[f"{lesson}:{name}:seed-{seed}" for lesson, name, seed in SEED_SENSITIVE],
)
def test_buggy_variant_is_caught_under_the_seeds_that_once_cascaded(
    course, lesson_id, name, seed, grade_files
):
    lesson = course.lesson(lesson_id)
    variant = next(v for v in CATALOGS[lesson_id].BUGGY if v.name == name)
    result = grade_files(variant.apply(solution_files(lesson)), lesson=lesson, seed=seed)
    _assert_caught(result, variant)
    for check in failed(result):
        if check.todo == variant.todo:
            text = feedback_text(check.feedback, "es")
            others = {todo.id for todo in lesson.todos} - {variant.todo}
            assert not any(f"TODO [{other}]" in text for other in others), (check.id, text)


def _assert_caught(result, variant: Variant) -> None:
    assert not result.completed, f"{variant.name} ({variant.note}) escaped: the lesson was completed"
    caught = [c for c in failed(result) if variant.todo is None or c.todo == variant.todo]
    assert caught, (
        f"{variant.name} ({variant.note}): no failed check names TODO [{variant.todo}]; "
        f"failed checks:\n{_report(result)}"
    )
    for check in caught:
        text = feedback_text(check.feedback, "es")
        assert text.strip(), f"{variant.name}: check {check.id} failed with an empty message"
        assert TRACEBACK_HEADER not in text, (
            f"{variant.name}: check {check.id} shows a raw traceback:\n{text}"
        )
    # One slip costs one TODO: a failed check of another TODO is a misattribution, unless it
    # says it waits on the variant's TODO (CheckResult.waits_on: the learner's code raised
    # there, or a grader could not judge past that TODO's result). Checks of no TODO may fail;
    # a slip outside every TODO (todo None) may fail only those.
    misattributed = [
        c
        for c in failed(result)
        if c.todo not in (variant.todo, None) and (variant.todo is None or c.waits_on != variant.todo)
    ]
    assert not misattributed, (
        f"{variant.name} ({variant.note}) also fails checks of other TODOs "
        f"({', '.join(f'{c.id} [{c.todo}]' for c in misattributed)}):\n{_report(result)}"
    )


@pytest.mark.parametrize("lesson, variant", CORRECT)
def test_correct_variant_gets_full_marks(lesson, variant: Variant, grade_files):
    result = grade_files(variant.apply(solution_files(lesson)), lesson=lesson)
    assert result.completed and result.score == result.max_score, (
        f"{variant.name} ({variant.note}) lost points ({result.score}/{result.max_score}):\n{_report(result)}"
    )
    assert not any(c.status is Status.ERROR for c in result.checks)
