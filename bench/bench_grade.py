"""Benchmark: wall time of `autograder grade 03` against `python -c "import torch"`.

Run from the repository root:  python bench/bench_grade.py [--repeat N]
Each command runs as a fresh process, alternating, so machine noise hits all of them alike;
the medians are reported with their ratio to the torch import (goal: at most 2.5x).
This is a measurement, never a test: shared machines are too noisy for timed assertions.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def wall(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp()) / "r.json"
    grade = [sys.executable, "-m", "autograder", "grade", "03", "--format", "json", "--output", str(out)]
    commands = {
        "python -c 'import torch'": [sys.executable, "-c", "import torch"],
        "grade 03 (solution)": grade + ["--submission", str(ROOT / "solutions" / "03-atencion-causal")],
        "grade 03 (stub)": grade + ["--submission", str(ROOT / "exercises" / "03-atencion-causal")],
    }
    wall(commands["python -c 'import torch'"])  # warm the file cache
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.repeat):
        for name, cmd in commands.items():
            times[name].append(wall(cmd))
    base = statistics.median(times["python -c 'import torch'"])
    print(f"{'command':32} {'median s':>9} {'min s':>7} {'x torch':>8}")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:32} {median:9.2f} {min(values):7.2f} {median / base:8.2f}")


if __name__ == "__main__":
    main()
