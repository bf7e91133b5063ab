"""Grading mutants as `grade-all` grades learners, judging each outcome, and sending the
survivors to the oracle.

Roots. `reference_root` writes the solved course: a folder holding every lesson folder of
course.yml by its folder name (exercises/ overlaid with solutions/, markers stripped), what a
learner who finished everything has. `candidate_root` copies it and puts one mutated file in
place. Grading and the oracle (bench/mutation/oracle: compare(lesson, candidate, reference)) read
the same two roots.

Grading. One autograder.cohort.pool.GradingPool per lesson (its Setup names the lessons every
task grades: the lesson of the mutants), with grade-all's engine call, seed and trust boundary:
each mutant is a Task whose submission and boundary are its candidate root. The pool's
processes stay warm across the lesson's mutants. A short learner timeout (default 30 s of wall
time; a lesson's grading took 1-9 s on a machine at load 11) stops a mutant that loops before the
checks' own CPU budgets (10 s for the first check, then short ones) run out on a loaded machine:
it is recorded as "timeout" and costs the 30 s plus a fresh grading process (measured: a loop in
lesson 03's mask, 42 s of wall time with the pool's start, under 6 s of this process's CPU).

Judging, as tests/lessons/test_variants.py judges a buggy variant: killed = the lesson is not
completed; blame_ok = some failed check names the mutated TODO and every other failed check
belongs to no TODO or says it waits on the mutated one (CheckResult.waits_on). A grading that
did not finish (the pool's "timeout", "crashed", "internal") leaves the lesson uncompleted too:
it counts as killed, with no blame to judge. A survivor (the lesson completed) goes to the
oracle once the lesson's pool has stopped (so the two never compete for the CPU).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from autograder.cohort.store import grading_fingerprint
from autograder.core.manifest import Course, Lesson

from .mutants import Mutant, lesson_texts
from .store import ORACLE_UNAVAILABLE, Store

__all__ = [
    "DEFAULT_LEARNER_TIMEOUT",
    "DEFAULT_SEED",
    "LANG",
    "Settings",
    "candidate_root",
    "judge",
    "reference_root",
    "run",
]

DEFAULT_SEED = 20261202  # the suite's seed (tests/support/project.py): a result replays with it
DEFAULT_LEARNER_TIMEOUT = (
    30.0  # wall seconds per mutant: 3x the slowest grading seen (lesson 05, 8.7 s at load 11)
)
DEFAULT_ORACLE_TIMEOUT = 120.0
LANG = "es"  # grade-all's default language for this course; the judgement does not read messages
TRACEBACK_HEADER = "Traceback (most recent call last)"
KILLED = ("killed", "timeout", "crashed", "internal")  # every status but "survived"


@dataclass(frozen=True)
class Settings:
    jobs: int = 1
    seed: int = DEFAULT_SEED
    learner_timeout: float = DEFAULT_LEARNER_TIMEOUT
    oracle_timeout: float = DEFAULT_ORACLE_TIMEOUT
    oracle: bool = True  # send survivors to the oracle


# --- roots ------------------------------------------------------------------------------------------


def reference_root(course: Course, dest: Path) -> Path:
    """The solved course at `dest` (made afresh): dest/<lesson folder>/... for every lesson."""
    dest = Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    for lesson in course.lessons:
        for rel, text in lesson_texts(course, lesson).items():
            target = dest / lesson.folder / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        for rel, path in _binary_files(course, lesson).items():
            target = dest / lesson.folder / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
    return dest


def candidate_root(reference: Path, mutant: Mutant, course: Course, dest: Path) -> Path:
    """A copy of the reference root at `dest` with the mutant's file in place."""
    dest = Path(dest)
    shutil.copytree(reference, dest)
    folder = course.lesson(mutant.lesson).folder
    (dest / folder / mutant.file).write_text(mutant.text, encoding="utf-8")
    return dest


def _binary_files(course: Course, lesson: Lesson) -> dict[str, Path]:
    """Files of the lesson folder that are not UTF-8 text (lesson_texts leaves them out)."""
    from autograder.course.stubs import lesson_files

    texts = lesson_texts(course, lesson)
    return {rel: path for rel, path in lesson_files(course.root, lesson.folder).items() if rel not in texts}


# --- judging ----------------------------------------------------------------------------------------


def judge(mutant: Mutant, result: dict | None, error: str | None = None) -> dict:
    """The verdict fields of a mutant's line, from grade-all's result JSON (`result`, None when
    grading did not finish: `error` says why)."""
    if result is None:
        return {"status": error or "internal", "completed": False, "failed": [], "blame_ok": None}
    lesson = next(item for item in result["lessons"] if item["id"] == mutant.lesson)
    failed = [c for c in lesson["checks"] if c["status"] in ("failed", "error")]
    caught = [c for c in failed if c["todo"] == mutant.todo]
    misattributed = [
        c for c in failed if c["todo"] not in (mutant.todo, None) and c.get("waits_on") != mutant.todo
    ]
    completed = bool(lesson["completed"])
    return {
        "status": "survived" if completed else "killed",
        "completed": completed,
        "score": lesson["score"],
        "max_score": lesson["max_score"],
        "failed": [
            {"check": c["id"], "todo": c["todo"], "waits_on": c.get("waits_on"), "status": c["status"]}
            for c in failed
        ],
        "blame_ok": None if completed else bool(caught) and not misattributed,
        # a message of the mutated TODO's checks that shows a raw Python traceback
        "raw_traceback": any(TRACEBACK_HEADER in (c.get("message") or "") for c in caught),
    }


def record(mutant: Mutant, fingerprint: str, seed: int, verdict: dict, seconds: float) -> dict:
    """One line of results.jsonl."""
    return {
        "id": mutant.id,
        "lesson": mutant.lesson,
        "todo": mutant.todo,
        "file": mutant.file,
        "operator": mutant.operator,
        "line": mutant.line,
        "before": mutant.before,
        "after": mutant.after,
        "digest": mutant.digest,
        "fingerprint": fingerprint,
        "seed": seed,
        "seconds": round(seconds, 3),
        "oracle": None,
        **verdict,
    }


# --- the run ----------------------------------------------------------------------------------------


def run(
    course: Course,
    mutants: Iterable[Mutant],
    store: Store,
    settings: Settings,
    say: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
) -> dict[str, int]:
    """Grade every mutant not yet judged under the current graders, lesson by lesson, then
    send the survivors without a verdict to the oracle. {"graded", "skipped", "oracle"}: how
    many mutants were graded, found already judged, and judged by the oracle."""
    store.create()
    known = store.load()
    by_lesson: dict[str, list[Mutant]] = {}
    for mutant in mutants:
        by_lesson.setdefault(mutant.lesson, []).append(mutant)
    counts = {"graded": 0, "skipped": 0, "oracle": 0}
    # This run's own scratch: the reference root and the candidate roots. Never the run folder,
    # which two runs (two lessons' helpers) may share.
    scratch = Path(tempfile.mkdtemp(prefix="mutation-"))
    try:
        reference = reference_root(course, scratch / "reference")
        for lesson_id, todo in by_lesson.items():
            lesson = course.lesson(lesson_id)
            fingerprint = grading_fingerprint(course, [lesson], seed=settings.seed, lang=LANG)
            fresh = [m for m in todo if not store.is_current(known.get(m.id), m.digest, fingerprint)]
            counts["skipped"] += len(todo) - len(fresh)
            if fresh:
                counts["graded"] += _grade_lesson(
                    course, lesson, fresh, reference, scratch, store, settings, fingerprint, say
                )
            if settings.oracle:
                known = store.load()
                pending = [
                    m
                    for m in todo
                    if store.is_current(known.get(m.id), m.digest, fingerprint)
                    and store.needs_oracle(known[m.id])
                ]
                for mutant in pending:
                    counts["oracle"] += 1
                    store.append(
                        _with_oracle(known[mutant.id], mutant, course, reference, scratch, settings, say)
                    )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return counts


def _grade_lesson(
    course: Course,
    lesson: Lesson,
    mutants: list[Mutant],
    reference: Path,
    scratch: Path,
    store: Store,
    settings: Settings,
    fingerprint: str,
    say: Callable[[str], None],
) -> int:
    from autograder.cohort.pool import GradingPool, PoolError, Setup, Task, remove_stale_scratch

    remove_stale_scratch()
    by_id = {m.id: m for m in mutants}
    roots = {}
    for index, mutant in enumerate(mutants):
        roots[mutant.id] = candidate_root(reference, mutant, course, scratch / f"m{index}")
    setup = Setup(str(course.root / "course.yml"), (lesson.id,), settings.seed, LANG)
    pool = GradingPool(setup, settings.jobs, settings.learner_timeout)
    tasks = [Task(m.id, str(roots[m.id]), str(roots[m.id])) for m in mutants]
    started = time.monotonic()
    done = 0
    say(f"lesson {lesson.id}: grading {len(mutants)} mutants, {settings.jobs} at a time")
    try:
        for outcome in pool.run(tasks):
            mutant = by_id[outcome.learner]
            result = json.loads(outcome.result_json) if outcome.result_json else None
            verdict = judge(mutant, result, outcome.error)
            if outcome.error:
                verdict["detail"] = outcome.detail[-2000:]
            store.append(record(mutant, fingerprint, settings.seed, verdict, outcome.seconds))
            done += 1
            blame = (
                "" if verdict["blame_ok"] is None else (" blame ok" if verdict["blame_ok"] else " MISBLAMED")
            )
            say(f"  [{done}/{len(mutants)}] {mutant.id} {verdict['status']}{blame} ({outcome.seconds:.1f} s)")
            shutil.rmtree(roots[mutant.id], ignore_errors=True)  # the oracle makes its own copy
    except PoolError as exc:
        say(f"lesson {lesson.id}: the grading processes could not start: {exc}")
        raise
    wall = time.monotonic() - started
    store.log_run({"lesson": lesson.id, "mutants": done, "jobs": settings.jobs, "wall_s": round(wall, 1)})
    rate = 60 * done / wall if wall else 0.0
    say(f"lesson {lesson.id}: {done} mutants in {wall:.0f} s ({rate:.1f} mutants/min)")
    return done


def _with_oracle(
    line: dict,
    mutant: Mutant,
    course: Course,
    reference: Path,
    scratch: Path,
    settings: Settings,
    say: Callable[[str], None],
) -> dict:
    """`line` with the oracle's verdict on the survivor `mutant`."""
    try:
        from bench.mutation.oracle import compare
    except ImportError as exc:
        return {**line, "oracle": {"error": ORACLE_UNAVAILABLE, "detail": str(exc)}}
    root = scratch / f"oracle-{os.getpid()}"
    if root.exists():
        shutil.rmtree(root)
    candidate_root(reference, mutant, course, root)
    started = time.monotonic()
    try:
        verdict = compare(mutant.lesson, root, reference, timeout=settings.oracle_timeout)
        found = {
            "equivalent": bool(verdict.equivalent),
            "probes": int(verdict.probes),
            "difference": verdict.difference,
            "error": verdict.error,
        }
    except Exception as exc:  # noqa: BLE001 - the oracle's failure is this survivor's verdict, not the run's
        found = {"equivalent": False, "probes": 0, "difference": None, "error": f"oracle raised {exc!r}"}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    found["seconds"] = round(time.monotonic() - started, 1)
    what = (
        f"equivalent on {found['probes']} probes"
        if found["equivalent"]
        else f"GAP: {found['difference'] or found['error']}"
    )
    say(f"  oracle {mutant.id}: {what}")
    return {**line, "oracle": found}
