"""The check-run publisher's own table (checks.py): which verdicts are to be posted to GitHub as
check runs, which were, and which were dropped, so that a restart loses none and posts none
twice that it knew it had posted.

    check_runs  one row per result (results.id) the publisher has seen:
                    pending -> posted         GitHub created the check run (check_run_id)
                    pending -> dropped        a newer verdict of the same learner arrived before
                                              this one was posted: only the newest is posted
                    pending -> failed         GitHub refused it for good (a 4xx that is not a
                                              rate limit); `detail` says GitHub's status and
                                              message
                    pending -> given_up       every retry of a 5xx (or GitHub unreachable)
                                              failed; the next start makes it pending again
                                              (`revive`), unless the learner has a newer one
                attempts counts 5xx/unreachable answers; not_before is when it may be tried
                again; sent_at the last time it was sent (the rate window is seeded from it
                after a restart).

Defined on autograder.service.schema.metadata, so Store.create() makes it (serve imports checks.py,
which imports this module, before the store is created). Read and written with SQLAlchemy Core
only: SQLite and PostgreSQL alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Column,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.engine import Connection, Engine

from autograder.service.schema import UTCDateTime, metadata, results, submissions

# schema.py's id type: SQLite's rowid for INTEGER, 64-bit elsewhere
_ID = BigInteger().with_variant(Integer(), "sqlite")
CHECK_STATES = ("pending", "posted", "dropped", "failed", "given_up")
DETAIL_CHARS = 300
LATE_COMMIT_IDS = 1000  # results ids may commit out of order (several workers): look this far back

check_runs = Table(
    "check_runs",
    metadata,
    Column("result_id", _ID, ForeignKey("results.id"), primary_key=True, autoincrement=False),
    Column("submission_id", _ID, nullable=False),
    Column("learner", String(255), nullable=False),
    Column("state", String(16), nullable=False, default="pending"),
    Column("attempts", Integer, nullable=False, default=0),
    Column("not_before", UTCDateTime),
    Column("sent_at", UTCDateTime),
    Column("posted_at", UTCDateTime),
    Column("check_run_id", BigInteger),
    Column("detail", String(DETAIL_CHARS)),
    Column("created_at", UTCDateTime, nullable=False),
    Index("check_runs_by_state", "state", "result_id"),
    Index("check_runs_by_learner", "learner", "state"),
)


@contextmanager
def reading(engine: Engine) -> Iterator[Connection]:
    with engine.connect() as conn:
        yield conn


@contextmanager
def writing(engine: Engine) -> Iterator[Connection]:
    """A writing transaction; on SQLite it begins IMMEDIATE (schema.make_engine's "writes")."""
    with engine.connect() as conn:
        conn.execution_options(writes=True)
        with conn.begin():
            yield conn


def discover(conn: Connection, after_id: int, now: datetime, batch: int) -> tuple[int, int]:
    """Record the results not seen yet (ids above `after_id` - LATE_COMMIT_IDS) as pending, then
    drop every pending row of those learners older than their newest: (the highest result id
    seen, how many rows were added)."""
    r, s, k = results.c, submissions.c, check_runs.c
    rows = conn.execute(
        select(r.id, r.submission_id, s.learner)
        .select_from(
            results.join(submissions, s.id == r.submission_id).outerjoin(check_runs, k.result_id == r.id)
        )
        .where(k.result_id.is_(None), r.id > max(0, after_id - LATE_COMMIT_IDS))
        .order_by(r.id)
        .limit(batch)
    ).all()
    if not rows:
        return after_id, 0
    conn.execute(
        insert(check_runs),
        [
            {
                "result_id": row.id,
                "submission_id": row.submission_id,
                "learner": row.learner,
                "state": "pending",
                "attempts": 0,
                "created_at": now,
            }
            for row in rows
        ],
    )
    for learner in sorted({row.learner for row in rows}):
        newest = conn.execute(
            select(func.max(k.result_id)).where(k.learner == learner, k.state == "pending")
        ).scalar_one()
        conn.execute(
            update(check_runs)
            .where(k.learner == learner, k.state == "pending", k.result_id < newest)
            .values(state="dropped", detail="a newer verdict of the same learner")
        )
    return max(after_id, max(row.id for row in rows)), len(rows)


def revive(conn: Connection) -> int:
    """The verdicts given up (GitHub failing) pending again, with fresh attempts, unless the same
    learner has a newer verdict pending or posted (then dropped); how many were revived."""
    k = check_runs.c
    revived = 0
    for row in conn.execute(select(k.result_id, k.learner).where(k.state == "given_up")).all():
        newer = conn.execute(
            select(func.count())
            .select_from(check_runs)
            .where(k.learner == row.learner, k.result_id > row.result_id, k.state.in_(("pending", "posted")))
        ).scalar_one()
        values = {"state": "dropped"} if newer else {"state": "pending", "attempts": 0, "not_before": None}
        conn.execute(update(check_runs).where(k.result_id == row.result_id).values(**values))
        revived += 0 if newer else 1
    return revived


def next_due(conn: Connection, now: datetime):
    """The oldest pending row that may be sent now, or None."""
    k = check_runs.c
    return conn.execute(
        select(check_runs)
        .where(k.state == "pending", (k.not_before.is_(None)) | (k.not_before <= now))
        .order_by(k.result_id)
        .limit(1)
    ).first()


def earliest_retry(conn: Connection) -> datetime | None:
    """When the first pending row held back by a retry delay may be sent."""
    k = check_runs.c
    return conn.execute(
        select(func.min(k.not_before)).where(k.state == "pending", k.not_before.is_not(None))
    ).scalar_one()


def sent_since(conn: Connection, since: datetime) -> list[datetime]:
    """The last sending time of each row sent since `since` (the rate window after a restart)."""
    k = check_runs.c
    return list(conn.execute(select(k.sent_at).where(k.sent_at >= since)).scalars())


def mark(conn: Connection, result_id: int, **values) -> None:
    if "detail" in values and values["detail"] is not None:
        values["detail"] = str(values["detail"])[:DETAIL_CHARS]
    conn.execute(update(check_runs).where(check_runs.c.result_id == result_id).values(**values))


def counts(conn: Connection) -> dict[str, int]:
    """{state: how many rows}, for the metrics and the tests."""
    k = check_runs.c
    return dict(conn.execute(select(k.state, func.count()).group_by(k.state)).all())
