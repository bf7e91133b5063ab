"""Fairness sweep: grade the solutions under many grading seeds and list every check that did
not pass. A correct submission must get full marks whatever weights and inputs a seed draws,
so any line this prints is a grader bug (a tolerance too tight for float32, a near-tie, an
input that makes the reference ill-conditioned).

Run from the repository root:  python bench/sweep_seeds.py [--seeds N] [--lesson 06] [--first S] [--variants]
With --variants, every correct-but-different variant of tests/lessons/lessonNN_variants.py (einsum,
an explicit softmax, -1e9 for -inf...) is graded instead: real-world correct code takes other
float32 paths than the solution, and must get full marks under every seed too. With --buggy,
every buggy variant must be caught, by its own TODO, under every seed (the suite proves it
under one fixed seed; learners are graded under any).
Seeds are S, S+1, ... S+N-1, used as `autograder grade --seed` uses them, so a failure is
replayed with `autograder grade NN --submission solutions/NN-slug --seed SEED`. Exit status 1
when any check of a solution failed. Grading runs in this process (one torch import for all
seeds): about 2 s per seed of the whole course on 2 cores. A maintainer runs it after touching
a grader or a tolerance; the suite replays the seeds it found.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def grade(course, lessons, seed: int, submission: Path | None = None):
    """One grading of the solutions, in this process (the workers are forked per lesson as
    always; only the CLI's start and torch import are shared across seeds)."""
    from autograder.engine import grading

    try:
        result = grading.grade(course, lessons, submission or ROOT / "solutions", seed=seed)
    except Exception as err:  # noqa: BLE001 - a grader crash is what this sweep looks for
        return f"{type(err).__name__}: {err}"
    return result


def unfair(result) -> list[str]:
    """One line per check of a solution that neither passed nor was skipped."""
    from autograder.core import i18n
    from autograder.core.results import Status

    if isinstance(result, str):
        return [f"grading crashed: {result}"]
    return [
        f"{lesson.id} {check.id} {check.status.value}: "
        + " ".join(i18n.feedback_text(check.feedback, "en").split())[:600]
        for lesson in result.lessons
        for check in lesson.checks
        if check.status not in (Status.PASSED, Status.SKIPPED)
    ]


def variants(course, lessons, scratch: Path, kind: str) -> list[tuple[str, object, Path, object]]:
    """(name, lesson, folder, variant) for each variant of tests/lessons/lessonNN_variants.py's `kind`
    list (CORRECT or BUGGY): the solution's files (markers stripped) with its substitutions."""
    import importlib

    sys.path.insert(0, str(ROOT / "tests"))
    from support.variants import solution_files

    found = []
    for lesson in lessons:
        files = solution_files(lesson)
        for variant in getattr(importlib.import_module(f"lessons.lesson{lesson.id}_variants"), kind):
            target = scratch / f"{lesson.id}-{variant.name}"
            target.mkdir(parents=True)
            for name, text in {**files, **variant.apply(files)}.items():
                (target / name).write_text(text, encoding="utf-8")
            found.append((f"{lesson.id}:{variant.name}", lesson, target, variant))
    return found


def escaped(result, variant) -> list[str]:
    """What tests/lessons/test_variants.py asserts of a buggy variant, under this seed: the lesson is
    not completed, a failed check names the variant's TODO, and no check of another TODO fails
    unless it waits on that one."""
    from autograder.core.results import Status

    if isinstance(result, str):
        return [f"grading crashed: {result}"]
    lesson = result.lessons[0]
    failed = [c for c in lesson.checks if c.status in (Status.FAILED, Status.ERROR)]
    if lesson.completed:
        return ["escaped: the lesson was completed"]
    problems = []
    if not any(variant.todo is None or c.todo == variant.todo for c in failed):
        problems.append(f"no failed check names TODO [{variant.todo}]: " + ", ".join(c.id for c in failed))
    wrong = [
        f"{c.id} [{c.todo}]"
        for c in failed
        if c.todo not in (variant.todo, None) and (variant.todo is None or c.waits_on != variant.todo)
    ]
    if wrong:
        problems.append("also fails checks of other TODOs: " + ", ".join(wrong))
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=50, help="how many seeds (default 50)")
    parser.add_argument("--first", type=int, default=1, help="the first seed (default 1)")
    parser.add_argument("--lesson", help="one lesson id (01..06); default the whole course")
    parser.add_argument(
        "--variants",
        action="store_true",
        help="grade every correct-but-different variant of tests/lessons/lessonNN_variants.py "
        "instead of the solutions (each lesson alone)",
    )
    parser.add_argument(
        "--buggy",
        action="store_true",
        help="grade every buggy variant instead: each must be caught, by its TODO, under every seed",
    )
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from autograder.core.manifest import load_course

    course = load_course(ROOT / "course.yml")
    lessons = [course.lesson(args.lesson)] if args.lesson else list(course.lessons)
    failures = 0
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="sweep-") as scratch:
        if args.variants or args.buggy:
            runs = [
                (name, [lesson], folder, variant)
                for name, lesson, folder, variant in variants(
                    course, lessons, Path(scratch), "BUGGY" if args.buggy else "CORRECT"
                )
            ]
        else:
            runs = [("solutions", lessons, None, None)]
        for seed in range(args.first, args.first + args.seeds):
            for name, graded, folder, variant in runs:
                result = grade(course, graded, seed, folder)
                for line in escaped(result, variant) if args.buggy else unfair(result):
                    failures += 1
                    print(f"seed {seed} {name}: {line}", flush=True)
    took = time.perf_counter() - start
    what = (f"lesson {args.lesson}" if args.lesson else "the course") + (
        f" ({len(runs)} buggy variants)"
        if args.buggy
        else f" ({len(runs)} correct variants)"
        if args.variants
        else " on the solutions"
    )
    verdict = (
        "problem(s) with a buggy variant" if args.buggy else "check(s) of a correct submission did not pass"
    )
    print(f"{args.seeds} seeds of {what} in {took:.0f} s: {failures} {verdict}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
