"""The GitHub side: the workflow's steps, the REST client, the grades branch and the hand-out.

Owns: what grade.yml and grade-comment.yml run (steps.py: record, report, annotations), the
standard-library REST client and its texts (api.py), and the grades branch that keeps a
learner's (practice) history (grades_branch.py), and `autograder handout`, one private
repository per learner from the template, within GitHub's rate limits (handout.py).

May import: core, engine, render.
"""
