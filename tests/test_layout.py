"""The package layout is the architecture (drawn and explained in docs/architecture.md): each subpackage of
autograder/ may import only the packages below it, the worker only what runs inside the walls,
and no module imports itself back through others. Imports inside functions count too: a lazy
import is still a dependency, only a later one."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "autograder"

# Who may import whom: a package may always import its own modules. `graders` are the hidden
# graders (autograder/graders/); `cli` is the command line on top of everything, and
# `cli_language` the language it speaks (argparse in the catalogs' words), which needs only core.
ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "sandbox": {"core"},
    "engine": {"core", "sandbox"},
    "render": {"core", "engine"},
    "learner": {"core", "sandbox", "engine", "render"},
    # cohort reads push times through github's one REST client (grade-all --snapshot).
    "cohort": {"core", "sandbox", "engine", "render", "github", "term"},
    "github": {"core", "engine", "render"},
    "course": {"core", "sandbox", "engine", "render"},
    "graders": {"core", "sandbox", "engine"},
    # The grading service composes the instructor's tools: cohort's grading processes and
    # exports, github's REST client; nothing below imports it.
    "service": {"core", "sandbox", "engine", "render", "cohort", "github", "term"},
    # The instructor's term (deadlines, late policy, which submission counts, LMS files) works on
    # plain data: cohort and the service hand it their submissions and grades.
    "term": {"core"},
    # The similarity report reads a grade-all output folder and the learners' repositories.
    "similarity": {"core", "cohort"},
    "cli": {
        "core",
        "sandbox",
        "engine",
        "render",
        "learner",
        "cohort",
        "github",
        "course",
        "service",
        "term",
        "similarity",
        "cli_language",
    },
    "cli_language": {"core"},
    "__main__": {"cli"},
    "__init__": set(),
}
# What the worker (the process that runs the learner's code) may import of the engine: its own
# modules and the wire protocol. Nothing else of ours is readable behind its walls.
WORKER = "sandbox.worker"
WORKER_ALLOWED = ("sandbox.worker", "sandbox.protocol")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "__pycache__" not in p.parts}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The engine module an imported dotted name lives in (a name may be a module's attribute)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every engine module `name` imports, at module level or inside a function."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(["autograder", *base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            targets = [f"{module}.{a.name}" for a in node.names] + [module]
        for target in targets:
            if target == "autograder" or not target.startswith("autograder."):
                continue
            resolved = _resolve(target.removeprefix("autograder."), modules)
            if resolved and resolved != name:
                found.add(resolved)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _package(module: str) -> str:
    return module.split(".")[0]


GRAPH = _graph()


def test_every_top_level_module_belongs_to_a_known_package():
    assert {_package(m) for m in GRAPH} <= set(ALLOWED), sorted({_package(m) for m in GRAPH} - set(ALLOWED))


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_packages_import_only_the_layers_below_them(package):
    wrong = sorted(
        f"{m} -> {d}"
        for m, deps in GRAPH.items()
        if _package(m) == package
        for d in deps
        if _package(d) != package and _package(d) not in ALLOWED[package]
    )
    assert not wrong, f"{package} may import only {sorted(ALLOWED[package])}: " + "; ".join(wrong)


def test_the_worker_imports_only_itself_and_the_protocol():
    wrong = sorted(
        f"{m} -> {d}"
        for m, deps in GRAPH.items()
        if m.startswith(WORKER)
        for d in deps
        if not d.startswith(WORKER_ALLOWED)
    )
    assert not wrong, "; ".join(wrong)


def test_no_import_cycles():
    """Tarjan's strongly connected components: any component of two or more modules is a cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(GRAPH.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                component.append(item)
                if item == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(GRAPH):
        if node not in index:
            visit(node)
    assert not cycles, cycles


def test_the_checker_sees_a_forbidden_import(tmp_path):
    """The rules above are only as good as the import reader: it must see a lazy relative import."""
    modules = {"core.results": tmp_path / "r.py", "learner.check": tmp_path / "c.py"}
    source = tmp_path / "r.py"
    source.write_text("def f():\n    from ..learner.check import main\n", encoding="utf-8")
    assert _imports("core.results", source, modules) == {"learner.check"}


@pytest.mark.parametrize("package", sorted(p for p in ALLOWED if (PACKAGE / p / "__init__.py").exists()))
def test_each_package_says_what_it_may_import(package):
    """The package docstrings are the layout's documentation: their "May import:" line is the
    rule this test enforces, so the two cannot drift apart."""
    doc = ast.get_docstring(ast.parse((PACKAGE / package / "__init__.py").read_text(encoding="utf-8"))) or ""
    lines = [line for line in doc.splitlines() if line.startswith("May import:")]
    assert len(lines) == 1, f"autograder/{package}/__init__.py: one 'May import:' line"
    said = lines[0].removeprefix("May import:").strip().rstrip(".")
    names = set() if said == "nothing of ours" else {name.strip() for name in said.split(",")}
    assert names == ALLOWED[package]


def _private_uses(path: Path, modules: dict[str, Path]) -> list[str]:
    """Where `path` reaches into another module of ours for a name it keeps private (a leading
    underscore): `from autograder.x import _name`, or `x._name` on a module of ours it imported."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    module_aliases: set[str] = set()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("autograder.") and alias.asname:
                    module_aliases.add(alias.asname)
        elif (
            isinstance(node, ast.ImportFrom)
            and (node.module or "").startswith("autograder")
            and not node.level
        ):
            for alias in node.names:
                dotted = f"{node.module}.{alias.name}".removeprefix("autograder.")
                if dotted in modules:
                    module_aliases.add(alias.asname or alias.name)
                elif _private(alias.name):
                    found.append(f"{path.name}:{node.lineno} imports {node.module}.{alias.name}")
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in module_aliases
            and _private(node.attr)
        ):
            found.append(f"{path.name}:{node.lineno} uses {node.value.id}.{node.attr}")
    return found


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


@pytest.mark.parametrize("tree", ["autograder", "tests", "bench"])
def test_no_module_reaches_for_another_modules_private_names(tree):
    """A name with a leading underscore is its module's own business: whoever needs it from
    outside gets it under a public, honest name (ruff's rule for this is still a preview rule)."""
    modules = _modules()
    root = PACKAGE.parent / tree
    wrong = [use for path in sorted(root.rglob("*.py")) for use in _private_uses(path, modules)]
    assert not wrong, "; ".join(wrong)


def test_the_private_name_check_sees_both_ways_in(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text(
        "from autograder.core.regions import _hidden\n"
        "from autograder.sandbox.worker import confine\n"
        "confine._secret(1)\n"
        "confine.__name__\n"
    )
    assert _private_uses(planted, _modules()) == [
        "planted.py:1 imports autograder.core.regions._hidden",
        "planted.py:3 uses confine._secret",
    ]
