"""Checks judged only in the official grade (skipped in practice: engine.official_only, said in
full once and "También se juzga solo en la nota oficial." after) are not failures, so the terminal
never groups them as "Esta misma causa hace fallar N comprobaciones (0 puntos)"; checks that do
fail for one cause still are. (tests/learner/test_release_blame.py sees the same in a real
release's `check 03`.)"""

from __future__ import annotations

from autograder.core.results import CheckResult, CourseResult, Feedback, LessonResult, Status, message
from autograder.render.terminal import render_text


def skipped(check_id: str, key: str) -> CheckResult:
    return CheckResult(check_id, None, Status.SKIPPED, 0, 0, Feedback.of(message(key)))


def test_official_only_checks_are_each_said_and_never_grouped_as_failures():
    missing = Feedback.of(message("engine.missing_file", file="attention_numpy.py"))
    checks = [
        CheckResult("np-1", "np-mask", Status.FAILED, 0, 2, missing),
        CheckResult("np-2", "np-mask", Status.FAILED, 0, 3, missing),
        skipped("quiz-1", "engine.official_only"),
        skipped("quiz-2", "engine.official_only_again"),
        skipped("quiz-3", "engine.official_only_again"),
    ]
    lesson = LessonResult("03", "atencion-causal", {"es": "t"}, 50, checks, mode="practice")
    result = CourseResult("c", "es", 1, [lesson])
    text = " ".join(render_text(result, "es", color=False, width=200).split())
    # The real failures: one cause, said once, named as such.
    assert "Esta misma causa hace fallar 2 comprobaciones (5 puntos); las otras: np-2." in text
    # The official-only checks: each on its own line, none grouped.
    assert text.count("Esta misma causa") == 1, text
    assert "quiz-3" in text and "las otras: quiz" not in text
    assert text.count("se juzga solo en la nota oficial") == 3, text
    assert "(0 puntos)" not in text
