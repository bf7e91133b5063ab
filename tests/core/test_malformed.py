"""Malformed submissions through the command line: grading still runs (exit 0), the JSON
result keeps its contract, and each failed check says plainly what is wrong.

One case runs `python -m autograder` in a subprocess, as CI does; the others call the same
entry point (autograder.cli.main) in this process, which spares a torch import per case.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from support.grading import write_submission
from support.project import ROOT, SEED
from support.variants import solution_files

from autograder import cli
from autograder.core.manifest import load_course

ATTENTION_CHECKS = (
    "mask-buffer",
    "future-leak",
    "future-leak-grad",
    "weights-causal",
    "short-sequences",
    "shapes",
    "heads-split",
    "scaling",
    "heads-merge",
    "reference-parity",
    "dropout-modes",
    "fused-parity",
    "fused-sdpa",
    "fused-dropout",
)
NUMPY_CHECKS = (
    "np-mask",
    "np-softmax",
    "np-softmax-stable",
    "np-attention",
    "np-attention-causal",
    "np-edges",
)
QUIZ_CHECKS = ("quiz-1", "quiz-2", "quiz-3")
TOP_KEYS = {"course", "language", "xp", "xp_max", "score", "max_score", "lessons"}
LESSON_KEYS = {"id", "slug", "title", "score", "max_score", "xp", "completed", "checks"}
CHECK_KEYS = {"id", "todo", "status", "score", "max_score", "message"}
NUMBER = (int, float)


def check_contract(data: dict) -> dict[str, dict]:
    """The issues' JSON contract, field by field; returns lesson 03's checks by id."""
    assert TOP_KEYS <= set(data)
    assert isinstance(data["course"], str) and data["language"] in ("es", "en")
    assert type(data["xp"]) is int and type(data["xp_max"]) is int
    assert isinstance(data["score"], NUMBER) and isinstance(data["max_score"], NUMBER)
    assert isinstance(data["lessons"], list) and data["lessons"]
    course = load_course(ROOT / "course.yml")
    for lesson in data["lessons"]:
        assert LESSON_KEYS <= set(lesson)
        spec = course.lesson(lesson["id"])
        assert lesson["slug"] == spec.slug and isinstance(lesson["title"], str)
        assert isinstance(lesson["score"], NUMBER) and isinstance(lesson["max_score"], NUMBER)
        assert type(lesson["xp"]) is int and type(lesson["completed"]) is bool
        assert [c["id"] for c in lesson["checks"]] == [c.id for c in spec.checks]
        for check in lesson["checks"]:
            assert CHECK_KEYS <= set(check)
            assert check["todo"] is None or isinstance(check["todo"], str)
            assert check["status"] in ("passed", "failed", "error", "skipped")
            assert isinstance(check["score"], NUMBER) and isinstance(check["max_score"], NUMBER)
            assert isinstance(check["message"], str)
            if check["status"] in ("failed", "error"):
                assert check["score"] == 0 and check["message"].strip(), check["id"]
                assert "Error interno" not in check["message"], check  # never blame the grader
        assert lesson["score"] == sum(c["score"] for c in lesson["checks"])
    assert data["score"] == sum(lesson["score"] for lesson in data["lessons"])
    (lesson03,) = [lesson for lesson in data["lessons"] if lesson["id"] == "03"]
    return {c["id"]: c for c in lesson03["checks"]}


def grade_cli(
    tmp_path: Path, submission: Path, *args: str, lesson: str | None = "03", subprocess_: bool = False
) -> dict[str, dict]:
    output = tmp_path / "out" / "result.json"
    argv = [
        "--course",
        str(ROOT / "course.yml"),
        "grade",
        *([lesson] if lesson else []),
        "--submission",
        str(submission),
        "--format",
        "json",
        "--output",
        str(output),
        "--seed",
        str(SEED),
        *args,
    ]
    if subprocess_:
        proc = subprocess.run(
            [sys.executable, "-m", "autograder", *argv],
            capture_output=True,
            text=True,
            timeout=180,
            cwd=tmp_path,
            env={**os.environ, "PYTHONIOENCODING": "utf-8"},
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert proc.stdout == ""  # with --output, the result goes to the file only
    else:
        assert cli.main(argv) == 0
    data = json.loads(output.read_text(encoding="utf-8"))
    return check_contract(data)


def submission(tmp_path: Path, lesson03, **changes: str | bytes | None) -> Path:
    """The solution's files, with some replaced (str or raw bytes) or removed (None)."""
    files = solution_files(lesson03)
    folder = write_submission(tmp_path / "submission", {})
    for name, text in files.items():
        change = changes.get(name.replace(".", "_"), text)
        if change is None:
            continue
        path = folder / name
        path.write_bytes(change if isinstance(change, bytes) else change.encode("utf-8"))
    return folder


def assert_passed(checks: dict, ids) -> None:
    for check in ids:
        assert checks[check]["status"] == "passed", (check, checks[check]["message"])


def assert_failed(checks: dict, ids, *needles: str) -> None:
    for check in ids:
        assert checks[check]["status"] == "failed", (check, checks[check])
        for needle in needles:
            assert needle in checks[check]["message"], (check, needle, checks[check]["message"])


def test_syntax_error_names_file_and_line(tmp_path, lesson03):
    source = solution_files(lesson03)["attention.py"].splitlines(keepends=True)
    line = next(i for i, text in enumerate(source, 1) if text.strip().startswith("def forward"))
    source[line - 1] = source[line - 1].replace("):", ")")  # def forward(self, x)   <- no colon
    checks = grade_cli(
        tmp_path, submission(tmp_path, lesson03, attention_py="".join(source)), subprocess_=True
    )
    # One line in the learner's words: the file as the learner sees it, and its line.
    assert_failed(
        checks, ATTENTION_CHECKS, f"Error de sintaxis en exercises/{lesson03.folder}/attention.py:{line}"
    )
    assert_passed(checks, NUMPY_CHECKS + QUIZ_CHECKS)  # attention_numpy.py is fine


def test_missing_attention_py(tmp_path, lesson03):
    checks = grade_cli(tmp_path, submission(tmp_path, lesson03, attention_py=None))
    assert_failed(checks, ATTENTION_CHECKS, "No encuentro el archivo attention.py")
    assert_passed(checks, NUMPY_CHECKS + QUIZ_CHECKS)


def test_missing_lesson_folder(tmp_path):
    root = tmp_path / "my-course"  # a submission root without 03-atencion-causal/
    (root / "otra-cosa").mkdir(parents=True)
    (root / "01-tokens-y-lotes").mkdir()  # another lesson is there: the root is the right folder
    (root / "01-tokens-y-lotes" / "data.py").write_text("", encoding="utf-8")
    checks = grade_cli(tmp_path, root, lesson=None)  # every lesson, from the root
    for check in ATTENTION_CHECKS:
        assert_failed(checks, [check], "No encuentro el archivo attention.py")
    assert_failed(checks, NUMPY_CHECKS, "No encuentro el archivo attention_numpy.py")
    assert_failed(checks, QUIZ_CHECKS, "No encuentro el archivo quiz.yml")


def test_submission_folder_that_does_not_exist_is_a_usage_error(tmp_path, capsys):
    code = cli.main(
        ["--course", str(ROOT / "course.yml"), "grade", "03", "--submission", str(tmp_path / "nope")]
    )
    assert code == 2 and "no es una carpeta" in capsys.readouterr().err


def test_wrong_class_name(tmp_path, lesson03):
    text = solution_files(lesson03)["attention.py"].replace(
        "class CausalSelfAttention", "class CausalAttention"
    )
    checks = grade_cli(tmp_path, submission(tmp_path, lesson03, attention_py=text))
    assert_failed(checks, ATTENTION_CHECKS, "CausalSelfAttention")
    assert_passed(checks, NUMPY_CHECKS + QUIZ_CHECKS)


def test_missing_quiz(tmp_path, lesson03):
    checks = grade_cli(tmp_path, submission(tmp_path, lesson03, quiz_yml=None))
    assert_failed(checks, QUIZ_CHECKS, "No encuentro el archivo quiz.yml")
    assert_passed(checks, ATTENTION_CHECKS + NUMPY_CHECKS)


def test_quiz_with_invalid_yaml(tmp_path, lesson03):
    quiz = "# respuestas\npregunta_1: c\npregunta_2: [a\npregunta_3: b\n"
    checks = grade_cli(tmp_path, submission(tmp_path, lesson03, quiz_yml=quiz))
    assert_failed(checks, QUIZ_CHECKS, "quiz.yml", "YAML")
    assert any(f"línea {n}" in checks["quiz-1"]["message"] for n in (3, 4)), checks["quiz-1"]["message"]
    assert_passed(checks, ATTENTION_CHECKS + NUMPY_CHECKS)


def test_empty_files(tmp_path, lesson03):
    checks = grade_cli(tmp_path, submission(tmp_path, lesson03, attention_numpy_py="", quiz_yml=""))
    expected = {
        "np-mask": "causal_mask",
        "np-softmax": "softmax",
        "np-softmax-stable": "softmax",
        "np-attention": "masked_self_attention",
        "np-attention-causal": "masked_self_attention",
        "np-edges": "count_edges",
    }
    for check, name in expected.items():
        assert_failed(checks, [check], "attention_numpy", f"'{name}'")
    assert_failed(checks, QUIZ_CHECKS, "sin responder")
    assert_passed(checks, ATTENTION_CHECKS)


def test_non_utf8_files(tmp_path, lesson03):
    files = solution_files(lesson03)
    latin1 = files["attention.py"].encode("latin-1")  # an editor that saved "tamaño" as one byte
    quiz = files["quiz.yml"].encode("latin-1", errors="replace")
    assert latin1 != files["attention.py"].encode("utf-8")
    checks = grade_cli(
        tmp_path, submission(tmp_path, lesson03, attention_py=latin1, quiz_yml=quiz), "--lang", "en"
    )
    assert_failed(checks, ATTENTION_CHECKS, "Syntax error in exercises/", "attention.py:", "utf-8")
    assert_passed(checks, NUMPY_CHECKS + QUIZ_CHECKS)  # a Latin-1 quiz.yml still reads
