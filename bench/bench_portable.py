"""Benchmark: wall time of `autograder grade 03` on lesson 03's solution, and of the whole course on
the solutions, on the portable worker path (AUTOGRADER_WORKER=portable: a spawned interpreter per
worker, started ahead of need as a spare, what macOS and Windows get) against the Linux path
(workers forked from the warm pool's zygote), both as ratios to `python -c "import torch"`
measured in the same run. Also `watch`'s case: lesson 03 graded again in the same process a few
seconds after a first grading (the next save), timed inside that process.

Run from the repository root:  python bench/bench_portable.py [--repeat N] [--output FILE]
Each command runs as a fresh process, alternating, so machine noise hits all of them alike; the
median of N runs (default 3) is reported. A measurement a maintainer runs, never a test.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LESSON = "03"
SOLUTION = ROOT / "solutions" / "03-atencion-causal"


def wall(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


PAUSE_S = 3.0  # between two saves in `watch`: the learner edits


def regrade() -> None:
    """In a child process: grade lesson 03 twice, PAUSE_S apart, as `watch` does on two saves;
    print the seconds the second one took."""
    sys.path.insert(0, str(ROOT))
    from autograder.core.manifest import load_course
    from autograder.engine.grading import grade
    from autograder.sandbox.client import start_warm_pool

    course = load_course(ROOT / "course.yml")
    start_warm_pool()
    lesson = course.lesson(LESSON)
    grade(course, [lesson], SOLUTION, seed=1)
    time.sleep(PAUSE_S)
    start = time.perf_counter()
    grade(course, [lesson], SOLUTION, seed=1)
    print(f"{time.perf_counter() - start:.4f}")


def inner(cmd: list[str], env: dict[str, str]) -> float:
    """The seconds a command prints (its own measurement)."""
    proc = subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True, text=True)
    return float(proc.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--output", type=Path, help="also write the table to this file")
    parser.add_argument(
        "--regrade", action="store_true", help=argparse.SUPPRESS
    )  # the child of `watch`'s case
    args = parser.parse_args()
    if args.regrade:
        regrade()
        return
    out = Path(tempfile.mkdtemp()) / "r.json"
    grade = [
        sys.executable,
        "-m",
        "autograder",
        "grade",
        LESSON,
        "--submission",
        str(SOLUTION),
        "--format",
        "json",
        "--output",
        str(out),
    ]
    course = [
        sys.executable,
        "-m",
        "autograder",
        "grade",
        "--submission",
        str(ROOT / "solutions"),
        "--format",
        "json",
        "--output",
        str(out),
    ]
    base_env = {k: v for k, v in os.environ.items() if k != "AUTOGRADER_WORKER"}
    commands = {
        "python -c 'import torch'": ([sys.executable, "-c", "import torch"], base_env),
        "grade 03, Linux path": (grade, {**base_env, "AUTOGRADER_WORKER": "auto"}),
        "grade 03, portable path": (grade, {**base_env, "AUTOGRADER_WORKER": "portable"}),
        # The whole course too: there the Linux path forks every worker from one warm zygote,
        # while the portable path starts a fresh interpreter (and torch) per lesson.
        "grade all, Linux path": (course, {**base_env, "AUTOGRADER_WORKER": "auto"}),
        "grade all, portable path": (course, {**base_env, "AUTOGRADER_WORKER": "portable"}),
    }
    # Timed inside the process: the second of two gradings PAUSE_S apart (watch's next save).
    again = [sys.executable, str(Path(__file__).resolve()), "--regrade"]
    inside = {
        "grade 03 again, Linux path": (again, {**base_env, "AUTOGRADER_WORKER": "auto"}),
        "grade 03 again, portable path": (again, {**base_env, "AUTOGRADER_WORKER": "portable"}),
    }
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    wall(*commands["python -c 'import torch'"])  # warm the file cache
    times: dict[str, list[float]] = {name: [] for name in (*commands, *inside)}
    for _ in range(args.repeat):
        for name, (cmd, env) in commands.items():
            times[name].append(wall(cmd, env))
        for name, (cmd, env) in inside.items():
            times[name].append(inner(cmd, env))
    medians = {name: statistics.median(values) for name, values in times.items()}
    torch_s = medians["python -c 'import torch'"]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [
        f"bench_portable: lesson {LESSON} and the whole course (solutions), median of {args.repeat}, "
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, "
        f"load {load_before:.2f} before and {load:.2f} after",
        f"{'command':30} {'median s':>9} {'min s':>7} {'x torch':>8}",
    ]
    for name, values in times.items():
        lines.append(f"{name:30} {medians[name]:9.2f} {min(values):7.2f} {medians[name] / torch_s:8.2f}")
    for what in ("grade 03", "grade all", "grade 03 again"):
        lines.append(
            f"{what}: portable / Linux path = {medians[what + ', portable path'] / medians[what + ', Linux path']:.2f}x"
        )
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
