"""Hidden checks of the "Comprueba tu comprensión" answers (quiz.yml, read as data only)."""

from __future__ import annotations

import pytest
import yaml

from autograder.checks import fail
from autograder.results import message

QUIZ_FILE = "quiz.yml"
MAX_BYTES = 64 * 1024
# The key: which option is right, and which section of the lesson's README explains it.
ANSWERS = {1: "c", 2: "a", 3: "b"}


def read_answers(submission) -> dict:
    raw = submission.read_file(QUIZ_FILE, MAX_BYTES)
    if raw is None:
        fail(message("engine.missing_file", file=QUIZ_FILE))
    if len(raw) > MAX_BYTES:
        fail(message("lesson03.quiz_too_big"))
    try:
        data = yaml.safe_load(raw.decode("utf-8", errors="replace"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        fail(message("lesson03.quiz_unreadable", line=mark.line + 1 if mark else "?"))
    if data is None:
        data = {}
    if not isinstance(data, dict):
        fail(message("lesson03.quiz_unreadable", line=1))
    return data


@pytest.mark.parametrize("number", [pytest.param(n, marks=pytest.mark.check(f"quiz-{n}")) for n in ANSWERS])
def test_quiz(submission, number):
    answers = read_answers(submission)
    given = answers.get(f"pregunta_{number}")
    if given is None or str(given).strip() == "":
        fail(message("lesson03.quiz_blank", n=number))
    letter = str(given).strip().lower().rstrip(")").strip()
    if letter not in ("a", "b", "c", "d"):
        fail(message("lesson03.quiz_not_letter", n=number, given=str(given)[:40]))
    if letter != ANSWERS[number]:
        fail(message(f"lesson03.quiz_wrong_{number}", given=letter))
