"""The engine on a tiny made-up lesson: how pytest outcomes become check results.

A temporary course.yml and graders folder (AUTOGRADER_GRADERS) exercise every outcome with
one real worker: pass, CheckFailure, the learner's exception, a pending TODO, a timeout
followed by a check that still runs, a skip, and a course.yml check with no grader test.
"""

from __future__ import annotations

import shutil
import textwrap

import pytest
import yaml

from autograder.core.i18n import feedback_text
from autograder.core.manifest import load_course
from autograder.core.results import Status
from autograder.engine.grading import grade

GRADERS = """
import pytest
from autograder.engine.checks import fail
from autograder.core.results import message


def fn(sub, name):
    return sub.getattr(sub.module("toy"), name)


@pytest.mark.check("passes")
def test_passes(submission):
    assert submission.call(fn(submission, "double"), 21) == 42


@pytest.mark.check("fails")
def test_fails(submission):
    got = submission.call(fn(submission, "double"), 1)
    if got != 3:
        fail(message("lesson03.edges_wrong", got=got, expected=3))


@pytest.mark.check("raises")
def test_raises(submission):
    submission.call(fn(submission, "broken"))


@pytest.mark.check("pending")
def test_pending(submission):
    submission.call(fn(submission, "todo"))


@pytest.mark.check("hangs")
def test_hangs(submission):
    submission.call(fn(submission, "spin"))


@pytest.mark.check("after-hang")
def test_after_hang(submission):
    assert submission.call(fn(submission, "double"), 2) == 4


@pytest.mark.check("skipped")
def test_skipped(submission):
    pytest.skip("lesson03.no_cuda")
"""

TOY = """
def double(x):
    return 2 * x

def broken():
    items = []
    return items[3]

def todo():
    raise NotImplementedError("TODO [first] pendiente: escribe la primera parte")

def spin():
    while True:
        pass
"""


@pytest.fixture
def toy_course(tmp_path, monkeypatch):
    manifest = {
        "course": "Toy",
        "language": "es",
        "timezone": "UTC",
        "lessons": [
            {
                "id": "09",
                "slug": "toy",
                "section": {"es": "S", "en": "S"},
                "title": {"es": "Juguete", "en": "Toy"},
                "minutes": 1,
                "xp": 10,
                "files": ["toy.py"],
                "graders": "toy",
                "todos": [
                    {
                        "id": "first",
                        "file": "toy.py",
                        "title": {"es": "la primera parte", "en": "the first part"},
                    }
                ],
                "checks": [
                    {"id": "passes", "todo": "first", "points": 1},
                    {"id": "fails", "todo": "first", "points": 2},
                    {"id": "raises", "todo": None, "points": 1},
                    {"id": "pending", "todo": None, "points": 1},
                    {"id": "hangs", "todo": None, "points": 1, "timeout": 1.5},
                    {"id": "after-hang", "todo": None, "points": 1},
                    {"id": "skipped", "todo": None, "points": 5},
                    {"id": "no-grader", "todo": None, "points": 1},
                ],
            }
        ],
    }
    (tmp_path / "course.yml").write_text(yaml.safe_dump(manifest), encoding="utf-8")
    graders = tmp_path / "graders" / "toy"
    graders.mkdir(parents=True)
    (graders / "test_toy.py").write_text(GRADERS, encoding="utf-8")
    monkeypatch.setenv("AUTOGRADER_GRADERS", str(tmp_path / "graders"))
    submission = tmp_path / "submission"
    submission.mkdir()
    (submission / "toy.py").write_text(textwrap.dedent(TOY), encoding="utf-8")
    return load_course(tmp_path / "course.yml"), submission


def test_every_outcome_becomes_a_check_result(toy_course):
    course, submission = toy_course
    result = grade(course, course.lessons, submission, seed=1).lessons[0]
    by_id = {c.id: c for c in result.checks}
    assert [c.id for c in result.checks] == [c.id for c in course.lessons[0].checks]  # manifest order
    text = {cid: feedback_text(c.feedback, "es") for cid, c in by_id.items()}

    assert by_id["passes"].status is Status.PASSED and by_id["passes"].score == 1
    assert by_id["fails"].status is Status.FAILED and by_id["fails"].score == 0
    assert "Devolviste 2" in text["fails"]
    assert by_id["raises"].status is Status.FAILED
    assert "IndexError" in text["raises"] and "toy.py" in text["raises"] and "items[3]" in text["raises"]
    assert "autograder" not in text["raises"]  # the traceback is trimmed to the learner's file
    assert text["pending"].startswith("TODO [first] pendiente")
    assert by_id["hangs"].status is Status.ERROR and "Tiempo agotado" in text["hangs"]
    assert by_id["after-hang"].status is Status.PASSED  # a fresh worker took over
    assert by_id["skipped"].status is Status.SKIPPED and by_id["skipped"].max_score == 0
    assert by_id["no-grader"].status is Status.ERROR and "no-grader" in text["no-grader"]
    assert result.max_score == 8 and result.score == 2 and not result.completed and result.xp == 0


def test_missing_graders_folder_is_an_error_for_every_check(toy_course, monkeypatch, tmp_path):
    course, submission = toy_course
    monkeypatch.setenv("AUTOGRADER_GRADERS", str(tmp_path / "nowhere"))
    result = grade(course, course.lessons, submission, seed=1).lessons[0]
    assert all(c.status is Status.ERROR for c in result.checks)
    assert "no están disponibles" in feedback_text(result.checks[0].feedback, "es")


def test_a_grader_test_without_a_manifest_check_is_reported(toy_course, tmp_path):
    course, submission = toy_course
    (tmp_path / "graders" / "toy" / "test_extra.py").write_text(
        "import pytest\n\n@pytest.mark.check('not-in-course-yml')\ndef test_x(submission):\n    pass\n",
        encoding="utf-8",
    )
    result = grade(course, course.lessons, submission, seed=1).lessons[0]
    assert all(c.status is Status.ERROR for c in result.checks)
    assert "not-in-course-yml" in feedback_text(result.checks[0].feedback, "es")


def test_a_graders_file_that_does_not_collect_is_an_internal_error_not_a_ctrl_c(toy_course, tmp_path):
    # pytest reports a collection error as its own Interrupted, a KeyboardInterrupt subclass:
    # grading must not take it for the learner's Ctrl-C and stop the whole run.
    course, submission = toy_course
    (tmp_path / "graders" / "toy" / "test_broken.py").write_text("def test_x(:\n    pass\n", encoding="utf-8")
    result = grade(course, course.lessons, submission, seed=1).lessons[0]
    assert all(c.status is Status.ERROR for c in result.checks)
    text = feedback_text(result.checks[0].feedback, "es")
    assert "los correctores no se pudieron ejecutar" in text and "test_broken.py" in text, text


def test_a_grader_that_waits_on_another_todo_says_so_and_records_it(tmp_path, monkeypatch):
    """fail(..., waits_on=...) from a hidden grader: the result names the TODO it waits on, its
    message says to fix that one first, and the next step goes there."""
    from support.grading import write_submission
    from support.project import ROOT, SEED
    from support.variants import solution_files

    from autograder.core.i18n import feedback_text
    from autograder.core.manifest import load_course
    from autograder.engine.grading import grade
    from autograder.learner.steps import blocking_todo

    course = load_course(ROOT / "course.yml")
    lesson = course.lesson("01")
    graders = tmp_path / "graders"
    shutil.copytree(ROOT / "autograder" / "graders", graders, ignore=shutil.ignore_patterns("__pycache__"))
    test_file = graders / lesson.graders / "test_waits_probe.py"
    test_file.write_text(
        "import pytest\n"
        "from autograder.engine.checks import fail\n"
        "from autograder.core.results import message\n\n"
        "@pytest.mark.check('split-order')\n"
        "def test_probe(submission):\n"
        "    fail(message('engine.assertion', detail='x'), waits_on='vocab')\n\n"
        # A check of no TODO (a quiz question here) waits on one too, and must not say "TODO [None]".
        "@pytest.mark.check('quiz-1')\n"
        "def test_probe_of_no_todo(submission):\n"
        "    fail(message('engine.assertion', detail='x'), waits_on='vocab')\n",
        encoding="utf-8",
    )
    # Two tests for one check: the probe replaces the real split-order and quiz tests' verdicts.
    for name in ("test_split.py", "test_quiz.py"):
        (graders / lesson.graders / name).unlink()
    monkeypatch.setenv("AUTOGRADER_GRADERS", str(graders))
    folder = write_submission(tmp_path / "sub", solution_files(lesson))
    result = grade(course, [lesson], folder, seed=SEED).lessons[0]
    check = next(c for c in result.checks if c.id == "split-order")
    assert check.waits_on == "vocab"
    assert "arregla antes TODO [vocab]" in feedback_text(check.feedback, "es")
    assert blocking_todo(check, [t.id for t in lesson.todos]) == "vocab"
    quiz = next(c for c in result.checks if c.id == "quiz-1")
    text = feedback_text(quiz.feedback, "es")
    assert quiz.waits_on == "vocab" and "arregla antes TODO [vocab]" in text, text
    assert "None" not in text, text


def test_a_reason_several_checks_were_skipped_for_is_said_once():
    # In practice, lesson 05 skips up to ten checks because the learner's own GPT differs from
    # the reference: the first says why, the others name it; another reason is said in full.
    from autograder.core.results import CheckResult, Feedback, message
    from autograder.engine.grading import say_each_skip_reason_once

    def skipped(check_id: str, key: str) -> CheckResult:
        return CheckResult(check_id, None, Status.SKIPPED, 0.0, 0.0, Feedback.of(message(key)))

    checks = [
        skipped("a", "lesson05.practice_model_differs"),
        CheckResult("b", None, Status.PASSED, 1.0, 1.0),
        skipped("c", "lesson05.practice_model_differs"),
        skipped("d", "lesson04.practice_attention_differs"),
        skipped("e", "engine.official_only"),
        skipped("f", "engine.official_only"),
    ]
    say_each_skip_reason_once(checks)
    said = {check.id: feedback_text(check.feedback, "es") for check in checks}
    assert said["a"].startswith("No se juzga en la práctica") and said["d"].startswith(
        "No se juzga en la práctica"
    )
    assert said["c"] == "No se juzga aquí, por la misma razón que a."
    assert said["e"].startswith("Esta comprobación se juzga solo en la nota oficial")
    assert said["f"] == "También se juzga solo en la nota oficial."
