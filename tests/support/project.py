"""Where the project is, and the seed the suite grades with."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository: course.yml, exercises/, solutions/
SEED = 20261202  # fixed so a failing test can be replayed; the graders draw inputs from it
