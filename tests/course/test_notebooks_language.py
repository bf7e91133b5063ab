"""`autograder notebooks` speaks the course language to the instructor (Spanish by default, the
English catalog with --lang en): what it wrote and what to run next, an earlier build it will
not overwrite, a lesson whose README it cannot build from. The real command, as a process.

The lines the nbgrader hooks log while nbgrader runs are checked against a real
`nbgrader generate_assignment` in tests/course/test_notebooks.py (its `released` fixture)."""

from __future__ import annotations

import shutil
import subprocess
import sys

from support.project import ROOT

# Words of the command's English messages that must not reach a Spanish instructor.
ENGLISH = (
    "written",
    "unchanged",
    "removed",
    "next, from",
    "would change",
    "not part of this build",
    "nothing was",
)


def notebooks(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autograder", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_build_and_a_refused_rebuild_speak_the_course_language(tmp_path):
    out = tmp_path / "curso"
    done = notebooks("notebooks", "--out", str(out), "01")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(
        f"Carpeta de curso de nbgrader escrita en {out}: 1 tarea (01-tokens-y-lotes); "
    )
    assert "archivos escritos, 0 sin cambios, 0 quitados." in lines[0], lines[0]
    assert lines[1:] == [
        f"Después, desde {out}:",
        "  nbgrader generate_assignment 01-tokens-y-lotes",
        "  nbgrader autograde 01-tokens-y-lotes",
    ]

    notebook = out / "source" / "01-tokens-y-lotes" / "01-tokens-y-lotes.ipynb"
    notebook.write_text(notebook.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    refused = notebooks("notebooks", "--out", str(out), "01")
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [
        f"autograder notebooks: {out} tiene archivos de una construcción anterior que esta "
        "sustituiría o quitaría:",
        "  source/01-tokens-y-lotes/01-tokens-y-lotes.ipynb (cambiaría)",
        "No se ha escrito nada; usa --force para sustituirlos (el gradebook, las entregas y las "
        "publicaciones nunca se tocan).",
    ]
    for said in (done.stdout, refused.stderr):
        assert not any(word in said.lower() for word in ENGLISH), said

    # The English catalog, word for word the same message.
    english = notebooks("notebooks", "--out", str(out), "01", "--lang", "en")
    assert english.returncode == 2
    assert "  source/01-tokens-y-lotes/01-tokens-y-lotes.ipynb (would change)" in english.stderr
    assert "Nothing was written; pass --force to replace them" in english.stderr
    assert "cambiaría" not in english.stderr


def test_a_lesson_that_cannot_be_built_says_so_in_the_course_language(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copy(ROOT / "course.yml", root / "course.yml")
    for tree in ("solutions", "exercises"):
        shutil.copytree(ROOT / tree / "01-tokens-y-lotes", root / tree / "01-tokens-y-lotes")
    (root / "exercises" / "01-tokens-y-lotes" / "README.md").unlink()
    out = tmp_path / "curso"
    for lang, words in (
        ("es", "no existe; el cuaderno de una lección se construye a partir de su README"),
        ("en", "not found; a lesson's notebook is built from its README"),
    ):
        done = notebooks(
            "--course", str(root / "course.yml"), "notebooks", "--out", str(out), "01", "--lang", lang
        )
        assert done.returncode == 2
        assert f"README.md: {words}." in done.stderr, done.stderr
        assert not out.exists()
    # Not a folder: said in Spanish by default.
    (tmp_path / "archivo").write_text("x", encoding="utf-8")
    done = notebooks("notebooks", "--out", str(tmp_path / "archivo"), "01")
    assert done.returncode == 2 and f"{tmp_path / 'archivo'}: existe y no es una carpeta." in done.stderr
