"""The service's SQL store: the record of every submission and its one result (the gradebook).

SQLAlchemy Core over SQLite by default (one file in the data folder, WAL, a busy timeout) and
PostgreSQL at scale, with the same statements: nothing below is SQLite's own SQL. The tables
and their rows are schema.py's.

Correctness rests here, not on the queue: a submission is recorded before the service answers;
`claim` hands a queued submission to exactly one worker (SELECT ... FOR UPDATE SKIP LOCKED where
the database has it, and always a conditional UPDATE that only one claimer can win) with a lease
the worker renews (`heartbeat`); `reap` requeues the submissions whose lease expired, and after
`max_attempts` records them as errors so that a submission that kills every worker cannot loop;
`complete` records the first result and ignores any later one (a worker thought lost that comes
back). Execution is at least once, the recorded result exactly once.

Fairness: `claim` takes the oldest queued submission. A repository with several queued gets its
newest graded and the older ones superseded, except the last submission before each deadline
boundary (`boundaries`), which is graded too: the newest push of each learner always counts, and
so does the last one before a deadline.

SQLite runs writers one at a time: each writing transaction begins IMMEDIATE (it takes the write
lock first and waits up to the busy timeout for it), so two processes never both read "queued"
and then collide on the upgrade; readers are not blocked (WAL). Times are stored in UTC.

Issue 33 (workers on other machines): a submission is recorded queued without its files; the
service's fetcher (archiver.py) takes it with a lease of its own (`claim_fetch`), fetches the
commit with the service's credential and stores it as a bounded archive (`store_archive`), which
makes it claimable; a fetch refused for good is its error result, one that may work later is
retried (`fetch_failed`, counting attempts). Workers read the archive (`archive`), claim only
submissions of their own graders' hash, the push lane before the regrade lane, and say where they
are (`worker_seen`, the workers table). Results are kept per graders' hash: `queue_regrade` queues
graded submissions again on the regrade lane with other graders, and the old result stays
beside the new one (`results_of`); `result`/`current_result` is the one of the submission's
graders hash, else the newest.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    and_,
    delete,
    exists,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from autograder.core.results import Text

if TYPE_CHECKING:  # the service's other parts, written beside this one
    from autograder.service.claims import Admitted
    from autograder.service.github_lookup import SubmissionTime

from autograder.service.schema import (
    LOST,
    STATES,
    Result,
    Submission,
    WorkerRow,
    archives,
    claim_query,
    make_engine,
    metadata,
    now_utc,
    result_from_row,
    results,
    submission_from_row,
    submissions,
    text_to_json,
    worker_from_row,
    workers,
)

CREATE_LOCK = 0x61757467  # PostgreSQL advisory lock key held while the tables are made ("autg")

__all__ = ["LOST", "STATES", "Result", "Store", "Submission", "WorkerRow", "claim_query", "now_utc"]


class Store:
    """The submissions and their results in the database at `url` ("sqlite:///path.db",
    "postgresql+psycopg://..."). Thread-safe; one per process."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)

    def create(self) -> None:
        """Create the tables that do not exist yet (a new data folder; idempotent), after
        upgrading a store made before the lanes and archives in place (schema_upgrade.py). One
        process at a time (the service and its workers start together): SQLite's write lock,
        PostgreSQL's transaction-scoped advisory lock."""
        from sqlalchemy import inspect, text

        from autograder.service.schema_upgrade import upgrade

        with self._write() as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": CREATE_LOCK})
            if inspect(conn).has_table("submissions"):
                upgrade(conn)
            metadata.create_all(conn)

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with self.engine.connect() as conn:
            conn.execution_options(writes=True)
            with conn.begin():
                yield conn

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self.engine.connect() as conn:
            yield conn

    # -------------------------------------------------------------------- intake (the app)

    def record(
        self, *, admitted: Admitted, submitted: SubmissionTime, received_at: datetime
    ) -> tuple[Submission, bool]:
        """Record an admitted submission, queued: (it, True). The same token again (jti), or
        another token for the same repository and commit, gives the submission already recorded:
        (it, False). A commit recorded before and superseded since is queued again when this
        push of it is the repository's newest (the newest push is always graded)."""
        for name, moment in (("submitted.at", submitted.at), ("received_at", received_at)):
            if moment.tzinfo is None:
                raise ValueError(f"record: {name} is a naive datetime ({moment!r}); give it a time zone")
        ident = admitted.identity
        values = {
            "page_key": secrets.token_urlsafe(24),
            "learner": admitted.learner.id,
            "repository_id": int(ident.repository_id),
            "repository": ident.repository,
            "sha": ident.sha,
            "ref": ident.ref,
            "event_name": ident.event_name,
            "run_id": int(ident.run_id),
            "actor": ident.actor or "",
            "token_id": ident.token_id,
            "submitted_at": submitted.at,
            "time_source": submitted.source,
            "received_at": received_at,
            "state": "queued",
            "attempts": 0,
            "lane": "push",
            "warnings_json": json.dumps(
                [{"key": w.key, "params": w.params} for w in admitted.warnings],
                ensure_ascii=False,
                default=str,
            ),
        }
        for _ in range(2):  # a second time only after losing a race to insert the same commit
            try:
                with self._write() as conn:
                    existing = self._existing(conn, ident.token_id, values["repository_id"], ident.sha)
                    if existing is not None:
                        return self._revive(conn, existing, submitted), False
                    new_id = conn.execute(insert(submissions).values(**values)).inserted_primary_key[0]
                    return submission_from_row(
                        conn.execute(select(submissions).where(submissions.c.id == new_id)).one()
                    ), True
            except IntegrityError:
                continue
        raise RuntimeError("record: the submission neither exists nor can be inserted")

    def _existing(self, conn: Connection, token_id: str, repository_id: int, sha: str) -> Submission | None:
        c = submissions.c
        row = conn.execute(
            select(submissions)
            .where((c.token_id == token_id) | ((c.repository_id == repository_id) & (c.sha == sha)))
            .order_by(c.id)
            .limit(1)
        ).first()
        return None if row is None else submission_from_row(row)

    def _revive(self, conn: Connection, existing: Submission, submitted: SubmissionTime) -> Submission:
        """A superseded commit pushed again (a force-push back to it): queued again, with this
        push's time, when nothing of its repository is newer."""
        if existing.state != "superseded" or submitted.at <= existing.submitted_at:
            return existing
        c = submissions.c
        newer = conn.execute(
            select(func.count())
            .select_from(submissions)
            .where(
                c.repository_id == existing.repository_id, c.id != existing.id, c.submitted_at >= submitted.at
            )
        ).scalar_one()
        if newer:
            return existing
        conn.execute(
            update(submissions)
            .where(c.id == existing.id, c.state == "superseded")
            .values(state="queued", submitted_at=submitted.at, time_source=submitted.source)
        )
        return submission_from_row(conn.execute(select(submissions).where(c.id == existing.id)).one())

    # -------------------------------------------------------------------- grading (the workers)

    # -------------------------------------------------------------------- fetching (the service)

    def claim_fetch(
        self,
        fetcher: str,
        lease_s: float,
        *,
        boundaries: Sequence[datetime] = (),
        now: datetime | None = None,
    ) -> Submission | None:
        """The oldest queued submission whose files the service has not fetched yet (and whose
        fetch is not held by another fetcher's lease, nor waiting to be tried again), now held by
        `fetcher` for `lease_s` seconds; None when none is. One that a newer push of its
        repository supersedes (push lane, not the last before one of `boundaries`) is marked
        superseded on the way, never fetched."""
        now = now or now_utc()
        c = submissions.c
        with self._write() as conn:
            while True:
                row = conn.execute(
                    select(submissions)
                    .where(
                        c.state == "queued",
                        c.fetched_at.is_(None),
                        c.lease_expires.is_(None) | (c.lease_expires < now),
                    )
                    .order_by(c.id)
                    .limit(1)
                    .with_for_update(skip_locked=True)
                ).first()
                if row is None:
                    return None
                candidate = submission_from_row(row)
                if candidate.lane == "push" and self._is_superseded(conn, candidate, boundaries):
                    conn.execute(
                        update(submissions)
                        .where(c.id == candidate.id, c.state == "queued")
                        .values(state="superseded", worker=None, lease_expires=None)
                    )
                    continue
                won = conn.execute(
                    update(submissions)
                    .where(c.id == candidate.id, c.state == "queued", c.fetched_at.is_(None))
                    .values(worker=fetcher, lease_expires=now + timedelta(seconds=lease_s))
                ).rowcount
                if won == 1:
                    return submission_from_row(
                        conn.execute(select(submissions).where(c.id == candidate.id)).one()
                    )

    def renew_fetch(
        self, submission_id: int, fetcher: str, lease_s: float, *, now: datetime | None = None
    ) -> bool:
        """Renew `fetcher`'s fetch lease (claim_fetch's) while its fetch runs; False when it no
        longer holds it (the fetch lapsed and another fetcher took it, or it was stored)."""
        now = now or now_utc()
        c = submissions.c
        with self._write() as conn:
            return (
                conn.execute(
                    update(submissions)
                    .where(
                        c.id == submission_id,
                        c.worker == fetcher,
                        c.state == "queued",
                        c.fetched_at.is_(None),
                    )
                    .values(lease_expires=now + timedelta(seconds=lease_s))
                ).rowcount
                == 1
            )

    def store_archive(
        self,
        submission_id: int,
        packed: Any,
        graders_hash: str,
        *,
        boundaries: Sequence[datetime] | None = None,
        now: datetime | None = None,
    ) -> bool:
        """Store the submission's files (`packed`: archive.Packed) and make it claimable, to be
        graded with `graders_hash` (unless a regrade already chose its graders); its attempts
        start again at 0 (the fetch's retries are not the graders'). With `boundaries`, older
        queued pushes of the same repository are superseded now (unless one is the last before
        a boundary). False when the submission is no longer queued."""
        now = now or now_utc()
        c = submissions.c
        with self._write() as conn:
            row = conn.execute(select(submissions).where(c.id == submission_id).with_for_update()).first()
            if row is None or row.state != "queued":
                return False
            conn.execute(delete(archives).where(archives.c.submission_id == submission_id))
            conn.execute(
                insert(archives).values(
                    submission_id=submission_id,
                    data=packed.data,
                    size=packed.size,
                    sha256=packed.sha256,
                    created_at=now,
                )
            )
            conn.execute(
                update(submissions)
                .where(c.id == submission_id)
                .values(
                    fetched_at=now,
                    graders_hash=row.graders_hash or graders_hash,
                    worker=None,
                    lease_expires=None,
                    attempts=0,
                )
            )
            if boundaries is not None:
                older = conn.execute(
                    select(submissions).where(
                        c.repository_id == row.repository_id,
                        c.id != submission_id,
                        c.state == "queued",
                        c.lane == "push",
                    )
                ).all()
                for other in map(submission_from_row, older):
                    if self._is_superseded(conn, other, boundaries):
                        conn.execute(
                            update(submissions)
                            .where(c.id == other.id, c.state == "queued")
                            .values(state="superseded", worker=None, lease_expires=None)
                        )
            return True

    def fetch_failed(
        self,
        submission_id: int,
        fetcher: str,
        reason: Text,
        *,
        retry_s: float,
        max_attempts: int,
        error_result: Callable[[Submission, Text], str],
        graders_hash: str,
        now: datetime | None = None,
    ) -> bool:
        """A fetch that may work later failed: an attempt spent, tried again after `retry_s`;
        after `max_attempts`, the submission's error result (`error_result(submission, reason)`)
        is recorded. True when that error was recorded."""
        now = now or now_utc()
        c = submissions.c
        with self._write() as conn:
            row = conn.execute(
                select(submissions).where(c.id == submission_id, c.worker == fetcher, c.state == "queued")
            ).first()
            if row is None:
                return False
            held = submission_from_row(row)
            attempts = held.attempts + 1
            if attempts < max_attempts:
                conn.execute(
                    update(submissions)
                    .where(c.id == submission_id)
                    .values(
                        attempts=attempts,
                        worker=None,
                        lease_expires=now + timedelta(seconds=retry_s),
                        last_error=text_to_json(reason),
                    )
                )
                return False
            conn.execute(
                update(submissions)
                .where(c.id == submission_id)
                .values(state="error", attempts=attempts, worker=None, lease_expires=None)
            )
            hash_ = held.graders_hash or graders_hash
            self._insert_result(
                conn,
                held,
                status="error",
                result_json=error_result(held, reason),
                graders_hash=hash_,
                seed=None,
                error=reason.key,
                worker=fetcher,
                now=now,
            )
            return True

    def archive(self, submission_id: int) -> tuple[bytes, str] | None:
        """(the archive, its sha256) of the submission's files, None before they are fetched."""
        with self._read() as conn:
            row = conn.execute(
                select(archives.c.data, archives.c.sha256).where(archives.c.submission_id == submission_id)
            ).first()
        return None if row is None else (bytes(row.data), row.sha256)

    # -------------------------------------------------------------------- grading (the workers)

    def claim(
        self,
        worker: str,
        lease_s: float,
        *,
        graders_hash: str | None = None,
        boundaries: Sequence[datetime] | None = (),
        now: datetime | None = None,
    ) -> Submission | None:
        """The oldest claimable submission (queued, its files fetched, of `graders_hash`: None,
        of any), the push lane first, that is not superseded, now "grading" under `worker`'s
        lease of `lease_s` seconds; None when nothing is left to grade. Older queued pushes of a
        repository that has a newer one are marked superseded on the way, unless one is the
        last before one of `boundaries` (deadlines); `boundaries` None: none is (the service
        superseded them when it fetched: a worker elsewhere has no roster)."""
        now = now or now_utc()
        c = submissions.c
        with self._write() as conn:
            while True:
                row = conn.execute(claim_query(graders_hash)).first()
                if row is None:
                    return None
                candidate = submission_from_row(row)
                if (
                    boundaries is not None
                    and candidate.lane == "push"
                    and self._is_superseded(conn, candidate, boundaries)
                ):
                    conn.execute(
                        update(submissions)
                        .where(c.id == candidate.id, c.state == "queued")
                        .values(state="superseded")
                    )
                    continue
                won = conn.execute(
                    update(submissions)
                    .where(c.id == candidate.id, c.state == "queued")
                    .values(
                        state="grading",
                        worker=worker,
                        lease_expires=now + timedelta(seconds=lease_s),
                        heartbeat_at=now,
                    )
                ).rowcount
                if won == 1:
                    return submission_from_row(
                        conn.execute(select(submissions).where(c.id == candidate.id)).one()
                    )

    def _is_superseded(self, conn: Connection, candidate: Submission, boundaries: Sequence[datetime]) -> bool:
        """Whether a newer submission of the candidate's repository exists (in any state) and the
        candidate is not the last one before any of `boundaries`."""
        c = submissions.c
        rows = conn.execute(
            select(c.id, c.submitted_at).where(c.repository_id == candidate.repository_id)
        ).all()
        if not any(row.id == candidate.id for row in rows):
            return False
        order = sorted((row.submitted_at, row.id) for row in rows)
        if order[-1][1] == candidate.id:
            return False
        for boundary in boundaries:
            before = [entry for entry in order if entry[0] <= boundary]
            if before and before[-1][1] == candidate.id:
                return False
        return True

    def heartbeat(
        self, submission_id: int, worker: str, lease_s: float, *, now: datetime | None = None
    ) -> bool:
        """Renew `worker`'s lease; False when it no longer holds one (reaped, or finished)."""
        now = now or now_utc()
        c = submissions.c
        with self._write() as conn:
            return (
                conn.execute(
                    update(submissions)
                    .where(c.id == submission_id, c.worker == worker, c.state == "grading")
                    .values(lease_expires=now + timedelta(seconds=lease_s), heartbeat_at=now)
                ).rowcount
                == 1
            )

    def release(self, submission_id: int, worker: str, reason: Text, *, now: datetime | None = None) -> bool:
        """`worker` gives up on this attempt without a result (a fetch that may work later): its
        lease ends now, so the next `reap` requeues it as for a lost worker (an attempt spent),
        and `reason` is what the error says if every attempt ends so."""
        now = now or now_utc()
        c = submissions.c
        with self._write() as conn:
            return (
                conn.execute(
                    update(submissions)
                    .where(c.id == submission_id, c.worker == worker, c.state == "grading")
                    .values(lease_expires=now, last_error=text_to_json(reason))
                ).rowcount
                == 1
            )

    def requeue(self, submission_id: int, worker: str) -> bool:
        """`worker` cannot grade at all (its grading processes do not start): the submission goes
        back to the queue at once, no attempt spent, for a worker that can."""
        c = submissions.c
        with self._write() as conn:
            return (
                conn.execute(
                    update(submissions)
                    .where(c.id == submission_id, c.worker == worker, c.state == "grading")
                    .values(state="queued", worker=None, lease_expires=None)
                ).rowcount
                == 1
            )

    def complete(
        self,
        submission_id: int,
        worker: str,
        *,
        status: str,
        result_json: str,
        graders_hash: str,
        seed: int | None = None,
        error: str | None = None,
        now: datetime | None = None,
    ) -> bool:
        """Record the submission's result ("done": graded; "error": `error` names the reason's
        catalog key). The first completion wins, whichever worker sends it; a later one (a worker
        thought lost that comes back, after another graded it or it was recorded as lost) is
        ignored: False."""
        if status not in ("done", "error"):
            raise ValueError(f"complete: status must be 'done' or 'error', not {status!r}")
        now = now or now_utc()
        c = submissions.c
        try:
            with self._write() as conn:
                # The submission's row first (its lock, on PostgreSQL), then the result: `reap`
                # takes them in the same order.
                moved = conn.execute(
                    update(submissions)
                    .where(c.id == submission_id, c.state.in_(("queued", "grading")))
                    .values(state=status, worker=worker, lease_expires=None)
                ).rowcount
                if moved != 1:
                    return False
                held = submission_from_row(
                    conn.execute(select(submissions).where(c.id == submission_id)).one()
                )
                return self._insert_result(
                    conn,
                    held,
                    status=status,
                    result_json=result_json,
                    graders_hash=graders_hash,
                    seed=seed,
                    error=error,
                    worker=worker,
                    now=now,
                )
        except IntegrityError:
            return False

    def _insert_result(
        self,
        conn: Connection,
        submission: Submission,
        *,
        status: str,
        result_json: str,
        graders_hash: str,
        seed: int | None,
        error: str | None,
        worker: str,
        now: datetime,
    ) -> bool:
        """The result of `submission` with `graders_hash`, unless it has one already (a regrade
        queued twice): the first stays. True when inserted."""
        r = results.c
        if conn.execute(
            select(r.id).where(r.submission_id == submission.id, r.graders_hash == graders_hash)
        ).first():
            return False
        conn.execute(
            insert(results).values(
                submission_id=submission.id,
                status=status,
                result_json=result_json,
                graders_hash=graders_hash,
                seed=seed,
                error=error,
                worker=worker,
                created_at=now,
                lane=submission.lane,
            )
        )
        return True

    def reap(
        self,
        now: datetime | None = None,
        max_attempts: int = 3,
        *,
        lost_result: Callable[[Submission, Text], str] | None = None,
        graders_hash: str = "",
    ) -> list[int]:
        """Requeue every submission whose lease expired (its worker died or hung), counting the
        attempt; one whose `max_attempts`-th attempt expired is recorded instead as an error
        (the reason: what `release` said last, else "worker lost"), so that a submission that
        kills every worker cannot loop. `lost_result(submission, reason)` makes that error's
        result JSON (the worker's, which knows the course; without it, the reason alone).
        Returns the ids whose lease expired."""
        now = now or now_utc()
        c = submissions.c
        expired: list[int] = []
        with self._write() as conn:
            rows = conn.execute(
                select(submissions)
                .where(c.state == "grading", c.lease_expires < now)
                .order_by(c.id)
                .with_for_update(skip_locked=True)
            ).all()
            for row in rows:
                lapsed = submission_from_row(row)
                attempts = lapsed.attempts + 1
                stale = (c.id == lapsed.id, c.state == "grading", c.lease_expires < now)
                if attempts < max_attempts:
                    conn.execute(
                        update(submissions)
                        .where(*stale)
                        .values(state="queued", attempts=attempts, worker=None, lease_expires=None)
                    )
                    expired.append(lapsed.id)
                    continue
                reason = lapsed.last_error_text or Text(LOST, {"attempts": attempts})
                moved = conn.execute(
                    update(submissions)
                    .where(*stale)
                    .values(state="error", attempts=attempts, lease_expires=None)
                ).rowcount
                if moved != 1:
                    continue
                self._insert_result(
                    conn,
                    lapsed,
                    status="error",
                    result_json=(
                        lost_result(lapsed, reason)
                        if lost_result
                        else json.dumps({"error": {"key": reason.key, "params": reason.params}}, default=str)
                    ),
                    graders_hash=lapsed.graders_hash or graders_hash,
                    seed=None,
                    error=reason.key,
                    worker=lapsed.worker or "",
                    now=now,
                )
                expired.append(lapsed.id)
        return expired

    # -------------------------------------------------------------------- reading

    def get(self, submission_id: int) -> Submission | None:
        with self._read() as conn:
            row = conn.execute(select(submissions).where(submissions.c.id == submission_id)).first()
        return None if row is None else submission_from_row(row)

    def by_key(self, page_key: str) -> Submission | None:
        with self._read() as conn:
            row = conn.execute(select(submissions).where(submissions.c.page_key == page_key)).first()
        return None if row is None else submission_from_row(row)

    def result(self, submission_id: int) -> Result | None:
        """The submission's current result (`current_result`)."""
        return self.current_result(submission_id)

    def current_result(self, submission_id: int) -> Result | None:
        """The result of the graders the submission is to be graded with, else the newest: what
        the learner's verdict, the page and the export show."""
        r = results.c
        with self._read() as conn:
            wanted = conn.execute(
                select(submissions.c.graders_hash).where(submissions.c.id == submission_id)
            ).scalar()
            rows = conn.execute(select(results).where(r.submission_id == submission_id).order_by(r.id)).all()
        found = [result_from_row(row) for row in rows]
        mine = [result for result in found if wanted is not None and result.graders_hash == wanted]
        return (mine or found or [None])[-1]

    def results_of(self, submission_id: int) -> list[Result]:
        """Every result of the submission, oldest first (one per graders' hash)."""
        r = results.c
        with self._read() as conn:
            rows = conn.execute(select(results).where(r.submission_id == submission_id).order_by(r.id)).all()
        return [result_from_row(row) for row in rows]

    def submissions(self, learner: str | None = None) -> list[Submission]:
        """Every submission (or `learner`'s), in the order they were recorded."""
        query = select(submissions).order_by(submissions.c.id)
        if learner is not None:
            query = query.where(submissions.c.learner == learner)
        with self._read() as conn:
            return [submission_from_row(row) for row in conn.execute(query)]

    def count_recent(self, repository_id: int, since: datetime) -> int:
        """How many submissions of the repository were received since `since` (rate limits)."""
        c = submissions.c
        with self._read() as conn:
            return conn.execute(
                select(func.count())
                .select_from(submissions)
                .where(c.repository_id == repository_id, c.received_at >= since)
            ).scalar_one()

    def queued(self) -> int:
        """How many submissions wait (to be fetched or graded)."""
        with self._read() as conn:
            return conn.execute(
                select(func.count()).select_from(submissions).where(submissions.c.state == "queued")
            ).scalar_one()

    def claimable(self) -> dict[str, int]:
        """{graders' hash: how many fetched submissions wait for a worker of those graders}
        (the timer wakes workers while any of theirs wait; a worker says when only others do)."""
        c = submissions.c
        with self._read() as conn:
            rows = conn.execute(
                select(c.graders_hash, func.count())
                .where(c.state == "queued", c.fetched_at.is_not(None))
                .group_by(c.graders_hash)
            ).all()
        return {str(hash_): count for hash_, count in rows}

    def to_fetch(self) -> int:
        """How many queued submissions the service has yet to fetch."""
        c = submissions.c
        with self._read() as conn:
            return conn.execute(
                select(func.count())
                .select_from(submissions)
                .where(c.state == "queued", c.fetched_at.is_(None))
            ).scalar_one()

    # -------------------------------------------------------------------- graders and regrading

    def restamp_waiting(self, graders_hash: str) -> int:
        """The submissions waiting (queued, not yet graded by anyone) are to be graded with
        `graders_hash` (the service started with these graders); how many changed."""
        c = submissions.c
        with self._write() as conn:
            return conn.execute(
                update(submissions)
                .where(
                    c.state == "queued",
                    c.graders_hash.is_not(None),
                    c.graders_hash != graders_hash,
                )
                .values(graders_hash=graders_hash)
            ).rowcount

    def _regradable(self, graders_hash: str, learners: Sequence[str] | None):
        """Graded submissions (done or error) with no result of `graders_hash`."""
        c, r = submissions.c, results.c
        query = c.state.in_(("done", "error")) & ~exists(
            select(r.id).where(and_(r.submission_id == c.id, r.graders_hash == graders_hash))
        )
        if learners is not None:
            query = query & c.learner.in_(list(learners))
        return query

    def graded_by_others(self, graders_hash: str) -> int:
        """How many graded submissions have no result of `graders_hash` (graded by other graders:
        `autograder regrade` would grade them again)."""
        with self._read() as conn:
            return conn.execute(
                select(func.count()).select_from(submissions).where(self._regradable(graders_hash, None))
            ).scalar_one()

    def queue_regrade(
        self,
        graders_hash: str,
        *,
        learners: Sequence[str] | None = None,
        lessons: Sequence[str] | None = None,
    ) -> int:
        """Queue again, on the regrade lane, to be graded with `graders_hash`, every graded
        submission (done or error; `learners`' only, when given) that has no result of those
        graders; their results so far are kept. A claim takes every waiting push first, so a
        regrade never delays a learner's push. `lessons` is accepted for the callers' sake and
        changes nothing: a submission is graded whole, with every lesson of the graders (their
        hash names the lessons). How many were queued. Nothing regrades by itself: the
        instructor calls this (`autograder regrade`, the live view)."""
        del lessons
        with self._write() as conn:
            return conn.execute(
                update(submissions)
                .where(self._regradable(graders_hash, learners))
                .values(
                    state="queued",
                    lane="regrade",
                    graders_hash=graders_hash,
                    attempts=0,
                    worker=None,
                    lease_expires=None,
                    last_error=None,
                )
            ).rowcount

    # -------------------------------------------------------------------- the workers table

    def worker_seen(
        self,
        name: str,
        *,
        host: str,
        pid: int,
        graders_hash: str,
        threads: int,
        started_at: datetime,
        lease_s: float,
        state: str,
        detail: str = "",
        current: int | None = None,
        now: datetime | None = None,
    ) -> None:
        """Where worker `name` stands (its row renewed, or made)."""
        now = now or now_utc()
        values = {
            "host": host,
            "pid": pid,
            "graders_hash": graders_hash,
            "threads": threads,
            "started_at": started_at,
            "seen_at": now,
            "lease_s": lease_s,
            "state": state,
            "detail": detail,
            "current": current,
        }
        for _ in range(2):  # a second time only after losing a race to insert the same name
            try:
                with self._write() as conn:
                    if conn.execute(update(workers).where(workers.c.name == name).values(**values)).rowcount:
                        return
                    conn.execute(insert(workers).values(name=name, **values))
                    return
            except IntegrityError:
                continue

    def workers(self) -> list[WorkerRow]:
        """Every worker that has been seen, by name."""
        with self._read() as conn:
            return [worker_from_row(row) for row in conn.execute(select(workers).order_by(workers.c.name))]

    def counts(self) -> dict[str, Any]:
        """{state: how many}, for the instructor's overview and the tests."""
        c = submissions.c
        with self._read() as conn:
            return dict(conn.execute(select(c.state, func.count()).group_by(c.state)).all())
