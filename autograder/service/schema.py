"""The service's SQL schema: its two tables, the rows read from them, and the engine that reaches
them (SQLAlchemy Core; SQLite by default, PostgreSQL at scale, with the same statements). What
the store does with them is store.py's.

Two tables:

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
                 attempts counts leases that expired (a worker lost mid-grading); after the
                 last, the submission is an error with a result that says so.
    results      at most one per submission (UNIQUE submission_id): status "done" (the grade
                 JSON) or "error" (a grade-shaped JSON whose every check says why, and the
                 catalog key of that reason), the graders' hash, the seed and the worker.

Times are stored in UTC; a catalog Text (a warning, a reason) is stored as JSON.
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
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    UniqueConstraint,
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
LOST = "service.worker.lost"  # the reason recorded when every attempt lost its worker


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
    UniqueConstraint("repository_id", "sha", name="one_submission_per_commit"),
    Index("submissions_by_state", "state", "id"),
    Index("submissions_by_repository", "repository_id", "received_at"),
    Index("submissions_by_learner", "learner", "id"),
)

results = Table(
    "results",
    metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("submission_id", _ID, ForeignKey("submissions.id"), nullable=False, unique=True),
    Column("status", String(16), nullable=False),  # "done" | "error"
    Column("result_json", SQLText, nullable=False),
    Column("graders_hash", String(64), nullable=False),
    Column("seed", BigInteger),
    Column("error", String(100)),  # the reason's catalog key, for an error
    Column("worker", String(255), nullable=False, default=""),
    Column("created_at", UTCDateTime, nullable=False),
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


def claim_query():
    """The oldest queued submission, its row locked where the database has row locks (another
    claimer skips it rather than waits: PostgreSQL's SELECT ... FOR UPDATE SKIP LOCKED; SQLite
    has none, and its IMMEDIATE transaction serializes claimers instead)."""
    c = submissions.c
    return (
        select(submissions)
        .where(c.state == "queued")
        .order_by(c.id)
        .limit(1)
        .with_for_update(skip_locked=True)
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
