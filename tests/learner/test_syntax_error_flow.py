"""Errors in the learner's words, tried as a learner tries them: the real `autograder` command on
a copy of the course whose lesson 03 has a syntax error, an import error or a crash.

A file that does not load is ONE line naming the file as the learner sees it (relative to their
course folder) and its line, said once, filed under the file (no TODO), and the next step is
"corrige el error de sintaxis en …:N", in `check`, `grade` (text, Markdown, JSON and a
results.json read back), `hint`, `watch` and with the practice tests; no frame of pytest,
importlib or torch and no temporary path reaches the learner. A crash is blamed on the TODO
whose code raised."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from support.learner_course import Terminal, cli_env, make_course, run_cli, solved_text

from autograder.render.markdown import render_markdown
from autograder.render.results_json import from_json_dict
from autograder.render.terminal import render_text

LESSON = "exercises/03-atencion-causal"
ATTENTION = f"{LESSON}/attention.py"
# What must never reach a learner: frames of the machinery, library and temporary paths.
LEAKS = ("Traceback", "_pytest", "importlib", "site-packages", "/tmp/", "autograder-", "torch/", "???")
CLOSE = "            is_causal=True,\n        )\n"
OPEN = "            is_causal=True,\n        \n"
BAD_IMPORT = "from torch.nn import NoSuchThing\n"


def line_of(path: Path, needle: str) -> int:
    return next(n for n, row in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if needle in row)


def assert_no_leak(text: str) -> None:
    for leak in LEAKS:
        assert leak not in text, f"{leak!r} reached the learner:\n{text}"


def with_kept_todo_comments(solution: str) -> str:
    """A finished file as a learner who kept the stub's `# TODO [id]: …` comments writes it:
    each solution region's hint lines (`#: …`) as those comments, its code below them."""
    out, todo, first = [], None, False
    for row in solution.splitlines():
        stripped = row.strip()
        begin = re.match(r"### BEGIN SOLUTION (\S+)", stripped)
        if begin:
            todo, first = begin.group(1), True
        elif stripped == "### END SOLUTION":
            todo = None
        elif todo and stripped.startswith("#:"):
            indent = row[: len(row) - len(row.lstrip())]
            out.append(
                f"{indent}# TODO [{todo}]: {stripped[2:].strip()}"
                if first
                else f"{indent}# {stripped[2:].strip()}"
            )
            first = False
        else:
            out.append(row)
    return "\n".join(out) + "\n"


@pytest.fixture(scope="module")
def courses(tmp_path_factory):
    """Three copies of the course with lesson 03 finished, then broken as a learner breaks it."""
    base = tmp_path_factory.mktemp("learners")
    made = {}
    for name in ("syntax", "import", "crash"):
        root = make_course(base / name, {"03": "solved"})
        path = root / ATTENTION
        text = path.read_text(encoding="utf-8")
        if name == "syntax":
            assert CLOSE in text
            text = text.replace(CLOSE, OPEN)
        elif name == "import":
            text = text.replace(
                "import torch.nn.functional as F\n", "import torch.nn.functional as F\n" + BAD_IMPORT
            )
        else:
            from support.project import ROOT

            marked = (ROOT / "solutions" / "03-atencion-causal" / "attention.py").read_text(encoding="utf-8")
            text = with_kept_todo_comments(marked).replace(
                "y = y.transpose(1, 2).contiguous().view(B, T, C)", "y = y.transpose(1, 2).view(B, T, C)"
            )
        path.write_text(text, encoding="utf-8")
        made[name] = root
    return made


def syntax_line(root: Path) -> int:
    return line_of(root / ATTENTION, "return F.scaled_dot_product_attention(")


def test_check_says_a_syntax_error_once_with_the_learners_path_and_the_next_step(courses):
    root = courses["syntax"]
    where = f"{ATTENTION}:{syntax_line(root)}"
    done = run_cli(root, "check", "03")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    error = f"Error de sintaxis en {where}: '(' was never closed"
    assert f"  ✘ {error}\n" in out, out
    assert out.count("was never closed") == 1, out  # said once, not once per check
    assert "Comprobaciones que este error no deja ejecutar: 14 (64 puntos): mask-buffer," in out
    assert f"Siguiente: corrige el error de sintaxis en {where}\n" in out
    assert "TODO [mask]" not in out and "TODO [fused]" not in out  # filed under the file, not a TODO
    assert "✔ np-mask · TODO [np-mask]" in out  # the lesson's other file still graded
    assert_no_leak(out + done.stderr)

    english = run_cli(root, "--lang", "en", "check", "03").stdout
    assert f"  ✘ Syntax error in {where}: '(' was never closed\n" in english
    assert f"Next: fix the syntax error in {where}\n" in english


def test_grade_says_it_once_in_text_markdown_and_json(courses):
    root = courses["syntax"]
    where = f"{ATTENTION}:{syntax_line(root)}"
    error = f"Error de sintaxis en {where}: '(' was never closed"

    text = run_cli(root, "grade", "03").stdout
    assert text.count("was never closed") == 1 and f"✘ {error}" in text
    assert text.rstrip().endswith(f"Siguiente: corrige el error de sintaxis en {where}")
    assert_no_leak(text)

    markdown = run_cli(root, "grade", "03", "--format", "markdown").stdout
    assert markdown.count("was never closed") == 1, markdown
    assert f"### ❌ {error}\n" in markdown
    assert f"Siguiente: corrige el error de sintaxis en {where}\n" in markdown
    assert "TODO [mask]" not in markdown
    assert_no_leak(markdown)

    raw = run_cli(root, "grade", "03", "--format", "json").stdout
    assert_no_leak(raw)
    data = json.loads(raw)
    stopped = [c for c in data["lessons"][0]["checks"] if c["status"] == "failed"]
    assert len(stopped) == 14
    for check in stopped:  # each check's record holds the one line, and no TODO is blamed
        assert check["message"] == error
        assert check["raised_in"] is None and check["waits_on"] is None

    # The workflow's report step renders from results.json: the same single block.
    back = from_json_dict(data)
    again = render_markdown(back, "es")
    assert again.count("was never closed") == 1 and f"### ❌ {error}\n" in again
    shown = render_text(back, "en", color=False)
    assert shown.count("was never closed") == 1
    assert f"✘ Syntax error in {where}: '(' was never closed" in shown


def test_an_import_error_names_the_import_line_without_a_library_path(courses):
    root = courses["import"]
    where = f"{ATTENTION}:{line_of(root / ATTENTION, BAD_IMPORT.strip())}"
    out = run_cli(root, "check", "03").stdout
    error = f"Error de importación en {where}: ImportError: cannot import name 'NoSuchThing' from 'torch.nn'"
    assert error in " ".join(out.split()), out  # the terminal may wrap the line's message
    assert out.count("NoSuchThing") == 1, out
    assert f"Siguiente: corrige el error de importación en {where}\n" in out
    assert "TODO [mask]" not in out
    assert_no_leak(out)


def test_the_practice_tests_say_it_in_one_line_too(courses):
    root = courses["syntax"]
    where = f"{ATTENTION}:{syntax_line(root)}"
    # Without the hidden graders, `check` grades with the lesson's own practice tests.
    done = run_cli(root, "check", "03", env=cli_env(AUTOGRADER_GRADERS=str(root / "no-graders")))
    out = done.stdout
    assert "Nota de práctica" in out, out
    assert f"  ✘ Error de sintaxis en {where}: '(' was never closed\n" in out, out
    assert "Comprobaciones que este error no deja ejecutar: 1 (1 punto): test_practica.py." in out
    assert out.count("was never closed") == 1
    assert f"Siguiente: corrige el error de sintaxis en {where}\n" in out
    assert_no_leak(out + done.stderr)


def test_hint_sends_the_learner_to_the_file_first(courses):
    root = courses["syntax"]
    where = f"{ATTENTION}:{syntax_line(root)}"
    done = run_cli(root, "hint", "03")
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "Antes de una pista: un archivo de la lección 03 no se carga, y las comprobaciones que lo usan "
        f"no pueden ejecutarse.\nSiguiente: corrige el error de sintaxis en {where}\n"
    )


def test_a_crash_is_blamed_on_the_todo_whose_line_raised(courses):
    root = courses["crash"]
    raised = line_of(root / ATTENTION, "y = y.transpose(1, 2).view(B, T, C)")
    assert line_of(root / ATTENTION, "# TODO [contiguous-view]") < raised
    out = run_cli(root, "check", "03").stdout
    assert f"Siguiente: TODO [contiguous-view] en {ATTENTION}:{raised}\n" in out, out
    assert f"attention.py:{raised} · forward()" in out
    assert out.count("view size is not compatible") == 1, out  # one block for every check it stopped
    assert_no_leak(out)


def test_watch_says_a_syntax_error_once_after_a_save(tmp_path):
    root = make_course(tmp_path / "course", {"03": "solved"})
    path = root / ATTENTION
    term = Terminal(
        [sys.executable, "-m", "autograder", "--course", str(root / "course.yml"), "watch", "03"],
        cwd=root,
        env=cli_env(TERM="xterm-256color", COLUMNS="140"),
    )
    try:
        assert term.read_until(r"Esperando a que guardes", 180), term.text[-3000:]
        mark = len(term.text)
        path.write_text(
            solved_text("03-atencion-causal", "attention.py").replace(CLOSE, OPEN), encoding="utf-8"
        )
        where = f"{ATTENTION}:{syntax_line(root)}"
        step = f"Siguiente: corrige el error de sintaxis en {where}"
        assert term.read_until(re.escape(step) + r"[\s\S]*Esperando", 180, start=mark), term.text[mark:]
        after = term.text[mark:]
        assert after.count("was never closed") == 1, after
        assert f"✘ Error de sintaxis en {where}: '(' was never closed" in after
        assert "TODO [" not in after, after
        assert_no_leak(after)
        term.send(b"\x03")
        assert term.wait(60) == 0
    finally:
        term.close()


def test_a_crash_in_the_practice_tests_is_blamed_on_its_todo_too(courses):
    root = courses["crash"]
    raised = line_of(root / ATTENTION, "y = y.transpose(1, 2).view(B, T, C)")
    done = run_cli(root, "check", "03", env=cli_env(AUTOGRADER_GRADERS=str(root / "no-graders")))
    out = done.stdout
    assert "Nota de práctica" in out, out
    assert f"Siguiente: TODO [contiguous-view] en {ATTENTION}:{raised}\n" in out, out
    assert f"attention.py:{raised} · forward()" in out
    # pytest said the error twice per test (its crash line and its traceback's E line), for
    # every test it stopped: now once, for them all, with the learner's frame only.
    assert out.count("view size is not compatible") == 1, out
    assert "test_practica.py:" not in out and "E   " not in out
    assert_no_leak(out + done.stderr)
