"""One grading run: the hidden graders run by pytest in the trusted process, each check's verdict.

Owns: grading lessons (grading.py, with the plugin pytest runs the graders under in
pytest_plugin.py; split.py shares a course's lessons between two processes), what a check may
say and how a failure becomes feedback (checks.py, feedback.py), quizzes and practice tests
(quiz.py, practice.py), what a check that runs out of time says and costs the others
(hangs.py), which TODO a learner's error blames (blame.py), a learner's file that does not
load and a practice test's crash in the learner's words (learner_errors.py, practice_errors.py),
the reference pieces earlier lessons give later ones (references.py), how the graders reach
their lesson's reference (recording.py: the live module, recorded by `autograder record`, or
replayed from a recording in the learner release; a recording's values and files in
recording_values.py, what it is made from and what ships in recording_sources.py), and the
helpers the lessons' graders share
(grader_helpers.py).

May import: core, sandbox.
"""
