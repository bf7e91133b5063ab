"""The informational own-pieces check (lessons 04-06) and a learner's file that does not load:
the grader catches the learner's error and fails with its own words, but a file that does not
load is said ONCE, as every other check says it (engine/learner_errors.py): its one line with the
course-relative path, the check listed among those the error keeps from running; never a second
time in the grader's message with the file's short name ("train.py:49").

Real gradings of lesson 05 (`check`, `grade --format json`) on a copy of the course."""

from __future__ import annotations

import json
import re

import pytest
from support.learner_course import make_course, run_cli

TRAIN = "exercises/05-entrenar/train.py"
ATTENTION = "exercises/03-atencion-causal/attention.py"


def unclose(path, after: int = 0) -> int:
    """Leave a parenthesis open at the end of the first `return` line below line `after`."""
    rows = path.read_text(encoding="utf-8").splitlines()
    index = next(i for i, row in enumerate(rows) if i >= after and row.strip().startswith("return "))
    rows[index] += " + ("
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return index + 1


@pytest.fixture(scope="module")
def courses(tmp_path_factory):
    """Lessons 03-05 finished; then train.py, or the learner's own lesson-03 attention.py, broken."""
    made = {}
    for name, target in (("train", TRAIN), ("attention", ATTENTION)):
        root = make_course(tmp_path_factory.mktemp(name), {"03": "solved", "04": "solved", "05": "solved"})
        made[name] = (root, target, unclose(root / target, after=25))
    return made


def own_pieces(root) -> dict:
    done = run_cli(root, "grade", "05", "--format", "json")
    assert done.returncode == 0, done.stderr
    return next(c for c in json.loads(done.stdout)["lessons"][0]["checks"] if c["id"] == "own-pieces")


def test_a_lesson_file_that_does_not_load_is_said_once_own_pieces_among_the_checks_it_stops(courses):
    root, target, line = courses["train"]
    where = f"{target}:{line}"
    out = run_cli(root, "check", "05").stdout
    flat = " ".join(out.split())
    assert out.count("was never closed") == 1, out
    assert f"Error de sintaxis en {where}: '(' was never closed" in out, out
    blocked = re.search(r"Comprobaciones que este error no deja ejecutar: (\d+) \([^)]*\): ([^.]*)\.", flat)
    assert blocked is not None, out
    assert "own-pieces" in blocked.group(2).split(", ")
    assert int(blocked.group(1)) == len(blocked.group(2).split(", "))
    assert not re.search(rf"(?<![/\w])train\.py:{line}", out), out  # never the short name

    check = own_pieces(root)
    assert check["status"] == "failed" and check["informational"] and check["score"] == 0
    assert check["message"] == f"Error de sintaxis en {where}: '(' was never closed"
    assert len(check["feedback"]) == 1


def test_the_learners_own_earlier_piece_that_does_not_load_is_named_by_its_course_path(courses):
    """Only own-pieces runs the learner's lesson-03 file in lesson 05: that check alone says it,
    naming the file in its own lesson's folder."""
    root, target, line = courses["attention"]
    check = own_pieces(root)
    assert check["status"] == "failed" and check["informational"]
    assert check["message"] == f"Error de sintaxis en {target}:{line}: '(' was never closed"
    assert len(check["feedback"]) == 1
