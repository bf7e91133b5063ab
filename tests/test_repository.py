"""The repository's promises about itself: the README's two commands are what CI runs, PyTorch's
CPU build is installed before anything could pull the CUDA one, and learners are sent to the
learner release."""

from __future__ import annotations

import re

from conftest import ROOT


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


CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"


def _sections(text: str) -> list[tuple[str, str]]:
    """(heading, body) of each "## " section, whitespace collapsed (inline code may wrap)."""
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return [(parts[0][:40], " ".join(parts[0].split()))] + [
        (parts[i], " ".join(parts[i + 1].split())) for i in range(1, len(parts), 2)
    ]


def assert_cpu_torch_first(text: str, where: str) -> None:
    """In every section that installs the project with pip, PyTorch's CPU build is installed
    first, at the version pyproject.toml pins: pip would otherwise fetch torch from PyPI, a
    multi-GB CUDA build on a Linux laptop."""
    pin = re.search(r'"(torch==[^"]+)"', (ROOT / "pyproject.toml").read_text(encoding="utf-8")).group(1)
    installs = 0
    for heading, body in _sections(text):
        project = re.search(r"pip install -e[ .]", body)
        if project is None:
            continue
        installs += 1
        cpu = body.find(f"pip install {pin} {CPU_INDEX}")
        assert 0 <= cpu < project.start(), f"{where}, «{heading}»: the CPU torch install must come first"
    assert installs, f"{where}: no install command found"


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
