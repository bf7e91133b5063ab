"""Practice grading tells the learner what official grading tells them (issue 30's CI sample).

For each lesson whose catalog (tests/lessons/lessonNN_variants.py) names a PRACTICE_SAMPLE of
buggy variants, the lesson's graders are copied as the learner release ships them (no
reference.py, no official-only checks, no quiz key; a current recording beside them, made in
that copy when the committed one is stale or absent), and each sample variant is graded twice
with the real engine: officially (the live reference, the suite's seed) and in practice (the
recording, its practice seed, in a learner's repository without solutions/, as `autograder
check` grades it). See tests/support/agreement.py.

What must hold for each sample variant: the same next step (the TODO to fix first), no check
told differently (other catalog keys or pictures) or failed in practice only, and at least one
check of the variant's TODO that failed officially judged in practice; a check judged only
officially (a reference call on the learner's own values) is the inventory's business. The
solution itself gets no failure in practice.

Not collected, and so never counted as passed: a lesson whose catalog names no PRACTICE_SAMPLE,
or whose graders still import reference.py themselves (no recording can stand in for them).
A lesson that is collected and whose recording cannot be made FAILS: nothing is skipped.

One test per lesson, so that its recording is made once on whichever worker takes it; the full
table over every buggy variant is bench/bench_practice_agreement.py, not CI.
"""

from __future__ import annotations

import pytest
from support import agreement
from support.project import ROOT

from autograder.core.manifest import load_course
from autograder.core.results import CourseResult, Status
from autograder.engine import recording
from autograder.engine.grading import GRADERS_ROOT, grade
from autograder.render.figures import write_figures

COURSE = load_course(ROOT / "course.yml")
SAMPLED = [
    pytest.param(lesson, id=lesson.id)
    for lesson in COURSE.lessons
    if agreement.practice_sample(lesson) and recording.converted(GRADERS_ROOT / lesson.graders)
]


@pytest.mark.parametrize("lesson", SAMPLED)
def test_practice_tells_what_the_official_grade_tells(course, lesson, tmp_path):
    release = agreement.release_graders(course, lesson, tmp_path / "release")
    assert release is not None, f"lesson {lesson.id}: no recording could be made for its graders"

    # The solution in practice: nothing fails (a check it cannot answer is only skipped).
    mine = agreement.learner_repository(
        course, lesson, agreement.learner_files(lesson), tmp_path / "solution"
    )
    with agreement.graders_at(release):
        result = grade(mine, [mine.lesson(lesson.id)]).lessons[0]
    assert result.mode == "practice"
    failing = {c.id: c.feedback for c in result.checks if c.status in (Status.FAILED, Status.ERROR)}
    assert failing == {} and result.completed

    problems = []
    for variant in agreement.practice_sample(lesson):
        told = agreement.grade_both(course, lesson, variant, release, tmp_path / "variants")
        # Never vacuous: the official grade catches the variant, so there is something to compare.
        assert told.official.step[0] is not None and told.official.checks, variant.name
        assert not told.official.completed and not told.practice.completed, variant.name
        problems += [f"{variant.name}: {line}" for line in told.disagreements]
        # The variant's own TODO is diagnosed in practice: at least one of its checks that failed
        # officially was judged there (and, as every answered check, the same way). Other checks
        # judged only officially (a reference call on the learner's own values) are the
        # inventory's business (bench/bench_practice_agreement.py), not a disagreement.
        own = [c for c in told.answerable if variant.todo is None or _todo(lesson, c) == variant.todo]
        if not own:
            problems.append(
                f"{variant.name}: no check of its TODO that failed officially was judged in practice"
            )
        _expect_figures_saved(course, told.results[1], tmp_path / "figures" / variant.name)
    assert not problems, "\n".join(problems)


def _todo(lesson, check_id: str) -> str | None:
    return lesson.check(check_id).todo


def _expect_figures_saved(course, practice, folder) -> None:
    """The pictures a practice result carries are drawn where `check` saves them (the README of
    lesson 03 promises the attention matrix of a failing mask check in .autograder/figuras/)."""
    count = sum(len(check.figures) for check in practice.checks)
    if not count:
        return
    written = write_figures(CourseResult(course.name, "es", 0, [practice]), folder, "es")
    assert len(written) == count and all(path.read_bytes().startswith(b"\x89PNG") for path in written)


def test_a_check_practice_cannot_answer_is_never_counted_as_agreeing():
    """compare() on made-up stories: an official failure the practice grading only skipped as
    "official only" is counted apart (not SAME), as are a different diagnosis, a different
    picture count, a practice-only failure and a different next step."""
    failed = agreement.CheckStory("failed", ("lesson03.called", "lesson03.diag_scale_none"))
    official = agreement.Story(
        ("todo", "scaling"),
        {
            "scaling": failed,
            "heads-merge": agreement.CheckStory("failed", ("lesson03.merge_hint",)),
            "weights-causal": agreement.CheckStory("failed", ("lesson03.future_weights",), figures=1),
            "shapes": agreement.CheckStory("passed"),
            "np-edges": agreement.CheckStory("passed"),
        },
        completed=False,
    )
    practice = agreement.Story(
        ("todo", "mask"),
        {
            "scaling": failed,
            "heads-merge": agreement.CheckStory(agreement.OFFICIAL_ONLY),
            "weights-causal": agreement.CheckStory("failed", ("lesson03.future_weights",), figures=0),
            "shapes": agreement.CheckStory("failed", ("lesson03.shape_wrong",)),
            "np-edges": agreement.CheckStory(agreement.OFFICIAL_ONLY),
        },
        completed=False,
    )
    told = agreement.compare("made-up", official, practice)
    assert told.checks == {
        "scaling": agreement.SAME,
        "heads-merge": agreement.OFFICIAL_ONLY,
        "weights-causal": agreement.DIFFERENT,
        "shapes": agreement.PRACTICE_ONLY,
    }
    assert told.answerable == ["scaling", "weights-causal"]
    assert not told.same_step
    assert [line.split(":")[0] for line in told.disagreements] == ["next step", "weights-causal", "shapes"]
