"""The grading service (`autograder serve`): the official grade on every push, made on the
instructor's side, on one machine or across many.

The package owns the service end to end: the app that takes a learner's submission and answers
their job and page, the fetch of their commit, the store that is the record and the gradebook,
the queue of wake-ups, the workers that grade (beside the app or on other machines), the
regrading lane, and the exports made from the store.

The flow: a learner's workflow proves which repository and commit it is with GitHub's OIDC token;
the service verifies the token against the issuer's keys (jwks.py, tokens.py), admits the claims
against the roster (claims.py), dates the submission with its own credential (github_lookup.py,
credentials.py) and records it, queued, before answering (store.py: the SQL store, SQLite by
default or PostgreSQL; its tables in schema.py). The service's fetcher (archiver.py, in the
serve process: the only part that holds the GitHub credential) fetches that commit (fetch.py,
with git in a scratch repository: git_scratch.py) and stores its regular files with the
submission as a bounded archive (archive.py), stamped with the graders' hash it is to be graded
with, then wakes the workers (queue.py: Huey over SQLite, or Redis). A worker (worker.py: run
by `serve` itself, or by `autograder worker` on any machine that reaches the store and the queue,
worker_command.py) claims a submission of its own graders' hash under a lease (the push lane
before the regrade lane), unpacks the archive and grades it with the course's own engine and
hidden graders; leases that lapse are reaped, and after the last attempt the submission is the
error "worker lost". When the graders change, `autograder regrade` (regrade_command.py) queues
graded submissions again on the regrade lane; each result is kept per graders' hash. The ASGI
app (app.py, configured by config.py) answers the learner's job and renders each submission's
page (page.py, verdict.py) from its current result; serve.py is the command, export.py the
gradebook and CSVs made from the store on demand; errors.py the one refusal. The instructor's
live view (live.py: its queries in live_data.py, its HTML/CSS/JS in live_page.py, the staff's
tokens and sessions in staff.py, `autograder staff` in staff_command.py), the check runs on
GitHub (checks.py, checks_body.py, checks_table.py: a publisher thread in serve) and the
operations endpoints (ops.py: /readyz, /metrics from metrics.py) read the same tables; logs.py
shapes the logs (JSON lines on request, secrets redacted).

May import: core, sandbox, engine, render, cohort, github, term.
"""
