"""The GitHub side: the workflow's steps, the REST client and the grades branch.

Owns: what grade.yml and grade-comment.yml run (steps.py: record, report, annotations), the
standard-library REST client and its texts (api.py), and the grades branch that keeps a
learner's history (grades_branch.py).

May import: core, engine, render.
"""
