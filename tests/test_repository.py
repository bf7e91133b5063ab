"""The repository's promises about itself: the README's two commands are what CI runs."""

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
    ci = [c.replace("python3 ", "python ") for c in _commands((ROOT / ".ci" / "run").read_text(encoding="utf-8"))]
    ci_install = [c for c in ci if c.startswith("python -m pip install")]
    assert [re.sub(r" --quiet --disable-pip-version-check", "", c) for c in ci_install] == [install]
    assert ci[-1] == test  # the last thing CI does is the README's test command, verbatim
