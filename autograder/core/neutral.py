"""Learner text made inert: the one place that decides how text that came from a learner (an
exception's message, a traceback's lines, a repr, a file name, a roster's id, anything read back
from a results.json a learner could have written) may appear in each rendering.

    terminal(text)             control characters made visible: no escape sequence (clipboard,
                               title, clear screen), bell, backspace or carriage return reaches
                               a terminal; newlines and tabs stay
    markdown_inline(text)      one line, safe in a paragraph, a heading or a table cell: HTML
                               escaped, no emphasis, code, link, image, strikethrough, math,
                               table syntax or @mention left live
    markdown_text(text)        the same for several lines, kept as hard line breaks, none able
                               to start a heading, list, quote or table
    markdown_code(text)        an inline code span no backtick inside can close
    markdown_fence(text)       a fenced block no backtick run inside can close
    formula_like(text)         whether a spreadsheet would read the text as a formula (OWASP's
                               CSV-injection rule); rosters refuse such ids and e-mails
    spreadsheet_cell(text)     a CSV cell no spreadsheet reads as a formula: a formula-like text
                               gets a leading apostrophe, a plain number stays a number

Standard library only: autograder.github.api (run from a bare checkout) uses it too.
"""

from __future__ import annotations

import html
import re

# C0 controls but tab and newline, DEL, C1 controls, and the Unicode controls that reorder or
# hide text (bidirectional overrides and isolates, line and paragraph separators).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_PICTURE_DEL = "\u2421"  # ␡
_REPLACEMENT = "\ufffd"  # �


def _visible(match: re.Match) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)  # the Control Pictures block: ESC is ␛, BEL ␇, CR ␍
    return _PICTURE_DEL if code == 0x7F else _REPLACEMENT


def terminal(text: object) -> str:
    """`text` with every control character but newline and tab shown as a visible symbol
    (ESC as ␛): inert on a terminal, and the reader still sees that something was there. A
    Windows line end (CR LF) is a plain newline."""
    return _CONTROL.sub(_visible, str(text).replace("\r\n", "\n"))


# Backslash-escaped wherever they occur: each can open inline Markdown (code, emphasis,
# strikethrough, math, table cells) and a backslash escape is literal in CommonMark and GFM.
_INLINE = re.compile(r"([\\`*_~$|#])")
# A link or image needs "](" or "][" right after its text; breaking that pair leaves
# "TODO [mask]" as readable as before.
_LINK = re.compile(r"\](?=[(\[])")
# What may open a block at the start of a line: a list item, a setext underline or thematic
# break, a reference definition ("[x]: url"), an ordered list item ("1. ", "2)"). A quote's ">"
# is escaped as HTML already.
_LINE_START = re.compile(r"^(\s*)(?:([-+=\[])|(\d{1,9})([.)])(?=\s|$))")


def _escape(line: str) -> str:
    line = html.escape(line, quote=False)
    line = _INLINE.sub(r"\\\1", line)
    line = _LINK.sub("]\\\\", line)
    # GitHub turns "@name" into a mention (a notification) after Markdown is parsed, escapes or
    # not: an invisible word joiner after the "@" keeps the text and drops the mention.
    line = line.replace("@", "@\u2060")
    return _LINE_START.sub(
        lambda m: m.group(1) + ("\\" + m.group(2) if m.group(2) else m.group(3) + "\\" + m.group(4)), line
    )


def markdown_inline(text: object) -> str:
    """One line of inert Markdown: whitespace (line breaks included) collapsed to single spaces,
    control characters visible, HTML escaped, every inline construct escaped; safe inside a
    table cell (pipes escaped) and after a heading's `#`."""
    return _escape(" ".join(terminal(text).split()))


def markdown_text(text: object) -> str:
    """Several lines of inert Markdown as one paragraph: each line as markdown_inline makes it
    (its leading spaces kept), joined by hard line breaks, so no line can open a block."""
    lines = terminal(text).strip("\n").split("\n")
    return "\\\n".join(_escape(line.rstrip()) for line in lines)


def markdown_code(text: object) -> str:
    """An inline code span: verbatim between backtick runs longer than any inside (one line,
    control characters visible). In a table cell use markdown_cell_code."""
    body = " ".join(terminal(text).split())
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if body.startswith("`") or body.endswith("`") or not body.strip() else ""
    return f"{ticks}{pad}{body}{pad}{ticks}"


def markdown_cell_code(text: object) -> str:
    """markdown_code for a table cell: GFM reads `\\|` inside a code span in a table as `|`."""
    return markdown_code(text).replace("|", "\\|")


def markdown_fence(text: object, info: str = "text") -> str:
    """Verbatim in a code fence longer than any backtick run inside, so the text cannot close it
    (control characters visible)."""
    body = terminal(text).rstrip("\n")
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{body}\n{fence}"


# OWASP's CSV-injection rule: a cell starting with = + - @, tab or carriage return may be read as
# a formula (or DDE command) by Excel, LibreOffice or Google Sheets. The full-width forms are
# included because some spreadsheets normalise them on import.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")
# A plain decimal number ("-3.5", "+2", "1e-3") is data, not a formula: it stays as it is, so a
# negative penalty is still a number in the sheet.
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def formula_like(text: object) -> bool:
    """True when a spreadsheet opening a CSV could read `text` as a formula (numbers are not)."""
    value = str(text)
    return value.startswith(FORMULA_STARTS) and not _PLAIN_NUMBER.fullmatch(value)


def spreadsheet_cell(text: object) -> str:
    """`text` as a CSV cell that no spreadsheet evaluates: a formula-like text gets a leading
    apostrophe (shown as text, as OWASP recommends); anything else, numbers included, unchanged.
    Quoting the cell for CSV is the csv module's job."""
    value = str(text)
    return "'" + value if formula_like(value) else value
