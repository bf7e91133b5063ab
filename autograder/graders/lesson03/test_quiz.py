"""Hidden checks of lesson 03's "Comprueba tu comprensión" answers (quiz.yml)."""

from autograder.engine.quiz import quiz_test

# The key: which option is right; each wrong-answer message names the README section.
test_quiz = quiz_test({1: "c", 2: "a", 3: "b"}, wrong="lesson03.quiz_wrong_{n}")
