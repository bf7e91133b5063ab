"""grade-all never loses a cohort at the last step: it runs from a venv that
is not activated (no `alembic` on PATH, which nbgrader's Gradebook would run by name), each
output is written on its own (one that cannot be written is named, the others are kept), and a
learner whose files cannot be read costs only that learner.

Real grade-all runs (real grading processes, real nbgrader gradebook) on a two-learner cohort
of lesson 01, which grades in seconds.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

from support.cohort_factory import grade_all, records, results
from support.grading import write_submission
from support.project import SEED
from support.variants import solution_files

from autograder.cli import main as cli_main
from autograder.cohort import grade_all as batch

OUTPUTS = ("grades.csv", "cohort.csv", "report.md", "report.png", "gradebook.db")


def cohort(base: Path, lesson) -> Path:
    submissions = base / "submissions"
    write_submission(submissions / "ana" / "exercises" / lesson.folder, solution_files(lesson))
    (submissions / "beto" / "exercises" / lesson.folder).mkdir(parents=True)  # an untouched start: nothing
    return submissions


def gradebook_scores(path: Path) -> dict[str, float]:
    """Each student's total auto score, read straight from the SQLite file nbgrader wrote."""
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT submitted_assignment.student_id, SUM(grade.auto_score) FROM grade "
            "JOIN submitted_notebook ON grade.notebook_id = submitted_notebook.id "
            "JOIN submitted_assignment ON submitted_notebook.assignment_id = submitted_assignment.id "
            "GROUP BY submitted_assignment.student_id"
        ).fetchall()
        version = db.execute("SELECT version_num FROM alembic_version").fetchall()
    assert len(version) == 1 and version[0][0], version
    return {student: score for student, score in rows}


def test_grade_all_from_a_venv_that_is_not_activated_writes_every_output(course, tmp_path):
    """PATH holds only the system's folders: no `alembic`, no venv bin, as under cron or systemd
    (the interpreter is named by its full path, as venv/bin/autograder would be)."""
    lesson = course.lesson("01")
    submissions, out = cohort(tmp_path, lesson), tmp_path / "out"
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    assert shutil.which("alembic", path=env["PATH"]) is None, "the test needs a PATH without alembic"
    proc = grade_all(submissions, "--out", out, "--lessons", "01", "--jobs", 2, "--seed", SEED, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in OUTPUTS:
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    assert gradebook_scores(out / "gradebook.db") == {"ana": 100.0, "beto": 0.0}
    # nbgrader itself opens what we wrote as its own gradebook.
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{out / 'gradebook.db'}") as gb:
        assert gb.find_submission(lesson.folder, "ana").score == 100.0


def test_an_output_that_cannot_be_written_is_named_and_the_others_are_kept(course, tmp_path):
    lesson = course.lesson("01")
    submissions, out = cohort(tmp_path, lesson), tmp_path / "out"
    (out / "report.png").mkdir(parents=True)  # in the way: the chart cannot be saved there
    proc = grade_all(submissions, "--out", out, "--lessons", "01", "--jobs", 2, "--seed", SEED, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"No se pudo escribir {out / 'report.png'}" in proc.stderr, proc.stderr
    for name in OUTPUTS:
        if name != "report.png":
            assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    assert sorted(results(out)) == ["ana", "beto"]
    # Mended and run again: nobody is graded again, and the missing output is written.
    (out / "report.png").rmdir()
    again = grade_all(submissions, "--out", out, "--lessons", "01", "--jobs", 2, "--seed", SEED)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "0 corregidos, 2 sin cambios" in again.stdout, again.stdout
    assert (out / "report.png").is_file()


def test_a_learner_whose_files_cannot_be_read_costs_only_that_learner(course, tmp_path, monkeypatch, capsys):
    """An OSError while reading one learner's files (a folder without permission for a plain
    user, a file that vanishes, a kernel file): that learner gets an error result naming why;
    everyone else is graded. Root reads every folder, so the failure is provoked in the walk."""
    lesson = course.lesson("01")
    submissions, out = cohort(tmp_path, lesson), tmp_path / "out"
    real_hash = batch.content_hash

    def content_hash(course, lessons, exercises, *, boundary=None):
        if Path(boundary).name == "beto":
            raise PermissionError(13, "Permission denied", str(exercises))
        return real_hash(course, lessons, exercises, boundary=boundary)

    monkeypatch.setattr(batch, "content_hash", content_hash)
    status = cli_main(
        [
            "grade-all",
            str(submissions),
            "--out",
            str(out),
            "--lessons",
            "01",
            "--jobs",
            "2",
            "--seed",
            str(SEED),
        ]
    )
    captured = capsys.readouterr()
    assert status == 0, captured.out + captured.err
    assert "beto: no se puede leer su entrega (PermissionError" in captured.err, captured.err
    ana, beto = results(out)["ana"], results(out)["beto"]
    record = records(out)["beto"]
    assert ana["score"] == 100 and beto["score"] == 0
    assert (record["status"], record["error"]) == ("error", "unreadable")
    assert "No se pudo leer esta entrega" in json.dumps(beto, ensure_ascii=False)
    assert "beto" in (out / "report.md").read_text(encoding="utf-8")
