"""Reading install instructions (the README, the release's README): their sections, and the
rule that PyTorch's CPU build is installed before the project."""

from __future__ import annotations

import re

from support.project import ROOT

CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"


def sections(text: str) -> list[tuple[str, str]]:
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
    for heading, body in sections(text):
        project = re.search(r"pip install -e[ .]", body)
        if project is None:
            continue
        installs += 1
        cpu = body.find(f"pip install {pin} {CPU_INDEX}")
        assert 0 <= cpu < project.start(), f"{where}, «{heading}»: the CPU torch install must come first"
    assert installs, f"{where}: no install command found"
