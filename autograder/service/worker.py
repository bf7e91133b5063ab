"""The workers of `autograder serve`: take a recorded submission, fetch that commit, grade it
with the course's own engine and hidden graders, record the one result.

`run_workers(config)` is one worker process (the command starts it beside the app; at scale,
several on other machines share the database): Huey's consumer with `workers` threads
(autograder/service/queue.py) and as many grading processes of cohort/pool.py kept warm
(`WarmGraders`: the same engine call as `autograder grade`, torch imported once). A wake-up
makes a thread drain the store: claim the oldest eligible submission under a lease, renew the
lease from a heartbeat thread while working, fetch the commit (autograder/service/fetch.py: the
service's own credential, only the commit's regular files), grade the learner's files as
`grade-all` takes them (their exercises/ folder, nothing below a symlink followed), complete;
until nothing is left. A timer reaps expired leases (a worker killed mid-grading: the
submission is requeued and graded by whoever claims it next) and wakes the threads while anything
is queued, so correctness never rests on a wake-up.

Each grading draws a fresh random seed (official grading keeps fresh random inputs), recorded
with the result and inside it. Every result carries the graders' hash: grade-all's grading
fingerprint (cohort/store.grading_fingerprint: the lessons' course.yml entries, their hidden
graders, the reference solutions they use, the engine and its catalogs, the language) with the
seed held fixed, so that it names the graders and engine, not the run.

What can go wrong costs that submission only and is recorded as its error result (every check
an error saying why, in the shape of a grade, as grade-all records its errors): a grading
process that dies or runs past the time limit (a fresh one takes its place), a commit the fetch
refuses (too big, not in the repository). A fetch that may work later (GitHub or git down)
gives the attempt back: the lease ends, the reaper requeues it, and after `max_attempts` the
error says why. Grading processes that cannot start at all are a broken installation, no
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
from dataclasses import dataclass, field
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
from autograder.cohort.roster import Allowed, Learner
from autograder.cohort.store import grading_fingerprint
from autograder.core.manifest import Course, Lesson, load_course
from autograder.core.results import Text, message
from autograder.service.errors import ServiceRefusal
from autograder.service.queue import consume, make_queue
from autograder.service.store import Store, Submission

# The seed in the graders' hash: fixed, so that the hash names the graders and the engine only.
HASH_SEED = 0
INTAKE = "intake"  # in the data folder: each fetched commit's scratch folder, removed after grading

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FetchSettings:
    """How the workers fetch a learner's commit (autograder/service/fetch.py)."""

    url_template: str = "https://github.com/{repository}.git"
    allowed: Allowed = Allowed()  # the schemes and hosts a clone URL may have
    api_url: str = "https://api.github.com"  # where a GitHub App's installation token comes from
    limits: Any = None  # fetch.FetchLimits; None: its defaults
    user: str | None = None  # git's unprivileged user when the worker runs as root; None: fetch's default


@dataclass(frozen=True)
class WorkerConfig:
    course_file: Path
    database_url: str
    queue_url: str | None  # None: SqliteHuey in data_dir
    data_dir: Path
    workers: int = 1  # grading threads, each with its own warm grading process
    lease_s: float = 30.0  # a lease not renewed for this long is a lost worker's
    fetch: FetchSettings = field(default_factory=FetchSettings)
    lessons: tuple[str, ...] | None = None  # None: every lesson of the course
    max_attempts: int = 3  # leases that may expire before the submission is an error
    boundaries: tuple[datetime, ...] = ()  # deadlines: the last push before each is graded too
    learner_timeout: float | None = None  # None: grade-all's default for the lessons


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
    say.line("service.worker.started", workers=config.workers, name=worker.name)
    try:
        consume(
            queue,
            worker.drain,
            workers=config.workers,
            tick_s=max(0.5, config.lease_s / 3),
            tick=worker.tick,
        )
    finally:
        graders.close()
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
        self.name = f"{socket.gethostname()}:{os.getpid()}"
        self.intake = Path(config.data_dir) / INTAKE
        self.intake.mkdir(parents=True, exist_ok=True)
        os.chmod(self.intake, 0o755)  # git may run as an unprivileged user below it
        from autograder.service.credentials import credential_from_env

        self.credential = credential_from_env(os.environ, config.fetch.api_url)
        self.broken: str | None = None  # why this worker cannot grade at all, once it knows

    def tick(self) -> bool:
        """Reap expired leases; True while anything waits (the timer then wakes the threads)."""
        lapsed = self.store.reap(
            max_attempts=self.config.max_attempts,
            lost_result=self.lost_result,
            graders_hash=self.graders_hash,
        )
        if lapsed:
            self.say.line("service.worker.reaped", ids=", ".join(map(str, lapsed)))
        return self.store.queued() > 0

    def drain(self, stop: threading.Event) -> None:
        """Grade submission after submission until none is claimable or the consumer stops."""
        me = f"{self.name}:{threading.current_thread().name}"
        while not stop.is_set() and self.broken is None:
            submission = self.store.claim(me, self.config.lease_s, boundaries=self.config.boundaries)
            if submission is None:
                return
            self.grade(submission, me)

    def grade(self, submission: Submission, me: str) -> None:
        started = time.monotonic()
        seed = random.SystemRandom().randrange(2**31)
        with Heartbeat(self.store, submission.id, me, self.config.lease_s):
            scratch = Path(tempfile.mkdtemp(prefix=f"{submission.id}-", dir=self.intake))
            try:
                try:
                    folder = self._fetch(submission, scratch)
                except ServiceRefusal as refusal:
                    reason = message("service.worker.fetch_failed", reason=refusal.text)
                    if refusal.status >= 500:  # may work later: this attempt is given back
                        self.store.release(submission.id, me, reason)
                        self._say_failed(submission, reason)
                    else:
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

    def _fetch(self, submission: Submission, scratch: Path) -> Path:
        from autograder.service.fetch import FetchLimits, fetch_commit

        settings = self.config.fetch
        return fetch_commit(
            submission.repository,
            submission.sha,
            scratch,
            url_template=settings.url_template,
            allowed=settings.allowed,
            credential=self.credential,
            limits=settings.limits or FetchLimits(),
            **({"user": settings.user} if settings.user else {}),
        )

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
    (grading blocks the thread that claimed). A lease lost meanwhile (the reaper took it: this
    worker was too slow to renew) is not fought for: grading goes on, and the first result
    recorded wins (Store.complete)."""

    def __init__(self, store: Store, submission_id: int, worker: str, lease_s: float) -> None:
        self.store, self.submission_id, self.worker, self.lease_s = store, submission_id, worker, lease_s
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
                if not self.store.heartbeat(self.submission_id, self.worker, self.lease_s):
                    return
            except Exception:  # the database busy or away: the next beat tries again
                log.exception("heartbeat")


def graders_hash(course: Course, lessons: list[Lesson], lang: str) -> str:
    """The hash of what grades, besides the learner's files and the seed (see the docstring)."""
    return grading_fingerprint(course, lessons, seed=HASH_SEED, lang=lang)


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
