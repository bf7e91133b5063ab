"""The oracle is apart from the graders (issue 31): no module of bench/mutation/oracle imports
anything of autograder or any reference module, statically or by name at run time; it imports
only the standard library, numpy, torch and its own package (the lesson files it probes are
imported by plain module name from the root it is given, in probing.load_modules)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ORACLE = Path(__file__).resolve().parents[2] / "bench" / "mutation" / "oracle"
ALLOWED_THIRD_PARTY = {"numpy", "torch"}


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path.name}: relative import"
            names.append(node.module)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
            "import_module",
            "__import__",
        ):
            # A dynamic import names its module in a string or builds it from the lesson's
            # files: neither may spell autograder or a reference module.
            for arg in ast.walk(node):
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    names.append(arg.value.rstrip("."))
    return names


def test_the_package_scan_sees_its_files():
    files = sorted(p.name for p in ORACLE.glob("*.py"))
    assert {"__init__.py", "compare.py", "probe.py", "record.py"} <= set(files)
    assert [f"probes_0{i}.py" for i in range(1, 7)] == [f for f in files if f.startswith("probes_")]


def test_oracle_imports_nothing_of_the_graders():
    offending = []
    for path in sorted(ORACLE.glob("*.py")):
        for name in _imports(path):
            top = name.split(".")[0]
            if top == "autograder" or "reference" in name.lower():
                offending.append(f"{path.name}: {name}")
            elif top == "bench":
                if not name.startswith("bench.mutation.oracle"):
                    offending.append(f"{path.name}: {name} (outside the oracle)")
            elif top not in sys.stdlib_module_names and top not in ALLOWED_THIRD_PARTY:
                offending.append(f"{path.name}: {name} (not the standard library, numpy or torch)")
    assert offending == []


def test_no_string_in_the_code_names_the_graders():
    # A string the code could hand to an importer or open as a path (docstrings aside); the bare
    # word "autograder" is allowed: probe.py lists any module of that name a run imported.
    for path in sorted(ORACLE.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                named = ("autograder.", "autograder/", "graders", "reference.py")
                assert not any(n in node.value for n in named), (path.name, node.value)
