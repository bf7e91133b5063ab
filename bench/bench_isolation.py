"""Benchmark: what the worker's walls cost. `autograder grade 03` (and the whole course) on the
solutions, with the walls (the default) and with AUTOGRADER_ISOLATION=off, in the same run,
against `python -c "import torch"`; the warm pool and fresh workers both.

Run from the repository root:  python bench/bench_isolation.py [--repeat N]
Commands alternate so that machine noise hits every one alike; medians and their ratio to the
torch import are printed. Also prints, once, one worker's wall-in time measured inside a
sandbox (Landlock rules + seccomp filter). A measurement, never a test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def wall(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(
        cmd,
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **env},
    )
    return time.perf_counter() - start


def confine_cost() -> float:
    """Seconds one forked child spends walling itself in, as a worker does (median of 5)."""
    sys.path.insert(0, str(ROOT))
    from autograder.sandbox import isolation

    costs = []
    for _ in range(5):
        isolation.probe.cache_clear()
        start = time.perf_counter()
        isolation.probe()
        costs.append(time.perf_counter() - start)
    return statistics.median(costs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from bench_grade import solved_copy

    from autograder.core.manifest import load_course

    course = load_course(ROOT / "course.yml")
    tmp = Path(tempfile.mkdtemp())
    solved = solved_copy(course, tmp)
    grade = [sys.executable, "-m", "autograder", "grade", "--format", "json", "--output", str(tmp / "r.json")]
    one = grade + ["03", "--submission", str(solved / "03-atencion-causal")]
    course_cmd = grade + ["--submission", str(solved)]
    torch = [sys.executable, "-c", "import torch"]
    runs = {"python -c 'import torch'": (torch, {})}
    for pool, pool_env in (("warm pool", "1"), ("fresh workers", "0")):
        for walls, walls_env in (("walls", "on"), ("no walls", "off")):
            env = {"AUTOGRADER_WARM_POOL": pool_env, "AUTOGRADER_ISOLATION": walls_env}
            runs[f"grade 03, {pool}, {walls}"] = (one, env)
    for walls, walls_env in (("walls", "on"), ("no walls", "off")):
        runs[f"grade all 6, warm pool, {walls}"] = (course_cmd, {"AUTOGRADER_ISOLATION": walls_env})
    wall(torch, {})
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.repeat):
        for name, (cmd, env) in runs.items():
            times[name].append(wall(cmd, env))
    base = statistics.median(times["python -c 'import torch'"])
    print(f"{'command':<40} {'median s':>9} {'x torch':>8}")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:<40} {median:>9.2f} {median / base:>8.2f}")
    print(f"\none worker walling itself in (forked probe, median of 5): {confine_cost() * 1000:.1f} ms")
    print(f"uid {os.getuid()}, repeat {args.repeat}, {time.strftime('%Y-%m-%d')}")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
