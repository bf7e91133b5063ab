"""Benchmark: throughput of grading a cohort, in learners per minute, three ways side by side.

Run from the repository root:  python bench/bench_cohort.py [--learners 40] [--jobs 2] [--only-grade-all]

The cohort is N lesson-03 submissions: the solution, the correct-but-different variants, the
realistic buggy variants and the stub, in turn (tests/lessons/lesson03_variants.py), so that the graders
take every path a real cohort takes. The same code is graded

  (a) by `autograder grade-all --jobs J` (warm worker pool: torch is imported once per run),
  (b) by one fresh `autograder grade 03` process per learner, J at a time,
  (c) by real `nbgrader autograde` of the same code as notebooks of the Jupyter edition
      (`autograder notebooks`, `nbgrader generate_assignment`, each learner's cells filled in),

one after the other in one run, and each way's points are compared with the others so that a
fast wrong answer cannot win. Goal: (a) at least 4x (c). This is a measurement, never a test:
shared machines are too noisy for timed assertions.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def cohort(size: int) -> dict[str, dict[str, str]]:
    """{learner id: files of exercises/03-.../}, cycling through the known kinds of submission."""
    from lessons.lesson03_variants import BUGGY, CORRECT
    from support.cohort_factory import stub_files
    from support.variants import solution_files

    from autograder.core.manifest import load_course

    lesson = load_course(ROOT / "course.yml").lesson("03")
    solved = solution_files(lesson)
    kinds = [("solucion", solved), ("stub", stub_files(lesson))]
    kinds += [(f"ok-{v.name}", {**solved, **v.apply(solved)}) for v in CORRECT]
    kinds += [(f"bug-{v.name}", {**solved, **v.apply(solved)}) for v in BUGGY]
    return {f"{i:02d}-{kinds[i % len(kinds)][0]}"[:60]: kinds[i % len(kinds)][1] for i in range(size)}


def write(folder: Path, files: dict[str, str]) -> None:
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")


def run(cmd: list[str], cwd: Path = ROOT) -> None:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")


def points_of(result: dict) -> float:
    return sum(check["score"] for lesson in result["lessons"] for check in lesson["checks"])


def way_a(learners: dict, work: Path, jobs: int, folder: str) -> tuple[float, dict[str, float]]:
    submissions = work / "a-entregas"
    for learner, files in learners.items():
        write(submissions / learner / "exercises" / folder, files)
    out = work / "a-notas"
    start = time.perf_counter()
    run(
        [
            sys.executable,
            "-m",
            "autograder",
            "grade-all",
            str(submissions),
            "--out",
            str(out),
            "--jobs",
            str(jobs),
            "--lessons",
            "03",
        ]
    )
    seconds = time.perf_counter() - start
    return seconds, {
        p.stem: points_of(json.loads(p.read_text(encoding="utf-8"))) for p in (out / "results").glob("*.json")
    }


def way_b(learners: dict, work: Path, jobs: int, folder: str) -> tuple[float, dict[str, float]]:
    for learner, files in learners.items():
        write(work / "b" / learner / folder, files)

    def grade(learner: str) -> float:
        output = work / "b" / f"{learner}.json"
        run(
            [
                sys.executable,
                "-m",
                "autograder",
                "grade",
                "03",
                "--submission",
                str(work / "b" / learner / folder),
                "--format",
                "json",
                "--output",
                str(output),
            ]
        )
        return points_of(json.loads(output.read_text(encoding="utf-8")))

    start = time.perf_counter()
    with ThreadPoolExecutor(jobs) as pool:
        points = dict(zip(learners, pool.map(grade, learners)))
    return time.perf_counter() - start, points


def way_c(learners: dict, work: Path, folder: str) -> tuple[float, dict[str, float]]:
    import nbformat
    from nbgrader.api import Gradebook

    from autograder.course.notebooks.sources import fill_cells

    course_dir = work / "c-curso"
    run([sys.executable, "-m", "autograder", "notebooks", "--out", str(course_dir), "03"])
    run(["nbgrader", "generate_assignment", folder], cwd=course_dir)
    release = nbformat.read(course_dir / "release" / folder / f"{folder}.ipynb", as_version=4)
    for learner, files in learners.items():
        notebook = nbformat.from_dict(json.loads(json.dumps(release)))
        fill_cells(notebook, files)
        target = course_dir / "submitted" / learner / folder
        target.mkdir(parents=True)
        nbformat.write(notebook, target / f"{folder}.ipynb")
    start = time.perf_counter()
    run(["nbgrader", "autograde", folder], cwd=course_dir)
    seconds = time.perf_counter() - start
    with Gradebook(f"sqlite:///{course_dir / 'gradebook.db'}") as gradebook:
        points = {
            learner: float(gradebook.find_submission_notebook(folder, folder, learner).score)
            for learner in learners
        }
    return seconds, points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learners", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--skip-nbgrader", action="store_true", help="only (a) and (b)")
    parser.add_argument("--only-grade-all", action="store_true", help="only (a): grade-all's own throughput")
    args = parser.parse_args()
    from autograder.core.manifest import load_course

    folder = load_course(ROOT / "course.yml").lesson("03").folder
    learners = cohort(args.learners)
    work = Path(tempfile.mkdtemp(prefix="bench-cohort-"))
    try:
        rows = {f"(a) grade-all --jobs {args.jobs}": way_a(learners, work, args.jobs, folder)}
        if not args.only_grade_all:
            rows[f"(b) one autograder grade per learner, {args.jobs} at a time"] = way_b(
                learners, work, args.jobs, folder
            )
        if not args.skip_nbgrader and not args.only_grade_all:
            rows["(c) nbgrader autograde (one process)"] = way_c(learners, work, folder)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{args.learners} learners, lesson 03, {args.jobs} jobs")
    print(f"{'way':56} {'s':>7} {'learners/min':>13}")
    for name, (seconds, _) in rows.items():
        print(f"{name:56} {seconds:7.1f} {60 * len(learners) / seconds:13.1f}")
    reference = rows[next(iter(rows))][1]
    for name, (_, points) in rows.items():
        differ = sorted(learner for learner in learners if points.get(learner) != reference.get(learner))
        print(f"{name[:3]} points equal to (a): {'yes' if not differ else 'NO, ' + ', '.join(differ)}")
    if len(rows) == 3:
        (a, _), (c, _) = rows[next(iter(rows))], rows["(c) nbgrader autograde (one process)"]
        print(f"(a) / (c) throughput: {c / a:.1f}x (goal >= 4x)")


if __name__ == "__main__":
    main()
