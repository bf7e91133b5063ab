"""Every CSV `grade-all` writes opens safely in a spreadsheet (autograder/cohort/gradebook.py):
no text cell a spreadsheet would evaluate as a formula (OWASP's CSV-injection rule,
core.neutral.formula_like), and the score and XP columns still numbers.

A real run: a roster whose learners' names are formulas (their repositories served over HTTP
from local bare remotes, as in tests/cohort/test_batch.py), then the same outputs written again from
records whose names and e-mails start with a tab or a carriage return, which no roster lets
through (it trims names and refuses formula-like e-mails) but a record edited by hand could hold.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from support.cohort_factory import bare_remote, grade_all, served, stub_files
from support.grading import write_submission
from support.project import SEED

from autograder.cohort import gradebook
from autograder.cohort.outputs import publish
from autograder.cohort.store import Store
from autograder.core.neutral import formula_like

pytestmark = pytest.mark.timeout(900)
ALLOW = ("--allow-scheme", "http", "--allow-host", "127.0.0.1")
# id: (first_name, last_name) as the roster has them.
NAMES = {
    "ana": ('=HYPERLINK("http://x","y")', "García"),
    "beto": ("Beto", "+cmd|' /C calc'!A0"),
    "carla": ("@SUM(1)", "-2+3"),
    "dario": ("\uff1d1+1", "=1+2"),  # a full-width equals sign, which some spreadsheets normalise
}
# The columns of numbers in each CSV ("lessons": cohort.csv's one per lesson).
NUMBERS = {
    "grades.csv": {"raw_score", "late_submission_penalty", "score", "max_score", "xp", "xp_max"},
    "cohort.csv": {"lessons", "score", "max_score", "xp", "xp_max"},
}


def read_rows(path: Path) -> list[list[str]]:
    # newline="": a carriage return inside a quoted cell stays in the cell.
    with open(path, encoding="utf-8", newline="") as fh:
        return list(csv.reader(fh))


def check_every_csv(out: Path, lessons: list[str]) -> dict[str, list[dict[str, str]]]:
    """Every CSV in `out`: no formula-like cell anywhere, numbers where numbers go. Returns
    {file name: rows as dicts}."""
    found = {path.name: path for path in out.rglob("*.csv")}
    assert {"grades.csv", "cohort.csv"} <= set(found), sorted(found)
    tables = {}
    for name, path in found.items():
        rows = read_rows(path)
        assert len(rows) > 1, name
        for number, row in enumerate(rows, 1):
            for cell in row:
                assert not formula_like(cell), (name, number, cell)
        header = rows[0]
        tables[name] = [dict(zip(header, row)) for row in rows[1:]]
        numeric = NUMBERS.get(name, set())
        columns = (numeric - {"lessons"}) | (set(lessons) if "lessons" in numeric else set())
        assert columns <= set(header), (name, header)
        for row in tables[name]:
            for column in columns:
                value = row[column]
                assert float(value) == float(value) and not value.startswith("'"), (name, column, value)
    return tables


def test_a_roster_of_formula_names_gives_csvs_with_no_formula(course, tmp_path):
    lesson = course.lesson("01")
    remotes, submissions, out = tmp_path / "remotes", tmp_path / "submissions", tmp_path / "out"
    remotes.mkdir()
    for learner in NAMES:
        bare_remote(remotes, learner, lesson, stub_files(lesson))
    roster = tmp_path / "roster.csv"
    with served(remotes) as base:
        with open(roster, "w", encoding="utf-8", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(["id", "first_name", "last_name", "email", "url"])
            for learner, (first, last) in NAMES.items():
                writer.writerow([learner, first, last, f"{learner}@example.org", f"{base}/{learner}.git"])
        grade_all(
            submissions,
            "--roster",
            roster,
            "--out",
            out,
            "--lessons",
            "01",
            "--jobs",
            2,
            "--seed",
            SEED,
            *ALLOW,
        )
    assert {json.loads(p.read_text(encoding="utf-8"))["status"] for p in (out / "records").iterdir()} == {
        "graded"
    }
    tables = check_every_csv(out, [lesson.folder])
    for name in ("grades.csv", "cohort.csv"):
        rows = {row["student_id"]: row for row in tables[name]}
        assert set(rows) == set(NAMES)
        for learner, (first, last) in NAMES.items():
            # Shown as the text it is: the apostrophe that keeps it a text is the only change.
            assert rows[learner]["first_name"] == (f"'{first}" if formula_like(first) else first), (
                name,
                learner,
            )
            assert rows[learner]["last_name"] == (f"'{last}" if formula_like(last) else last), (name, learner)
            assert rows[learner]["email"] == f"{learner}@example.org"
    assert {row["max_score"] for row in tables["grades.csv"]} == {"100.0"}
    assert {row["xp_max"] for row in tables["cohort.csv"]} == {"50"}


def test_names_and_emails_starting_with_a_tab_or_a_return_come_out_inert(course, tmp_path):
    lesson = course.lesson("01")
    submissions, out = tmp_path / "submissions", tmp_path / "out"
    for learner in ("ana", "beto"):
        write_submission(submissions / learner / lesson.folder, stub_files(lesson))
    grade_all(submissions, "--out", out, "--lessons", "01", "--seed", SEED)
    store = Store(out)
    hostile = {
        "ana": ("\t=1+2", "\r@SUM(1)", "=cmd@example.org"),
        "beto": ("-2+3", "+1", "\t-3"),
    }  # "+1" is a plain number: data, left as it is
    for learner, (first, last, email) in hostile.items():
        record = store.read_record(learner)
        record.first_name, record.last_name, record.email = first, last, email
        store.save_record(record)
    assert publish(course, store, store.read_run(), "es") == []
    tables = check_every_csv(out, [lesson.folder])
    for name in ("grades.csv", "cohort.csv"):
        rows = {row["student_id"]: row for row in tables[name]}
        for learner, (first, last, email) in hostile.items():
            assert (rows[learner]["first_name"], rows[learner]["last_name"], rows[learner]["email"]) == (
                f"'{first}",
                last if last == "+1" else f"'{last}",
                f"'{email}",
            ), (name, learner)


def test_numbers_stay_numbers_and_only_numbers_go_in_number_columns():
    text = gradebook.csv_text(
        ["name", "penalty"], [{"name": "-2+3", "penalty": -2.5}, {"name": "-2", "penalty": 0}], {"penalty"}
    )
    assert text == "name,penalty\r\n'-2+3,-2.5\r\n-2,0\r\n"  # a text that is a plain number is data too
    # A carriage return inside a cell is quoted: no spreadsheet starts a row (and a formula) there.
    assert gradebook.csv_text(["name"], [{"name": "Ana\r@SUM(1)"}], set()) == 'name\r\n"Ana\r@SUM(1)"\r\n'
    with pytest.raises(TypeError, match="column penalty"):
        gradebook.csv_text(["penalty"], [{"penalty": "=1+2"}], {"penalty"})
