"""The oracle (bench/mutation/oracle): the reference is equivalent to itself across two fresh
processes, hand-written mutants of the kinds issue 31 names are reported as differing with a
readable difference, a looping candidate is a timeout error (no hang), and the verdict and float
rules hold.

Each probe run is a fresh process that imports torch (2-4 s of CPU), so CI proves two lessons
end to end, seven probe processes in all: 01 (the cheapest) and 03 (the flagship).
`python3 -m bench.mutation.oracle --self-check` proves all six lessons, and `--handmade` runs
every hand-written mutant of handmade.py, 38 over the six lessons (bench, not CI). One test per
lesson keeps the reference's run cached for its mutants whichever xdist worker takes it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.variants import solution_folder

from bench.mutation.oracle import ProbeRun, compare, judge, record, reference_run
from bench.mutation.oracle.handmade import Handmade, by_name

LESSON_FOLDERS = {"01": "01-tokens-y-lotes", "03": "03-atencion-causal"}


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """Lessons 01 and 03 solved, their region markers stripped (as the mutation harness builds
    them)."""
    root = tmp_path_factory.mktemp("oracle-reference")
    for folder in LESSON_FOLDERS.values():
        solution_folder(folder, root / folder, strip=True)
    return root


def test_lesson01_reference_equivalent_mutant_differs_loop_times_out(course, tmp_path):
    ref = reference_run("01", course)
    assert ref.failure is None and ref.meta["import_error"] is None
    # The run imported nothing of the project but the lesson (the oracle is apart from the graders).
    assert ref.meta["foreign_modules"] == []
    assert all(p["raises"] is None for p in ref.meta["probes"])  # lesson 01 probes raise nowhere

    same = compare("01", course, course)  # the cached reference against a fresh process
    assert same.equivalent and same.error is None and same.difference is None, same
    assert same.probes == len(ref.meta["probes"]) >= 60

    floats = compare("01", by_name("01-split-floats").apply(course, tmp_path / "floats"), course)
    assert not floats.equivalent and floats.error is None
    assert floats.difference.startswith(
        "probe 'split N=1 val_fraction=0.1': train: dtype float32 where the reference has int64"
    ), floats.difference

    # Sleeps rather than spins: the same hang for the oracle, without burning the CI's CPU.
    sleeps = Handmade(
        "sleeps",
        "01",
        "01-tokens-y-lotes/data.py",
        "        ids = []\n",
        "        ids = []\n        while len(ids) >= 0:\n            __import__('time').sleep(0.05)\n",
        "differs",
    )
    hangs = compare("01", sleeps.apply(course, tmp_path / "sleeps"), course, timeout=12)
    assert not hangs.equivalent and hangs.difference is None
    assert hangs.error.startswith("candidate timed out after 12 s in probe 'encode-decode corpus'"), (
        hangs.error
    )


def test_lesson03_reference_equivalent_mask_not_cropped_differs(course, tmp_path):
    same = compare("03", course, course)
    assert same.equivalent and same.error is None, same

    # The mask applied whole broadcasts only when T == block_size: only the probes with
    # T < block_size see it, and the T = block_size ones still agree.
    uncropped = compare("03", by_name("03-mask-not-cropped").apply(course, tmp_path / "uncropped"), course)
    assert not uncropped.equivalent and uncropped.error is None
    assert uncropped.difference.startswith(
        "probe 'attention C=12 nh=3 bs=8 B=2 T=5 seed=0': candidate raises RuntimeError"
    ), uncropped.difference
    assert 0 < uncropped.probes < same.probes


# --- the verdict's rules, on made-up runs (no child process) --------------------------------------


def _run(probes, import_error=None, failure=None, timed_out=False):
    meta = None if failure else {"probes": probes, "import_error": import_error}
    return ProbeRun(meta, {}, failure, timed_out)


def _probe(name, value, raises=None):
    return {"name": name, "outputs": [["v", {"t": "int", "v": value, "type": "int"}]], "raises": raises}


def test_verdicts():
    ref = _run([_probe("a", 1), _probe("b", 2)])
    assert judge(ref, _run([_probe("a", 1), _probe("b", 2)])).equivalent
    differs = judge(ref, _run([_probe("a", 1), _probe("b", 3)]))
    assert (differs.equivalent, differs.probes) == (False, 1)
    assert differs.difference == "probe 'b': v: 3 where the reference has 2"
    raised = judge(
        ref,
        _run(
            [_probe("a", 1), {"name": "b", "outputs": [], "raises": {"type": "KeyError", "message": "'x'"}}]
        ),
    )
    assert (
        raised.difference
        == "probe 'b': candidate raises KeyError: 'x' (before 'v') where the reference does not"
    )
    broken = judge(ref, _run([], import_error={"type": "ImportError", "message": "no data today"}))
    assert (broken.equivalent, broken.error) == (False, None)
    assert broken.difference == "candidate's files fail to import: ImportError: no data today"
    crashed = judge(ref, _run([], failure="the probe process exited with code 1 in probe 'a': boom"))
    assert crashed.difference.startswith("candidate crashes: ") and crashed.error is None
    timeout = judge(ref, _run([], failure="timed out after 5 s in probe 'b'", timed_out=True))
    assert (timeout.difference, timeout.error) == (None, "candidate timed out after 5 s in probe 'b'")
    bad_ref = judge(_run([], failure="timed out after 5 s in probe 'a'", timed_out=True), ref)
    assert bad_ref.error.startswith("the reference's probe run failed")


# --- the comparison rules (record.py) ------------------------------------------------------------


def _diff(ref, cand):
    enc_r, enc_c = record.Encoder(), record.Encoder()
    r, c = enc_r.encode(ref), enc_c.encode(cand)
    return record.compare_nodes(r, c, enc_r.arrays, enc_c.arrays, "y")


def test_float32_tolerance_and_messages():
    ref = np.array([[1.0, -2.0], [0.5, 0.0]], dtype=np.float32)
    assert _diff(ref, ref * np.float32(1 + 1e-6)) is None  # float32 rounding apart
    diff = _diff(ref, ref + np.array([[0.0, 0.0], [0.01, 0.0]], dtype=np.float32))
    assert diff.startswith("y differs at [1, 0]: 0.51 where the reference has 0.5 (1 of 4 elements differ"), (
        diff
    )
    assert _diff(ref, ref.astype(np.float64)) == "y: dtype float64 where the reference has float32"
    assert _diff(ref, ref[:1]) == "y: shape (1, 2) where the reference has (2, 2)"
    assert _diff(np.float32(2.5).reshape(()), np.float32(2.6).reshape(())).startswith("y: 2.6 where")


def test_nan_inf_ints_strings_and_python_floats():
    special = np.array([np.nan, -np.inf, 1.0])
    assert _diff(special, special.copy()) is None
    assert _diff(special, np.array([0.0, -np.inf, 1.0])) is not None
    assert _diff(special, np.array([np.nan, -1e30, 1.0])) is not None
    assert _diff(np.array([3, 4, 5]), np.array([3, 4, 6])).startswith(
        "y differs at [2]: 6 where the reference has 5"
    )
    # A Python float is usually a float32 loss's .item(): rtol 1e-5. Ints and types are exact.
    assert _diff(2.302585, 2.302585 * (1 + 2e-6)) is None
    assert _diff(2.302585, 2.31) == "y: 2.31 where the reference has 2.30259"
    assert _diff(3, 3.0) == "y: float 3 where the reference has int 3"
    assert _diff(np.int64(3), 3) == "y: type int where the reference has int64"
    assert (
        _diff(["a", "b", "\t"], ["a", "b"])
        == "y: 2 items where the reference has 3 (only the reference has ['\\t'])"
    )
    assert _diff({"k": 1}, {"k": 1, "j": 2}).startswith("y: keys differ")
