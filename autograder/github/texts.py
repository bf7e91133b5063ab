"""The texts the workflow's steps and the REST client send, standard library only.

The truncation notes come from the message catalog (autograder/messages/<lang>/formats.yml),
the pull request's unverified grade from ci.yml, read with a small line reader instead of
PyYAML; those files keep every entry on one line. What would pass one of GitHub's size limits
(a job summary, a comment) is cut at a line, closed, and followed by such a note.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Callable

DEFAULT_LANGUAGE = "es"
LANGUAGES = ("es", "en")

_CATALOG_DIR = Path(__file__).resolve().parents[1] / "messages"
_CATALOG_LINE = re.compile(r'([a-z]+\.[A-Za-z0-9_.]+):\s*("(?:[^"\\]|\\.)*")\s*')
_FALLBACK_NOTES = {  # only if the catalog file cannot be read
    "formats.truncated_comment": "_(truncated)_",
    "formats.truncated_summary": "_(truncated)_",
}


# --- the catalog's lines ------------------------------------------------------------------


def catalog_messages(lang: str, name: str = "formats") -> dict[str, str]:
    """The `name`.* entries of a language's catalog file `name`.yml (formats or ci), read
    without PyYAML (one `key: "double-quoted"` entry per line; the quoted text is decoded as
    JSON, which agrees with YAML for the escapes these files use; a test checks both readers
    agree)."""
    if lang not in LANGUAGES:
        raise ValueError(f"unknown language {lang!r}; expected one of {', '.join(LANGUAGES)}")
    out: dict[str, str] = {}
    try:
        text = (_CATALOG_DIR / lang / f"{name}.yml").read_text(encoding="utf-8")
    except OSError:
        return out
    for line in text.splitlines():
        match = _CATALOG_LINE.fullmatch(line)
        if match and match.group(1).startswith(name + "."):
            try:
                out[match.group(1)] = json.loads(match.group(2))
            except ValueError:
                continue
    return out


def truncation_note(key: str, lang: str) -> str:
    """The note that says a text was cut (formats.truncated_comment or _summary)."""
    return catalog_messages(lang).get(key) or _FALLBACK_NOTES[key]


# --- GitHub's size limits -----------------------------------------------------------------


def truncate_markdown(text: str, fits: Callable[[str], bool], note: str) -> str:
    """`text` whole if fits(text), else its longest prefix that ends a line and, closed and
    followed by the note, fits. Closing means: an open code fence gets its closing fence and
    unclosed <details> get </details>, so the cut cannot swallow what follows."""
    if fits(text):
        return text
    lines = text.split("\n")

    def closed(count: int) -> str:
        kept = lines[:count]
        fence: str | None = None
        for row in kept:
            match = re.match(r"\s{0,3}(`{3,}|~{3,})", row)
            if not match:
                continue
            run = match.group(1)
            if fence is None:
                fence = run
            elif run[0] == fence[0] and len(run) >= len(fence) and row.strip() == run:
                fence = None
        tail = []
        if fence is not None:
            tail.append(fence)
        body = "\n".join(kept)
        opened = len(re.findall(r"<details\b", body)) - len(re.findall(r"</details>", body))
        tail += ["</details>"] * max(0, opened)
        return "\n".join([*kept, *tail, "", note]) + "\n"

    lo, hi = 0, len(lines)  # the largest count of whole lines that fits
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(closed(mid)):
            lo = mid
        else:
            hi = mid - 1
    result = closed(lo)
    if not fits(result):  # not even the note fits: cut hard, still valid text
        result = note
        while result and not fits(result):
            result = result[:-1]
    return result


def utf16_len(text: str) -> int:
    # GitHub counts a comment's characters as JavaScript does (UTF-16 code units): an emoji
    # outside the BMP counts twice. Counting so is never too generous.
    return len(text.encode("utf-16-le")) // 2
