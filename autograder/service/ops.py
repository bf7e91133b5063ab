"""Operations endpoints (issue 33; being written): readiness and Prometheus metrics, at the top
level beside /healthz. `routes(services)` gives them to the app (app.py)."""

from __future__ import annotations


def routes(services) -> list:
    return []
