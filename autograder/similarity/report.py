"""The similarity report's two files, in NOTAS/similarity/ (the instructor's output folder):

    similarity.html   self-contained (inline CSS, no script, nothing fetched): per lesson, the
                      distribution the pairs were judged against, the flagged pairs with each
                      side's own code side by side and the matching lines marked, the highest
                      scores that were not flagged, and what could not be read; then the
                      repositories that share commits.
    similarity.csv    one row per flagged pair and lesson (and one per pair of repositories that
                      share commits), the matching lines of each side in two cells side by side;
                      every text cell spreadsheet-safe (cohort/gradebook.py's csv_text).

Both hold learners' names and code: the folder is made 0700 and each file 0600 (written whole:
a temporary file, then a rename), and nothing else is written anywhere. Learners' code is hostile
input: in HTML every text is escaped, and control and bidirectional characters are shown, never
obeyed (core/neutral.py's `terminal`).
"""

from __future__ import annotations

import html
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from autograder.cohort.gradebook import csv_text
from autograder.cohort.store import write_atomic
from autograder.core import i18n
from autograder.core.neutral import terminal
from autograder.similarity.compare import Distribution, Pair
from autograder.similarity.own_code import OwnCode

FOLDER = "similarity"
HTML_FILE = "similarity.html"
CSV_FILE = "similarity.csv"
TOP_UNFLAGGED = 10  # the highest pairs not flagged, shown for context
SIDE_LINES = 300  # own lines shown per side; beyond, the matching ones with CONTEXT lines around
CONTEXT = 2
_GAP = '<tr><td class="where">…</td><td></td><td></td></tr>'
SIDE_BY_SIDE = 50  # flagged pairs of a lesson shown with their code, highest z first (the CSV has all)
CELL_LIMIT = 30000  # characters per CSV cell (spreadsheets hold 32767)

CSV_COLUMNS = [
    "lesson",
    "reason",
    "learner_a",
    "name_a",
    "learner_b",
    "name_b",
    "score",
    "z",
    "residual",
    "similarity_a",
    "similarity_b",
    "shared_commits",
    "lines_a",
    "lines_b",
]
CSV_NUMBERS = frozenset({"score", "similarity_a", "similarity_b"})


@dataclass
class LessonResult:
    id: str
    title: str
    owns: dict[str, OwnCode]
    pairs: list[Pair]
    distribution: Distribution
    left_out: list[str]


@dataclass
class Result:
    course: str
    names: dict[str, str]  # learner id -> "First Last" (may be empty)
    lessons: list[LessonResult]
    shared: dict[tuple[str, str], list[str]]
    histories: dict[str, str | None]  # learner -> why no history (None: one was read)
    hand_out_commits: int
    common_commits: int
    problems: list[str] = field(default_factory=list)

    def flagged(self) -> list[Pair]:
        return [pair for lesson in self.lessons for pair in lesson.pairs if pair.flagged_code]


# ------------------------------------------------------------------------------ writing


def write_private(folder: Path, name: str, text: str) -> Path:
    """`folder`/`name`, readable by its owner only, written whole or not at all."""
    private_folder(folder)
    path = folder / name
    write_atomic(path, text)  # cohort's one atomic writer: a temporary file, 0600, then a rename
    return path


def private_folder(folder: Path) -> None:
    """`folder` made (or found) as a real folder, 0700; never through a symlink."""
    try:
        mode = os.lstat(folder).st_mode
    except FileNotFoundError:
        folder.mkdir(mode=0o700, parents=True)
        mode = os.lstat(folder).st_mode
    if stat.S_ISLNK(mode) or not stat.S_ISDIR(mode):
        raise NotADirectoryError(
            f"{folder}: not a folder (a symlink or a file); the report is not written there"
        )
    os.chmod(folder, 0o700)


def write(result: Result, out: Path, lang: str) -> list[Path]:
    folder = out / FOLDER
    return [
        write_private(folder, HTML_FILE, html_report(result, lang)),
        write_private(folder, CSV_FILE, csv_report(result)),
    ]


# ------------------------------------------------------------------------------ CSV


def _where(own: OwnCode, indexes: list[int]) -> str:
    lines = [own.lines[i] for i in indexes if i < len(own.lines)]
    text = "\n".join(terminal(f"{line.file}:{line.number}: {line.text.strip()}") for line in lines)
    return text if len(text) <= CELL_LIMIT else text[:CELL_LIMIT] + "\n[...]"


def csv_report(result: Result) -> str:
    rows = []
    for lesson in result.lessons:
        for pair in lesson.pairs:
            if not pair.flagged_code:
                continue
            shared = result.shared.get((pair.a, pair.b), [])
            rows.append(
                {
                    "lesson": lesson.id,
                    "reason": "code+commits" if shared else "code",
                    "learner_a": pair.a,
                    "name_a": terminal(result.names.get(pair.a, "")),
                    "learner_b": pair.b,
                    "name_b": terminal(result.names.get(pair.b, "")),
                    "score": pair.score,
                    "z": "" if pair.z is None else f"{pair.z:.2f}",
                    "residual": f"{pair.residual:.4f}",
                    "similarity_a": pair.similarity_a,
                    "similarity_b": pair.similarity_b,
                    "shared_commits": " ".join(shared),
                    "lines_a": _where(lesson.owns[pair.a], pair.lines_a),
                    "lines_b": _where(lesson.owns[pair.b], pair.lines_b),
                }
            )
    for (a, b), shas in sorted(result.shared.items()):
        rows.append(
            {
                "lesson": "",
                "reason": "commits",
                "learner_a": a,
                "name_a": terminal(result.names.get(a, "")),
                "learner_b": b,
                "name_b": terminal(result.names.get(b, "")),
                "score": 1.0,
                "z": "",
                "residual": "",
                "similarity_a": 1.0,
                "similarity_b": 1.0,
                "shared_commits": " ".join(shas),
                "lines_a": "",
                "lines_b": "",
            }
        )
    return csv_text(CSV_COLUMNS, rows, CSV_NUMBERS)


# ------------------------------------------------------------------------------ HTML

_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:.2em .5em;vertical-align:top;text-align:left}
.code{font-family:ui-monospace,monospace;font-size:.85em;white-space:pre-wrap;word-break:break-all}
.side{width:50%}
.side table{width:100%}
.match{background:#ffe08a}
.where{color:#777;white-space:nowrap;width:1%}
.flag{color:#b00;font-weight:bold}
.note{color:#555}
"""


def _e(value: object) -> str:
    return html.escape(terminal(value), quote=True)


def html_report(result: Result, lang: str) -> str:
    t = _texts(lang)
    parts = [
        "<!DOCTYPE html>",
        f'<html lang="{_e(lang)}"><head><meta charset="utf-8">',
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">",
        f"<title>{_e(t('title', course=result.course))}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_e(t('title', course=result.course))}</h1>",
        f"<p>{_e(t('intro'))}</p>",
    ]
    for problem in result.problems:
        parts.append(f'<p class="note">{_e(problem)}</p>')
    for lesson in result.lessons:
        parts += _lesson_html(lesson, result, t)
    parts += _history_html(result, t)
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _name(result: Result, learner: str) -> str:
    name = result.names.get(learner, "")
    return f"{learner} ({name})" if name else learner


def _lesson_html(lesson: LessonResult, result: Result, t) -> list[str]:
    dist = lesson.distribution
    parts = [f"<h2>{_e(t('lesson', id=lesson.id, title=lesson.title))}</h2>"]
    if dist.median is None:
        parts.append(f"<p>{_e(t('no_pairs', learners=len(lesson.owns) - len(lesson.left_out)))}</p>")
    else:
        parts.append(
            "<p>"
            + _e(
                t(
                    "distribution",
                    learners=len(lesson.owns) - len(lesson.left_out),
                    pairs=dist.pairs,
                    median=f"{dist.score_median:.3f}",
                    scale=f"{dist.scale:.3f}",
                    threshold=dist.threshold,
                )
            )
            + "</p>"
        )
        if dist.pairs < dist.min_pairs:
            parts.append(f'<p class="note">{_e(t("too_few", pairs=dist.pairs, min=dist.min_pairs))}</p>')
        elif not dist.scale:
            parts.append(f'<p class="note">{_e(t("no_spread"))}</p>')
    if lesson.left_out:
        parts.append(f'<p class="note">{_e(t("left_out", learners=", ".join(lesson.left_out)))}</p>')
    notes = [(learner, file, what) for learner, own in lesson.owns.items() for file, what in own.notes]
    if notes:
        parts.append(f"<h3>{_e(t('notes'))}</h3><ul>")
        parts += [
            f"<li>{_e(learner)}: {_e(file)}: {_e(note_text(what, t))}</li>" for learner, file, what in notes
        ]
        parts.append("</ul>")
    ranked = sorted(lesson.pairs, key=lambda pair: (-pair.score, pair.a, pair.b))
    flagged = sorted(
        (pair for pair in ranked if pair.flagged_code), key=lambda pair: (-(pair.z or 0.0), pair.a, pair.b)
    )
    parts.append(f"<h3>{_e(t('flagged', n=len(flagged)))}</h3>")
    if flagged:
        parts.append(_pairs_table(flagged, result, t))
    if len(flagged) > SIDE_BY_SIDE:
        parts.append(f'<p class="note">{_e(t("side_by_side_cap", n=SIDE_BY_SIDE))}</p>')
    for pair in flagged[:SIDE_BY_SIDE]:
        parts += _pair_html(pair, lesson, result, t)
    others = [pair for pair in ranked if not pair.flagged_code][:TOP_UNFLAGGED]
    if others:
        parts.append(f"<h3>{_e(t('highest'))}</h3>")
        parts.append(_pairs_table(others, result, t))
    return parts


def _pairs_table(pairs: list[Pair], result: Result, t) -> str:
    head = "".join(
        f"<th>{_e(t(key))}</th>" for key in ("col_a", "col_b", "col_score", "col_z", "col_copydetect")
    )
    rows = [
        "<tr>"
        f"<td>{_e(_name(result, pair.a))}</td><td>{_e(_name(result, pair.b))}</td>"
        f"<td>{pair.score:.3f}</td><td>{'' if pair.z is None else f'{pair.z:.2f}'}</td>"
        f"<td>{pair.similarity_a:.2f} / {pair.similarity_b:.2f}</td>"
        "</tr>"
        for pair in pairs
    ]
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def side_html(own: OwnCode, matched: list[int]) -> str:
    """One side of a pair: its own lines (file:line, TODO, code), the matching ones marked."""
    marked = set(matched)
    shown = range(len(own.lines))
    if len(own.lines) > SIDE_LINES:  # a long side: its matching lines and a few around them
        shown = sorted(
            {i for m in marked for i in range(m - CONTEXT, m + CONTEXT + 1) if 0 <= i < len(own.lines)}
        )
        shown = shown[:SIDE_LINES]
    rows, previous = [], -1
    for index in shown:
        line = own.lines[index]
        if index != previous + 1:
            rows.append(_GAP)
        previous = index
        css = ' class="code match"' if index in marked else ' class="code"'
        rows.append(
            f'<tr><td class="where">{_e(line.file)}:{line.number}</td>'
            f'<td class="where">{_e(line.todo or "")}</td><td{css}>{_e(line.text)}</td></tr>'
        )
    if own.lines and previous != len(own.lines) - 1:
        rows.append(_GAP)
    return f"<table>{''.join(rows)}</table>"


def _pair_html(pair: Pair, lesson: LessonResult, result: Result, t) -> list[str]:
    shared = result.shared.get((pair.a, pair.b), [])
    summary = t(
        "pair",
        a=_name(result, pair.a),
        b=_name(result, pair.b),
        score=f"{pair.score:.3f}",
        z=f"{pair.z:.2f}" if pair.z is not None else "-",
        sim_a=f"{pair.similarity_a:.2f}",
        sim_b=f"{pair.similarity_b:.2f}",
    )
    parts = [f'<h4 class="flag">{_e(summary)}</h4>']
    if shared:
        parts.append(f'<p class="flag">{_e(t("also_commits", n=len(shared)))}</p>')
    parts.append(
        '<table><tr><th class="side">'
        + _e(_name(result, pair.a))
        + '</th><th class="side">'
        + _e(_name(result, pair.b))
        + "</th></tr><tr>"
        + f'<td class="side">{side_html(lesson.owns[pair.a], pair.lines_a)}</td>'
        + f'<td class="side">{side_html(lesson.owns[pair.b], pair.lines_b)}</td>'
        + "</tr></table>"
    )
    return parts


def _history_html(result: Result, t) -> list[str]:
    parts = [f"<h2>{_e(t('history'))}</h2>"]
    with_history = sum(1 for why in result.histories.values() if why is None)
    parts.append(
        "<p>"
        + _e(
            t(
                "history_intro",
                with_history=with_history,
                learners=len(result.histories),
                hand_out=result.hand_out_commits,
                common=result.common_commits,
            )
        )
        + "</p>"
    )
    if result.shared:
        parts.append(
            f"<table><tr><th>{_e(t('col_a'))}</th><th>{_e(t('col_b'))}</th><th>{_e(t('col_commits'))}</th></tr>"
        )
        for (a, b), shas in sorted(result.shared.items()):
            listed = " ".join(shas[:20]) + (f" (+{len(shas) - 20})" if len(shas) > 20 else "")
            parts.append(
                f'<tr class="flag"><td>{_e(_name(result, a))}</td><td>{_e(_name(result, b))}</td>'
                f'<td class="code">{len(shas)}: {_e(listed)}</td></tr>'
            )
        parts.append("</table>")
    else:
        parts.append(f"<p>{_e(t('no_shared'))}</p>")
    missing = [(learner, why) for learner, why in sorted(result.histories.items()) if why is not None]
    if missing:
        parts.append(f'<p class="note">{_e(t("no_history"))}</p><ul>')
        parts += [f'<li class="note">{_e(learner)}: {_e(note_text(why, t))}</li>' for learner, why in missing]
        parts.append("</ul>")
    return parts


# own_code's and history's notes ("kind" or "kind: detail") in the report's language.
_NOTES = ("missing", "link", "cut", "unreadable", "syntax", "not a clone")


def note_text(note: str, t) -> str:
    kind, _, detail = note.partition(": ")
    if kind not in _NOTES:
        return note  # git's own words
    return t("note_" + kind.replace(" ", "_"), detail=detail)


def _texts(lang: str):
    def t(key: str, **params) -> str:
        return i18n.translate(f"similarity.report.{key}", lang, **params)

    return t
