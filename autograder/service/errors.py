"""The one error a service step raises when it refuses a submission or cannot go on.

It carries a catalog key (messages/<lang>/service*.yml) and its parameters, so the app can answer
the learner's job in the course's language, and the HTTP status that refusal deserves.
"""

from __future__ import annotations

from typing import Any

from autograder.core.results import Text


class ServiceRefusal(Exception):
    """A submission refused (401 bad token, 403 not admitted, 413, 429, ...) or a step that cannot
    go on (502 GitHub or git, 503 the issuer unreachable), with the words to say why."""

    def __init__(self, key: str, status: int = 403, **params: Any) -> None:
        super().__init__(key)
        self.key, self.status, self.params = key, status, params

    @property
    def text(self) -> Text:
        return Text(self.key, self.params)

    def __str__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{self.key} ({self.status}){': ' + params if params else ''}"
