"""Checks of lesson 06's "Comprueba tu comprensión" answers (quiz.yml)."""

from autograder.engine.quiz import quiz_test

# The key: which option is right; each wrong-answer message names the README section.
test_quiz = quiz_test({1: "b", 2: "d", 3: "c"}, wrong="lesson06.quiz_wrong_{n}")
