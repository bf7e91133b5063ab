"""The instructor's tools over a cohort: `grade-all` and what it writes.

Owns: intake and parallel grading of every learner (grade_all.py, pool.py), merging the shards
of one run (merge.py), what both write and say besides the results (outputs.py), the resumable
store of results (store.py), the log of when each submission was first seen, the one source of
submission times (observations.py), reading the roster and fetching its repositories with git
(roster.py; the roster's schema itself is core's), the nbgrader gradebook and the
spreadsheet-safe CSVs (gradebook.py) and the cohort report (report.py), with why a learner's lesson
does not run at all, read back from a result (causes.py); the term grade: which submission counts
per learner and lesson under the deadlines, graded when it never was (term_grades.py, on
autograder/term's rules).

May import: core, sandbox, engine, render, github, term.
"""
