"""The results of a mutation run: one JSON line per judged mutant, in a run folder
(default bench/results/mutation-run/), appended as each outcome arrives.

A rerun skips every mutant whose id already has a line made from the same mutant text (its
digest) under the same graders (autograder.cohort.store.grading_fingerprint of its lesson: the
lesson's graders, reference pieces, engine and messages, the seed and language): an interrupted
run loses at most the mutants that were grading. A line made under other graders, or from
another text under the same id (the solution changed), is stale: the mutant is graded again and
its new line wins (the last line of an id is the one that counts). Survivors get a second line
once the oracle has judged them; a survivor whose oracle verdict is missing (interrupted, or the
oracle could not be imported: ORACLE_UNAVAILABLE) is sent to the oracle again without being
graded again.

Layout of the run folder:
    results.jsonl   the lines (see runner.record for the fields)
    runs.jsonl      one line per lesson graded: when, how many mutants, wall seconds
    report.txt      the last report written
Several runs may share a run folder (each line is one append); each run keeps its roots (the
reference and the candidates) in a temporary folder of its own.
    .gitignore      "*": a run folder never shows up in git status
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

__all__ = ["DEFAULT_RUN", "ORACLE_UNAVAILABLE", "Store"]

DEFAULT_RUN = Path(__file__).resolve().parents[2] / "bench" / "results" / "mutation-run"
# A survivor's verdict while bench/mutation/oracle cannot be imported: judged again on a rerun.
ORACLE_UNAVAILABLE = "oracle unavailable"


class Store:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.results = self.root / "results.jsonl"
        self.runs = self.root / "runs.jsonl"
        self.skipped_lines = 0  # lines that could not be read (a line cut by a kill)

    def create(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        ignore = self.root / ".gitignore"
        if not ignore.exists():
            ignore.write_text("*\n", encoding="utf-8")

    def load(self) -> dict[str, dict]:
        """{mutant id: its last line}."""
        found: dict[str, dict] = {}
        self.skipped_lines = 0
        if not self.results.is_file():
            return found
        with self.results.open(encoding="utf-8") as lines:
            for line in lines:
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                    found[record["id"]] = record
                except (ValueError, KeyError, TypeError):
                    self.skipped_lines += 1
        return found

    def append(self, record: dict) -> None:
        self._append(self.results, record)

    def log_run(self, entry: dict) -> None:
        self._append(self.runs, {"when": time.strftime("%Y-%m-%dT%H:%M:%S"), **entry})

    def run_log(self) -> list[dict]:
        if not self.runs.is_file():
            return []
        out = []
        for line in self.runs.read_text(encoding="utf-8").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out

    @staticmethod
    def is_current(record: dict | None, digest: str, fingerprint: str) -> bool:
        """Whether `record` judged this very mutant text under these graders."""
        return (
            record is not None and record.get("digest") == digest and record.get("fingerprint") == fingerprint
        )

    @staticmethod
    def needs_oracle(record: dict) -> bool:
        """A survivor the oracle has not judged yet (interrupted, or the oracle was unavailable).
        A verdict with another error (the oracle timed out, say) stands: it would say the same."""
        if record.get("status") != "survived":
            return False
        verdict = record.get("oracle")
        return not isinstance(verdict, dict) or verdict.get("error") == ORACLE_UNAVAILABLE

    def _append(self, path: Path, record: dict) -> None:
        self.create()
        line = json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n"
        with path.open("a", encoding="utf-8") as out:
            out.write(line)
            out.flush()
            os.fsync(out.fileno())
