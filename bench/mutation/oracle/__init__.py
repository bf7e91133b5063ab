"""The mutation harness's oracle: does a candidate lesson implementation behave like the
reference solution over a stated probe space? (issue 31, item 2; contract in
/work/notes/mutation-contract.md.)

Owns: `compare(lesson_id, candidate_root, reference_root, timeout=60) -> Verdict` (compare.py),
the child process that runs one lesson's probes on one root (probe.py), the encoding and the
comparison rules of probe outputs (record.py), and each lesson's probes with the probe space in
its docstring (probes_01.py ... probes_06.py, helpers in probing.py). CLI: __main__.py.

It is apart from the graders by construction: it imports nothing from autograder (graders,
engine or otherwise) and no reference.py; the child imports only torch, numpy, the standard
library, this package and the learner-facing lesson files under the root it is given. A test
(tests/mutation/test_oracle_imports.py) scans every import of this package.
"""

from bench.mutation.oracle.compare import ProbeRun, Verdict, compare, judge, reference_run, run_probes

__all__ = ["ProbeRun", "Verdict", "compare", "judge", "reference_run", "run_probes"]
