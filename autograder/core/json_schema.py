"""The project's JSON Schemas (course.schema.json, roster.schema.json): loaded once, checked with
one validator class, and jsonschema imported without its slowest optional checker.

    schema(path)      the schema document (a dict), read once per process
    validator(path)   a Draft 2020-12 validator of it, built once per process
    ValidationError, best_match
                      jsonschema's, re-exported: every other module takes jsonschema from
                      here, never by its own `import jsonschema`, because an import sorter
                      puts third-party imports first and that import would then come before
                      the line below (it once did, and every `autograder` start paid ~1 s of
                      CPU again)
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any

# jsonschema imports every optional format checker it finds at import time; rfc3987-syntax
# (pulled in by nbgrader's jsonschema[format-nongpl]) compiles a grammar that costs seconds on
# every `autograder` start. Our schemas use no "iri" format: leave that checker out.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]

import jsonschema  # noqa: E402
from jsonschema.exceptions import ValidationError, best_match  # noqa: E402

__all__ = ["ValidationError", "best_match", "schema", "validator"]


@functools.cache
def schema(path: Path) -> dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


@functools.cache
def validator(path: Path) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema(path))
