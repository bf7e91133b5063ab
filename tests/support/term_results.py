"""A grading result made by hand for the term's tests (tests/cohort/test_term_grades.py,
tests/service/test_term_export.py): every check of the given lessons at one fraction of its points,
so that a learner's grade and its penalty can be computed by hand."""

from __future__ import annotations

from autograder.core.results import CheckResult, CourseResult, LessonResult, Status
from autograder.render.output import render_json


def result_json(course, lesson_ids, fraction: float) -> str:
    """The results JSON of `course`'s `lesson_ids`, each check scoring `fraction` of its points
    (passed at 1.0, failed below)."""
    lessons = []
    for lid in lesson_ids:
        lesson = course.lesson(lid)
        checks = [
            CheckResult(
                spec.id,
                spec.todo,
                Status.PASSED if fraction == 1.0 else Status.FAILED,
                float(spec.points) * fraction,
                float(spec.points),
            )
            for spec in lesson.checks
        ]
        lessons.append(LessonResult(lesson.id, lesson.slug, dict(lesson.title), lesson.xp, checks))
    return render_json(CourseResult(course.name, "es", 1, lessons), "es")
