"""A learner's loop that never ends, met by `check` and `watch` (learner-side grading): one
timeout for the lesson, the line and TODO it was stuck in, every other check of that code said
to wait on the same cause; as root and as a plain user. Real CLI, real workers, lesson 03 with
small budgets (tests/support/looping.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.learner_course import Terminal, cli_env, make_course, run_cli
from support.looping import loop_in_mask, set_timeouts_in_course_yml, timeouts_bound
from support.unprivileged import expose_python_to

BUDGET = 3.0
FOLDER = "03-atencion-causal"


def looping_course(root: Path) -> tuple[Path, int]:
    """A course whose lesson 03 is finished but for a loop in its TODO [mask] code."""
    make_course(root, {"03": "solved"})
    path = root / "exercises" / FOLDER / "attention.py"
    text, line = loop_in_mask(path.read_text(encoding="utf-8"))
    path.write_text(text, encoding="utf-8")
    set_timeouts_in_course_yml(root, "03", BUDGET)
    return root, line


def assert_one_timeout_naming_the_line(output: str, line: int, verbose: bool = False) -> None:
    assert output.count("Tiempo agotado") == 1, output
    assert f"Tu código seguía en attention.py:{line} (en forward), dentro de TODO [mask]" in output, output
    if verbose:  # every check in full: those held back say so, none ran the loop again
        assert output.count("No se ejecutó: en espera de la misma causa") >= 10, output
    else:
        assert "Esta misma causa hace fallar" in output, output  # the held-back checks, as one block
    assert f"Siguiente: TODO [mask] en exercises/{FOLDER}/attention.py:{line}" in output, output
    for needle in ("/tmp/autograder-", "Traceback", "worker/main.py", "_pytest"):
        assert needle not in output, output
    # The numpy checks and the quiz, which never run attention.py, still pass.
    assert "✔ np-attention " in output and "✔ quiz-1" in output, output


def test_check_of_a_looping_lesson_ends_within_two_timeouts_and_names_the_line(tmp_path):
    root, line = looping_course(tmp_path / "course")
    started = time.monotonic()
    proc = run_cli(root, "check", "03")
    elapsed = time.monotonic() - started
    print(f"check 03 of a looping lesson, as this user: {elapsed:.1f} s")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert elapsed < timeouts_bound(BUDGET, 2)
    assert_one_timeout_naming_the_line(proc.stdout, line)


def test_check_of_a_looping_lesson_as_a_plain_user(plain_user):
    """No root anywhere: the worker is the learner's own user (in namespaces of its own where the
    kernel allows them); the trusted side still samples its stack before stopping it."""
    base = Path("/tmp/agtest-hang-plain-user")
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(mode=0o755)
    try:
        root, line = looping_course(base / "course")
        subprocess.run(["chown", "-R", plain_user, str(base)], check=True)
        course_yml = str(root / "course.yml")
        command = [sys.executable, "-m", "autograder", "--course", course_yml, "check", "03", "--verbose"]
        started = time.monotonic()
        proc = subprocess.run(
            expose_python_to(plain_user, command),
            cwd=root,
            capture_output=True,
            text=True,
            timeout=600,
            env=cli_env(),
        )
        elapsed = time.monotonic() - started
        print(f"check 03 of a looping lesson, as a plain user: {elapsed:.1f} s")
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert elapsed < timeouts_bound(BUDGET, 2)
        assert_one_timeout_naming_the_line(proc.stdout, line, verbose=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a pseudo-terminal and inotify")
def test_watch_of_a_looping_lesson_says_the_line_within_two_timeouts(tmp_path):
    root, line = looping_course(tmp_path / "course")
    term = Terminal(
        [sys.executable, "-m", "autograder", "--course", str(root / "course.yml"), "watch", "03"],
        cwd=root,
        env=cli_env(TERM="xterm-256color", COLUMNS="110"),
    )
    try:
        started = time.monotonic()
        found = term.read_until(r"Esperando a que guardes algún archivo", timeouts_bound(BUDGET, 2))
        elapsed = time.monotonic() - started
        print(f"watch 03 of a looping lesson, first grading: {elapsed:.1f} s")
        assert found, term.text[-3000:]
        text = term.text
        assert f"attention.py:{line} (en forward), dentro de TODO [mask]" in text, text[-3000:]
        assert f"Siguiente: TODO [mask] en exercises/{FOLDER}/attention.py:{line}" in text, text[-3000:]
        assert text.count("Tiempo agotado") <= 1 and "/tmp/autograder-" not in text, text[-3000:]
        term.send(b"\x03")
        assert term.wait(60) == 0, term.text[-2000:]
    finally:
        term.close()
