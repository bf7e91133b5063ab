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
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
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
    claim_query,
    make_engine,
    metadata,
    now_utc,
    result_from_row,
    results,
    submission_from_row,
    submissions,
    text_to_json,
)

__all__ = ["LOST", "STATES", "Result", "Store", "Submission", "claim_query", "now_utc"]


class Store:
    """The submissions and their results in the database at `url` ("sqlite:///path.db",
    "postgresql+psycopg://..."). Thread-safe; one per process."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)

    def create(self) -> None:
        """Create the tables that do not exist yet (a new data folder; idempotent)."""
        metadata.create_all(self.engine)

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

    def claim(
        self,
        worker: str,
        lease_s: float,
        *,
        boundaries: Sequence[datetime] = (),
        now: datetime | None = None,
    ) -> Submission | None:
        """The oldest queued submission that is not superseded, now "grading" under `worker`'s
        lease of `lease_s` seconds; None when nothing is left to grade. Older queued submissions
        of a repository that has a newer one are marked superseded on the way, unless one is the
        last before one of `boundaries` (deadlines)."""
        now = now or now_utc()
        c = submissions.c
        with self._write() as conn:
            while True:
                row = conn.execute(claim_query()).first()
                if row is None:
                    return None
                candidate = submission_from_row(row)
                if self._is_superseded(conn, candidate, boundaries):
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
                conn.execute(
                    insert(results).values(
                        submission_id=submission_id,
                        status=status,
                        result_json=result_json,
                        graders_hash=graders_hash,
                        seed=seed,
                        error=error,
                        worker=worker,
                        created_at=now,
                    )
                )
                return True
        except IntegrityError:
            return False

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
                conn.execute(
                    insert(results).values(
                        submission_id=lapsed.id,
                        status="error",
                        result_json=(
                            lost_result(lapsed, reason)
                            if lost_result
                            else json.dumps(
                                {"error": {"key": reason.key, "params": reason.params}}, default=str
                            )
                        ),
                        graders_hash=graders_hash,
                        seed=None,
                        error=reason.key,
                        worker=lapsed.worker or "",
                        created_at=now,
                    )
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
        with self._read() as conn:
            row = conn.execute(select(results).where(results.c.submission_id == submission_id)).first()
        return None if row is None else result_from_row(row)

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
        """How many submissions wait for a worker (the timer wakes workers while any do)."""
        with self._read() as conn:
            return conn.execute(
                select(func.count()).select_from(submissions).where(submissions.c.state == "queued")
            ).scalar_one()

    def counts(self) -> dict[str, Any]:
        """{state: how many}, for the instructor's overview and the tests."""
        c = submissions.c
        with self._read() as conn:
            return dict(conn.execute(select(c.state, func.count()).group_by(c.state)).all())
