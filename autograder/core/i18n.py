"""Message catalogs: every learner-facing string lives in autograder/messages/<lang>/*.yml
(one file per area: engine.yml, feedback.yml, lesson03.yml, ...; a key may appear only once).

Spanish is the course language; English is the alternative catalog. A key missing from a
catalog falls back to Spanish rather than failing a learner's grading; a test keeps the two
catalogs' keys identical.

A count that names a noun takes the noun's two forms in the placeholder's format spec:
"{jobs:plural:proceso|procesos}" renders "1 proceso" or "4 procesos" (number included), so a
message never says "1 procesos" and needs no second key for the singular.
"""

from __future__ import annotations

import functools
import re
import string
from pathlib import Path
from typing import Any

from autograder.core.results import Block, Feedback, Text
from autograder.core.yaml_loader import safe_load

LANGUAGES = ("es", "en")
DEFAULT_LANGUAGE = "es"
_CATALOG_DIR = Path(__file__).resolve().parents[1] / "messages"


@functools.cache
def catalog(lang: str) -> dict[str, str]:
    if lang not in LANGUAGES:
        raise ValueError(f"unknown language {lang!r}; expected one of {', '.join(LANGUAGES)}")
    merged: dict[str, str] = {}
    for path in sorted((_CATALOG_DIR / lang).glob("*.yml")):
        with open(path, encoding="utf-8") as fh:
            data = safe_load(fh) or {}
        for key, value in data.items():
            if key in merged:
                raise ValueError(f"{path}: message key {key!r} is defined twice")
            merged[str(key)] = str(value)
    return merged


class _Placeholder(str):
    # Ignores any format spec ("{n:.3f}"), which a plain str would reject with ValueError.
    def __format__(self, spec: str) -> str:
        return str(self)


class _Lenient(dict):
    # A message whose parameter is missing still renders, showing the placeholder.
    def __missing__(self, key: str) -> str:
        return _Placeholder("{" + key + "}")


def localize(value: Any, lang: str) -> Any:
    """Localise a catalog Text, an {"es":..,"en":..} dict, or return the value unchanged."""
    if isinstance(value, Text):
        return translate(value.key, lang, **value.params)
    if isinstance(value, dict) and set(value) and set(value) <= set(LANGUAGES):
        return value.get(lang) or value.get(DEFAULT_LANGUAGE) or next(iter(value.values()))
    return value


_PLURAL = "plural:"


class _Formatter(string.Formatter):
    """str.format, plus the "plural:one|many" spec (see the module docstring)."""

    def format_field(self, value: Any, format_spec: str) -> str:
        if format_spec.startswith(_PLURAL):
            one, _, many = format_spec[len(_PLURAL) :].partition("|")
            if isinstance(value, _Placeholder):  # a missing count: show the placeholder
                return f"{value} {many}"
            return f"{value} {one if _is_one(value) else many or one}"
        return super().format_field(value, format_spec)


def _is_one(value: Any) -> bool:
    try:
        return float(value) == 1
    except (TypeError, ValueError):
        return False


_FORMATTER = _Formatter()


def translate(key: str, lang: str, /, **params: Any) -> str:
    template = catalog(lang).get(key) or catalog(DEFAULT_LANGUAGE).get(key)
    if template is None:
        return key + (" " + repr(params) if params else "")
    values = _Lenient({k: localize(v, lang) for k, v in params.items()})
    return _FORMATTER.vformat(template, (), values)


@functools.cache
def _template_pattern(key: str, lang: str) -> re.Pattern | None:
    template = catalog(lang).get(key, "") if lang in LANGUAGES else ""
    if not template:
        return None
    pieces, seen = [], set()
    for literal, field, _, _ in string.Formatter().parse(template):
        pieces.append(re.escape(literal))
        if field:
            pieces.append(f"(?P={field})" if field in seen else f"(?P<{field}>.+?)")
            seen.add(field)
    return re.compile("".join(pieces), re.S)


def recognise(key: str, lang: str, text: str) -> dict[str, str] | None:
    """The parameters with which catalog message `key` reads `text` in `lang`, or None when
    `text` is not that message: a results.json keeps messages as localised text, and readers
    of it (render, cohort) recognise some of them. A field named twice must match alike."""
    pattern = _template_pattern(key, lang)
    found = pattern.fullmatch(text) if pattern is not None else None
    return found.groupdict() if found else None


def render_parts(feedback: Feedback, lang: str) -> list[tuple[str, str]]:
    """Feedback as (kind, text) pairs: kind "text" for messages, else the block's kind."""
    out = []
    for part in feedback.parts:
        if isinstance(part, Block):
            out.append((part.kind, part.text))
        else:
            out.append(("text", localize(part, lang)))
    return out


def feedback_text(feedback: Feedback, lang: str) -> str:
    """Feedback as one plain string (used by the JSON result's "message")."""
    chunks = []
    for kind, text in render_parts(feedback, lang):
        chunks.append(text if kind == "text" else text.rstrip("\n"))
    return "\n".join(chunks)
