"""compare(): run a lesson's probes on a candidate root and a reference root, each in a fresh
child process (probe.py), and say whether the candidate behaves like the reference.

The reference's run is kept in memory per (lesson, root, digest of the root's .py and data files
and of this package's sources), so a harness comparing many mutants with one reference pays for
the reference once per process. The candidate always runs.

Imports numpy (through record.py) and the standard library; never torch, never the project.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.mutation.oracle import record

PACKAGE = Path(__file__).resolve().parent
REPO = PACKAGE.parents[2]


@dataclass(frozen=True)
class Verdict:
    """equivalent: every probe agreed. probes: how many probes ran and agreed. difference: the
    first probe that differs and how (None when equivalent). error: why the oracle could not
    decide (a timeout, the reference failing); a candidate that fails to import or crashes is a
    difference, not an error."""

    equivalent: bool
    probes: int
    difference: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class ProbeRun:
    """One side's run: `meta` and `arrays` as record.load gives them, or `failure` (a sentence)
    with `timed_out` when the child ran past its time."""

    meta: dict | None
    arrays: dict
    failure: str | None = None
    timed_out: bool = False
    seconds: float = 0.0


_REFERENCE_CACHE: dict[tuple, ProbeRun] = {}


def _digest(root: Path, lesson_id: str) -> str:
    h = hashlib.sha256()
    for path in sorted(PACKAGE.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    for folder in sorted(p for p in Path(root).iterdir() if p.is_dir()):
        for path in sorted(folder.rglob("*")):
            if path.is_file() and path.suffix in (".py", ".txt") and "__pycache__" not in path.parts:
                h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    h.update(lesson_id.encode())
    return h.hexdigest()


def _start(lesson_id: str, root: Path, workdir: Path, side: str):
    out = workdir / f"{side}.npz"
    log = open(workdir / f"{side}.log", "wb")  # noqa: SIM115 - closed in _finish
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    # One hash seed: a candidate whose output hangs on set order gives the same verdict each run.
    env["PYTHONHASHSEED"] = "0"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[var] = "1"
    cwd = workdir / f"{side}-cwd"  # stray files the lesson's code writes land here
    cwd.mkdir()
    cmd = [sys.executable, "-m", "bench.mutation.oracle.probe", "--lesson", lesson_id, "--root", str(root)]
    cmd += ["--out", str(out)]
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    return proc, out, log, time.monotonic()


def _finish(started, deadline: float, workdir: Path, side: str, timeout: float) -> ProbeRun:
    proc, out, log, t0 = started
    try:
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        # The child leads its own session: kill its group (it and anything it started), only it.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        log.close()
        progress = Path(str(out) + ".progress")
        where = progress.read_text(encoding="utf-8") if progress.exists() else "(starting)"
        return ProbeRun(
            None,
            {},
            f"timed out after {timeout:g} s in probe {where!r}",
            True,
            time.monotonic() - t0,
        )
    log.close()
    seconds = time.monotonic() - t0
    if proc.returncode != 0 or not out.exists():
        tail = (
            (workdir / f"{side}.log").read_text(encoding="utf-8", errors="replace").strip().splitlines()[-3:]
        )
        progress = Path(str(out) + ".progress")
        where = progress.read_text(encoding="utf-8") if progress.exists() else "(starting)"
        return ProbeRun(
            None,
            {},
            f"the probe process exited with code {proc.returncode} in probe {where!r}: "
            + " | ".join(tail)[-400:],
            False,
            seconds,
        )
    try:
        meta, arrays = record.load(out)
    except (OSError, ValueError, KeyError) as exc:  # a file the child could not finish writing
        return ProbeRun(
            None, {}, f"its output could not be read: {type(exc).__name__}: {exc}", False, seconds
        )
    return ProbeRun(meta, arrays, None, False, seconds)


def run_probes(lesson_id: str, root: Path, *, timeout: float = 60) -> ProbeRun:
    """One side's probe run (a fresh child process), for callers that want the raw outputs."""
    with tempfile.TemporaryDirectory(prefix="oracle-") as tmp:
        started = _start(lesson_id, Path(root).resolve(), Path(tmp), "run")
        return _finish(started, time.monotonic() + timeout, Path(tmp), "run", timeout)


def _cache_key(lesson_id: str, reference_root: Path) -> tuple:
    return (lesson_id, str(reference_root), _digest(reference_root, lesson_id))


def reference_run(lesson_id: str, reference_root: Path, *, timeout: float = 60) -> ProbeRun:
    """The reference's probe run, from the cache or run now (and cached when it succeeded)."""
    lesson_id, reference_root = str(lesson_id).zfill(2), Path(reference_root).resolve()
    key = _cache_key(lesson_id, reference_root)
    if key not in _REFERENCE_CACHE:
        run = run_probes(lesson_id, reference_root, timeout=timeout)
        if run.failure is not None or run.meta.get("import_error") is not None:
            return run
        _REFERENCE_CACHE[key] = run
    return _REFERENCE_CACHE[key]


def compare(lesson_id: str, candidate_root: Path, reference_root: Path, *, timeout: float = 60) -> Verdict:
    """Does the lesson's code under candidate_root behave like the one under reference_root on
    every probe of probes_<lesson_id>.py? Each side runs in its own child process; `timeout`
    bounds each (wall clock, both run at once)."""
    lesson_id = str(lesson_id).zfill(2)
    candidate_root, reference_root = Path(candidate_root).resolve(), Path(reference_root).resolve()
    key = _cache_key(lesson_id, reference_root)
    with tempfile.TemporaryDirectory(prefix="oracle-") as tmp:
        workdir = Path(tmp)
        deadline = time.monotonic() + timeout
        ref_started = (
            None if key in _REFERENCE_CACHE else _start(lesson_id, reference_root, workdir, "reference")
        )
        cand = _finish(
            _start(lesson_id, candidate_root, workdir, "candidate"), deadline, workdir, "candidate", timeout
        )
        if ref_started is not None:
            ref = _finish(ref_started, deadline, workdir, "reference", timeout)
            if ref.failure is None and ref.meta.get("import_error") is None:
                _REFERENCE_CACHE[key] = ref
        else:
            ref = _REFERENCE_CACHE[key]
    return judge(ref, cand)


def judge(ref: ProbeRun, cand: ProbeRun) -> Verdict:
    """The verdict for two runs of the same lesson's probes."""
    if ref.failure:
        return Verdict(False, 0, None, f"the reference's probe run failed: {ref.failure}")
    if ref.meta["import_error"]:
        err = ref.meta["import_error"]
        return Verdict(
            False, 0, None, f"the reference's files fail to import: {err['type']}: {err['message']}"
        )
    if cand.timed_out:
        return Verdict(False, 0, None, f"candidate {cand.failure}")
    if cand.failure:
        return Verdict(False, 0, f"candidate crashes: {cand.failure}")
    if cand.meta["import_error"]:
        err = cand.meta["import_error"]
        return Verdict(False, 0, f"candidate's files fail to import: {err['type']}: {err['message']}")
    ref_probes = ref.meta["probes"]
    cand_probes = {p["name"]: p for p in cand.meta["probes"]}
    agreed, first, differing = 0, None, 0
    for probe in ref_probes:
        other = cand_probes.get(probe["name"])
        diff = (
            f"probe {probe['name']!r} did not run in the candidate"
            if other is None
            else record.compare_probe(probe, other, ref.arrays, cand.arrays)
        )
        if diff is None:
            agreed += 1
        else:
            differing += 1
            first = first or diff
    if first is None:
        return Verdict(True, agreed)
    more = f" (and {differing - 1} more of {len(ref_probes)} probes differ)" if differing > 1 else ""
    return Verdict(False, agreed, first + more)
