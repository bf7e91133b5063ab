"""Official verdicts as GitHub check runs on the learner's commit (issue 33; being written).
`start_publisher(services, say)` is started by `serve` beside the app; None when no GitHub App is
configured."""

from __future__ import annotations


def start_publisher(services, say):
    return None
