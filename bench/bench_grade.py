"""Benchmark: wall time of `autograder grade` per lesson and for the whole course, as ratios to
`python -c "import torch"` measured in the same run.

Run from the repository root:  python bench/bench_grade.py [--repeat N]
Each command runs as a fresh process, alternating, so machine noise hits all of them alike;
medians are reported with their ratio to the torch import. Every lesson in course.yml is graded
on its solution; lesson 03 also on its stub; the whole course on the solutions (a folder of
NN-slug/ copies with the markers stripped).

Goals (issue 16), checked at the end: the exit status is 1 when a ratio exceeds its goal, so a
regression is visible. One lesson (03, solution and stub) <= 1.5x the torch import; the whole
course <= 2.5x. Other lessons are reported without a goal (lesson 05's workers also load
torch.optim, ~2 s of CPU, see course.yml's warm_up).
This is a measurement a maintainer runs, never a test: shared machines are too noisy for timed
assertions.
"""

from __future__ import annotations

import argparse
import shutil
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


def solved_copy(course, tmp: Path) -> Path:
    """tmp/solved/NN-slug/: every lesson's folder solved (exercises/ overlaid with the marked
    files of solutions/, which holds only those), the region markers stripped."""
    from autograder.course.stubs import lesson_files, strip_markers

    solved = tmp / "solved"
    for lesson in course.lessons:
        for rel, source in lesson_files(ROOT, lesson.folder).items():
            path = solved / lesson.folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, path)
            if path.suffix in (".py", ".yml"):
                path.write_text(strip_markers(path.read_text(encoding="utf-8"), path.name), encoding="utf-8")
    return solved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from autograder.core.manifest import load_course

    course = load_course(ROOT / "course.yml")
    tmp = Path(tempfile.mkdtemp())
    out = tmp / "r.json"
    grade = [sys.executable, "-m", "autograder", "grade", "--format", "json", "--output", str(out)]
    solved = solved_copy(course, tmp)
    commands = {"python -c 'import torch'": [sys.executable, "-c", "import torch"]}
    for lesson in course.lessons:
        commands[f"grade {lesson.id} (solution)"] = grade + [
            lesson.id,
            "--submission",
            str(solved / lesson.folder),
        ]
    commands["grade 03 (stub)"] = grade + [
        "03",
        "--submission",
        str(ROOT / "exercises" / "03-atencion-causal"),
    ]
    commands[f"grade all {len(course.lessons)} (solutions)"] = grade + ["--submission", str(solved)]
    wall(commands["python -c 'import torch'"])  # warm the file cache
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.repeat):
        for name, cmd in commands.items():
            times[name].append(wall(cmd))
    base = statistics.median(times["python -c 'import torch'"])
    goals = {
        "grade 03 (solution)": 1.5,
        "grade 03 (stub)": 1.5,
        f"grade all {len(course.lessons)} (solutions)": 2.5,
    }
    print(f"{'command':32} {'median s':>9} {'min s':>7} {'x torch':>8} {'goal':>6}")
    missed = []
    for name, values in times.items():
        median = statistics.median(values)
        goal = goals.get(name)
        verdict = "" if goal is None else f"{goal:6.2f}" + ("  MISSED" if median / base > goal else "")
        if goal is not None and median / base > goal:
            missed.append(name)
        print(f"{name:32} {median:9.2f} {min(values):7.2f} {median / base:8.2f} {verdict}")
    if missed:
        print(f"goals missed: {', '.join(missed)}")
        sys.exit(1)


if __name__ == "__main__":
    main()
