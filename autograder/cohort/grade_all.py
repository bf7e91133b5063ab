"""`autograder grade-all`: an instructor grades a whole cohort.

    autograder grade-all SUBMISSIONS --out DIR [--jobs N] [--shard I/N] [--roster FILE]
                         [--allow-scheme SCHEME ...] [--allow-host HOST ...]
                         [--lessons LESSON ...] [--seed N] [--lang es|en] [--learner-timeout S]
    autograder grade-all --merge DIR [DIR ...] --out DIR

SUBMISSIONS holds one folder per learner: a clone of their repository (with exercises/ inside)
or just its exercises/. With --roster (autograder/cohort/roster.py) the repositories are cloned or
updated there first, from the schemes and hosts --allow-scheme and --allow-host allow (default:
https on github.com). Every learner is graded with the same engine call, trust boundary and seed
as `autograder grade --submission <their exercises> --seed <the run's seed>` (nothing below the
learner's folder that is a symlink is followed, not even their exercises/), by N long-lived
grading processes (autograder/cohort/pool.py). DIR receives one result per learner, the nbgrader
gradebook and CSVs (autograder/cohort/gradebook.py) and the cohort report (autograder/cohort/report.py); see
autograder/cohort/store.py for its layout and for how an interrupted run resumes.

Submission time: grade-all's own clock, never the learner's. DIR/observations.jsonl
(autograder/cohort/observations.py), kept across runs, holds when grade-all first saw each
learner's submission: a commit it fetched from the roster's repository (the moment that fetch
finished), or, for a folder it did not fetch (no roster: a folder without git, or a clone made by
someone else), the hash of the files it graded (the moment it read them). A submission seen
before keeps its first time, whatever run sees it again; a new commit or new files get the time
they were first seen. Each learner's record, grades.csv, cohort.csv and the gradebook are
stamped with the first sighting of what was graded; a commit's dates and files' times are never
read. A line of the log that cannot be read is reported (file and line) and skipped.

--shard I/N grades a stable I-th of N parts of the learners (by a hash of their id), so N
machines can share a cohort; --merge (autograder/cohort/merge.py) then combines the N output
folders into one, after checking that they are the N shards of the same run (same seed, lessons,
graders and engine). Each shard keeps its own observation log; --merge appends to the merged
folder's log what the shards saw and it did not (the earliest time of each sighting wins) and
stamps the merged records from it.

Exit status: 0 when every learner of the run has a result (a learner whose grading failed has
an error result, listed in the report); 2 for unusable input (roster, folders, shards); 1 for
an internal failure; 130 when interrupted with Ctrl-C (SIGINT), 143 with SIGTERM (a scheduler's
stop): what was graded is kept, and grade-all says so and that running the same command again
resumes.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import os
import random
import re
import signal
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

from autograder.cohort import observations
from autograder.cohort.merge import merge
from autograder.cohort.observations import ObservationLog, Sighting
from autograder.cohort.outputs import Say, error_result_json, load_log, publish, report_failed_outputs
from autograder.cohort.roster import (
    Allowed,
    Learner,
    add_allow_options,
    fetch,
    learners_in,
    read_roster,
)
from autograder.cohort.store import (
    RESULTS,
    BatchError,
    Record,
    Store,
    content_hash,
    grading_fingerprint,
    learner_key,
)
from autograder.core import i18n
from autograder.core.manifest import Course, Lesson
from autograder.sandbox import cpu_clock

WORKER_START_ALLOWANCE = 60.0  # seconds per lesson on top of its checks' timeouts
# A host name or an IP address, nothing more: no scheme, user, port or path.
_HOST = re.compile(r"[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?|\[?[0-9a-f:.]+\]?")


def add_parser(subparsers) -> None:
    from autograder.core.results import message  # help texts are catalog messages (messages/<lang>/cli.yml)

    parser = subparsers.add_parser(
        "grade-all", help=message("cli.grade_all.help"), description=message("cli.grade_all.description")
    )
    parser.add_argument(
        "submissions",
        nargs="?",
        type=Path,
        metavar=message("cli.metavar.submissions"),
        help=message("cli.grade_all.submissions"),
    )
    parser.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar=message("cli.metavar.dir"),
        help=message("cli.grade_all.out"),
    )
    parser.add_argument("--jobs", type=int, default=None, metavar="N", help=message("cli.grade_all.jobs"))
    parser.add_argument("--shard", default=None, metavar="I/N", help=message("cli.grade_all.shard"))
    parser.add_argument(
        "--roster",
        type=Path,
        default=None,
        metavar=message("cli.metavar.file"),
        help=message("cli.grade_all.roster"),
    )
    add_allow_options(parser, message("cli.grade_all.allow_scheme"), message("cli.grade_all.allow_host"))
    parser.add_argument(
        "--allow-unisolated", action="store_true", help=message("cli.grade_all.allow_unisolated")
    )
    parser.add_argument(
        "--lessons",
        nargs="+",
        default=None,
        metavar=message("cli.metavar.lesson"),
        help=message("cli.grade_all.lessons"),
    )
    parser.add_argument("--seed", type=int, default=None, help=message("cli.grade_all.seed"))
    parser.add_argument("--lang", choices=i18n.LANGUAGES, default=None, help=message("cli.grade_all.lang"))
    parser.add_argument(
        "--learner-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help=message("cli.grade_all.learner_timeout"),
    )
    parser.add_argument(
        "--merge",
        nargs="+",
        type=Path,
        default=None,
        metavar=message("cli.metavar.dir"),
        help=message("cli.grade_all.merge"),
    )


def main(course: Course, args: argparse.Namespace) -> int:
    lang = args.lang or course.language
    try:
        with _stopped_by_sigterm():
            if args.merge:
                return merge(course, args, lang)
            return _grade_all(course, args, lang)
    except BatchError as exc:
        print(f"autograder grade-all: {i18n.localize(exc.text, lang)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        return _interrupted(args, lang, getattr(exc, "signum", signal.SIGINT))


class Interrupted(KeyboardInterrupt):
    """SIGTERM, met like Ctrl-C: every cleanup that runs for Ctrl-C (the grading processes
    stopped, the progress bar closed) runs for it too."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _stopped_by_sigterm():
    """SIGTERM raises Interrupted in this (the main) thread while grade-all runs, instead of
    ending the process without a word (Python's default)."""

    def stop(signum, frame) -> None:
        raise Interrupted(signum)

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread (a test calling main()): nothing to catch
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupted(args: argparse.Namespace, lang: str, signum: int) -> int:
    """What an interrupted run says: how many results it keeps, and that the same command
    resumes (autograder/cohort/store.py: a learner whose result is whole is not graded again)."""
    results = Path(args.out) / RESULTS if getattr(args, "out", None) else None
    kept = sum(1 for _ in results.glob("*.json")) if results is not None and results.is_dir() else 0
    Say(lang).line(
        "batch.interrupted",
        signal=signal.Signals(signum).name,
        out=str(args.out),
        kept=kept,
    )
    return 128 + int(signum)


# ------------------------------------------------------------------------------ options


def parse_shard(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit() and 1 <= int(index) <= int(count)):
        raise BatchError("batch.bad_shard", shard=text)
    return int(index), int(count)


def shard_of(learner: str, count: int) -> int:
    """The shard (1..count) a learner belongs to: a hash of the id alone, so that every machine
    computes the same partition from the same roster or folder, whatever else is in it."""
    digest = hashlib.sha256(learner.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


def default_learner_timeout(lessons: list[Lesson]) -> float:
    # Each check may run up to its wall-clock bound (a loaded machine stretches checks, and
    # the budgets are CPU seconds): the learner's whole grading may take their sum.
    return sum(
        sum(cpu_clock.wall_bound(spec.timeout) for spec in lesson.checks) + WORKER_START_ALLOWANCE
        for lesson in lessons
    )


def _default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def _check_inputs(args: argparse.Namespace) -> None:
    if args.submissions is None:
        raise BatchError("batch.no_submissions")
    if args.jobs is not None and args.jobs < 1:
        raise BatchError("batch.bad_jobs", jobs=args.jobs)
    if args.learner_timeout is not None and args.learner_timeout <= 0:
        raise BatchError("batch.bad_timeout", seconds=args.learner_timeout)
    if args.roster is None and not args.submissions.is_dir():
        raise BatchError("batch.not_a_folder", folder=str(args.submissions))
    if args.roster is not None and not args.roster.is_file():
        raise BatchError("batch.roster_unreadable", where=str(args.roster), detail="not a file")
    out, submissions = args.out.resolve(), args.submissions.resolve()
    if out == submissions or submissions in out.parents:
        raise BatchError("batch.out_inside", out=str(args.out), submissions=str(args.submissions))
    if args.out.exists() and not args.out.is_dir():
        raise BatchError("batch.not_a_folder", folder=str(args.out))
    if importlib.util.find_spec("nbgrader") is None:
        raise BatchError("batch.nbgrader_missing")
    allowed(args)
    _check_isolation(args)


def _check_isolation(args: argparse.Namespace) -> None:
    """A cohort's learners can attack each other and the instructor: refuse to run their code
    unwalled unless told to (--allow-unisolated)."""
    from autograder.sandbox import isolation

    walls = isolation.probe()
    if not walls["official"] and not args.allow_unisolated:
        raise BatchError(
            "batch.unisolated",
            missing=", ".join(walls["missing"]) or "-",
            landlock=walls.get("landlock_abi", 0),
        )


def allowed(args: argparse.Namespace) -> Allowed:
    """Where the roster's repositories may be, from --allow-scheme and --allow-host."""
    default = Allowed()
    hosts = []
    for host in args.allow_host or default.hosts:
        if not _HOST.fullmatch(host.lower()):
            raise BatchError("batch.bad_host", host=host)
        hosts.append(host.lower().strip("[]"))  # compared as url_origin gives it: [::1] is ::1
    return Allowed(tuple(dict.fromkeys(args.allow_scheme or default.schemes)), tuple(dict.fromkeys(hosts)))


# ------------------------------------------------------------------------------ grading


def _grade_all(course: Course, args: argparse.Namespace, lang: str) -> int:
    _check_inputs(args)
    shard = parse_shard(args.shard)
    lessons = [course.lesson(key) for key in args.lessons] if args.lessons else list(course.lessons)
    say = Say(lang)
    learners = _learners(args, say)  # reads the roster or the folder; nothing is written before
    if shard is not None:
        learners = [learner for learner in learners if shard_of(learner.id, shard[1]) == shard[0]]
    store = Store(args.out)
    store.root.mkdir(parents=True, exist_ok=True)
    store.remove_leftovers()
    log = load_log(store.root, say)
    seed = args.seed if args.seed is not None else (store.read_run() or {}).get("seed")
    if not isinstance(seed, int):
        seed = random.SystemRandom().randrange(2**31)
    fetched: dict[str, datetime] = {}
    if args.roster is not None and learners:
        args.submissions.mkdir(parents=True, exist_ok=True)
        say.line("batch.fetching", n=len(learners))
        fetched = _fetch(learners, jobs=min(8, args.jobs or _default_jobs()), allowed=allowed(args))
    run = {
        "course": course.name,
        "language": lang,
        "seed": seed,
        "lessons": [lesson.id for lesson in lessons],
        "fingerprint": grading_fingerprint(course, lessons, seed=seed, lang=lang),
        "shard": None if shard is None else f"{shard[0]}/{shard[1]}",
        "learners": [learner.id for learner in learners],
    }
    store.write_run(run)

    todo, unchanged, failed = _triage(course, lessons, learners, store, run, say, log, fetched)
    jobs = min(args.jobs or _default_jobs(), max(1, len(todo)))
    say.line("batch.start", learners=len(learners), todo=len(todo), same=unchanged, jobs=jobs, seed=seed)
    counts = _grade(course, lessons, todo, store, run, jobs, args.learner_timeout, say)
    if counts is None:
        return 1
    failures = publish(course, store, run, lang)
    say.out("batch.summary", graded=counts[0], same=unchanged, errors=failed + counts[1], out=str(args.out))
    return report_failed_outputs(say, store, failures)


def _triage(
    course: Course,
    lessons: list[Lesson],
    learners: list[Learner],
    store: Store,
    run: dict,
    say: Say,
    log: ObservationLog,
    fetched: dict[str, datetime],
) -> tuple[dict[str, tuple[Record, Learner]], int, int]:
    """Sort the learners out: {id: (record, learner)} of those to grade, how many are unchanged since a
    previous run (their result stays), how many cannot be graded (an error result now). Each
    learner's submission is looked up in the observation `log` (and logged when new) on the way:
    `fetched` has the time each roster learner's fetch finished."""
    todo, unchanged, failed = {}, 0, 0
    for learner in learners:
        record = Record(
            learner.id, "", "graded", learner.first_name, learner.last_name, learner.email, learner.commit
        )
        if learner.problem is not None:
            kind, detail = learner.problem
            record.status, record.error, record.detail = "error", kind, detail
            store.save(
                record,
                error_result_json(course, lessons, run["language"], run["seed"], record.error_reason()),
            )
            say.line(f"batch.problem_{kind}", id=learner.id, detail=detail)
            failed += 1
            continue
        try:
            content = content_hash(course, lessons, learner.exercises, boundary=learner.folder)
        except OSError as exc:  # an unreadable folder or an odd file: this learner only
            record.status, record.error, record.detail = "error", "unreadable", f"{type(exc).__name__}: {exc}"
            store.save(
                record,
                error_result_json(course, lessons, run["language"], run["seed"], record.error_reason()),
            )
            say.line("batch.problem_unreadable", id=learner.id, detail=record.detail)
            failed += 1
            continue
        sighting = _observe(log, learner, content, fetched.get(learner.id))
        record.timestamp, record.observed = sighting.timestamp, sighting.what
        record.key = learner_key(run["fingerprint"], content)
        if store.is_done(learner.id, record.key):
            _refresh(store, record)
            unchanged += 1
        else:
            todo[learner.id] = (record, learner)
    return todo, unchanged, failed


def _grade(
    course: Course,
    lessons: list[Lesson],
    todo: dict[str, tuple[Record, Learner]],
    store: Store,
    run: dict,
    jobs: int,
    learner_timeout: float | None,
    say: Say,
) -> tuple[int, int] | None:
    """Grade the learners in `todo`, saving each result as it comes: (graded, errors), or None
    when the grading processes cannot even start."""
    from autograder.cohort.pool import GradingPool, PoolError, Setup, Task, remove_stale_scratch

    remove_stale_scratch()
    _import_publishing_meanwhile()
    setup = Setup(str(course.root / "course.yml"), tuple(run["lessons"]), run["seed"], run["language"])
    pool = GradingPool(setup, jobs, learner_timeout or default_learner_timeout(lessons))
    progress = _Progress(say, len(todo))
    pool.on_start = progress.started
    graded = errors = 0
    try:
        tasks = (
            Task(ident, str(learner.exercises), str(learner.folder)) for ident, (_, learner) in todo.items()
        )
        for outcome in pool.run(tasks):
            record = todo[outcome.learner][0]
            record.seconds, record.pending = round(outcome.seconds, 3), outcome.pending
            if outcome.error is None:
                store.save(record, outcome.result_json)
                graded += 1
            else:
                record.status, record.error, record.detail = "error", outcome.error, outcome.detail
                store.save(
                    record,
                    error_result_json(course, lessons, run["language"], run["seed"], record.error_reason()),
                )
                errors += 1
            progress.finished(record, store.read_result(record.learner))
    except PoolError as exc:
        progress.stop()
        say.line("batch.pool_failed", detail=str(exc))
        return None
    finally:
        progress.stop()
    return graded, errors


def _import_publishing_meanwhile() -> None:
    """Import what `publish` needs (nbgrader's gradebook, matplotlib: ~1.5 s) in a thread while
    the grading processes work: this process only waits on them until then."""

    def load() -> None:
        try:
            import matplotlib

            matplotlib.use("Agg")  # files only, never a window (as cohort.render_chart)
            import matplotlib.pyplot  # noqa: F401
            import nbgrader.api  # noqa: F401
        except Exception:  # noqa: BLE001 - publish imports them again and reports what fails
            pass

    threading.Thread(target=load, name="import-publishing", daemon=True).start()


def _learners(args: argparse.Namespace, say: Say) -> list[Learner]:
    if args.roster is not None:
        return read_roster(args.roster, args.submissions, allowed(args))
    learners, skipped = learners_in(args.submissions)
    for name in skipped:
        say.line("batch.skipped_folder", folder=name)
    return learners


def _fetch(learners: list[Learner], jobs: int, allowed: Allowed) -> dict[str, datetime]:
    """Clone or update every roster learner's repository (roster.fetch: a failure is kept on the
    learner), `jobs` at a time: {id: when that learner's fetch finished}, on this machine's clock.
    Each learner's own moment, not the end of all fetches, so that a cohort fetched over minutes
    stamps nobody later than their own fetch."""
    finished: dict[str, datetime] = {}

    def one(learner: Learner) -> None:
        fetch(learner, allowed)
        finished[learner.id] = observations.now()

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(one, learners))  # interrupted: map cancels the fetches not started yet
    return finished


def _observe(log: ObservationLog, learner: Learner, content: str, fetched_at: datetime | None) -> Sighting:
    """The first sighting of what is graded for `learner`: the commit this run fetched, else the
    content of the folder as found (see observations.py for why a clone found in SUBMISSIONS
    counts by its files, not its HEAD). Logged now when it is new."""
    try:
        if fetched_at is not None and learner.commit:
            return log.observe(learner.id, "fetch", commit=learner.commit, content=None, seen=fetched_at)
        return log.observe(
            learner.id, "folder", commit=learner.commit, content=content, seen=observations.now()
        )
    except OSError as exc:  # the output folder itself: every learner would fail the same way
        raise BatchError("batch.observations_unwritable", file=str(log.path), detail=str(exc)) from None


def _refresh(store: Store, record: Record) -> None:
    """An unchanged learner keeps its result; names, email, commit and time follow the roster
    and the observation log."""
    old = store.read_record(record.learner)
    fields = ("first_name", "last_name", "email", "commit", "timestamp", "observed")
    if old is not None and any(getattr(old, name) != getattr(record, name) for name in fields):
        for name in fields:
            setattr(old, name, getattr(record, name))
        store.save_record(old)


class _Progress:
    """A rich progress bar on a terminal; one plain line per learner when redirected."""

    def __init__(self, say: Say, total: int) -> None:
        self.say, self.total, self.done = say, total, 0
        self.grading: list[str] = []
        self._bar = None
        if total and sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._task = self._bar.add_task(say.text("batch.progress_starting"), total=total)
            self._bar.start()

    def started(self, task) -> None:
        self.grading.append(task.learner)
        self._describe()

    def finished(self, record: Record, result: dict | None) -> None:
        self.done += 1
        if record.learner in self.grading:
            self.grading.remove(record.learner)
        if record.status == "graded" and result is not None:
            line = self.say.text(
                "batch.learner_done",
                done=self.done,
                total=self.total,
                id=record.learner,
                score=result.get("score"),
                max_score=result.get("max_score"),
                xp=result.get("xp"),
                xp_max=result.get("xp_max"),
            )
        else:
            reason = i18n.localize(record.error_reason(), self.say.lang)
            line = self.say.text(
                "batch.learner_error", done=self.done, total=self.total, id=record.learner, reason=reason
            )
        if self._bar is not None:
            self._bar.console.print(line, markup=False, highlight=False)
            self._bar.update(self._task, advance=1)
            self._describe()
        else:
            print(line, file=sys.stderr, flush=True)

    def _describe(self) -> None:
        if self._bar is not None:
            self._bar.update(
                self._task, description=self.say.text("batch.progress", learners=", ".join(self.grading))
            )

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
