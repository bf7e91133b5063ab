"""CLI of the oracle.

    python3 -m bench.mutation.oracle --lesson 03 --candidate DIR --reference DIR [--timeout S]
        prints the Verdict as JSON (exit 0 when equivalent, 1 when not, 2 on an error);
    python3 -m bench.mutation.oracle --self-check [--lesson 03 ...]
        builds the repository's solved course (exercises/ overlaid with solutions/) in a temporary
        folder and compares every lesson (or the ones named) with itself: each must be
        equivalent; prints the probe count and the seconds of one compare() per lesson;
    python3 -m bench.mutation.oracle --handmade [--lesson 03 ...]
        compares the hand-written mutants of handmade.py with the solved course and prints each
        verdict against the one expected (exit 1 when any disagrees).

Builds the solved course by copying files (the solutions' region markers are comments): no
import of the project.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from bench.mutation.oracle.compare import REPO, compare

LESSONS = ("01", "02", "03", "04", "05", "06")


def solved_course(dest: Path, repo: Path = REPO) -> Path:
    """dest/<NN-slug>/...: every lesson folder of exercises/, its solutions/ files copied over."""
    for folder in sorted((repo / "exercises").iterdir()):
        if not folder.is_dir() or not folder.name[:2].isdigit():
            continue
        shutil.copytree(folder, dest / folder.name, ignore=shutil.ignore_patterns("__pycache__"))
        solved = repo / "solutions" / folder.name
        if solved.is_dir():
            shutil.copytree(
                solved, dest / folder.name, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__")
            )
    return dest


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def self_check(lessons, timeout: float) -> int:
    """Each lesson's reference against itself: two fresh processes, one compare()."""
    failures = 0
    with tempfile.TemporaryDirectory(prefix="oracle-self-") as tmp:
        root = solved_course(Path(tmp))
        print(f"{'lesson':6}  {'equivalent':10}  {'probes':>6}  {'wall s':>6}  {'CPU s (2 processes)':>19}")
        for lesson in lessons:
            start, cpu = time.monotonic(), _children_cpu()
            verdict = compare(lesson, root, root, timeout=timeout)
            took, cpu = time.monotonic() - start, _children_cpu() - cpu
            print(
                f"{lesson:6}  {str(verdict.equivalent):10}  {verdict.probes:>6}  {took:>6.1f}  {cpu:>19.1f}"
            )
            if not verdict.equivalent:
                failures += 1
                print(f"        {verdict.difference or verdict.error}")
    return 1 if failures else 0


def handmade(lessons, timeout: float) -> int:
    from bench.mutation.oracle.handmade import MUTANTS

    wrong = 0
    with tempfile.TemporaryDirectory(prefix="oracle-handmade-") as tmp:
        root = solved_course(Path(tmp) / "reference")
        for i, mutant in enumerate(m for m in MUTANTS if m.lesson in lessons):
            start, cpu = time.monotonic(), _children_cpu()
            candidate = mutant.apply(root, Path(tmp) / f"candidate-{i}")
            verdict = compare(mutant.lesson, candidate, root, timeout=timeout)
            took, cpu = time.monotonic() - start, _children_cpu() - cpu
            got = "error" if verdict.error else ("equivalent" if verdict.equivalent else "differs")
            mark = "ok" if got == mutant.expect else "WRONG"
            wrong += mark != "ok"
            print(
                f"{mark:5} {mutant.name:28} expected {mutant.expect:10} got {got:10} {verdict.probes:>3} probes "
                f"{took:5.1f} s wall {cpu:4.1f} s CPU"
            )
            if verdict.difference or verdict.error:
                print(f"      {verdict.difference or verdict.error}")
            shutil.rmtree(candidate)
    return 1 if wrong else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m bench.mutation.oracle", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--lesson", action="append", help="lesson id (repeatable with --self-check)")
    parser.add_argument("--candidate", type=Path)
    parser.add_argument("--reference", type=Path)
    parser.add_argument("--timeout", type=float, default=60)
    parser.add_argument("--self-check", action="store_true")
    parser.add_argument("--handmade", action="store_true")
    args = parser.parse_args(argv)
    if args.handmade:
        return handmade(args.lesson or LESSONS, args.timeout)
    if args.self_check:
        return self_check(args.lesson or LESSONS, args.timeout)
    if not (args.lesson and len(args.lesson) == 1 and args.candidate and args.reference):
        parser.error("give one --lesson, --candidate and --reference (or --self-check)")
    verdict = compare(args.lesson[0], args.candidate, args.reference, timeout=args.timeout)
    print(json.dumps(asdict(verdict), ensure_ascii=False, indent=2))
    return 0 if verdict.equivalent else (2 if verdict.error else 1)


if __name__ == "__main__":
    sys.exit(main())
