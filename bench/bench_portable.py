"""Benchmark: wall time of `autograder grade 03` on lesson 03's solution, and of the whole course on
the solutions, on the portable worker path (AUTOGRADER_WORKER=portable: a freshly spawned
interpreter per worker, what macOS and Windows get) against the Linux path (workers forked
from the warm pool's zygote), both as ratios to `python -c "import torch"` measured in the
same run.

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--output", type=Path, help="also write the table to this file")
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp()) / "r.json"
    grade = [sys.executable, "-m", "autograder", "grade", LESSON, "--submission", str(SOLUTION),
             "--format", "json", "--output", str(out)]
    course = [sys.executable, "-m", "autograder", "grade", "--submission", str(ROOT / "solutions"),
              "--format", "json", "--output", str(out)]
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
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    wall(*commands["python -c 'import torch'"])  # warm the file cache
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.repeat):
        for name, (cmd, env) in commands.items():
            times[name].append(wall(cmd, env))
    medians = {name: statistics.median(values) for name, values in times.items()}
    torch_s = medians["python -c 'import torch'"]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [f"bench_portable: lesson {LESSON} and the whole course (solutions), median of {args.repeat}, "
             f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, load {load_before:.2f} before and {load:.2f} after",
             f"{'command':28} {'median s':>9} {'min s':>7} {'x torch':>8}"]
    for name, values in times.items():
        lines.append(f"{name:28} {medians[name]:9.2f} {min(values):7.2f} {medians[name] / torch_s:8.2f}")
    for what in ("grade 03", "grade all"):
        lines.append(f"{what}: portable / Linux path = {medians[what + ', portable path'] / medians[what + ', Linux path']:.2f}x")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
