"""The similarity report: `autograder similarity NOTAS [SUBMISSIONS]` (command.py).

Owns: reading each learner's own code of a lesson (own_code.py: their files against the exercise
stubs, by the TODO-region grammar of core/regions.py, never following a symlink), comparing it
pair by pair with copydetect's winnowed fingerprints, the stubs as boilerplate, and flagging the
pairs that stand out from the lesson's own distribution (compare.py), the commits two learners'
histories share beyond the hand-out's (history.py), and the reports, HTML and CSV, written
readable by the instructor only (report.py). It reports; it never reads or changes a grade.

May import: core, cohort.
"""
