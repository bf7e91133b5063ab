"""The workers of the grading service: take a recorded submission, unpack its files, grade them
with the course's own engine and hidden graders, record the one result.

`run_workers(config)` is one worker process: `autograder serve` starts one beside the app (the
embedded default, over SQLite in its data folder), and `autograder worker`
(worker_command.py) starts one on any machine that reaches the service's queue (Redis) and store
(PostgreSQL), sharing no filesystem with the service and holding no GitHub credential: the
service fetched the commit and stored its files with the submission as a bounded archive
(archiver.py, archive.py). Huey's consumer runs `workers` threads (autograder/service/queue.py)
and as many grading processes of cohort/pool.py kept warm (`WarmGraders`: the same engine call
as `autograder grade`, torch imported once). A wake-up makes a thread drain the store: claim the
oldest claimable submission of this worker's graders' hash (the push lane before the regrade
lane) under a lease, renew the lease from a heartbeat thread while working, unpack the archive
into the worker's own data folder (only regular files, paths checked), grade the learner's files
as `grade-all` takes them (their exercises/ folder, nothing below a symlink followed), complete;
until nothing is left. A timer reaps expired leases (a worker killed mid-grading: the submission
is requeued and graded by whoever claims it next; after `max_attempts`, "worker lost"), records
where this worker stands in the workers table (renewed every tick), and wakes the threads while
anything of its graders waits, so correctness never rests on a wake-up.

The graders' hash (`graders_hash`): grade-all's grading fingerprint (cohort/store.
grading_fingerprint: the lessons' course.yml entries, their hidden graders, the reference
solutions they use, the engine and its catalogs, the language) with the seed held fixed, so that
it names the graders and engine, not the run. Each submission records the hash it is to be
graded with; a worker claims only those of its own and refuses the others, saying so (a log line
and the state "refused" in the workers table): a worker with other graders (an old install, a
course copy edited) never grades with them. Each grading draws a fresh random seed (official
grading keeps fresh random inputs), recorded with the result and inside it.

What can go wrong costs that submission only and is recorded as its error result (every check
an error saying why, in the shape of a grade, as grade-all records its errors): a grading
process that dies or runs past the time limit (a fresh one takes its place), an archive that
cannot be unpacked. Grading processes that cannot start at all are a broken installation, no
submission's fault: the submission goes back to the queue untouched and the worker process stops
with status 1, saying why. A worker stopped mid-grading (SIGTERM: a restart) records nothing:
its lease lapses and the next worker grades that submission.
"""

from __future__ import annotations

import logging
import os
import random
import shutil
import signal
import socket
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from autograder.cohort.outputs import Say, error_result_json
from autograder.cohort.pool import (
    GradersClosed,
    Outcome,
    PoolError,
    Setup,
    Task,
    WarmGraders,
    remove_stale_scratch,
)
from autograder.cohort.roster import Learner
from autograder.cohort.store import grading_fingerprint
from autograder.core.manifest import Course, Lesson, load_course
from autograder.core.results import Text, message
from autograder.service.queue import consume, make_queue
from autograder.service.schema import now_utc
from autograder.service.store import Store, Submission

# The seed in the graders' hash: fixed, so that the hash names the graders and the engine only.
HASH_SEED = 0
INTAKE = "intake"  # in the data folder: each submission's unpacked files, removed after grading

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkerConfig:
    course_file: Path
    database_url: str
    queue_url: str | None  # None: SqliteHuey in data_dir
    data_dir: Path
    workers: int = 1  # grading threads, each with its own warm grading process
    lease_s: float = 30.0  # a lease not renewed for this long is a lost worker's
    lessons: tuple[str, ...] | None = None  # None: every lesson of the course
    max_attempts: int = 3  # leases that may expire before the submission is an error
    # Deadlines: the last push before each is graded too. None: the worker supersedes nothing
    # (a worker elsewhere has no roster; the service superseded older pushes when it fetched).
    boundaries: tuple[datetime, ...] | None = ()
    learner_timeout: float | None = None  # None: grade-all's default for the lessons
    limits: Any = None  # fetch.FetchLimits bounding an archive unpacked; None: its defaults


def run_workers(config: WorkerConfig) -> None:
    """One worker process, until SIGINT or SIGTERM (blocking; call it from the main thread).
    When its grading processes cannot start at all, it says why and exits with status 1
    (SystemExit), the submissions left queued."""
    course = load_course(config.course_file)
    lessons = [course.lesson(key) for key in config.lessons] if config.lessons else list(course.lessons)
    say = Say(course.language)
    store = Store(config.database_url)
    store.create()
    queue = make_queue(config.queue_url, Path(config.data_dir))
    remove_stale_scratch()
    from autograder.cohort.grade_all import default_learner_timeout

    setup = Setup(
        str(Path(config.course_file).resolve()),
        tuple(lesson.id for lesson in lessons),
        HASH_SEED,
        course.language,
    )
    graders = WarmGraders(setup, config.workers, config.learner_timeout or default_learner_timeout(lessons))
    graders.start()
    worker = Worker(config, course, lessons, store, graders, say)
    say.line(
        "service.worker.started", workers=config.workers, name=worker.name, graders=worker.graders_hash[:12]
    )
    try:
        worker.seen("running")
        consume(
            queue,
            worker.drain,
            workers=config.workers,
            tick_s=max(0.5, config.lease_s / 3),
            tick=worker.tick,
        )
    finally:
        graders.close()
        try:
            worker.seen("stopped", worker.broken or "")
        except Exception:  # the database away: its row ages into "gone"
            log.exception("workers table")
        store.close()
    if worker.broken is not None:
        say.line("service.worker.cannot_grade", name=worker.name, detail=worker.broken)
        raise SystemExit(1)
    say.line("service.worker.stopped", name=worker.name)


class Worker:
    """What the consumer's threads run: `drain` per wake-up, `tick` on the timer."""

    def __init__(
        self,
        config: WorkerConfig,
        course: Course,
        lessons: list[Lesson],
        store: Store,
        graders: WarmGraders,
        say: Say,
    ) -> None:
        self.config, self.course, self.lessons = config, course, lessons
        self.store, self.graders, self.say = store, graders, say
        self.lang = course.language
        self.graders_hash = graders_hash(course, lessons, self.lang)
        self.host, self.pid = socket.gethostname(), os.getpid()
        self.name = f"{self.host}:{self.pid}"
        self.started_at = now_utc()
        self.intake = Path(config.data_dir) / INTAKE
        self.intake.mkdir(parents=True, exist_ok=True)
        os.chmod(self.intake, 0o755)  # the grading processes may read below it as another user
        self.broken: str | None = None  # why this worker cannot grade at all, once it knows
        self.grading: dict[str, int] = {}  # {thread: the submission it grades}
        self.refusing: tuple[str, ...] = ()  # the other graders' hashes it last said it refuses

    def seen(self, state: str, detail: str = "") -> None:
        """This worker's row in the workers table, renewed."""
        current = next(iter(self.grading.values()), None)
        self.store.worker_seen(
            self.name,
            host=self.host,
            pid=self.pid,
            graders_hash=self.graders_hash,
            threads=self.config.workers,
            started_at=self.started_at,
            lease_s=self.config.lease_s,
            state=state,
            detail=detail,
            current=current,
        )

    def tick(self) -> bool:
        """Reap expired leases, say where this worker stands (refusing submissions of other
        graders, if any wait); True while any of its graders wait (the timer wakes the threads)."""
        lapsed = self.store.reap(
            max_attempts=self.config.max_attempts,
            lost_result=self.lost_result,
            graders_hash=self.graders_hash,
        )
        if lapsed:
            self.say.line("service.worker.reaped", ids=", ".join(map(str, lapsed)))
        waiting = self.store.claimable()
        mine = waiting.pop(self.graders_hash, 0)
        others = tuple(sorted(waiting))
        if others != self.refusing:
            self.refusing = others
            if others:
                self.say.line(
                    "service.worker.refused",
                    name=self.name,
                    count=sum(waiting.values()),
                    theirs=", ".join(h[:12] for h in others),
                    mine=self.graders_hash[:12],
                )
        if others and not mine and not self.grading:
            detail = ", ".join(f"{h[:12]}: {waiting[h]}" for h in others)
            self.seen("refused", detail)
        else:
            self.seen("running")
        return mine > 0

    def drain(self, stop: threading.Event) -> None:
        """Grade submission after submission until none is claimable or the consumer stops."""
        thread = threading.current_thread().name
        me = f"{self.name}:{thread}"
        while not stop.is_set() and self.broken is None:
            submission = self.store.claim(
                me, self.config.lease_s, graders_hash=self.graders_hash, boundaries=self.config.boundaries
            )
            if submission is None:
                return
            self.grading[thread] = submission.id
            try:
                self.grade(submission, me)
            finally:
                self.grading.pop(thread, None)

    def grade(self, submission: Submission, me: str) -> None:
        from autograder.service.archive import ArchiveError

        started = time.monotonic()
        seed = random.SystemRandom().randrange(2**31)
        with Heartbeat(self.store, submission.id, me, self.config.lease_s):
            scratch = Path(tempfile.mkdtemp(prefix=f"{submission.id}-", dir=self.intake))
            os.chmod(scratch, 0o755)
            try:
                try:
                    folder = self._unpack(submission, scratch)
                except ArchiveError as refused:
                    reason = message("service.worker.fetch_failed", reason=refused.text)
                    self._complete_error(submission, me, seed, reason)
                    return
                exercises = Learner(submission.learner, folder).exercises
                try:
                    outcome = self.graders.grade(Task(submission.learner, str(exercises), str(folder), seed))
                except GradersClosed:  # the worker stops: its lease lapses, the next reap requeues it
                    return
                except PoolError as exc:  # no grading process starts: no submission's fault
                    self._cannot_grade(submission, me, exc)
                    return
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            if outcome.error is not None:
                self._complete_error(submission, me, seed, outcome_reason(outcome))
                return
            recorded = self.store.complete(
                submission.id,
                me,
                status="done",
                result_json=outcome.result_json,
                graders_hash=self.graders_hash,
                seed=seed,
            )
        if recorded:
            self.say.line(
                "service.worker.graded",
                id=submission.id,
                learner=submission.learner,
                sha=submission.sha[:12],
                seconds=f"{time.monotonic() - started:.1f}",
            )

    def _cannot_grade(self, submission: Submission, me: str, exc: PoolError) -> None:
        """This worker cannot grade anything (a broken installation, not a submission): the
        submission goes back to the queue untouched and the worker process stops, so that no
        submission spends its attempts on it and the instructor sees why (their last words stay
        in the log, never in a learner's result)."""
        self.store.requeue(submission.id, me)
        if self.broken is None:
            self.broken = str(exc).strip()[-2000:]
            os.kill(os.getpid(), signal.SIGTERM)  # Huey's consumer stops; run_workers says why

    def _unpack(self, submission: Submission, scratch: Path) -> Path:
        """The submission's files from its archive in the store, below `scratch`."""
        from autograder.service.archive import ArchiveError, unpack
        from autograder.service.fetch import FetchLimits

        stored = self.store.archive(submission.id)
        if stored is None:
            raise ArchiveError("service.archive.missing")
        data, sha256 = stored
        return unpack(data, scratch, self.config.limits or FetchLimits(), sha256=sha256)

    def _complete_error(self, submission: Submission, me: str, seed: int, reason: Text) -> None:
        self.store.complete(
            submission.id,
            me,
            status="error",
            result_json=error_result_json(self.course, self.lessons, self.lang, seed, reason),
            graders_hash=self.graders_hash,
            seed=seed,
            error=reason.key,
        )
        self._say_failed(submission, reason)

    def _say_failed(self, submission: Submission, reason: Text) -> None:
        self.say.line(
            "service.worker.failed",
            id=submission.id,
            learner=submission.learner,
            sha=submission.sha[:12],
            reason=reason,
        )

    def lost_result(self, submission: Submission, reason: Text) -> str:
        """The error result of a submission every attempt of which was lost (for `reap`)."""
        self._say_failed(submission, reason)
        return error_result_json(self.course, self.lessons, self.lang, 0, reason)


class Heartbeat:
    """Renews a lease every third of its length while the block runs, from a thread of its own
    (grading, or the archiver's fetch, blocks the thread that claimed). A lease lost meanwhile (the reaper took it: this
    worker was too slow to renew) is not fought for: grading goes on, and the first result
    recorded wins (Store.complete)."""

    def __init__(self, store: Store, submission_id: int, worker: str, lease_s: float, renew=None) -> None:
        self.store, self.submission_id, self.worker, self.lease_s = store, submission_id, worker, lease_s
        self.renew = renew or store.heartbeat  # the archiver renews its fetch lease (Store.renew_fetch)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{submission_id}", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.lease_s / 3):
            try:
                if not self.renew(self.submission_id, self.worker, self.lease_s):
                    return
            except Exception:  # the database busy or away: the next beat tries again
                log.exception("heartbeat")


def graders_hash(course: Course, lessons: list[Lesson], lang: str) -> str:
    """The hash of what grades, besides the learner's files and the seed (see the docstring)."""
    return grading_fingerprint(course, lessons, seed=HASH_SEED, lang=lang)


def service_graders_hash(config: Any, course: Course) -> str:
    """The graders' hash of a service configured with `config` (its --lessons, else every lesson
    of the course) in the course's language: what the service stamps its submissions with."""
    keys = getattr(config, "lessons", None)
    lessons = [course.lesson(key) for key in keys] if keys else list(course.lessons)
    return graders_hash(course, lessons, course.language)


def outcome_reason(outcome: Outcome) -> Text:
    """Why a grading process gave no grade, for the learner (their only part is the first or
    last line of the detail; the rest stays in the worker's log)."""
    lines = [line for line in (outcome.detail or "").strip().splitlines() if line.strip()]
    if outcome.error == "timeout":
        seconds = lines[0] if lines else ""
        lesson, _, check = (lines[1] if len(lines) > 1 else "").partition(" ")
        if check:
            return message("service.worker.timeout_in", seconds=seconds, lesson=lesson, check=check)
        return message("service.worker.timeout", seconds=seconds)
    if outcome.error == "crashed":
        return message("service.worker.crashed", detail=lines[0] if lines else "")
    return message("service.worker.internal", detail=lines[-1] if lines else "")
