"""Benchmark: wall time of `autograder grade` per lesson and for the whole course, against
`python -c "import torch"`.

Run from the repository root:  python bench/bench_grade.py [--repeat N]
Each command runs as a fresh process, alternating, so machine noise hits all of them alike;
the medians are reported with their ratio to the torch import. Every lesson in course.yml is
graded on its solution; lesson 03 also on its stub; and the whole course on the solutions (a
folder of NN-slug/ copies with the markers stripped). Goals on a 2-core machine: one lesson at
most 2.5x the torch import, the whole course under 60 s.
This is a measurement, never a test: shared machines are too noisy for timed assertions.
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
    """tmp/solved/NN-slug/: every lesson's solution files with the region markers stripped."""
    from autograder.stubs import strip_markers

    solved = tmp / "solved"
    for lesson in course.lessons:
        shutil.copytree(ROOT / "solutions" / lesson.folder, solved / lesson.folder)
        for path in (solved / lesson.folder).glob("*"):
            if path.suffix in (".py", ".yml"):
                path.write_text(strip_markers(path.read_text(encoding="utf-8"), path.name), encoding="utf-8")
    return solved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from autograder.manifest import load_course
    from autograder.stubs import strip_markers

    course = load_course(ROOT / "course.yml")
    tmp = Path(tempfile.mkdtemp())
    out = tmp / "r.json"
    grade = [sys.executable, "-m", "autograder", "grade", "--format", "json", "--output", str(out)]
    solved = solved_copy(course, tmp)
    commands = {"python -c 'import torch'": [sys.executable, "-c", "import torch"]}
    for lesson in course.lessons:
        commands[f"grade {lesson.id} (solution)"] = grade + [lesson.id, "--submission", str(solved / lesson.folder)]
    commands["grade 03 (stub)"] = grade + ["03", "--submission", str(ROOT / "exercises" / "03-atencion-causal")]
    commands[f"grade all {len(course.lessons)} (solutions)"] = grade + ["--submission", str(solved)]
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
