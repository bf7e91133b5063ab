"""The command line as other tools call it: real `python -m autograder` processes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml
from support.project import ROOT

STATUSES = {"passed", "failed", "error", "skipped"}


def run_cli(*args, cwd=ROOT, env=None):
    return subprocess.run(
        [sys.executable, "-m", "autograder", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def assert_contract(data: dict) -> None:
    """The JSON result contract of `autograder grade --format json` (what instructors' tools and the workflow read)."""
    assert {"course", "language", "xp", "xp_max", "score", "max_score", "lessons"} <= set(data)
    assert isinstance(data["course"], str) and data["language"] in ("es", "en")
    assert isinstance(data["xp"], int) and isinstance(data["xp_max"], int)
    for lesson in data["lessons"]:
        # The contract's fields, plus what came later: xp_max, mode and the feedback per check,
        # and what walled the lesson's workers in.
        assert set(lesson) == {
            "id",
            "slug",
            "title",
            "score",
            "max_score",
            "xp",
            "completed",
            "checks",
            "xp_max",
            "mode",
            "scale",
            "isolation",
        }
        assert_isolation(lesson["isolation"])
        assert isinstance(lesson["completed"], bool) and isinstance(lesson["xp"], int)
        for check in lesson["checks"]:
            # Where the learner's code raised, and the TODO a check waits on.
            assert set(check) == {
                "id",
                "todo",
                "status",
                "score",
                "max_score",
                "informational",
                "raised_in",
                "waits_on",
                "message",
                "feedback",
            }
            assert check["status"] in STATUSES
            assert check["todo"] is None or isinstance(check["todo"], str)
            assert isinstance(check["message"], str)
            assert 0 <= check["score"] <= check["max_score"]
        assert lesson["score"] == sum(c["score"] for c in lesson["checks"])
    assert data["xp"] == sum(lesson["xp"] for lesson in data["lessons"])
    assert_isolation(data["isolation"])


def assert_isolation(record: dict | None) -> None:
    """None when no worker ran; otherwise the walls, and `official` only when none is missing."""
    if record is None:
        return
    assert {"official", "enforced", "missing", "disabled"} <= set(record)
    assert record["official"] == (not record["missing"] and not record["disabled"])
    assert not set(record["enforced"]) & set(record["missing"])


def test_grade_solution_json_to_file(tmp_path):
    out = tmp_path / "deep" / "results.json"
    proc = run_cli(
        "grade",
        "03",
        "--submission",
        ROOT / "solutions" / "03-atencion-causal",
        "--format",
        "json",
        "--output",
        out,
        "--seed",
        "7",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    data = json.loads(out.read_text(encoding="utf-8"))
    assert_contract(data)
    assert data["seed"] == 7
    (lesson,) = data["lessons"]
    assert lesson["id"] == "03" and lesson["slug"] == "atencion-causal"
    assert lesson["completed"] is True and lesson["xp"] == 50 and data["xp"] == data["xp_max"] == 50
    assert lesson["score"] == lesson["max_score"] == data["score"]


def test_output_into_a_pipe_or_device_writes_into_it_and_never_replaces_it(tmp_path):
    """`--output /dev/null` once replaced the device with a regular file (a rename over it, as
    root). A named pipe shows the same without risking the machine's /dev/null: the pipe must
    still be a pipe afterwards, and what came through it must be the whole JSON."""
    import stat
    import threading

    fifo = tmp_path / "results.pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text(encoding="utf-8")), daemon=True)
    reader.start()
    proc = run_cli(
        "grade",
        "01",
        "--submission",
        ROOT / "solutions" / "01-tokens-y-lotes",
        "--format",
        "json",
        "--output",
        fifo,
        "--seed",
        "7",
    )
    reader.join(timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode), "the pipe was replaced by a regular file"
    assert received and json.loads(received[0])["score"] == 100
    assert not (tmp_path / "results.pipe.tmp").exists()


def test_grade_default_exercises_by_slug_in_english():
    proc = run_cli("grade", "atencion-causal", "--format", "json", "--lang", "en")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert_contract(data)
    assert data["language"] == "en" and data["xp"] == 0 and data["score"] == 0
    messages = {c["id"]: c["message"] for c in data["lessons"][0]["checks"]}
    assert messages["np-mask"].startswith("TODO [np-mask] pending")
    assert "unanswered" in messages["quiz-1"]


def test_grade_all_lessons_from_a_root_folder_as_markdown(tmp_path):
    """The finished course: every lesson of the solutions, 300/300 XP."""
    from autograder.core.manifest import load_course

    course = load_course(ROOT / "course.yml")
    xp_max = sum(lesson.xp for lesson in course.lessons)
    root = tmp_path / "work"
    shutil.copytree(ROOT / "solutions", root)
    proc = run_cli("grade", "--submission", root, "--format", "markdown")
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ") and "completada" in line]
    assert len(rows) == len(course.lessons) == 6, proc.stdout
    assert f"{xp_max}/{xp_max}" in proc.stdout and xp_max == 300


def test_the_readme_main_command_on_the_stubs_shows_zero_and_the_first_todo():
    """`autograder grade` with nothing done: 0 of the course's XP, each check naming its TODO."""
    from autograder.core.manifest import load_course

    course = load_course(ROOT / "course.yml")
    xp_max = sum(lesson.xp for lesson in course.lessons)
    proc = run_cli("grade")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith("Total: 0/") and line.endswith(f"XP 0/{xp_max}") for line in lines), (
        proc.stdout
    )
    first_todo = course.lessons[0].todos[0].id
    first_check = next(line for line in lines if line.startswith("  ✘ "))
    assert f"TODO [{first_todo}]" in first_check
    assert lines[-1].startswith(f"Empieza por: lección {course.lessons[0].id}, TODO [{first_todo}] en ")


@pytest.mark.parametrize(
    "args, needle",
    [
        (["grade", "99"], "no hay ninguna lección `99` en el curso"),
        (
            ["grade", "03", "--submission", "/nonexistent/folder"],
            "--submission /nonexistent/folder: no es una carpeta",
        ),
        (["grade", "03", "--format", "pdf"], "argumento --format: valor no válido: `pdf`"),
        (["grade", "03", "--lang", "fr"], "argumento --lang: valor no válido: `fr`"),
    ],
)
def test_usage_errors_exit_2_with_a_message(args, needle):
    proc = run_cli(*args)
    assert proc.returncode == 2
    assert needle in proc.stderr


def test_malformed_course_yml_names_the_field(tmp_path):
    data = yaml.safe_load((ROOT / "course.yml").read_text(encoding="utf-8"))
    data["lessons"][0]["checks"][2]["points"] = "muchos"
    bad = tmp_path / "course.yml"
    bad.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    proc = run_cli("--course", bad, "grade", "03")
    assert proc.returncode == 2
    assert "lessons[0].checks[2].points" in proc.stderr


def test_stubs_check_reports_drift_and_regenerates(tmp_path):
    work = tmp_path / "course"
    work.mkdir()
    shutil.copy(ROOT / "course.yml", work / "course.yml")
    for name in ("solutions", "exercises"):
        shutil.copytree(ROOT / name, work / name, ignore=shutil.ignore_patterns("__pycache__"))
    assert run_cli("--course", work / "course.yml", "stubs", "--check").returncode == 0
    stub = work / "exercises" / "03-atencion-causal" / "attention.py"
    stub.write_text(stub.read_text(encoding="utf-8") + "\n# edited by hand\n", encoding="utf-8")
    proc = run_cli("--course", work / "course.yml", "stubs", "--check")
    assert proc.returncode == 1 and "attention.py" in proc.stdout
    assert run_cli("--course", work / "course.yml", "stubs").returncode == 0
    assert run_cli("--course", work / "course.yml", "stubs", "--check").returncode == 0
    assert "edited by hand" not in stub.read_text(encoding="utf-8")


def test_console_script_is_installed():
    exe = shutil.which("autograder")
    assert exe, "pip install -e . should put the `autograder` console script on PATH"
    proc = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "autograder" in proc.stdout


def test_gradescope_format_from_a_real_grading(tmp_path):
    stub = ROOT / "exercises" / "03-atencion-causal"
    gs = run_cli("grade", "03", "--submission", stub, "--format", "gradescope", "--seed", "3")
    assert gs.returncode == 0, gs.stderr
    data = json.loads(gs.stdout)
    assert data["score"] == 0 and len(data["tests"]) == 24
    assert {t["status"] for t in data["tests"] if "status" in t} == {"failed"}
    assert sum(t["max_score"] for t in data["tests"]) == 100
    assert [t for t in data["tests"] if "status" not in t][0]["name"].endswith(
        "gpu-parity"
    )  # skipped, not passed


@pytest.mark.parametrize(
    "lang, words",
    [
        (
            "es",
            [
                "se retiró con GitHub Classroom",
                "los formatos que quedan son: gradescope, json, markdown, text",
            ],
        ),
        (
            "en",
            [
                "was retired with GitHub Classroom",
                "the formats that remain are: gradescope, json, markdown, text",
            ],
        ),
    ],
)
def test_the_classroom_format_is_retired_with_a_clear_message(tmp_path, lang, words):
    """GitHub Classroom was retired on 2026-08-28 and its grading reporter with it: asking for
    its format is a usage error (exit 2) that says so and names what remains, before grading."""
    out = tmp_path / "result.json"
    proc = run_cli("--lang", lang, "grade", "03", "--format", "classroom", "--output", out)
    assert proc.returncode == 2 and proc.stdout == ""
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("autograder grade: ") and "`classroom`" in line
    assert all(word in line for word in words), line
    assert "Traceback" not in proc.stderr and not out.exists()
    help_text = run_cli("--lang", lang, "grade", "--help").stdout
    assert "gradescope" in help_text and "classroom" not in help_text.lower()


def test_release_refuses_a_folder_that_is_not_a_release(tmp_path):
    (tmp_path / "mine.txt").write_text("my notes", encoding="utf-8")
    proc = run_cli("release", "--out", tmp_path)
    assert proc.returncode == 2 and "autograder release:" in proc.stderr
    assert (tmp_path / "mine.txt").read_text(encoding="utf-8") == "my notes"  # nothing lost


def test_release_has_no_graders_ref_option_any_more(tmp_path):
    """The release no longer fetches hidden graders, so there is no commit of them to pin."""
    proc = run_cli("--lang", "en", "release", "--out", tmp_path / "out", "--graders-ref", "a" * 40)
    assert proc.returncode == 2 and "unrecognized arguments: --graders-ref" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_ci_steps_explain_a_missing_results_file(tmp_path):
    env = {**os.environ, "GITHUB_SHA": "0" * 40}
    proc = run_cli("ci", "report", "--results", tmp_path / "nope.json", "--out", tmp_path, env=env)
    assert proc.returncode == 2 and "no results file" in proc.stderr
    (tmp_path / "bad.json").write_text("{", encoding="utf-8")
    proc = run_cli("ci", "record", "--results", tmp_path / "bad.json", env=env)
    assert proc.returncode == 2 and "not JSON" in proc.stderr


def test_ci_record_without_a_remote_warns_the_learner_in_spanish_and_loses_nothing(tmp_path):
    from autograder.core.results import CheckResult, CourseResult, LessonResult, Status
    from autograder.render.output import render_json

    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.name=a", "-c", "user.email=a@b"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "x"], cwd=repo, check=True)
    sha = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True, text=True
    ).stdout.strip()
    result = CourseResult(
        "Transformers desde cero",
        "es",
        1,
        [
            LessonResult(
                "03", "atencion-causal", {"es": "t"}, 50, [CheckResult("a", None, Status.PASSED, 1.0, 1.0)]
            )
        ],
    )
    results = tmp_path / "results.json"
    results.write_text(render_json(result, "es"), encoding="utf-8")
    env = {**os.environ, "GITHUB_SHA": sha, "GITHUB_WORKSPACE": str(repo)}
    proc = run_cli("ci", "record", "--results", results, env=env)
    assert proc.returncode == 0, proc.stderr  # the job goes on: the grade's feedback still comes
    assert proc.stdout.startswith(
        "::warning title=autograder%3A tu historial::Esta corrección no se pudo guardar"
    )
    assert json.loads(results.read_text(encoding="utf-8"))["xp"] == 50


def test_every_command_is_in_the_dispatch_table_and_its_module_registers_it():
    """cli.COMMANDS is the one list of commands: the parser's sub-commands are its keys, each
    registered by the module that runs it (no command reached by falling through)."""
    import argparse
    import importlib

    from autograder import cli

    parser = cli.build_parser("es")
    sub = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    assert list(sub.choices) == list(cli.COMMANDS)  # --help lists them in the table's order
    for name, module in cli.COMMANDS.items():
        registered = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(module).add_parser(registered)
        assert list(registered.choices) == [name], module
        assert callable(importlib.import_module(module).main), module


@pytest.mark.parametrize(
    "args, env_lang, said",
    [
        ((), None, "plantilla escrita en"),
        (("--lang", "en"), None, "release written to"),
        ((), "en", "release written to"),
    ],
)
def test_a_command_without_its_own_lang_speaks_the_command_line_language(tmp_path, args, env_lang, said):
    """`release` has no --lang: it reports in the command line's language (--lang before the
    command, over $AUTOGRADER_LANG, over course.yml's Spanish)."""
    env = {key: value for key, value in os.environ.items() if key != "AUTOGRADER_LANG"}
    if env_lang:
        env["AUTOGRADER_LANG"] = env_lang
    proc = run_cli(*args, "release", "--out", tmp_path / "out", env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(said + f" {tmp_path / 'out'} (")
    assert (tmp_path / "out" / "course.yml").is_file()
