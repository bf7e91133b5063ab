"""GitHub Actions' workflow commands and environment files, standard library only.

Workflow commands and environment files follow GitHub's documentation ("Workflow commands for
GitHub Actions") and @actions/core: data escapes %, CR and LF; properties also ':' and ',';
a multi-line output is `name<<DELIMITER`, value, `DELIMITER`, with a random delimiter that must
not occur in the value. A job summary is limited to 1 MiB (1024k) per step.

The workflow's steps (steps.py) write through these functions only, so no learner text can end a
command early, start another one or define an output.
"""

from __future__ import annotations

import os
import re
import uuid
from typing import Any, Mapping

from autograder.github.texts import DEFAULT_LANGUAGE, truncate_markdown, truncation_note

SUMMARY_LIMIT_BYTES = 1024 * 1024  # GitHub: "supports content up to a size of 1024k" per step
ANNOTATION_LEVELS = ("notice", "warning", "error")

_OUTPUT_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def escape_data(value: Any) -> str:
    """A workflow command's message: % -> %25, CR -> %0D, LF -> %0A."""
    return str(value).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: Any) -> str:
    """A workflow command's property value: as escape_data, and also : -> %3A, , -> %2C."""
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def annotation(
    level: str,
    message: str,
    *,
    file: str | None = None,
    line: int | None = None,
    end_line: int | None = None,
    title: str | None = None,
) -> str:
    """`::error file=F,line=L,endLine=E,title=T::message`, every part escaped, so no text can
    end the command early or start another one on a new line."""
    if level not in ANNOTATION_LEVELS:
        raise ValueError(f"annotation level must be one of {', '.join(ANNOTATION_LEVELS)}, not {level!r}")
    props = []
    if file is not None:
        props.append(("file", file))
    for name, number in (("line", line), ("endLine", end_line)):
        if number is not None:
            if isinstance(number, bool) or not isinstance(number, int) or number < 1:
                raise ValueError(f"{name} must be a positive integer, not {number!r}")
            props.append((name, number))
    if title is not None:
        props.append(("title", title))
    head = "::" + level
    if props:
        head += " " + ",".join(f"{name}={escape_property(value)}" for name, value in props)
    return f"{head}::{escape_data(message)}"


def append_summary(
    markdown: str, env: Mapping[str, str] = os.environ, *, lang: str = DEFAULT_LANGUAGE
) -> bool:
    """Append Markdown to $GITHUB_STEP_SUMMARY; False when not running in GitHub Actions.

    GitHub drops a step summary over 1 MiB entirely, so what would pass the limit (counting
    what the step already wrote) is cut at a line, any open code fence or <details> is closed,
    and a note says it was truncated."""
    path = env.get("GITHUB_STEP_SUMMARY")
    if not path:
        return False
    try:
        used = os.path.getsize(path)
    except OSError:
        used = 0
    budget = SUMMARY_LIMIT_BYTES - used
    text = markdown if markdown.endswith("\n") else markdown + "\n"
    text = truncate_markdown(
        text, lambda s: len(s.encode("utf-8")) <= budget, truncation_note("formats.truncated_summary", lang)
    )
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(text)
    return True


def set_output(name: str, value: Any, env: Mapping[str, str] = os.environ) -> bool:
    """Append a step output to $GITHUB_OUTPUT as `name<<DELIMITER` / value / `DELIMITER`, with a
    random delimiter checked not to occur in the value, so that a multi-line or hostile value
    cannot end early or define other outputs. False when not running in GitHub Actions."""
    if not isinstance(name, str) or not _OUTPUT_NAME_RE.fullmatch(name):
        raise ValueError(f"invalid output name {name!r}: letters, digits, '_' and '-' only")
    path = env.get("GITHUB_OUTPUT")
    if not path:
        return False
    text = str(value)
    delimiter = f"ghadelimiter_{uuid.uuid4()}"
    while delimiter in text or delimiter in name:
        delimiter = f"ghadelimiter_{uuid.uuid4()}"
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(f"{name}<<{delimiter}\n{text}\n{delimiter}\n")
    return True
