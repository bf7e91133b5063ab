"""Fairness sweep: grade the solutions under many grading seeds and list every check that did
not pass. A correct submission must get full marks whatever weights and inputs a seed draws,
so any line this prints is a grader bug (a tolerance too tight for float32, a near-tie, an
input that makes the reference ill-conditioned).

Run from the repository root:  python bench/sweep_seeds.py [--seeds N] [--lesson 06] [--first S]
Seeds are S, S+1, ... S+N-1, used as `autograder grade --seed` uses them, so a failure is
replayed with `autograder grade NN --submission solutions/NN-slug --seed SEED`. Exit status 1
when any check of a solution failed. Grading runs in this process (one torch import for all
seeds): about 2 s per seed of the whole course on 2 cores. A maintainer runs it after touching
a grader or a tolerance; the suite replays the seeds it found.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def grade(course, lessons, seed: int):
    """One grading of the solutions, in this process (the workers are forked per lesson as
    always; only the CLI's start and torch import are shared across seeds)."""
    from autograder.engine import grading

    try:
        result = grading.grade(course, lessons, ROOT / "solutions", seed=seed)
    except Exception as err:  # noqa: BLE001 - a grader crash is what this sweep looks for
        return f"{type(err).__name__}: {err}"
    return result


def unfair(result) -> list[str]:
    """One line per check of a solution that neither passed nor was skipped."""
    from autograder.core import i18n
    from autograder.core.results import Status

    if isinstance(result, str):
        return [f"grading crashed: {result}"]
    return [f"{lesson.id} {check.id} {check.status.value}: "
            + " ".join(i18n.feedback_text(check.feedback, "en").split())[:600]
            for lesson in result.lessons for check in lesson.checks
            if check.status not in (Status.PASSED, Status.SKIPPED)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=50, help="how many seeds (default 50)")
    parser.add_argument("--first", type=int, default=1, help="the first seed (default 1)")
    parser.add_argument("--lesson", help="one lesson id (01..06); default the whole course")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from autograder.core.manifest import load_course

    course = load_course(ROOT / "course.yml")
    lessons = [course.lesson(args.lesson)] if args.lesson else list(course.lessons)
    failures = 0
    start = time.perf_counter()
    for seed in range(args.first, args.first + args.seeds):
        for line in unfair(grade(course, lessons, seed)):
            failures += 1
            print(f"seed {seed}: {line}", flush=True)
    took = time.perf_counter() - start
    what = f"lesson {args.lesson}" if args.lesson else "the course"
    print(f"{args.seeds} seeds of {what} on the solutions in {took:.0f} s: "
          f"{failures} check(s) of a correct submission did not pass")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
