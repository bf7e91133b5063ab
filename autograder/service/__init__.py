"""The grading service (`autograder serve`): the official grade on every push, made on the
instructor's side.

A learner's workflow proves which repository and commit it is with GitHub's OIDC token; the
service verifies the token against the issuer's keys (jwks.py, tokens.py), admits the claims
against the roster (claims.py), dates the submission with its own credential (github_lookup.py,
credentials.py), records it before answering (store.py: the SQL store is the record and the
gradebook; its tables in schema.py), wakes a worker (queue.py), which fetches that commit itself
(fetch.py, with git in a scratch repository: git_scratch.py) and grades it with the course's own
engine and hidden graders (worker.py). The ASGI app (app.py, configured by config.py) answers the
learner's job and renders each submission's page (page.py, verdict.py); serve.py is the command,
export.py the gradebook and CSVs made from the store on demand; errors.py the one refusal.

May import: core, sandbox, engine, render, cohort, github, term.
"""
