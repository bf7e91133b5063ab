"""Grading a lesson's "Comprueba tu comprensión" answers: quiz.yml read as data only (never
imported), one check per question. A lesson's graders supply the key and, per question, the
catalog message that says where the README explains it:

    # autograder/graders/lessonNN/test_quiz.py
    from autograder.engine.quiz import quiz_test
    test_quiz = quiz_test({1: KEY_1, 2: KEY_2, 3: KEY_3}, wrong="lessonNN.quiz_wrong_{n}")

(each KEY_n the letter of the right option; the keys themselves live only with the hidden graders,
never in this file, which the learner release ships)
"""

from __future__ import annotations

import pytest
import yaml

from autograder.core import yaml_loader
from autograder.core.results import message
from autograder.engine.checks import fail

QUIZ_FILE = "quiz.yml"
MAX_BYTES = 64 * 1024
LETTERS = ("a", "b", "c", "d")


def read_answers(submission) -> dict:
    raw = submission.read_file(QUIZ_FILE, MAX_BYTES)
    if raw is None:
        fail(message("engine.missing_file", file=QUIZ_FILE))
    if len(raw) > MAX_BYTES:
        fail(message("quiz.too_big"))
    try:
        data = yaml_loader.safe_load(raw.decode("utf-8", errors="replace"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        fail(message("quiz.unreadable", line=mark.line + 1 if mark else "?"))
    if data is None:
        data = {}
    if not isinstance(data, dict):
        fail(message("quiz.unreadable", line=1))
    return data


def grade_answer(submission, number: int, answer: str, wrong: str) -> None:
    given = read_answers(submission).get(f"pregunta_{number}")
    if given is None or str(given).strip() == "":
        fail(message("quiz.blank", n=number))
    letter = str(given).strip().lower().rstrip(")").strip()
    if letter not in LETTERS:
        fail(message("quiz.not_letter", n=number, given=str(given)[:40]))
    if letter != answer:
        fail(message(wrong.format(n=number), given=letter))


def quiz_test(answers: dict[int, str], wrong: str):
    """A pytest test with one `quiz-N` check per question; `wrong` is the catalog key of the
    wrong-answer message, with {n} for the question number."""

    @pytest.mark.parametrize(
        "number", [pytest.param(n, marks=pytest.mark.check(f"quiz-{n}")) for n in answers]
    )
    def test_quiz(submission, number):
        grade_answer(submission, number, answers[number], wrong)

    return test_quiz
