"""A graded cohort as an nbgrader gradebook and as CSV files.

nbgrader's model is assignments made of notebooks made of grade cells. Here each lesson is an
assignment with one notebook (both named after the lesson's folder, e.g. 03-atencion-causal),
each check of course.yml is a grade cell of that notebook (max_score = its points) and each
learner is a student (names and email from the roster) with one submission per lesson, stamped
with the submission's time and holding one autograded grade per check. So `nbgrader export`,
the formgrader and any tool built on nbgrader.api read our grades as their own.

    grades.csv   the rows and columns `nbgrader export` writes from that gradebook (one row per
                 lesson and learner), plus xp and xp_max; written from the results, not read
                 back from the gradebook, so that the two can be checked against each other
    cohort.csv   one row per learner: one column of points per lesson, then the totals and XP
                 of their results (as `autograder grade` counts them), and the grading status;
                 max_score is the run's one maximum, the sum of the gradebook's grade cells, on
                 every row: a learner whose grading failed (a repository that could not be
                 fetched, a crash) has an error result in which every check, even one nobody
                 could run here, is worth its points, and would otherwise show 105 where the
                 others show 100

A check that could not run for anyone in the run (the GPU check on a machine without one) is a
grade cell worth 0, so every maximum is the one `autograder grade` reports (100, not 105).

The submission's time (the gradebook's timestamp, the CSVs' `timestamp`) is when grade-all first
saw what it graded (autograder/cohort/observations.py), naive UTC as nbgrader keeps it.

With deadlines (course.yml's term block; `term`, autograder/cohort/term_grades.TermGrades), each
lesson's grade is the term grade: the counting submission's points after the late penalty, which
may be an older submission than the latest graded one. grades.csv then fills nbgrader's own
columns as `nbgrader export` does for a late submission: `duedate` (the learner's, extensions
applied), `timestamp` (the counting submission's time), `raw_score` (its points),
`late_submission_penalty` (the points the policy took, >= 0) and `score` (raw_score - penalty);
xp is the counting submission's XP, never penalised. A lesson with no accepted submission scores
0. cohort.csv's lesson columns hold the term grades, each lesson with a due date followed by
`<lesson>:late_hours` (how late the counting submission was, in hours, 0 on time),
`<lesson>:penalty` (points taken) and `<lesson>:status` (on_time, late, none: nothing accepted,
ungraded: the counting submission could not be graded). The gradebook's submissions carry the
counting submission's checks, time and late_submission_penalty.

Spreadsheet-safe: the CSVs are opened in Excel, LibreOffice and Google Sheets, and names, e-mails
and statuses come from rosters and learners. Every cell is written by `_csv` as one of two kinds:
- numbers: the score columns (raw_score, late_submission_penalty, score, max_score, one per lesson
  in cohort.csv) and the XP columns (xp, xp_max), written as plain decimals ("87.5", "-2.0",
  "50") that every spreadsheet reads as numbers; only an int or a float may go in one;
- text: every other cell, the header included, through core.neutral.spreadsheet_cell: a text a
  spreadsheet would read as a formula (starting with = + - @, tab or carriage return, OWASP's
  rule) gets a leading apostrophe, shown as text and never evaluated.
Lines end in CRLF (RFC 4180), so that a cell holding a carriage return is quoted, never split.
So grades.csv is what `nbgrader export` writes, except that a formula-like name or e-mail, which
nbgrader's exporter leaves live, comes out inert.
"""

from __future__ import annotations

import csv
import datetime
import io
import os
import shutil
import tempfile
import warnings
from pathlib import Path

from autograder.cohort.report import Cohort, Entry
from autograder.core.neutral import spreadsheet_cell
from autograder.core.results import Status

# nbgrader export's columns, in its order (nbgrader/plugins/export.py).
NBGRADER_COLUMNS = (
    "assignment",
    "duedate",
    "timestamp",
    "student_id",
    "last_name",
    "first_name",
    "email",
    "raw_score",
    "late_submission_penalty",
    "score",
    "max_score",
)
# The columns of numbers (see the module docstring); cohort.csv's one per lesson too.
NUMBER_COLUMNS = frozenset({"raw_score", "late_submission_penalty", "score", "max_score", "xp", "xp_max"})


def _naive(moment: datetime.datetime | None) -> datetime.datetime | None:
    """An aware time as nbgrader keeps it: naive UTC, whole seconds."""
    if moment is None:
        return None
    return moment.astimezone(datetime.timezone.utc).replace(tzinfo=None, microsecond=0)


def _cell(term, entry: Entry, lesson):
    """The term grade of this learner's lesson, or None (no deadlines: the latest result)."""
    return None if term is None else term.cells.get(entry.record.learner, {}).get(lesson.id)


def _timestamp(entry: Entry) -> datetime.datetime | None:
    """The submission's time as nbgrader keeps it: naive UTC, whole seconds."""
    if entry.record.timestamp is None:
        return None
    return datetime.datetime.fromtimestamp(entry.record.timestamp, datetime.timezone.utc).replace(tzinfo=None)


def cell_points(cohort: Cohort, lesson) -> dict[str, float]:
    """Each grade cell's max_score: the check's points, or 0 for a check that could not run for
    anyone in this run (skipped for every learner graded, e.g. gpu-parity on a machine without
    a GPU). nbgrader has no "skipped": counting those points would make the maximum 105 where
    `autograder grade` (and the Jupyter edition) say 100."""
    results = [entry.lesson(lesson.id) for entry in cohort.entries if entry.graded]
    skipped = [
        {c.id for c in result.checks if c.status is Status.SKIPPED}
        for result in results
        if result is not None
    ]
    skipped_by_all = set.intersection(*skipped) if skipped else set()
    return {spec.id: 0.0 if spec.id in skipped_by_all else float(spec.points) for spec in lesson.checks}


def _points(result) -> float:
    return float(sum(check.score for check in result.checks)) if result is not None else 0.0


def _score(entry: Entry, lesson) -> float:
    return _points(entry.lesson(lesson.id))


def write_gradebook(path: Path, cohort: Cohort, term=None) -> None:
    """A fresh gradebook at `path` (replacing the previous one only once complete)."""
    from nbgrader import api

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        if path.is_file():
            # Start from a copy of the previous gradebook, emptied (its schema is already made).
            shutil.copyfile(path, tmp)
        else:
            _create_schema(tmp)
        with warnings.catch_warnings():
            # nbgrader's own relationships make SQLAlchemy warn while a submission is built.
            warnings.simplefilter("ignore")
            with api.Gradebook(f"sqlite:///{tmp}") as gb:
                for table in reversed(api.Base.metadata.sorted_tables):
                    if table.name != "course":
                        gb.db.execute(table.delete())
                _fill(gb, api, cohort, term)
        os.chmod(tmp, 0o600)  # names and grades: the owner's only, as DIR
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _create_schema(path: str) -> None:
    """nbgrader's tables and the alembic revision they are at, made in this process.

    nbgrader's Gradebook, given an empty database, learns the revision by running `alembic
    heads` as a subprocess found on PATH: from a venv that is not activated (cron, systemd,
    venv/bin/autograder) there is no such program, and the whole cohort's outputs would be lost
    at the last step. alembic's own API reads the same revision from nbgrader's migrations."""
    from alembic.script import ScriptDirectory
    from nbgrader import api, dbutil
    from sqlalchemy import create_engine, text

    head = ScriptDirectory(dbutil.ALEMBIC_DIR).get_current_head()
    engine = create_engine(f"sqlite:///{path}")
    try:
        api.Base.metadata.create_all(bind=engine)
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)"))
            conn.execute(text("INSERT INTO alembic_version (version_num) VALUES (:head)"), {"head": head})
    finally:
        engine.dispose()


def _fill(gb, api, cohort: Cohort, term=None) -> None:
    students = {}
    for entry in cohort.entries:
        record = entry.record
        students[record.learner] = gb.add_student(
            record.learner,
            first_name=record.first_name or None,
            last_name=record.last_name or None,
            email=record.email or None,
        )
    for lesson in cohort.lessons:
        assignment = gb.add_assignment(lesson.folder)
        notebook = gb.add_notebook(lesson.folder, lesson.folder)
        cells = {}
        for check_id, points in cell_points(cohort, lesson).items():
            cells[check_id] = gb.add_grade_cell(
                check_id, lesson.folder, lesson.folder, max_score=points, cell_type="code"
            )
        # One commit per lesson, not per submission: a cohort of hundreds stays quick.
        for entry in cohort.entries:
            cell = _cell(term, entry, lesson)
            stamp = _timestamp(entry) if cell is None else _naive(cell.submitted_at)
            submission = api.SubmittedAssignment(
                assignment=assignment, student=students[entry.record.learner], timestamp=stamp
            )
            submitted = api.SubmittedNotebook(notebook=notebook, assignment=submission)
            result = entry.lesson(lesson.id) if cell is None else cell.result
            if cell is not None:
                submitted.late_submission_penalty = cell.penalty
            scores = {check.id: check.score for check in result.checks} if result is not None else {}
            for spec in lesson.checks:
                api.Grade(
                    cell=cells[spec.id],
                    notebook=submitted,
                    auto_score=float(scores.get(spec.id, 0.0)),
                    needs_manual_grade=False,
                )
            gb.db.add(submission)
        gb.db.commit()


def _text(value) -> str:
    """A value as nbgrader export prints it: str() of it, '' for None."""
    return "" if value is None else str(value)


def _graded(entry: Entry, lesson, cell) -> tuple[float, float, float, object]:
    """(raw points, penalty, score, the lesson's result) of a learner's lesson: its term grade
    when there is one, else the latest result's points."""
    if cell is None:
        result = entry.lesson(lesson.id)
        score = _points(result)
        return score, 0.0, score, result
    raw = float(cell.points) if cell.points is not None and cell.grade is not None else 0.0
    return raw, cell.penalty, float(cell.grade) if cell.grade is not None else 0.0, cell.result


def export_rows(cohort: Cohort, term=None) -> list[dict[str, object]]:
    """The rows `nbgrader export` writes from our gradebook, with xp and xp_max added: numbers
    as numbers, text as text (`_csv` writes each as its kind). With `term`, the term grades."""
    rows = []
    for lesson in cohort.lessons:
        # nbgrader's assignment max_score: the sum of its grade cells' (see cell_points).
        max_score = float(sum(cell_points(cohort, lesson).values()))
        for entry in cohort.entries:
            cell = _cell(term, entry, lesson)
            raw, penalty, score, result = _graded(entry, lesson, cell)
            record = entry.record
            rows.append(
                {
                    "assignment": lesson.folder,
                    "duedate": _text(_naive(cell.due)) if cell is not None else "",
                    "timestamp": _text(_timestamp(entry) if cell is None else _naive(cell.submitted_at)),
                    "student_id": record.learner,
                    "last_name": record.last_name,
                    "first_name": record.first_name,
                    "email": record.email,
                    "raw_score": raw,
                    "late_submission_penalty": penalty,
                    "score": score,
                    "max_score": max_score,
                    "xp": result.xp if result is not None else 0,
                    "xp_max": lesson.xp,
                }
            )
    return rows


def grades_csv(cohort: Cohort, term=None) -> str:
    return csv_text([*NBGRADER_COLUMNS, "xp", "xp_max"], export_rows(cohort, term), NUMBER_COLUMNS)


def _late_columns(cohort: Cohort, term) -> dict[str, list[str]]:
    """{lesson folder: its late_hours, penalty and status columns}, for the lessons with a due date."""
    if term is None:
        return {}
    dated = {lid for row in term.cells.values() for lid, cell in row.items() if cell.due is not None}
    return {
        lesson.folder: [f"{lesson.folder}:late_hours", f"{lesson.folder}:penalty", f"{lesson.folder}:status"]
        for lesson in cohort.lessons
        if lesson.id in dated
    }


def cohort_csv(cohort: Cohort, term=None) -> str:
    """One row per learner: a column of points per lesson (named like its assignment), totals.
    With `term`, the term grades, each dated lesson followed by its lateness columns."""
    late = _late_columns(cohort, term)
    folders = [lesson.folder for lesson in cohort.lessons]
    lesson_columns = [name for folder in folders for name in (folder, *late.get(folder, ()))]
    columns = [
        "student_id",
        "last_name",
        "first_name",
        "email",
        "timestamp",
        "status",
        *lesson_columns,
        "score",
        "max_score",
        "xp",
        "xp_max",
    ]
    numbers = set(folders) | {names[0] for names in late.values()} | {names[1] for names in late.values()}
    rows = []
    maximum = float(sum(sum(cell_points(cohort, lesson).values()) for lesson in cohort.lessons))
    for entry in cohort.entries:
        record = entry.record
        scores: dict[str, object] = {}
        total, xp = 0.0, 0
        for lesson in cohort.lessons:
            cell = _cell(term, entry, lesson)
            _, penalty, score, result = _graded(entry, lesson, cell)
            scores[lesson.folder] = score
            total += score
            xp += result.xp if result is not None else 0
            if lesson.folder in late:
                hours, points, status = late[lesson.folder]
                scores[hours] = round(cell.late_by.total_seconds() / 3600, 2) if cell is not None else 0.0
                scores[points] = penalty
                scores[status] = cell.status if cell is not None else "none"
        rows.append(
            {
                "student_id": record.learner,
                "last_name": record.last_name,
                "first_name": record.first_name,
                "email": record.email,
                "timestamp": _text(_timestamp(entry)),
                "status": record.status if record.error is None else f"{record.status}:{record.error}",
                **scores,
                "score": float(entry.result.score) if term is None else round(total, 2),
                "max_score": maximum,
                "xp": xp,
                "xp_max": sum(lesson.xp for lesson in cohort.lessons),
            }
        )
    return csv_text(columns, rows, NUMBER_COLUMNS | numbers)


def _number(value: object, column: str) -> str:
    """A number cell: a plain decimal any spreadsheet reads as a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"column {column}: {value!r} is not a number")
    return str(value)


def csv_text(columns: list[str], rows: list[dict[str, object]], numbers: frozenset[str] | set[str]) -> str:
    """The CSV of `rows`: the cells of the `numbers` columns as numbers, every other cell (and
    the header) as text no spreadsheet evaluates."""
    buffer = io.StringIO()
    # RFC 4180's line ends: the csv module quotes a cell holding any character of the line
    # terminator, and only those; with "\n" alone, a carriage return in a name went out bare,
    # and a spreadsheet starts a new row there (one whose first cell could be a formula).
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow([spreadsheet_cell(column) for column in columns])
    for row in rows:
        writer.writerow(
            [
                _number(row[column], column) if column in numbers else spreadsheet_cell(_text(row[column]))
                for column in columns
            ]
        )
    return buffer.getvalue()


def lms_grade(entry: Entry, lesson, term=None) -> float | None:
    """A learner's grade of a lesson for the LMS files (term/lms.py): the term grade with
    deadlines (None where nothing counts or it could not be graded), else the latest result's
    points; None for a learner whose grading failed (an LMS's "no grade", never a graded 0)."""
    cell = _cell(term, entry, lesson)
    if cell is not None:
        return cell.grade
    return _points(entry.lesson(lesson.id)) if entry.graded else None
