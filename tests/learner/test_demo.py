"""The course's finale: exercises/06-generar/entrenar_y_generar.py trains the learner's own GPT
on the corpus and prints a sample. Run for real, briefly, on the solutions and on the stubs."""

from __future__ import annotations

import shutil
import subprocess
import sys

from support.project import ROOT
from support.variants import solution_folder

from autograder.core.manifest import load_course

SCRIPT = "06-generar/entrenar_y_generar.py"


def _course_copy(tmp_path, source: str):
    """The lesson folders the demo imports (01, 03-06) from solutions/ (markers stripped) or exercises/."""
    course = load_course(ROOT / "course.yml")
    for lesson in course.lessons:
        dest = tmp_path / lesson.folder
        if source == "solutions":  # solutions/ holds only the marked files: overlay exercises/
            solution_folder(lesson.folder, dest, strip=True)
        else:
            shutil.copytree(ROOT / source / lesson.folder, dest)
    return tmp_path


def _run(folder, *args):
    return subprocess.run(
        [sys.executable, str(folder / SCRIPT), *args], cwd=folder, capture_output=True, text=True, timeout=600
    )


def test_the_demo_trains_the_solutions_and_prints_a_sample(tmp_path):
    folder = _course_copy(tmp_path / "course", "solutions")
    proc = _run(
        folder,
        "--mini",
        "--pasos",
        "40",
        "--lote",
        "16",
        "--minutos",
        "5",
        "--muestra",
        "60",
        "--salida",
        str(tmp_path / "out"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    # The lesson-04 model: V*C + T*C + L*(12*C^2 + 13*C) + 2*C parameters, the head tied.
    assert "Modelo: 61,632 parámetros" in out
    steps = [line for line in out.splitlines() if line.startswith("paso")]
    first, last = (float(line.split()[3]) for line in (steps[0], steps[-1]))
    assert last < first - 0.3, out  # validation loss falls well below where it started
    sample = out.split("--- muestra de tu modelo ---\n", 1)[1]
    assert sample.startswith("Había una vez") and len(sample.strip()) >= 60
    png = (tmp_path / "out" / "perdida.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000


def test_the_demo_on_the_stubs_names_the_first_missing_todo(tmp_path):
    folder = _course_copy(tmp_path / "course", "exercises")
    proc = _run(folder, "--pasos", "5")
    assert proc.returncode == 1
    assert "Antes de la demo te falta un hueco: TODO [" in proc.stderr
    assert "Traceback" not in proc.stderr
