"""Small pieces of what the learner's commands (check, watch, hint, progress) print: catalog
text, bars, the streak, the terminal's width and the "grading…" spinner."""

from __future__ import annotations

import os
from typing import Any

from autograder.core import i18n

BAR_WIDTH = 20


def t(key: str, lang: str, **params: Any) -> str:
    """A learner message (autograder/messages/<lang>/learner.yml)."""
    return i18n.translate(f"learner.{key}", lang, **params)


def bar(fraction: float, width: int = BAR_WIDTH) -> str:
    """A text bar: filled and empty cells are different characters, so it reads without colour."""
    fraction = min(max(fraction, 0.0), 1.0)
    filled = round(fraction * width)
    return "█" * filled + "░" * (width - filled)


def streak_text(days: int, lang: str) -> str:
    if days <= 0:
        return t("streak_none", lang)
    return t("streak_one", lang) if days == 1 else t("streak_many", lang, days=days)


def terminal_width(stream) -> int:
    try:
        return max(60, min(os.get_terminal_size(stream.fileno()).columns, 120)) if stream.isatty() else 100
    except (OSError, ValueError, AttributeError):
        return 100


class Spinner:
    """A transient "grading lesson 03…" line on stderr in a terminal; nothing when redirected."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._status = None

    def __enter__(self):
        if self.enabled:
            from rich.console import Console

            self._status = Console(stderr=True).status("")
            self._status.start()
        return self._status

    def __exit__(self, *exc) -> None:
        if self._status is not None:
            self._status.stop()
