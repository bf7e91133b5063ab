"""The instructor's live view of the cohort (issue 33; being written): routes under
{public_url}/staff. `routes(services)` gives them to the app (app.py)."""

from __future__ import annotations


def routes(services) -> list:
    return []
