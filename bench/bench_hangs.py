"""Benchmark: what one learner's infinite loop costs, in `check` and in a cohort's `grade-all`.

Run from the repository root:  python bench/bench_hangs.py [--learners 13] [--jobs 2] [--checkout DIR]

Two measurements, with the course's own budgets (course.yml: 10 s of CPU per check):

Each is timed on the wall clock and in CPU seconds of everything it ran (load changes the first,
hardly the second).

- `check 03` (learner-side) on a course whose lesson 03 is finished but for a loop in its
  TODO [mask] code (tests/support/looping.py): the wall-clock time, how many checks said
  "Tiempo agotado", and whether the output names the loop's line;
- `grade-all --lessons 03` (official) of N learners, one of them with that loop and the others
  the solution: the wall-clock time, and the looping learner's points.

`--no-loop` grades the same cohort with no looping learner (the baseline).

`--checkout DIR` runs the engine of another checkout (PYTHONPATH), e.g. the commit before a
change (`git worktree add /tmp/before <sha>`), for before/after figures on the same machine; the
submissions are made by this checkout's test helpers either way. Results are appended to
bench/results/hangs.txt with the command, the engine's commit and the machine's load. A
measurement, never a test: shared machines are too noisy for timed assertions.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
FOLDER = "03-atencion-causal"


def children_cpu() -> float:
    """CPU seconds of every finished descendant waited for (the command, its grading processes,
    zygote, supervisors and workers): unlike the wall clock, the same on a loaded machine."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def engine_env(engine: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOGRADER_")}
    env["PYTHONPATH"] = str(engine)
    return env


def assert_engine(engine: Path, cwd: Path) -> None:
    """The engine a command run from `cwd` imports is `engine`'s (never this checkout's by accident)."""
    probe = [sys.executable, "-c", "import autograder; print(autograder.__file__)"]
    found = subprocess.run(probe, cwd=cwd, capture_output=True, text=True, env=engine_env(engine)).stdout
    if not Path(found.strip()).resolve().is_relative_to(engine):
        sys.exit(f"the engine imported from {cwd} is {found.strip()}, not {engine}'s")


def bench_check(engine: Path, work: Path) -> dict:
    from support.learner_course import make_course
    from support.looping import loop_in_mask

    root = make_course(work / "course", {"03": "solved"})
    path = root / "exercises" / FOLDER / "attention.py"
    text, line = loop_in_mask(path.read_text(encoding="utf-8"))
    path.write_text(text, encoding="utf-8")
    command = [sys.executable, "-m", "autograder", "--course", str(root / "course.yml"), "check", "03"]
    assert_engine(engine, root)
    start, cpu = time.perf_counter(), children_cpu()
    done = subprocess.run(command, cwd=root, capture_output=True, text=True, env=engine_env(engine))
    seconds, cpu = time.perf_counter() - start, children_cpu() - cpu
    if done.returncode != 0:
        sys.exit(f"check 03 failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return {
        "seconds": round(seconds, 1),
        "cpu_seconds": round(cpu, 1),
        "timeouts": done.stdout.count("Tiempo agotado"),
        "names_line": f"attention.py:{line}" in done.stdout,
    }


def bench_grade_all(engine: Path, work: Path, learners: int, jobs: int, loop: bool = True) -> dict:
    from support.looping import loop_in_mask
    from support.variants import solution_files

    from autograder.core.manifest import load_course

    lesson = load_course(ROOT / "course.yml").lesson("03")
    solved = solution_files(lesson)
    looping = dict(solved)
    looping["attention.py"], _ = loop_in_mask(solved["attention.py"])
    submissions = work / "entregas"
    for n in range(learners):
        looper = loop and n == 0
        folder = submissions / (f"{n:02d}-bucle" if looper else f"{n:02d}-solucion") / "exercises" / FOLDER
        folder.mkdir(parents=True)
        for name, text in (looping if looper else solved).items():
            (folder / name).write_text(text, encoding="utf-8")
    out = work / "notas"
    command = [
        sys.executable,
        "-m",
        "autograder",
        "grade-all",
        str(submissions),
        "--out",
        str(out),
        "--lessons",
        "03",
        "--jobs",
        str(jobs),
        "--seed",
        "1",
    ]
    assert_engine(engine, work)
    start, cpu = time.perf_counter(), children_cpu()
    # Run from `work`, never from this checkout: `python -m` puts the current folder first on
    # the import path, which would take this checkout's engine over --checkout's.
    done = subprocess.run(command, cwd=work, capture_output=True, text=True, env=engine_env(engine))
    seconds, cpu = time.perf_counter() - start, children_cpu() - cpu
    if done.returncode not in (0, 1):
        sys.exit(f"grade-all failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    points = None
    for path in out.rglob("*.json"):
        if "bucle" in path.name:
            data = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(data, dict) and "lessons" in data:
                points = sum(c["score"] for lesson in data["lessons"] for c in lesson["checks"])
    return {"seconds": round(seconds, 1), "cpu_seconds": round(cpu, 1), "looping_learner_points": points}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--learners", type=int, default=13)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--checkout", type=Path, help="run the engine of this checkout (PYTHONPATH)")
    parser.add_argument("--only", choices=("check", "grade-all"), help="one measurement only")
    parser.add_argument(
        "--no-loop", action="store_true", help="grade-all: every learner has the solution (the baseline)"
    )
    args = parser.parse_args()
    engine = (args.checkout or ROOT).resolve()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=engine, capture_output=True, text=True
    ).stdout.strip()
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-hangs-") as tmp:
        if args.only in (None, "check"):
            results["check 03"] = bench_check(engine, Path(tmp) / "check")
            print("check 03:", results["check 03"], flush=True)
        if args.only in (None, "grade-all"):
            work = Path(tmp) / "cohort"
            results["grade-all"] = bench_grade_all(engine, work, args.learners, args.jobs, not args.no_loop)
            print(
                f"grade-all of {args.learners} ({'none' if args.no_loop else 'one'} looping):",
                results["grade-all"],
            )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    line = (
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC · engine {engine} (commit {commit}) · "
        f"load {load:.1f} · {shlex.join(sys.argv)}\n  {json.dumps(results, ensure_ascii=False)}\n"
    )
    (ROOT / "bench" / "results").mkdir(exist_ok=True)
    with open(ROOT / "bench" / "results" / "hangs.txt", "a", encoding="utf-8") as fh:
        fh.write(line)
    print(line, end="")


if __name__ == "__main__":
    main()
