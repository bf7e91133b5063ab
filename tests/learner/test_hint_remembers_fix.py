"""`autograder hint` remembers a "fix the file that does not load" step as it remembers the other
steps (learner/store.py known_step): while the lesson's files and the broken file are unchanged it
answers from .autograder/state.json, without grading again (a grading appends a history record,
so the history's length tells); any edit grades again.

Real runs of the CLI on a copy of the course (lesson 01, the quickest to grade)."""

from __future__ import annotations

import hashlib
import json

import pytest
from support.learner_course import history_lines, make_course, run_cli

from autograder.core.manifest import load_course
from autograder.learner.folders import lesson_digest, lesson_dir
from autograder.learner.store import LocalStore, known_step

DATA = "exercises/01-tokens-y-lotes/data.py"


def break_line(root, number: int) -> None:
    """Leave an opening parenthesis unclosed on the `number`-th code line of data.py."""
    path = root / DATA
    rows = path.read_text(encoding="utf-8").splitlines()
    code = [n for n, row in enumerate(rows) if row.strip().startswith("return ")]
    index = code[number]
    rows[index] = rows[index] + " + ("
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return index + 1


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return make_course(tmp_path_factory.mktemp("learner") / "course", {"01": "solved", "02": "stub"})


def test_hint_answers_a_fix_step_from_memory_until_a_file_changes(root):
    line = break_line(root, 0)
    where = f"{DATA}:{line}"
    done = run_cli(root, "check", "01")
    assert done.returncode == 0, done.stderr
    assert f"Siguiente: corrige el error de sintaxis en {where}\n" in done.stdout, done.stdout
    graded = len(history_lines(root))
    assert graded == 1
    state = json.loads((root / ".autograder" / "state.json").read_text(encoding="utf-8"))
    saved = state["next"]["01"]
    assert saved["step"]["kind"] == "fix" and saved["step"]["path"] == DATA and saved["step"]["line"] == line

    expected = (
        "Antes de una pista: un archivo de la lección 01 no se carga, y las comprobaciones que lo usan "
        f"no pueden ejecutarse.\nSiguiente: corrige el error de sintaxis en {where}\n"
    )
    for _ in range(2):
        hinted = run_cli(root, "hint", "01")
        assert hinted.returncode == 0, hinted.stderr
        assert hinted.stdout == expected
    assert len(history_lines(root)) == graded  # answered from memory: no grading

    # The learner fixes that line and breaks another: the next hint grades again.
    (root / DATA).write_text(
        (root / DATA).read_text(encoding="utf-8").replace(" + (\n", "\n", 1), encoding="utf-8"
    )
    moved = break_line(root, 1)
    assert moved != line
    hinted = run_cli(root, "hint", "01")
    assert hinted.returncode == 0, hinted.stderr
    assert f"Siguiente: corrige el error de sintaxis en {DATA}:{moved}\n" in hinted.stdout, hinted.stdout
    assert len(history_lines(root)) == graded + 1


def test_a_fix_step_in_another_lessons_file_is_forgotten_when_that_file_changes(tmp_path):
    """Lesson 04 loads lesson 03's file: its fix step may point outside its own folder, which its
    own digest does not cover. Shown with the store itself: a remembered step of lesson 01 that
    points at lesson 02's file."""
    root = make_course(tmp_path / "course", {"01": "solved", "02": "stub"})
    course = load_course(root / "course.yml")
    lesson = course.lesson("01")
    store = LocalStore(root)
    other = "exercises/02-bigrama/bigram.py"
    digest = hashlib.sha256((root / other).read_bytes()).hexdigest()

    def point_at(state):
        state["next"]["01"] = {
            "digest": lesson_digest(lesson_dir(course, lesson)),
            "mode": "practice",
            "step": {
                "kind": "fix",
                "todo": None,
                "check": "vocab",
                "path": other,
                "line": 3,
                "error": "syntax",
            },
            "fix_digest": digest,
        }

    store.update_state("es", point_at)
    known, step = known_step(course, lesson, store, "es")
    assert known and (step.kind, step.path, step.line, step.error) == ("fix", other, 3, "syntax")

    (root / other).write_text((root / other).read_text(encoding="utf-8") + "\n# editado\n", encoding="utf-8")
    assert known_step(course, lesson, store, "es") == (False, None)

    # A state written before fix steps were remembered (no place, no digest) is not trusted either.
    store.update_state("es", lambda state: state["next"]["01"].update(step={"kind": "fix", "check": "vocab"}))
    assert known_step(course, lesson, store, "es") == (False, None)
