"""The reference pieces of earlier lessons, loaded in the trusted process.

Graders of a lesson that builds on earlier ones (lesson 05 trains lesson 04's model) compute
their expected values with the same reference code the worker runs: the files under
<graders>/reference/ (written by `autograder stubs` from the solutions). This is our own code,
never a learner's, so importing it here keeps the trust boundary.

The files import each other by plain name (`from attention import CausalSelfAttention`), as the
learner's files do. `load()` imports them all together under those names, then takes the names
back out of sys.modules so nothing else in this process (a learner's module served by a worker
never is, but the project's own tests import by the same names) ever sees them by accident.
"""

from __future__ import annotations

import importlib
import sys
import threading
from pathlib import Path
from types import ModuleType

from autograder.engine.grading import REFERENCE_FOLDER, graders_root

_lock = threading.Lock()
_cache: dict[Path, dict[str, ModuleType]] = {}


def load() -> dict[str, ModuleType]:
    """{module name: module} for every reference file, e.g. load()["model"].GPT."""
    root = (graders_root() / REFERENCE_FOLDER).resolve()
    with _lock:
        if root not in _cache:
            _cache[root] = _import_all(root)
        return _cache[root]


def _import_all(root: Path) -> dict[str, ModuleType]:
    folders = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    names = sorted({f.stem for folder in folders for f in folder.glob("*.py")})
    if not names:
        raise FileNotFoundError(f"no reference pieces under {root} (run `autograder stubs`)")
    saved_path = list(sys.path)
    saved = {name: sys.modules.pop(name) for name in names if name in sys.modules}
    sys.path[:0] = [str(folder) for folder in folders]
    try:
        return {name: importlib.import_module(name) for name in names}
    finally:
        sys.path[:] = saved_path
        for name in names:
            sys.modules.pop(name, None)
        sys.modules.update(saved)
