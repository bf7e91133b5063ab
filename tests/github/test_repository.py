"""The repository's promises about itself: the README's two commands are what CI runs, PyTorch's
CPU build is installed before anything could pull the CUDA one, and learners are sent to the
learner release."""

from __future__ import annotations

import re

from support.install_docs import CPU_INDEX, assert_cpu_torch_first, sections  # noqa: F401
from support.project import ROOT


def _commands(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_ci_runs_exactly_the_readme_test_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n(.*?)```", readme, re.S).group(1)
    install_and_test = [c for c in _commands(block) if "pytest" in c]
    assert len(install_and_test) == 1, block
    install, test = (part.strip() for part in install_and_test[0].split("&&"))
    ci = [
        c.replace("python3 ", "python ")
        for c in _commands((ROOT / ".ci" / "run").read_text(encoding="utf-8"))
    ]
    ci_install = [c for c in ci if c.startswith("python -m pip install")]
    assert [re.sub(r" --quiet --disable-pip-version-check", "", c) for c in ci_install] == [install]
    assert ci[-1] == test  # the last thing CI does is the README's test command, verbatim


def test_the_readme_installs_cpu_torch_before_the_project():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert_cpu_torch_first(readme, "README.md")
    # The main command (install and grade) starts with it, so the two commands stay two.
    block = re.search(r"```bash\n(.*?)```", readme, re.S).group(1)
    (main,) = [c for c in _commands(block) if "autograder grade" in c]
    # Debian's and Ubuntu's Python refuse `pip install` outside a virtual environment (PEP 668):
    # the command makes one and activates it before pip runs at all.
    venv, activate, first, *rest = (part.strip() for part in main.split("&&"))
    assert (venv, activate) == ("python3 -m venv .venv", ". .venv/bin/activate"), main
    assert first.startswith("python -m pip install torch==") and first.endswith(CPU_INDEX), main
    assert rest == ["python -m pip install -e .", "autograder grade"], main


def test_the_readme_speaks_to_instructors_and_sends_learners_to_the_learner_release():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    intro = readme[: readme.index("\n## ")]  # what a learner who lands here reads first
    intro = " ".join(re.sub(r"^> ?", "", intro, flags=re.M).split())
    assert "¿Vienes a hacer el curso?** No trabajes aquí ni hagas un fork de este repositorio" in intro
    assert "**versión para alumnos**, el repositorio plantilla que construye `autograder release`" in intro
    assert "## La versión para alumnos: `autograder release`" in readme
    assert "Haz un fork" not in readme  # the old first step told learners to fork this repository
    english = readme[readme.index("## In English") :]
    assert "Learners do not work here" in english and "`autograder release`" in english


def test_the_finale_curve_is_never_committed(tmp_path):
    """The finale (exercises/06-generar/entrenar_y_generar.py) saves perdida.png where it runs; the
    release ships this .gitignore verbatim, so git must ignore the picture wherever it lands."""
    import shutil
    import subprocess

    shutil.copy(ROOT / ".gitignore", tmp_path / ".gitignore")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    paths = ["perdida.png", "exercises/06-generar/perdida.png", "exercises/06-generar/generate.py"]
    proc = subprocess.run(
        ["git", "check-ignore", "--no-index", *paths], cwd=tmp_path, capture_output=True, text=True
    )
    assert proc.stdout.split() == paths[:2]  # the pictures, never the learner's code
