"""Lessons that build on earlier ones (course.yml `uses`), with a small real course in tmp_path.

Lesson 02 of this course imports lesson 01's a.py. The engine must grade it against the
reference a.py that travels with the hidden graders (so a bug in lesson 01 never fails lesson
02), run the informational `own-pieces` check with the learner's own a.py, and say so plainly
when something it needs is missing. Real engine, real workers, real pytest graders.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
import textwrap

import pytest

from autograder.core.i18n import feedback_text
from autograder.core.manifest import load_course
from autograder.core.results import Status
from autograder.engine import references
from autograder.engine.grading import grade
from autograder.render.output import render_json, render_markdown, render_text

MANIFEST = """\
course: Encaje
language: es
timezone: UTC
lessons:
  - id: "01"
    slug: base
    section: {es: Uno, en: One}
    title: {es: La base, en: The base}
    minutes: 5
    xp: 10
    files: [a.py]
    graders: lesson01
    todos:
      - {id: base, file: a.py, title: {es: "devuelve 40", en: "return 40"}}
    checks:
      - {id: base, todo: base, points: 1}
  - id: "02"
    slug: encima
    section: {es: Uno, en: One}
    title: {es: Encima, en: On top}
    minutes: 5
    xp: 10
    files: [b.py]
    graders: lesson02
    uses: ["01"]
    todos:
      - {id: plus-two, file: b.py, title: {es: "suma 2 a la base", en: "add 2 to the base"}}
    checks:
      - {id: plus-two, todo: plus-two, points: 3}
      - {id: own-pieces, todo: null, points: 0, informational: true}
"""

GRADERS = {
    "lesson01/__init__.py": "",
    "lesson01/test_a.py": """
        import pytest

        from autograder.engine.checks import fail
        from autograder.core.results import Text

        @pytest.mark.check("base")
        def test_base(submission):
            if submission.call(submission.getattr(submission.module("a"), "base")) != 40:
                fail(Text("base: no da 40"))
    """,
    "lesson02/__init__.py": "",
    "lesson02/test_b.py": """
        import pytest

        from autograder.engine.checks import fail
        from autograder.core.results import Text


        @pytest.mark.check("plus-two")
        def test_plus_two(submission):
            assert submission.call(submission.getattr(submission.module("b"), "value")) == 42

        @pytest.mark.check("own-pieces")
        def test_own_pieces(own_submission):
            got = own_submission.call(own_submission.getattr(own_submission.module("b"), "value"))
            if got != 42:
                fail(Text("encaje: tu base de la lección 01 da otra cosa"))
    """,
}
# Lesson 01's marked solution: the engine makes its reference piece from it.
SOLUTIONS = {
    "01-base/a.py": "def base():\n    ### BEGIN SOLUTION base\n    return 40\n    ### END SOLUTION\n"
}

RIGHT_B = "from a import base\n\n\ndef value():\n    return base() + 2\n"
WRONG_A = "def base():\n    return 0\n"


@pytest.fixture
def world(tmp_path, monkeypatch):
    """(course, graders folder, repository root) with the learner's exercises/ filled in."""
    (tmp_path / "course.yml").write_text(MANIFEST, encoding="utf-8")
    graders = tmp_path / "graders"
    for rel, text in GRADERS.items():
        (graders / rel).parent.mkdir(parents=True, exist_ok=True)
        (graders / rel).write_text(textwrap.dedent(text), encoding="utf-8")
    monkeypatch.setenv("AUTOGRADER_GRADERS", str(graders))
    for rel, text in SOLUTIONS.items():
        (tmp_path / "solutions" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "solutions" / rel).write_text(text, encoding="utf-8")
    for rel, text in {"01-base/a.py": WRONG_A, "02-encima/b.py": RIGHT_B}.items():
        path = tmp_path / "exercises" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return load_course(tmp_path / "course.yml"), graders, tmp_path


def _by_id(lesson_result):
    return {c.id: c for c in lesson_result.checks}


def test_a_bug_in_an_earlier_lesson_does_not_fail_the_later_one(world):
    course, _, root = world
    result = grade(course, course.lessons, root / "exercises", seed=1)
    first, second = result.lessons
    assert not first.completed  # lesson 01 itself is wrong...
    checks = _by_id(second)
    assert checks["plus-two"].status is Status.PASSED  # ...but lesson 02 is graded on the reference
    own = checks["own-pieces"]
    assert own.status is Status.FAILED and own.informational and own.max_score == 0
    assert "tu base de la lección 01" in feedback_text(own.feedback, "es")
    assert second.completed and second.xp == 10 and second.score == second.max_score == 3
    assert result.xp == 10

    # Every report says the check is informational, and the JSON carries it.
    data = json.loads(render_json(result, "es"))
    flags = {c["id"]: c["informational"] for c in data["lessons"][1]["checks"]}
    assert flags == {"plus-two": False, "own-pieces": True}
    assert data["lessons"][1]["completed"] is True
    text = render_text(result, "es", color=False)
    assert "own-pieces · informativa: no cuenta para la nota" in text
    assert "own-pieces · informational: does not count toward the grade" in render_text(
        result, "en", color=False
    )
    # A Markdown comment shows what keeps lesson 01 from completion, not lesson 02's details.
    assert "own-pieces" not in render_markdown(result, "es", compact=True)


def test_a_learner_file_cannot_shadow_the_reference_piece(world):
    course, _, root = world
    # A wrong a.py dropped into lesson 02's own folder: the reference copy replaces it.
    (root / "exercises" / "02-encima" / "a.py").write_text(WRONG_A, encoding="utf-8")
    (root / "exercises" / "01-base" / "a.py").write_text("def base():\n    return 40\n", encoding="utf-8")
    result = grade(course, [course.lesson("02")], root / "exercises" / "02-encima", seed=1)
    checks = _by_id(result.lessons[0])
    assert checks["plus-two"].status is Status.PASSED
    assert checks["own-pieces"].status is Status.PASSED  # their own 01 is right now


def test_without_the_earlier_folders_own_pieces_is_skipped(world, tmp_path):
    course, _, root = world
    alone = tmp_path / "alone" / "02-encima"
    alone.mkdir(parents=True)
    (alone / "b.py").write_text(RIGHT_B, encoding="utf-8")
    result = grade(course, [course.lesson("02")], alone, seed=1).lessons[0]
    own = _by_id(result)["own-pieces"]
    assert own.status is Status.SKIPPED and own.max_score == 0
    assert "No encuentro tus archivos de las lecciones anteriores" in feedback_text(own.feedback, "es")
    assert result.completed


def test_missing_reference_pieces_are_an_instructors_problem_said_plainly(world):
    course, graders, root = world
    (root / "solutions" / "01-base" / "a.py").unlink()
    result = grade(course, [course.lesson("02")], root / "exercises" / "02-encima", seed=1).lessons[0]
    assert all(c.status is Status.ERROR for c in result.checks)
    text = feedback_text(result.checks[0].feedback, "es")
    assert "faltan las piezas de referencia" in text and "a.py" in text and "autograder stubs" in text
    assert not result.completed


def test_practice_mode_uses_the_learners_own_earlier_files(world, tmp_path, monkeypatch):
    course, _, root = world
    # A student release: no hidden graders, only the lesson's practice tests.
    monkeypatch.setenv("AUTOGRADER_GRADERS", str(tmp_path / "no-graders"))
    (root / "exercises" / "01-base" / "a.py").write_text("def base():\n    return 40\n", encoding="utf-8")
    (root / "exercises" / "02-encima" / "test_practica.py").write_text(
        "import pytest\nfrom b import value\n\n\n@pytest.mark.todo('plus-two')\n"
        'def test_value():\n    """b.value() es la base más 2."""\n    assert value() == 42\n',
        encoding="utf-8",
    )
    result = grade(course, [course.lesson("02")], root / "exercises" / "02-encima", seed=1).lessons[0]
    assert result.mode == "practice"
    assert [c.status for c in result.checks] == [Status.PASSED], [
        feedback_text(c.feedback, "es") for c in result.checks
    ]


def test_reference_pieces_are_written_only_to_a_private_folder(world, tmp_path, monkeypatch):
    """The pieces made from the solutions are reference solutions: the folder they are written
    to is this user's alone (0700), and one that others could read is refused, never used."""
    course, _, root = world
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    pieces = references.reference_files(course, course.lesson("02"), root / "solutions")
    private = tmp_path / "tmp" / f"autograder-derived-{os.getuid()}"
    assert pieces["a.py"].is_relative_to(private) and stat.S_IMODE(private.stat().st_mode) == 0o700
    assert pieces["a.py"].read_text(encoding="utf-8") == "def base():\n    return 40\n"
    private.chmod(0o755)
    with pytest.raises(PermissionError, match="not a private folder of this user"):
        references.reference_files(course, course.lesson("02"), root / "solutions")
