"""Crash blame in the learner release: a learner's repository holds no solutions, and `check`
grades its own exercises/, so the untouched stubs blame compares a learner's file with come from
the copy the release ships beside each recorded lesson's graders (autograder/graders/lessonNN/
stubs/, exactly the exercises as generated; they are public). A `.view` without `.contiguous()`
in a lesson 03 whose learner deleted every `# TODO [x]` comment is blamed on TODO
[contiguous-view] at its line by `check` in the release, as official grading blames it; the
quiz checks, judged only officially there, are never grouped as the failures of a cause.

Real runs: one release built per module, the release's own engine (PYTHONPATH), the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.learner_course import cli_env, run_cli
from support.project import ROOT

from autograder.core.manifest import load_course
from autograder.course.release import build_release
from autograder.course.stubs import strip_markers
from autograder.engine import recording, references

LESSON = "03-atencion-causal"
MERGE = "y = y.transpose(1, 2).contiguous().view(B, T, C)"
BROKEN = "y = y.transpose(1, 2).view(B, T, C)"


@pytest.fixture(scope="module")
def course():
    return load_course(ROOT / "course.yml")


@pytest.fixture(scope="module")
def release(course, tmp_path_factory) -> Path:
    """A built release whose lesson 03 is finished without a single TODO comment, then broken
    with a `.view` of the transposed heads."""
    out = tmp_path_factory.mktemp("release") / "learner"
    build_release(course, out)
    for name in ("attention.py", "attention_numpy.py"):
        text = strip_markers((ROOT / "solutions" / LESSON / name).read_text(encoding="utf-8"), name)
        if name == "attention.py":
            assert text.count(MERGE) == 1
            text = text.replace(MERGE, BROKEN)
        assert "TODO" not in text
        (out / "exercises" / LESSON / name).write_text(text, encoding="utf-8")
    return out


def broken_line(release: Path) -> int:
    rows = (release / "exercises" / LESSON / "attention.py").read_text(encoding="utf-8").splitlines()
    return next(n for n, row in enumerate(rows, start=1) if BROKEN in row)


def in_release(release: Path, *args: str):
    """The release's own engine, run from the learner's repository as a learner runs it."""
    proc = run_cli(release, *args, env=cli_env(PYTHONPATH=str(release)))
    assert proc.returncode in (0, 1), proc.stderr
    return proc


def test_the_release_ships_each_recorded_lessons_stubs_beside_its_graders(course, release):
    for lesson in course.lessons:
        graders = release / "autograder" / "graders" / lesson.graders
        if not (graders / recording.JSON_NAME).is_file():
            continue
        shipped = sorted(path.name for path in (graders / recording.STUBS_FOLDER).iterdir())
        assert shipped == sorted(name for name in lesson.files if name.endswith(".py"))
        for name in shipped:
            assert (graders / recording.STUBS_FOLDER / name).read_bytes() == (
                ROOT / "exercises" / lesson.folder / name
            ).read_bytes()
        # Not graders code: the recording made for the instructor's graders still fits them.
        assert recording.graders_digest(graders) == recording.graders_digest(
            ROOT / "autograder" / "graders" / lesson.graders
        )
        recording.load(graders)


def test_a_grader_asking_blame_itself_gets_the_shipped_stubs(course, release):
    """Without solutions (a learner's release), `graded_stubs` (lesson 06's harness asks it)
    falls back to the stubs beside the graders in use; with them, it makes its own."""
    graders = release / "autograder" / "graders"
    lesson = course.lesson("06")
    try:
        references.use(course, None, graders)
        assert references.graded_stubs(lesson.folder) == graders / lesson.graders / recording.STUBS_FOLDER
        references.use(course, None, None)
        assert references.graded_stubs(lesson.folder) is None
        references.use(course, ROOT / "solutions", graders)
        made = references.graded_stubs(lesson.folder)
        assert made is not None and made != graders / lesson.graders / recording.STUBS_FOLDER
        assert (made / "generate.py").read_bytes() == (
            ROOT / "exercises" / lesson.folder / "generate.py"
        ).read_bytes()
    finally:
        references.use(course, None, None)


def test_check_in_the_release_blames_the_view_crash_as_official_grading_does(release):
    line = broken_line(release)
    text = " ".join(in_release(release, "check", "03").stdout.split())
    assert f"Siguiente: TODO [contiguous-view] en exercises/{LESSON}/attention.py:{line}" in text, text
    assert "Siguiente: TODO [mask]" not in text
    assert "heads-merge · TODO [contiguous-view] 0/6 fallida" in text, text
    # The quiz is judged only officially here: each check says so, none is a cause's failure.
    assert "se juzga solo en la nota oficial" in text
    assert "las otras: quiz" not in text and "(0 puntos)" not in text, text

    practice = json.loads(in_release(release, "grade", "03", "--format", "json").stdout)
    official = json.loads(
        run_cli(
            ROOT, "grade", "03", "--submission", release / "exercises" / LESSON, "--format", "json"
        ).stdout
    )
    assert practice["practice"] is True and official["practice"] is False
    blamed = {
        check["id"]: check.get("raised_in")
        for check in official["lessons"][0]["checks"]
        if check["status"] == "failed" and check.get("raised_in")
    }
    # Not vacuous: officially, every check the crash stops is blamed on the merge's line.
    assert len(blamed) >= 8
    assert set(map(json.dumps, blamed.values())) == {
        json.dumps({"todo": "contiguous-view", "file": "attention.py", "line": line})
    }
    in_practice = {check["id"]: check for check in practice["lessons"][0]["checks"]}
    for check_id, raised in blamed.items():
        if in_practice[check_id]["status"] == "failed":
            assert in_practice[check_id].get("raised_in") == raised, check_id
    assert in_practice["heads-merge"]["status"] == "failed"
