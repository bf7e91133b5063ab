"""The cohort report by cause, and cohort.csv's one maximum: a real `grade-all` (real grading
processes and sandboxed workers, real clones over HTTP from local bare remotes, real nbgrader)
over a small lesson-03 cohort, graded once for the module.

ana hands in the solution; sintaxis, a syntax error in attention.py; choque, an attention.py that
raises while it is imported; perdida's repository cannot be fetched. A lesson that does not run
is one line under "No se ejecuta" (file and line), not a learner stuck on every TODO of it.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pytest
from support.cohort_factory import bare_remote, grade_all, results, served
from support.variants import solution_files

from autograder.cohort.causes import check_does_not_run
from autograder.cohort.report import check_rates, load, render_markdown, todo_rates
from autograder.cohort.store import Store
from autograder.core.results import CheckResult, Feedback, Status, message
from autograder.engine.feedback import format_traceback

pytestmark = pytest.mark.timeout(900)

CRASH = "import math\nraise RuntimeError('falta el corpus de la lección')\n"


def _syntax_error(text: str) -> tuple[str, int]:
    """attention.py with one line of its forward() broken (a missing parenthesis): the text and
    that line's number."""
    lines = text.splitlines(keepends=True)
    index = next(i for i, line in enumerate(lines) if line.strip().startswith("def forward("))
    lines[index] = lines[index].replace("):", ":", 1)
    return "".join(lines), index + 1


@pytest.fixture(scope="module")
def graded(tmp_path_factory, course):
    lesson = course.lesson("03")
    root = tmp_path_factory.mktemp("by-cause")
    remotes = root / "remotes"
    remotes.mkdir()
    solved = solution_files(lesson)
    broken, line = _syntax_error(solved["attention.py"])
    bare_remote(remotes, "ana", lesson, solved)
    bare_remote(remotes, "sintaxis", lesson, {**solved, "attention.py": broken})
    bare_remote(remotes, "choque", lesson, {**solved, "attention.py": CRASH + solved["attention.py"]})
    roster, out = root / "roster.csv", root / "out"
    with served(remotes) as base:
        roster.write_text(
            "id,url\n"
            f"ana,{base}/ana.git\n"
            f"sintaxis,{base}/sintaxis.git\n"
            f"choque,{base}/choque.git\n"
            f"perdida,{base}/no-existe.git\n",
            encoding="utf-8",
        )
        proc = grade_all(
            root / "submissions",
            "--roster",
            roster,
            "--out",
            out,
            "--lessons",
            "03",
            "--jobs",
            2,
            "--allow-scheme",
            "http",
            "--allow-host",
            "127.0.0.1",
        )
    return {"out": out, "line": line, "log": proc.stdout + proc.stderr}


def _section(report: str, title: str) -> str:
    return report.split(f"## {title}\n")[1].split("\n## ")[0]


def _cohort(course, out: Path):
    store = Store(out)
    return load(course, store.read_run(), store)


def test_a_lesson_that_does_not_run_is_named_once_with_file_and_line(graded):
    report = (graded["out"] / "report.md").read_text(encoding="utf-8")
    section = _section(report, "No se ejecuta")
    rows = [line for line in section.splitlines() if line.startswith("- ")]
    assert len(rows) == 2, section
    choque, sintaxis = rows  # by learner id
    assert choque.startswith("- `choque` · lección 03: ") and "attention.py:2" in choque, choque
    assert "RuntimeError: falta el corpus" in choque and "(detiene 14 comprobaciones)" in choque
    assert sintaxis.startswith("- `sintaxis` · lección 03: ") and f"attention.py:{graded['line']}" in sintaxis
    assert re.search("Error de sintaxis|SyntaxError", sintaxis), sintaxis
    # Each is named once in the whole report: not among the stuck, not among the checks.
    for learner in ("sintaxis", "choque"):
        assert report.count(f"`{learner}`") == 1, report
    # ana ran, and perdida never got graded: neither is here (perdida is under the errors).
    assert "`ana`" not in section and "`perdida`" not in section
    assert "`perdida`" in _section(report, "Sin nota por un error de la corrección")


def test_the_learners_whose_lesson_does_not_run_are_not_stuck_on_its_todos(graded, course):
    cohort = _cohort(course, graded["out"])
    lesson = course.lesson("03")
    rates = {rate.id: rate for rate in todo_rates(cohort)}
    for todo in lesson.todos:
        rate = rates[todo.id]
        if todo.file == "attention.py":
            # Only ana is judged on attention.py's TODOs: the other two never got to run them.
            assert (rate.total, rate.stuck, rate.pending) == (1, 0, 0), rate
        else:
            # attention_numpy.py imports fine for all three (their NumPy part is the solution).
            assert (rate.total, rate.stuck, rate.pending) == (3, 0, 0), rate
    for rate in check_rates(cohort):
        assert rate.stuck == 0 and rate.total in (0, 1, 3), rate  # 0: gpu-parity, skipped without a GPU
    report = (graded["out"] / "report.md").read_text(encoding="utf-8")
    todos = _section(report, "¿En qué TODO se atascan?")
    assert all("| 0 (0 %) | 0 (0 %) |" in row for row in todos.splitlines() if row.startswith("| `")), todos
    assert "Nadie se atasca" in _section(report, "Comprobaciones")


def test_the_report_in_english_names_them_too(graded, course):
    report = render_markdown(_cohort(course, graded["out"]), "en")
    section = _section(report, "Does not run")
    rows = [line for line in section.splitlines() if line.startswith("- ")]
    assert rows[0].startswith("- `choque` · lesson 03: ") and "attention.py:2" in rows[0]
    assert rows[1].startswith("- `sintaxis` · lesson 03: ") and f"attention.py:{graded['line']}" in rows[1]
    assert all(row.endswith("(stops 14 checks)") for row in rows), rows
    assert "sintaxis" not in rows[1].split(": ", 1)[1], rows  # no Spanish word in the English report


def test_a_learner_whose_fetch_failed_has_the_same_maximum_in_cohort_csv(graded):
    out = graded["out"]
    rows = {row["student_id"]: row for row in csv.DictReader(io.StringIO((out / "cohort.csv").read_text()))}
    assert set(rows) == {"ana", "sintaxis", "choque", "perdida"}
    assert rows["perdida"]["status"] == "error:fetch" and float(rows["perdida"]["score"]) == 0
    ana = results(out)["ana"]
    assert ana["score"] == ana["max_score"]  # the solution: every check that ran here passes
    assert {row["max_score"] for row in rows.values()} == {f"{float(ana['max_score'])}"}, rows
    # grades.csv, nbgrader's own rows, agrees.
    grades = list(csv.DictReader(io.StringIO((out / "grades.csv").read_text())))
    assert {row["max_score"] for row in grades} == {f"{float(ana['max_score'])}"}


def _raised(frames: list[dict], type_name: str = "RuntimeError") -> CheckResult:
    """A failed check as the engine words a learner's exception (its catalog message, then the
    learner's frames as the engine formats them)."""
    feedback = Feedback.of(
        message("engine.student_raised", type=type_name, message="boom"),
        format_traceback(frames, type_name, "boom", final_line=False),
    )
    return CheckResult("shapes", "head-reshape", Status.FAILED, 0.0, 3.0, feedback)


def test_only_an_import_is_a_lesson_that_does_not_run():
    module = {"filename": "attention.py", "lineno": 3, "name": "<module>", "line": "raise X"}
    inner = {"filename": "data.py", "lineno": 7, "name": "<module>", "line": "raise X"}
    method = {"filename": "attention.py", "lineno": 57, "name": "forward", "line": "y = q @ k"}
    assert check_does_not_run(_raised([module]), "es").where == "attention.py:3"
    # attention.py imports data.py, which raises at its line 7: still an import.
    assert check_does_not_run(_raised([module, inner]), "es").where == "data.py:7"
    # The learner's forward() raised: the module was imported, this is a bug to be stuck on.
    assert check_does_not_run(_raised([method]), "es") is None
    assert check_does_not_run(_raised([method, module]), "es") is None
    passed = _raised([module])
    passed.status = Status.PASSED
    assert check_does_not_run(passed, "es") is None
