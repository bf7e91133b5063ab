"""What every `autograder` start costs: the CLI and the course/roster validation import
jsonschema without its optional "iri" format checker (rfc3987-syntax builds some forty parsers at
import, about a second of CPU on each of the hundreds of processes a cohort's grading starts)."""

from __future__ import annotations

import re
import subprocess
import sys

from support.project import ROOT

JSONSCHEMA_IMPORT = re.compile(r"^\s*(import jsonschema|from jsonschema)\b", re.MULTILINE)


def test_the_cli_and_the_validators_never_load_the_iri_checker():
    probe = (
        "import sys; import autograder.cli, autograder.core.manifest, autograder.core.roster; "
        "from autograder.core.manifest import load_course; load_course(sys.argv[1]); "
        "print(repr(sys.modules.get('rfc3987_syntax', 'absent')))"
    )
    shown = subprocess.run(
        [sys.executable, "-c", probe, str(ROOT / "course.yml")], capture_output=True, text=True, check=True
    )
    assert shown.stdout.strip() in ("None", "'absent'"), shown.stdout


def test_only_the_schema_module_imports_jsonschema():
    # An import sorter puts `import jsonschema` above the project's own imports, so a module that
    # imported it directly would load it before json_schema.py could leave the checker out.
    importers = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "autograder").rglob("*.py")
        if JSONSCHEMA_IMPORT.search(path.read_text(encoding="utf-8"))
    )
    assert importers == ["autograder/core/json_schema.py"], importers
