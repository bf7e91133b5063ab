"""The term's grades as files an LMS imports: Canvas's gradebook CSV and Moodle's "Import grades
from CSV". Pure functions from the term grades (one TermRow per learner: the counted, penalised
grade of each lesson) to file text, and one writer that puts both files in the instructor's
output folder. Neither import can be run here (no Canvas or Moodle instance is reachable): the
layouts below follow each importer's source code and documentation, and the tests parse the
files back against them.

    canvas.csv   Canvas, Grades > Import. The layout of Canvas's own gradebook export, which its
                 importer (canvas-lms app/models/gradebook_importer.rb) reads back:
                 - header: Student, ID, SIS User ID, SIS Login ID, Section, then one column per
                   lesson. The importer requires the first cell to hold "Student", the second
                   "ID", then SIS User ID and SIS Login ID (which make it count five learner
                   columns) and the fifth "Section"; no total column (Canvas ignores totals).
                 - second row: "Points Possible" under Student, empty learner cells, each
                   lesson's maximum points under its column. For a column Canvas does not know,
                   the import creates an assignment named by the header, and this row is where
                   it takes the points possible from (process_pp); for an existing assignment
                   (same name) it is informational. So the points are in the header rows, not in
                   the name: a header ending in " (digits)" is Canvas's "Name (assignment id)"
                   form of its exports (Assignment.title_and_id), and "Lesson (10)" would write
                   into assignment 10 of the course. A lesson title that ends that way gets a
                   no-break space before its "(" (Ruby's \\s does not match it), so it stays a
                   name.
                 - one row per learner. Canvas matches a row by ID (its internal user id, which
                   a roster does not know: left empty, since a wrong number would be someone
                   else), then SIS User ID (the roster's `id`), then SIS Login ID (the roster's
                   `email`), then by name (Student: "Last, First" when the roster gives both,
                   the roster's `name` otherwise, Canvas's two name forms). Section is required
                   as a column, not as a value: empty. A row nothing matches is listed on
                   Canvas's review screen, where the instructor picks the student.
                 - a lesson without a grade: an empty cell. Canvas reads an empty cell (or "-")
                   as no score, as its export writes an ungraded submission; a 0 would be a
                   graded zero, counted in the current score, and would overwrite a grade the
                   instructor entered by hand.
                 - titles with "Current Score", "Final Grade" and the like are dropped by the
                   importer as total columns (NON_ASSIGNMENT_COLUMN_HEADERS): course titles
                   should avoid them.

    moodle.csv   Moodle, Grades > Import > CSV file (gradeimport_csv, load_data.php). The first
                 column "Email address" identifies the learner (the mapping screen's "Map from"
                 defaults to the first column; "Map to": Email address), then one numeric column
                 per lesson, then "First name" and "Last name" for the reader (mapped to
                 "Ignore"). Moodle has no row for maximum points: the grade items are made in
                 Moodle with the lesson's maximum (canvas.csv's Points Possible row lists them)
                 and each column is mapped to its item.
                 - a lesson without a grade: "-", Moodle's own mark for no grade (its export
                   writes it). An empty cell is no grade only for an existing grade item; mapped
                   to "New grade item" the importer stores '' and Moodle's database layer turns
                   '' in a numeric column into 0, a graded zero. "-" is no grade both ways. It is
                   a constant of ours, never learner text, and a lone sign is no formula.
                 - learners without an e-mail, or sharing one, are left out (and reported): a row
                   with an empty identifier keeps the previous row's learner in Moodle's import
                   loop, so its grades would land on someone else; an e-mail Moodle does not know
                   stops the whole import with a user-mapping error, which is safe.

Both files: UTF-8 with a byte-order mark (Moodle's csv_import_reader strips it; Canvas's
importer finds "Student" with include?, so the mark before it is harmless; and Excel, where
instructors open such files, reads UTF-8 only with it: "García" stays "García"); comma
separated; CRLF line ends (RFC 4180; both importers accept them) so a carriage return inside a
cell is quoted, never a new row. Spreadsheet-safe as cohort/gradebook.py's CSVs: every text cell
through core.neutral.spreadsheet_cell (a formula-like name gets a leading apostrophe; rosters
already refuse formula-like ids and e-mails), whitespace in names collapsed to single spaces,
and the grade cells plain decimals ("87.5", "10") that both LMSs and every spreadsheet read as
numbers.

Written only into the instructor's output folder, each file whole or not at all (a temporary
file, then a rename) and readable by its owner only (0600): it holds names, e-mails and grades.
Nothing leaves the machine; the instructor uploads the files.
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from autograder.core.manifest import Course
from autograder.core.neutral import spreadsheet_cell
from autograder.core.results import Text, message
from autograder.core.roster import Learner

__all__ = [
    "CANVAS_FILE",
    "CANVAS_LEARNER_COLUMNS",
    "MOODLE_FILE",
    "MOODLE_NO_GRADE",
    "Column",
    "LmsFiles",
    "TermRow",
    "canvas_csv",
    "columns",
    "moodle_csv",
    "moodle_left_out",
    "write_lms_files",
]

CANVAS_FILE = "canvas.csv"
MOODLE_FILE = "moodle.csv"
CANVAS_LEARNER_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CANVAS_POINTS_ROW = "Points Possible"
MOODLE_EMAIL = "Email address"
MOODLE_NAMES = ("First name", "Last name")
MOODLE_NO_GRADE = "-"
BOM = "\ufeff"
# Canvas's Assignment.title_and_id: /\A(.*)\s\((\d+)\)\z/ reads "Name (123)" as assignment 123.
_CANVAS_ID_SUFFIX = re.compile(r"\s(\(\d+\))$")


@dataclass(frozen=True)
class TermRow:
    """One learner's term grades: {lesson id: the counted grade in points, penalty applied}, None
    (or a lesson left out) where nothing counts: no accepted submission, or not graded yet."""

    learner: Learner
    lessons: Mapping[str, float | None] = field(default_factory=dict)


@dataclass(frozen=True)
class Column:
    """One lesson as an LMS column: its id, the header's name and its maximum points."""

    lesson: str
    name: str
    points: float


def columns(
    course: Course, points: Mapping[str, float] | None = None, lang: str | None = None
) -> list[Column]:
    """One Column per lesson of `course`, in its order: named "<id> <title>" in `lang` (the
    course's language by default), worth `points[lesson id]` where given (grade-all's run
    maximum, which leaves out a check nobody could run), else the sum of its checks' points."""
    lang = lang or course.language
    result = []
    for lesson in course.lessons:
        title = (
            lesson.title.get(lang)
            or lesson.title.get(course.language)
            or next(iter(lesson.title.values()), "")
        )
        maximum = (
            points[lesson.id] if points and lesson.id in points else sum(c.points for c in lesson.checks)
        )
        result.append(Column(lesson.id, _one_line(f"{lesson.id} {title}"), float(maximum)))
    return result


def _one_line(text: object) -> str:
    """A name as an LMS shows it: whitespace (line breaks, tabs) collapsed to single spaces."""
    return " ".join(str(text).split())


def _number(value: float, what: str) -> str:
    """A grade as a plain decimal: at most two decimals, no exponent, no trailing zeros."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{what}: {value!r} is not a finite number of points")
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _grade(row: TermRow, column: Column, empty: str) -> str:
    value = row.lessons.get(column.lesson)
    return empty if value is None else _number(value, f"learner {row.learner.id}, lesson {column.lesson}")


def _csv(rows: Iterable[list[str]]) -> str:
    buffer = io.StringIO()
    # Cells are already text, each made safe by its kind; the csv module only quotes.
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerows(rows)
    return BOM + buffer.getvalue()


def _canvas_name(column: Column) -> str:
    return spreadsheet_cell(_CANVAS_ID_SUFFIX.sub("\u00a0\\1", column.name))


def _student(learner: Learner) -> str:
    """The name Canvas can match: its sortable form "Last, First" when both are known, else the
    roster's name as written (Canvas's display form), else the id."""
    if learner.first_name and learner.last_name:
        return _one_line(f"{learner.last_name}, {learner.first_name}")
    return _one_line(learner.name or " ".join(part for part in learner.names if part) or learner.id)


def canvas_csv(cols: list[Column], rows: Iterable[TermRow]) -> str:
    """canvas.csv's text (see the module docstring): header, Points Possible, one row per learner."""
    header = [*CANVAS_LEARNER_COLUMNS, *(_canvas_name(c) for c in cols)]
    points = [CANVAS_POINTS_ROW, "", "", "", "", *(_number(c.points, f"lesson {c.lesson}") for c in cols)]
    body = [
        [
            spreadsheet_cell(_student(row.learner)),
            "",
            spreadsheet_cell(row.learner.id),
            spreadsheet_cell(row.learner.email or ""),
            "",
            *(_grade(row, c, "") for c in cols),
        ]
        for row in rows
    ]
    return _csv([header, points, *body])


def moodle_left_out(rows: Iterable[TermRow]) -> tuple[list[str], list[str]]:
    """(ids without an e-mail, ids whose e-mail another learner shares, case-insensitively as
    Moodle's lookup): the learners moodle.csv leaves out."""
    rows = list(rows)
    shared = Counter((row.learner.email or "").strip().lower() for row in rows)
    no_email = [row.learner.id for row in rows if not (row.learner.email or "").strip()]
    duplicated = [
        row.learner.id
        for row in rows
        if (row.learner.email or "").strip() and shared[row.learner.email.strip().lower()] > 1
    ]
    return no_email, duplicated


def moodle_csv(cols: list[Column], rows: Iterable[TermRow]) -> str:
    """moodle.csv's text (see the module docstring): the learners moodle_left_out names are not in it."""
    rows = list(rows)
    no_email, duplicated = moodle_left_out(rows)
    skip = set(no_email) | set(duplicated)
    header = [MOODLE_EMAIL, *(spreadsheet_cell(c.name) for c in cols), *MOODLE_NAMES]
    body = []
    for row in rows:
        if row.learner.id in skip:
            continue
        first, last = row.learner.names
        body.append(
            [
                spreadsheet_cell(row.learner.email.strip()),
                *(_grade(row, c, MOODLE_NO_GRADE) for c in cols),
                spreadsheet_cell(_one_line(first)),
                spreadsheet_cell(_one_line(last)),
            ]
        )
    return _csv([header, *body])


@dataclass(frozen=True)
class LmsFiles:
    """What write_lms_files wrote, and who moodle.csv leaves out."""

    canvas: Path
    moodle: Path
    moodle_no_email: tuple[str, ...] = ()
    moodle_shared_email: tuple[str, ...] = ()

    def notes(self) -> list[Text]:
        """The instructor's notes on the files (catalog messages, lms.yml): who is left out of
        moodle.csv and why; none when everyone is in."""
        notes = []
        if self.moodle_no_email:
            notes.append(
                message(
                    "lms.moodle_no_email", file=str(self.moodle), learners=", ".join(self.moodle_no_email)
                )
            )
        if self.moodle_shared_email:
            notes.append(
                message(
                    "lms.moodle_shared_email",
                    file=str(self.moodle),
                    learners=", ".join(self.moodle_shared_email),
                )
            )
        return notes


def _write_private(path: Path, text: str) -> None:
    """`path` whole or not at all, readable and writable by its owner only (0600)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp makes the file 0600 already; said again for a umask-free reading of the code.
        os.chmod(tmp, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(text.encode("utf-8"))
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_lms_files(
    folder: Path,
    course: Course,
    rows: Iterable[TermRow],
    *,
    points: Mapping[str, float] | None = None,
    lang: str | None = None,
) -> LmsFiles:
    """canvas.csv and moodle.csv in `folder` (the instructor's output folder, created if
    missing), one column per lesson of `course` (see `columns` for `points` and `lang`), one
    row per TermRow in the order given. Each file is replaced whole, mode 0600."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rows = list(rows)
    cols = columns(course, points, lang)
    canvas, moodle = folder / CANVAS_FILE, folder / MOODLE_FILE
    _write_private(canvas, canvas_csv(cols, rows))
    _write_private(moodle, moodle_csv(cols, rows))
    no_email, duplicated = moodle_left_out(rows)
    return LmsFiles(canvas, moodle, tuple(no_email), tuple(duplicated))
