"""tests/mutation/: the mutation bench (bench/mutation/) and its oracle. `bench` is a namespace
package at the repository root, which pytest's importlib mode does not put on sys.path (the
suite's own pythonpath is tests/): it is added here, for these tests only."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def pytest_configure(config):
    # libcst.metadata imports its pyre type-inference module, which warns about mypy_extensions'
    # TypedDict on every run: nothing these tests use, nothing to act on here.
    config.addinivalue_line(
        "filterwarnings", "ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"
    )
