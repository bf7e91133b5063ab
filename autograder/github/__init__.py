"""The GitHub side: the workflow's steps, the REST client, the grades branch and the hand-out.

Owns: what grade.yml and grade-comment.yml run (steps.py: record, report, annotations), and,
standard library only for a bare checkout, GitHub Actions' workflow commands and environment
files (actions.py), the REST client and its rate-limit pacing (rest.py), the catalog line reader
and GitHub's size limits (texts.py), and the command line the workflow runs
(`python -m autograder.github.api comment|status|pr-comment`, api.py), and the learner's side of
the grading service (submit.py: the OIDC token sent, the official verdict shown as a copy); the
grades branch that
keeps a learner's (practice) history (grades_branch.py), and `autograder handout`, one private
repository per learner from the template, within GitHub's rate limits (handout.py).

May import: core, engine, render.
"""
