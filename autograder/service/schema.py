"""The service's SQL schema: its tables, the rows read from them, and the engine that reaches
them (SQLAlchemy Core; SQLite by default, PostgreSQL at scale, with the same statements). What
the store does with them is store.py's. Other parts of the service (the live view, the check
runs) read these tables through the Table objects below and add tables of their own to
`metadata`.

Four tables:

    submissions  one row per (repository, commit) the service accepted: who (the roster's learner,
                 the repository by id), what (the sha), when (submitted_at and where that time
                 came from, received_at), the token's jti (UNIQUE: a token replayed is the same
                 submission; UNIQUE (repository_id, sha): two runs on one commit are one), the
                 page key (the unguessable URL), its state and its lease:
                     queued -> grading -> done | error       graded, a result row each
                     grading -> queued                        its lease expired (reap) or its
                                                              worker cannot grade (requeue)
                     queued -> superseded                     a newer push of the same repository
                                                              was queued: recorded, never graded
                     queued -> error                          the service cannot fetch the commit
                     done | error -> queued (lane regrade)    the instructor regrades
                 A queued submission is claimable once the service has fetched its files into
                 `archives` (fetched_at set: autograder/service/archiver.py); until then the
                 service's fetcher holds it with worker/lease_expires (its own lease), the
                 learner still reads "queued". lane: "push" (a learner's push) or "regrade" (the
                 instructor's; a claim always takes the push lane first). graders_hash: the
                 graders it is to be graded with (set when fetched or queued for a regrade): a
                 worker claims only submissions of its own graders' hash.
                 attempts counts leases that expired (a worker lost mid-grading, or a fetch that
                 may work later); after the last, the submission is an error with a result that
                 says so.
    results      one per submission and graders' hash (UNIQUE (submission_id, graders_hash)):
                 a regrade with other graders adds a row, the old score kept beside it. status
                 "done" (the grade JSON) or "error" (a grade-shaped JSON whose every check says
                 why, and the catalog key of that reason), the seed, the worker, the lane. The
                 submission's current result: the one of its graders_hash, else the newest.
    archives     the learner's files of one submission, as the service fetched them: a bounded
                 tar (autograder/service/archive.py), its size and sha256. Workers read it from
                 here, so they share no filesystem with the service and hold no credential.
    workers      one row per worker process (name "host:pid"): its graders' hash, threads, when
                 it started and was last seen (renewed every tick; one not seen for 3 leases is
                 gone), its state ("running", "stopped", "refused": the tasks waiting have
                 other graders than its own) and the submission it grades, if any.

Times are stored in UTC; a catalog Text (a warning, a reason) is stored as JSON. A store made
before the lanes and archives is upgraded in place when opened (schema_upgrade.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    UniqueConstraint,
    case,
    create_engine,
    event,
    select,
)
from sqlalchemy import Text as SQLText
from sqlalchemy.engine import Connection, Engine, Row
from sqlalchemy.types import TypeDecorator

from autograder.core.results import Text

if TYPE_CHECKING:  # the service's other parts, written beside this one
    pass

BUSY_TIMEOUT_S = 30.0  # how long a SQLite writer waits for another's transaction to end
STATES = ("queued", "grading", "done", "error", "superseded")
LANES = ("push", "regrade")  # a claim takes the push lane first: a regrade never delays a push
WORKER_STATES = ("running", "stopped", "refused")
LOST = "service.worker.lost"  # the reason recorded when every attempt lost its worker
GONE_AFTER_LEASES = 3  # a worker not seen for this many leases is gone


class UTCDateTime(TypeDecorator):
    """An aware datetime in, an aware UTC datetime out, on every database (SQLite keeps no
    zone: it stores the UTC wall time, in a format that sorts as the times do)."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"a naive datetime reached the store: {value!r} (give it a time zone)")
        value = value.astimezone(timezone.utc)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


# SQLite's rowid autoincrements only for INTEGER PRIMARY KEY; elsewhere ids are 64-bit.
_ID = BigInteger().with_variant(Integer(), "sqlite")

metadata = MetaData()

submissions = Table(
    "submissions",
    metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("page_key", String(64), nullable=False, unique=True),
    Column("learner", String(255), nullable=False),
    Column("repository_id", BigInteger, nullable=False),
    Column("repository", String(255), nullable=False),  # owner/name as the token said, for display
    Column("sha", String(64), nullable=False),
    Column("ref", String(255), nullable=False),
    Column("event_name", String(64), nullable=False),
    Column("run_id", BigInteger, nullable=False),
    Column("actor", String(255), nullable=False, default=""),  # who pushed: display only
    Column("token_id", String(255), nullable=False, unique=True),
    Column("submitted_at", UTCDateTime, nullable=False),
    Column("time_source", String(16), nullable=False),  # "run" | "push" | "token"
    Column("received_at", UTCDateTime, nullable=False),
    Column("state", String(16), nullable=False, default="queued"),
    Column("attempts", Integer, nullable=False, default=0),
    Column("worker", String(255)),
    Column("lease_expires", UTCDateTime),
    Column("heartbeat_at", UTCDateTime),
    # Why the last attempt gave up without a result (a Text as JSON), said if every attempt does.
    Column("last_error", SQLText),
    Column("warnings_json", SQLText, nullable=False, default="[]"),
    Column("lane", String(16), nullable=False, default="push"),  # "push" | "regrade"
    Column("graders_hash", String(64)),  # the graders it is to be graded with; None: not fetched yet
    Column("fetched_at", UTCDateTime),  # its archive stored: claimable when queued
    UniqueConstraint("repository_id", "sha", name="one_submission_per_commit"),
    Index("submissions_by_state", "state", "id"),
    Index("submissions_by_repository", "repository_id", "received_at"),
    Index("submissions_by_learner", "learner", "id"),
)

results = Table(
    "results",
    metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("submission_id", _ID, ForeignKey("submissions.id"), nullable=False),
    Column("status", String(16), nullable=False),  # "done" | "error"
    Column("result_json", SQLText, nullable=False),
    Column("graders_hash", String(64), nullable=False),
    Column("seed", BigInteger),
    Column("error", String(100)),  # the reason's catalog key, for an error
    Column("worker", String(255), nullable=False, default=""),
    Column("created_at", UTCDateTime, nullable=False),
    Column("lane", String(16), nullable=False, default="push"),
    UniqueConstraint("submission_id", "graders_hash", name="one_result_per_graders"),
)

archives = Table(
    "archives",
    metadata,
    Column("submission_id", _ID, ForeignKey("submissions.id"), primary_key=True),
    Column("data", LargeBinary, nullable=False),
    Column("size", Integer, nullable=False),
    Column("sha256", String(64), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
)

workers = Table(
    "workers",
    metadata,
    Column("name", String(255), primary_key=True),  # host:pid
    Column("host", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("graders_hash", String(64), nullable=False),
    Column("threads", Integer, nullable=False),
    Column("started_at", UTCDateTime, nullable=False),
    Column("seen_at", UTCDateTime, nullable=False),
    Column("lease_s", Float, nullable=False, default=30.0),  # "gone" after GONE_AFTER_LEASES of these
    Column("state", String(16), nullable=False),  # WORKER_STATES
    Column("detail", SQLText, nullable=False, default=""),
    Column("current", _ID),  # the submission it grades, if any
)


@dataclass(frozen=True)
class Submission:
    id: int
    page_key: str
    learner: str
    repository_id: int
    repository: str
    sha: str
    ref: str
    event_name: str
    run_id: int
    actor: str
    token_id: str
    submitted_at: datetime
    time_source: str
    received_at: datetime
    state: str
    attempts: int
    worker: str | None
    lease_expires: datetime | None
    heartbeat_at: datetime | None
    last_error: str | None
    warnings_json: str
    lane: str = "push"
    graders_hash: str | None = None
    fetched_at: datetime | None = None

    @property
    def warnings(self) -> list[Text]:
        return [Text(item["key"], item.get("params", {})) for item in json.loads(self.warnings_json or "[]")]

    @property
    def last_error_text(self) -> Text | None:
        return text_from_json(self.last_error) if self.last_error else None


@dataclass(frozen=True)
class Result:
    submission_id: int
    status: str  # "done" | "error"
    result_json: str
    graders_hash: str
    seed: int | None
    error: str | None
    worker: str
    created_at: datetime
    lane: str = "push"


@dataclass(frozen=True)
class WorkerRow:
    name: str
    host: str
    pid: int
    graders_hash: str
    threads: int
    started_at: datetime
    seen_at: datetime
    lease_s: float
    state: str
    detail: str
    current: int | None

    def gone(self, now: datetime) -> bool:
        """Not seen for GONE_AFTER_LEASES leases (killed, or its machine away)."""
        return (now - self.seen_at).total_seconds() > GONE_AFTER_LEASES * self.lease_s


def text_to_json(text: Text) -> str:
    """A catalog Text as JSON; a parameter that is itself a Text (a fetch refusal inside the
    worker's reason) stays a Text, so that it is said in the reader's language, never as repr."""
    return json.dumps(_encoded(text), ensure_ascii=False, default=str)


def text_from_json(data: str) -> Text:
    return _decoded(json.loads(data))


def _encoded(value: Any) -> Any:
    if isinstance(value, Text):
        return {"key": value.key, "params": {name: _encoded(v) for name, v in value.params.items()}}
    if isinstance(value, dict):
        return {"$dict": {str(name): _encoded(v) for name, v in value.items()}}
    if isinstance(value, (list, tuple)):
        return [_encoded(v) for v in value]
    return value


def _decoded(item: dict) -> Text:
    return Text(item["key"], {name: _decoded_param(v) for name, v in item.get("params", {}).items()})


def _decoded_param(value: Any) -> Any:
    if isinstance(value, dict) and "key" in value and set(value) <= {"key", "params"}:
        return _decoded(value)
    if isinstance(value, dict) and set(value) == {"$dict"}:
        return {name: _decoded_param(v) for name, v in value["$dict"].items()}
    if isinstance(value, list):
        return [_decoded_param(v) for v in value]
    return value


def now_utc() -> datetime:
    return datetime.now(timezone.utc)


def submission_from_row(row: Row) -> Submission:
    return Submission(**{name: row._mapping[name] for name in Submission.__dataclass_fields__})


def result_from_row(row: Row) -> Result:
    return Result(**{name: row._mapping[name] for name in Result.__dataclass_fields__})


def worker_from_row(row: Row) -> WorkerRow:
    return WorkerRow(**{name: row._mapping[name] for name in WorkerRow.__dataclass_fields__})


def claim_query(graders_hash: str | None = None):
    """The oldest claimable submission, the push lane first (a regrade never delays a push):
    queued, fetched, of `graders_hash` (None: of any), its row locked where the database has row
    locks (another claimer skips it rather than waits: PostgreSQL's SELECT ... FOR UPDATE SKIP
    LOCKED; SQLite has none, and its IMMEDIATE transaction serializes claimers instead)."""
    c = submissions.c
    query = select(submissions).where(c.state == "queued", c.fetched_at.is_not(None))
    if graders_hash is not None:
        query = query.where(c.graders_hash == graders_hash)
    return (
        query.order_by(case((c.lane == "push", 0), else_=1), c.id).limit(1).with_for_update(skip_locked=True)
    )


def make_engine(url: str) -> Engine:
    """An engine for `url`; for SQLite: WAL, the busy timeout, foreign keys, and transactions
    begun by us (IMMEDIATE when they write, see `Store._write`), not by the driver."""
    if not url.startswith("sqlite"):
        return create_engine(url, pool_pre_ping=True)
    engine = create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_S})

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection, _record) -> None:
        dbapi_connection.isolation_level = None  # the driver's own BEGIN off: "begin" below does it
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("writes") else "BEGIN")

    return engine
