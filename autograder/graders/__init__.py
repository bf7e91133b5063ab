"""The hidden graders: one folder per lesson (harness.py and test_*.py), run by pytest in the
trusted process. The reference pieces of earlier lessons and the lessons' stubs are made from
the marked solutions by autograder/engine/references.py, never kept here. Only this file and
pytest.ini ship in the learner release.

May import: core, sandbox, engine.
"""
