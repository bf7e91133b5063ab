"""The graders: one folder per lesson (harness.py and test_*.py), run by pytest in the trusted
process, reaching the lesson's reference.py only through engine/recording.reference_of. The
reference pieces of earlier lessons and the lessons' stubs are made from the marked solutions by
autograder/engine/references.py, never kept here. The learner release ships this file,
pytest.ini and each recorded lesson's folder with its recording (recording.json, recording.npz),
but never a reference.py, an official-only check (test_official_*.py) or a quiz check
(test_quiz.py: the key).

May import: core, sandbox, engine.
"""
