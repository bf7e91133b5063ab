"""The term's LMS files (autograder/term/lms.py) parsed back with the csv module against the
layouts Canvas's and Moodle's importers read: headers exactly, the points Canvas takes for a
new assignment, rows matched to roster ids and e-mails, non-ASCII names, formula-like names made
inert, lessons without a grade, the learners Moodle cannot identify left out, and the files'
permissions. Pure functions on a hand-made course and roster: no grading."""

from __future__ import annotations

import csv
import dataclasses
import io
import os
import stat
import sys
from pathlib import Path

import pytest

from autograder.core import i18n
from autograder.core.manifest import CheckSpec, Course, Lesson
from autograder.core.roster import Learner
from autograder.term import lms
from autograder.term.lms import Column, TermRow


def _lesson(id: str, slug: str, es: str, en: str, points: tuple[float, ...]) -> Lesson:
    return Lesson(
        id=id,
        slug=slug,
        section={"es": "s", "en": "s"},
        title={"es": es, "en": en},
        minutes=30,
        xp=10,
        files=("a.py",),
        quiz=None,
        graders=f"lesson{id}",
        todos=(),
        checks=tuple(CheckSpec(f"c{i}", None, p, 10.0) for i, p in enumerate(points)),
    )


COURSE = Course(
    name="curso",
    language="es",
    timezone="Europe/Madrid",
    lessons=(
        _lesson("01", "tokens", "Tokenización", "Tokenisation", (5, 5, 2.5)),
        _lesson("02", "bigramas", "Bigramas (2)", "Bigrams (2)", (20,)),
        _lesson("03", "atencion", "Atención causal", "Causal attention", (10, 0)),
    ),
    root=Path("."),
)

ANA = Learner(id="ana", first_name="Ana", last_name="García Núñez", email="ana@example.org")
BEA = Learner(id="2024-0042", name='=HYPERLINK("http://x") Bea', email="bea@example.org")
CHE = Learner(id="che", name="Chè\nLópez", email=None)
DAN = Learner(id="dan", name="Dan One", email="Same@example.org")
EVA = Learner(id="eva", name="Eva Two", email="same@example.org")

ROWS = [
    TermRow(ANA, {"01": 12.5, "02": 18.0, "03": 8.55}),
    TermRow(BEA, {"01": 0.0, "02": None}),  # 02: nothing counts; 03: never submitted
    TermRow(CHE, {"01": 7.0, "02": 20, "03": 10.0}),
]


def _parse(text: str) -> list[list[str]]:
    assert text.startswith("\ufeff"), "UTF-8 with a byte-order mark (see the module docstring)"
    body = text[1:]
    assert "\r\n" in body and "\n" not in body.replace("\r\n", ""), (
        "CRLF line ends only, outside quoted cells"
    )
    return list(csv.reader(io.StringIO(body, newline="")))


def test_columns_name_each_lesson_in_the_course_language_with_its_points():
    cols = lms.columns(COURSE)
    assert cols == [
        Column("01", "01 Tokenización", 12.5),
        Column("02", "02 Bigramas (2)", 20.0),
        Column("03", "03 Atención causal", 10.0),
    ]
    # grade-all's run maximum (a check nobody could run counts 0) wins over the course's sum.
    assert [c.points for c in lms.columns(COURSE, points={"03": 5.0}, lang="en")] == [12.5, 20.0, 5.0]
    assert lms.columns(COURSE, lang="en")[2].name == "03 Causal attention"


def test_canvas_layout_header_points_row_and_learner_rows():
    table = _parse(lms.canvas_csv(lms.columns(COURSE), ROWS))
    header, points, *learners = table
    assert header == [
        "Student",
        "ID",
        "SIS User ID",
        "SIS Login ID",
        "Section",
        "01 Tokenización",
        # Canvas reads "Name (123)" as assignment 123: a no-break space keeps this title a name.
        "02 Bigramas\u00a0(2)",
        "03 Atención causal",
    ]
    # The row Canvas takes a new assignment's points possible from (its first cell holds it).
    assert points == ["Points Possible", "", "", "", "", "12.5", "20", "10"]
    assert [len(row) for row in table] == [8] * 5
    # Matched by SIS User ID = roster id, SIS Login ID = e-mail; Canvas's own user ID unknown.
    assert [(r[1], r[2], r[3], r[4]) for r in learners] == [
        ("", "ana", "ana@example.org", ""),
        ("", "2024-0042", "bea@example.org", ""),
        ("", "che", "", ""),
    ]
    # Canvas's sortable name when the roster splits it; non-ASCII kept; one line.
    assert learners[0][0] == "García Núñez, Ana"
    assert learners[2][0] == "Chè López"
    # Grades: plain decimals; no grade is an empty cell, never 0 (a graded zero stays "0").
    assert [r[5:] for r in learners] == [["12.5", "18", "8.55"], ["0", "", ""], ["7", "20", "10"]]
    for row in learners:
        for cell in row[5:]:
            assert cell == "" or float(cell) >= 0


def test_canvas_header_is_what_canvas_importer_recognises():
    # gradebook_importer.rb: row[0] includes "Student", row[1] "ID", SIS User/Login ID at 2 and
    # 3, "Section" closing the learner columns; the points row's first cell includes the words.
    header, points, *_ = _parse(lms.canvas_csv(lms.columns(COURSE), ROWS))
    assert "Student" in header[0] and "ID" in header[1] and "Section" in header[4]
    assert header[2:4] == ["SIS User ID", "SIS Login ID"]
    assert "Points Possible" in points[0]
    import re

    title_and_id = re.compile(r"\A(.*)\s\((\d+)\)\Z", re.ASCII)  # Ruby's \s is ASCII
    assert not any(title_and_id.match(name) for name in header[5:])
    assert not any(
        word in name for name in header for word in ("Current Score", "Final Score", "Final Grade")
    )


def test_formula_like_names_are_inert_in_both_files():
    cols = lms.columns(COURSE)
    canvas = _parse(lms.canvas_csv(cols, ROWS))
    moodle = _parse(lms.moodle_csv(cols, ROWS))
    assert canvas[3][0] == '\'=HYPERLINK("http://x") Bea'
    bea = next(row for row in moodle if row[0] == "bea@example.org")
    assert bea[-2] == '\'=HYPERLINK("http://x")'
    for table in (canvas, moodle):
        for row in table:
            for cell in row:
                assert not cell.startswith(("=", "+", "@")) and cell[:1] != "\t", cell
                # The only cells starting with "-": Moodle's no-grade mark, a constant of ours.
                assert not cell.startswith("-") or cell == lms.MOODLE_NO_GRADE, cell


def test_moodle_layout_email_then_one_numeric_column_per_lesson():
    table = _parse(lms.moodle_csv(lms.columns(COURSE), ROWS))
    header, *learners = table
    assert header == [
        "Email address",
        "01 Tokenización",
        "02 Bigramas (2)",
        "03 Atención causal",
        "First name",
        "Last name",
    ]
    # Che has no e-mail: left out (an empty identifier would give the previous learner their grades).
    assert learners == [
        ["ana@example.org", "12.5", "18", "8.55", "Ana", "García Núñez"],
        ["bea@example.org", "0", "-", "-", '\'=HYPERLINK("http://x")', "Bea"],
    ]
    for row in learners:
        for cell in row[1:4]:
            assert cell == "-" or float(cell) >= 0


def test_moodle_leaves_out_learners_it_cannot_identify():
    rows = [*ROWS, TermRow(DAN, {"01": 1.0}), TermRow(EVA, {"01": 2.0})]
    assert lms.moodle_left_out(rows) == (["che"], ["dan", "eva"])
    emails = [row[0] for row in _parse(lms.moodle_csv(lms.columns(COURSE), rows))[1:]]
    assert emails == ["ana@example.org", "bea@example.org"]
    # Canvas matches on the id too: everyone is there.
    assert len(_parse(lms.canvas_csv(lms.columns(COURSE), rows))) == 2 + len(rows)


def test_numbers_are_plain_decimals_and_bad_grades_are_refused():
    cols = [Column("01", "01 T", 10.0)]
    out = _parse(lms.canvas_csv(cols, [TermRow(ANA, {"01": 1e-7}), TermRow(BEA, {"01": 9.999})]))
    assert [row[5] for row in out[2:]] == ["0", "10"]
    for bad in (float("nan"), float("inf"), True, "9"):
        with pytest.raises(ValueError, match="learner ana, lesson 01"):
            lms.canvas_csv(cols, [TermRow(ANA, {"01": bad})])


def test_write_lms_files_private_and_replaced_whole(tmp_path):
    out = tmp_path / "notas"
    written = lms.write_lms_files(out, COURSE, ROWS)
    assert written.canvas == out / "canvas.csv" and written.moodle == out / "moodle.csv"
    for path in (written.canvas, written.moodle):
        text = path.read_bytes().decode("utf-8")
        assert text.startswith("\ufeff")
        if sys.platform != "win32":
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert _parse(written.canvas.read_bytes().decode("utf-8"))[2][0] == "García Núñez, Ana"
    # A second run replaces the files (a file left 0644 by hand is 0600 again), no temporary left.
    os.chmod(written.canvas, 0o644)
    again = lms.write_lms_files(out, COURSE, ROWS[:1])
    assert len(_parse(again.canvas.read_bytes().decode("utf-8"))) == 3
    if sys.platform != "win32":
        assert stat.S_IMODE(again.canvas.stat().st_mode) == 0o600
    assert sorted(p.name for p in out.iterdir()) == ["canvas.csv", "moodle.csv"]
    # Who moodle.csv leaves out, said in the catalog's words (both languages).
    assert written.moodle_no_email == ("che",)
    (note,) = written.notes()
    for lang in ("es", "en"):
        said = i18n.translate(note.key, lang, **note.params)
        assert "che" in said and str(written.moodle) in said
    assert again.notes() == []


def test_write_lms_files_keeps_the_old_file_when_writing_fails(tmp_path):
    lms.write_lms_files(tmp_path, COURSE, ROWS)
    before = (tmp_path / "canvas.csv").read_bytes()
    with pytest.raises(ValueError):
        lms.write_lms_files(tmp_path, COURSE, [TermRow(ANA, {"01": float("nan")})])
    assert (tmp_path / "canvas.csv").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["canvas.csv", "moodle.csv"]


def test_the_readme_worked_example_end_to_end():
    """README's worked example («Un ejemplo completo» / "A worked example"), from the deadline to
    the cells canvas.csv and moodle.csv get, computed by the term's own code: Bea's on-time and
    late pushes, Ana's extension, her push past her late period (tests/term/test_counting.py
    proves the same counts from course.yml and roster.yml text)."""
    from datetime import timedelta

    from autograder.core.manifest import LatePolicy, Term, wall_time
    from autograder.core.roster import Extension, Roster
    from autograder.term.counting import Attempt, counting
    from autograder.term.deadlines import due_dates

    zone = "Europe/Madrid"
    late = LatePolicy(accepted=True, period=timedelta(days=3), per="day", percent=10, floor=50)
    term = Term(counting="latest", grace=timedelta(minutes=10), late=late)
    lesson = _lesson("03", "atencion", "Self-attention causal, multi-cabeza", "x", (100,))
    lesson = dataclasses.replace(lesson, due=wall_time("2026-12-20 23:59", zone))
    course = Course("curso", "es", zone, (lesson,), Path("."), term=term)
    ana = Learner(id="ana", name="Ana García", email="ana@example.org")
    bea = Learner(id="bea", name="Bea Ruiz", email="bea@example.org")
    roster = Roster(
        Path("roster.yml"), "yaml", (ana, bea), extensions=(Extension("ana", "03", extra=timedelta(days=2)),)
    )

    def at(text: str):
        return wall_time(text, zone)

    bea_due, ana_due = (due_dates(course, roster, who)["03"] for who in ("bea", "ana"))
    assert ana_due.due == at("2026-12-22 23:59") and ana_due.late_until == at("2026-12-25 23:59")
    bea_pushes = [
        Attempt("bea", "03", at("2026-12-20 23:50"), "b1", 75.0, 100.0),
        Attempt("bea", "03", at("2026-12-22 10:30"), "b2", 87.5, 100.0),
    ]
    late_one = counting(bea_pushes, bea_due, "latest", term.grace)
    assert late_one.lateness.late_by - term.grace == timedelta(days=1, hours=10, minutes=21)
    assert (late_one.lateness.units, late_one.lateness.factor, late_one.grade) == (2, 0.8, 70.0)
    assert counting(bea_pushes, bea_due, "best", term.grace).grade == 75.0
    ana_pushes = [
        Attempt("ana", "03", at("2026-12-22 10:30"), "a1", 87.5, 100.0),
        Attempt("ana", "03", at("2026-12-26 00:30"), "a2", 100.0, 100.0),  # past her late period
    ]
    assert counting(ana_pushes, ana_due, "latest", term.grace).grade == 87.5

    rows = [
        TermRow(bea, {"03": late_one.grade}),
        TermRow(ana, {"03": counting(ana_pushes, ana_due, "latest", term.grace).grade}),
        TermRow(
            Learner(id="cai", email="cai@example.org"), {"03": counting([], bea_due, "latest", term.grace)}
        ),
    ]
    cols = lms.columns(course, points={"03": 100.0})
    canvas = _parse(lms.canvas_csv(cols, rows))
    assert canvas[0][5] == "03 Self-attention causal, multi-cabeza"
    assert [row[5] for row in canvas[1:]] == ["100", "70", "87.5", ""]
    assert [row[1] for row in _parse(lms.moodle_csv(cols, rows))[1:]] == ["70", "87.5", "-"]
