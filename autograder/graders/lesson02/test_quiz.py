"""Hidden checks of lesson 02's "Comprueba tu comprensión" answers (quiz.yml)."""

from autograder.engine.quiz import quiz_test

# The key: which option is right; each wrong-answer message names the README section.
test_quiz = quiz_test({1: "d", 2: "b", 3: "a"}, wrong="lesson02.quiz_wrong_{n}")
