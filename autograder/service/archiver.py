"""The service's fetcher: the one part that holds the GitHub credential and fetches learners'
commits. It runs in the `autograder serve` process (with its own workers or with --workers 0),
so workers on other machines need neither the credential nor a filesystem shared with it.

A recorded submission waits queued without its files; `Archiver` threads take it with a fetch
lease of their own (Store.claim_fetch: the oldest first; one that a newer push supersedes is
marked superseded and never fetched), fetch the commit (fetch.py: only its regular files,
bounded), pack them as a bounded archive (archive.py) and store it with the submission
(Store.store_archive), which makes it claimable by a worker of the service's graders' hash; then
a wake-up is sent (queue.py). A fetch refused for good (the commit is not in the repository, too
big, a forged tree, an archive over the caps) is the submission's error result, as a worker
records one; one that may work later (GitHub or git unreachable: a 5xx refusal) is tried again
after a pause that doubles each time, and after `max_attempts` the error says why. A service
killed mid-fetch leaves the fetch lease to lapse: the next start fetches it again.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from autograder.cohort.outputs import Say, error_result_json
from autograder.core.manifest import Course, Lesson
from autograder.core.results import Text, message
from autograder.service.errors import ServiceRefusal
from autograder.service.store import Store, Submission

INTAKE = "fetch"  # in the data folder: each fetch's scratch folder, removed once archived
POLL_S = 0.3  # how often an idle fetcher looks for a new submission
RETRY_S = (2.0, 5.0, 15.0, 60.0)  # waits before fetching again after a fetch that may work later

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ArchiverConfig:
    data_dir: Path
    url_template: str
    allowed: Any  # cohort.roster.Allowed
    limits: Any = None  # fetch.FetchLimits; None: its defaults
    user: str | None = None  # git's unprivileged user when root; None: fetch's default
    threads: int = 2
    # A fetch lease, renewed every third of it while the fetch runs (worker.Heartbeat): a service
    # killed mid-fetch leaves its submissions to the next start (or another replica) this soon.
    lease_s: float = 30.0
    max_attempts: int = 3
    boundaries: tuple[datetime, ...] = ()


class Archiver:
    """`threads` fetch threads over `store`, started with `start()`, stopped with `stop()`."""

    def __init__(
        self,
        config: ArchiverConfig,
        store: Store,
        course: Course,
        lessons: Sequence[Lesson],
        graders_hash: str,
        credential: Any,
        say: Say,
        wake: Any = None,  # called after a submission becomes claimable
    ) -> None:
        from autograder.service.fetch import FetchLimits

        self.config, self.store, self.course, self.lessons = config, store, course, list(lessons)
        self.graders_hash, self.credential, self.say, self.wake = graders_hash, credential, say, wake
        self.limits = config.limits or FetchLimits()
        self.name = f"{socket.gethostname()}:{os.getpid()}:fetch"
        self.intake = Path(config.data_dir) / INTAKE
        self.intake.mkdir(parents=True, exist_ok=True)
        os.chmod(self.intake, 0o755)  # git may run as an unprivileged user below it
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, name=f"autograder-fetch-{n}", daemon=True)
            for n in range(max(1, config.threads))
        ]

    def start(self) -> Archiver:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(self.limits.seconds + 5)

    def _run(self) -> None:
        me = f"{self.name}-{threading.current_thread().name.rsplit('-', 1)[-1]}"
        while not self._stop.is_set():
            try:
                if not self.fetch_one(me):
                    self._stop.wait(POLL_S)
            except Exception:  # the database busy or away: the next round tries again
                log.exception("fetch")
                self._stop.wait(POLL_S * 5)

    def fetch_one(self, me: str) -> bool:
        """Fetch one waiting submission into its archive; False when none waits."""
        lease_s = self.config.lease_s
        submission = self.store.claim_fetch(me, lease_s, boundaries=self.config.boundaries)
        if submission is None:
            return False
        from autograder.service.archive import ArchiveError, pack
        from autograder.service.worker import Heartbeat

        scratch = Path(tempfile.mkdtemp(prefix=f"{submission.id}-", dir=self.intake))
        try:
            try:
                with Heartbeat(self.store, submission.id, me, lease_s, renew=self.store.renew_fetch):
                    folder = self._fetch(submission, scratch)
                    packed = pack(folder, self.limits)
            except ServiceRefusal as refusal:
                reason = message("service.worker.fetch_failed", reason=refusal.text)
                if refusal.status >= 500:
                    self._retry_later(submission, me, reason)
                else:
                    self._refused(submission, reason)
                return True
            except ArchiveError as refused:
                self._refused(submission, message("service.worker.fetch_failed", reason=refused.text))
                return True
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        if self.store.store_archive(
            submission.id, packed, self.graders_hash, boundaries=self.config.boundaries
        ):
            if self.wake is not None:
                try:
                    self.wake()
                except Exception:  # a lost wake-up costs latency only: the workers' timer finds it
                    log.exception("wake")
        return True

    def _fetch(self, submission: Submission, scratch: Path) -> Path:
        from autograder.service.fetch import fetch_commit

        settings = self.config
        return fetch_commit(
            submission.repository,
            submission.sha,
            scratch,
            url_template=settings.url_template,
            allowed=settings.allowed,
            credential=self.credential,
            limits=self.limits,
            **({"user": settings.user} if settings.user else {}),
        )

    def _error_result(self, submission: Submission, reason: Text) -> str:
        return error_result_json(self.course, self.lessons, self.course.language, 0, reason)

    def _refused(self, submission: Submission, reason: Text) -> None:
        self.store.complete(
            submission.id,
            self.name,
            status="error",
            result_json=self._error_result(submission, reason),
            graders_hash=submission.graders_hash or self.graders_hash,
            error=reason.key,
        )
        self._say_failed(submission, reason)

    def _retry_later(self, submission: Submission, me: str, reason: Text) -> None:
        wait = RETRY_S[min(submission.attempts, len(RETRY_S) - 1)]
        self.store.fetch_failed(
            submission.id,
            me,
            reason,
            retry_s=wait,
            max_attempts=self.config.max_attempts,
            error_result=self._error_result,
            graders_hash=self.graders_hash,
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
