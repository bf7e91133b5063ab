"""The instructor's tools over a cohort: `grade-all` and what it writes.

Owns: intake and parallel grading of every learner (grade_all.py, pool.py), the resumable
store of results (store.py), the roster (roster.py), the nbgrader gradebook (gradebook.py)
and the cohort report (report.py).

May import: core, sandbox, engine, render.
"""
