"""`python3 -m bench.mutation`: mutation-test the lessons' hidden graders (run from the repository root).

    python3 -m bench.mutation [--lesson ID] [--todo ID] [--shard I/N] [--sample K] [--jobs N]
                              [--run DIR] [--report] [--list] [--out FILE] [--seed N]
                              [--learner-timeout S] [--no-oracle]

Without --report: make the mutants of the chosen lessons (all by default; --todo one TODO,
--sample K at most K per TODO spread over the operators, --shard I/N a stable I-th of them),
grade those not yet judged under the current graders through grade-all's warm pool (--jobs
processes), send the survivors to the oracle, then print the report and write it to
DIR/report.txt (and to --out FILE). The run folder (default bench/results/mutation-run) keeps
every result: the same command again resumes, and skips what is done.

--report prints the tables from the run folder alone (filtered by --lesson/--todo when given),
--list prints the chosen mutants (id, line, before -> after) without grading anything.

Exit status: 0 when every chosen mutant has a result, 1 when the grading processes could not
start, 2 for bad options, 130 when interrupted (the same command resumes).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from autograder.cohort.store import grading_fingerprint
from autograder.core.manifest import load_course

from . import report
from .mutants import generate, in_shard, sample
from .runner import DEFAULT_LEARNER_TIMEOUT, DEFAULT_SEED, LANG, Settings, run
from .store import DEFAULT_RUN, Store

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    course = load_course(ROOT / "course.yml")
    try:
        lessons, todo = _selection(course, args)
        shard = _shard(args.shard)
    except ValueError as exc:
        print(f"bench.mutation: {exc}", file=sys.stderr)
        return 2
    store = Store(args.run)

    if args.report:
        return _print_report(course, store, lessons, todo, args)

    mutants = [m for lesson in lessons for m in generate(course, lesson, todo)]
    if args.sample is not None:
        mutants = sample(mutants, args.sample)
    if shard is not None:
        mutants = [m for m in mutants if in_shard(m, *shard)]
    if args.list:
        for m in mutants:
            change = f"{' '.join(m.before.split())!r} -> {' '.join(m.after.split())!r}"
            print(f"{m.id}  {m.file}:{m.line}  {change}")
        print(f"{len(mutants)} mutants", file=sys.stderr)
        return 0

    settings = Settings(
        jobs=args.jobs or _default_jobs(),
        seed=args.seed,
        learner_timeout=args.learner_timeout,
        oracle=not args.no_oracle,
    )
    print(
        f"bench.mutation: {len(mutants)} mutants of lesson(s) {', '.join(lessons)}"
        + (f", TODO {todo}" if todo else "")
        + f"; run folder {args.run}",
        file=sys.stderr,
    )
    started = time.monotonic()
    try:
        counts = run(course, mutants, store, settings)
    except KeyboardInterrupt:
        print(
            f"bench.mutation: interrupted; what was judged is in {args.run}: the same command resumes",
            file=sys.stderr,
        )
        return 130
    except Exception as exc:  # noqa: BLE001 - the pool's PoolError and the like: say it, keep what was stored
        print(f"bench.mutation: stopped: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(
        f"bench.mutation: {counts['graded']} graded, {counts['skipped']} already judged, "
        f"{counts['oracle']} sent to the oracle, in {time.monotonic() - started:.0f} s",
        file=sys.stderr,
    )
    return _print_report(course, store, lessons, todo, args, ids={m.id for m in mutants})


def _print_report(course, store: Store, lessons: list[str], todo: str | None, args, ids=None) -> int:
    records = store.load()
    chosen = {
        ident: r
        for ident, r in records.items()
        if r.get("lesson") in lessons
        and (todo is None or r.get("todo") == todo)
        and (ids is None or ident in ids)
    }
    fingerprints = {
        lesson: grading_fingerprint(course, [course.lesson(lesson)], seed=args.seed, lang=LANG)
        for lesson in lessons
    }
    stale = {
        ident for ident, r in chosen.items() if r.get("fingerprint") != fingerprints.get(r.get("lesson"))
    }
    title = (
        f"Mutation testing of the graders: python3 -m bench.mutation {' '.join(sys.argv[1:])}".rstrip()
        + f"\n(run folder {_shown(store.root)}, seed {args.seed}, {time.strftime('%Y-%m-%d %H:%M')})"
    )
    todos = [f"{lesson.id} {t.id}" for lesson in course.lessons for t in lesson.todos]
    order = {key: index for index, key in enumerate(todos)}  # the per-TODO table in course order
    text = report.render(
        chosen,
        title=title,
        stale=stale,
        run_log=store.run_log(),
        skipped_lines=store.skipped_lines,
        todo_order=order,
    )
    print(text)
    if store.root.is_dir():
        (store.root / "report.txt").write_text(text, encoding="utf-8")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    return 0


def _selection(course, args) -> tuple[list[str], str | None]:
    known = [lesson.id for lesson in course.lessons]
    lessons = args.lesson or known
    for lesson in lessons:
        if lesson not in known:
            raise ValueError(f"no lesson {lesson!r} in course.yml (lessons: {', '.join(known)})")
    todo = args.todo
    if todo is not None:
        owners = [lesson for lesson in lessons if todo in {t.id for t in course.lesson(lesson).todos}]
        if not owners:
            raise ValueError(f"no TODO {todo!r} in lesson(s) {', '.join(lessons)}")
        lessons = owners
    return lessons, todo


def _shard(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit() and 1 <= int(index) <= int(count)):
        raise ValueError(f"--shard {text!r}: expected I/N with 1 <= I <= N")
    return int(index), int(count)


def _default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def _shown(path: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python3 -m bench.mutation",
        description="Mutation-test the lessons' hidden graders (issue 31).",
    )
    parser.add_argument(
        "--lesson", action="append", metavar="ID", help="a lesson id (repeatable; default: all)"
    )
    parser.add_argument("--todo", metavar="ID", help="only this TODO's mutants")
    parser.add_argument("--shard", metavar="I/N", help="a stable I-th of N parts of the mutants")
    parser.add_argument(
        "--sample", type=int, metavar="K", help="at most K mutants per TODO, spread over operators"
    )
    parser.add_argument("--jobs", type=int, metavar="N", help="grading processes (default: the cores)")
    parser.add_argument("--run", type=Path, default=DEFAULT_RUN, metavar="DIR", help="the run folder")
    parser.add_argument("--report", action="store_true", help="print the tables from the run folder only")
    parser.add_argument("--list", action="store_true", help="print the chosen mutants, grade nothing")
    parser.add_argument("--out", type=Path, metavar="FILE", help="also write the report to FILE")
    parser.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help=f"grading seed (default {DEFAULT_SEED})"
    )
    parser.add_argument(
        "--learner-timeout",
        type=float,
        default=DEFAULT_LEARNER_TIMEOUT,
        metavar="S",
        help=f"wall seconds one mutant's grading may take (default {DEFAULT_LEARNER_TIMEOUT:g})",
    )
    parser.add_argument("--no-oracle", action="store_true", help="leave survivors unjudged")
    return parser


if __name__ == "__main__":
    sys.exit(main())
