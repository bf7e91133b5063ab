"""Who may open the instructor's live view: one revocable token per instructor or assistant, and
the sessions those tokens open (issue 33).

    staff_tokens    one row per token given (`autograder staff add NAME`): the person's name, their
                    role ("instructor" | "assistant"), the token's SHA-256 (never the token: it is
                    printed once and kept by its owner), when it was made and, once revoked, when.
                    A name has at most one token that is not revoked.
    staff_sessions  one row per login: the session id's SHA-256 (the id itself lives only in the
                    browser's cookie), the token that opened it, its CSRF token (synchronizer
                    token: sent back in each POST's form or X-CSRF-Token header), when it ends.

A token is 256 random bits, so one SHA-256 is enough to store it (nothing to guess, nothing for a
slow hash to slow down); the lookup is by that hash. Revoking a token ends its sessions at once:
they are deleted, and a session is valid only while its token is not revoked. The tables live on
`schema.metadata`, so `Store.create()` makes them; live.py imports this module, and app.py imports
live.py before the store is created.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import (
    BigInteger,
    Column,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    delete,
    insert,
    select,
    update,
)
from sqlalchemy.engine import Connection, Engine

from autograder.service.schema import UTCDateTime, metadata, now_utc

ROLES = ("instructor", "assistant")
TOKEN_PREFIX = "agst_"  # says what a token is when one turns up in a log or a paste
SESSION_LIFETIME = timedelta(hours=12)  # a working day; then the token is asked for again
_ID = BigInteger().with_variant(Integer(), "sqlite")  # as schema.py's ids

staff_tokens = Table(
    "staff_tokens",
    metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("name", String(255), nullable=False),
    Column("role", String(16), nullable=False),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("revoked_at", UTCDateTime),
    Index("staff_tokens_by_name", "name"),
)

staff_sessions = Table(
    "staff_sessions",
    metadata,
    Column("id_hash", String(64), primary_key=True),
    Column("token_id", _ID, ForeignKey("staff_tokens.id"), nullable=False),
    Column("csrf", String(64), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
    Index("staff_sessions_by_token", "token_id"),
)


class StaffError(Exception):
    """A staff command that cannot be done; `key` is the catalog text that says why."""

    def __init__(self, key: str, **params: object) -> None:
        super().__init__(key)
        self.key, self.params = key, params


@dataclass(frozen=True)
class StaffMember:
    id: int
    name: str
    role: str
    created_at: datetime
    revoked_at: datetime | None


@dataclass(frozen=True)
class Session:
    """A valid login: who, and the CSRF token its POSTs must carry."""

    name: str
    role: str
    csrf: str
    expires_at: datetime


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


class Staff:
    """The tokens and sessions in the store's database (the engine of `Store`)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def create(self) -> None:
        metadata.create_all(self.engine, tables=[staff_tokens, staff_sessions])

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        # IMMEDIATE on SQLite (schema.make_engine): the write lock first, as the store's writers.
        with self.engine.connect() as conn:
            conn.execution_options(writes=True)
            with conn.begin():
                yield conn

    # ------------------------------------------------------------------ tokens (the command)

    def add(self, name: str, role: str = "instructor", *, now: datetime | None = None) -> str:
        """A new token for `name` (returned once, stored hashed); StaffError when `name` has
        one not revoked, or the role or name is not one the view knows."""
        name = name.strip()
        if role not in ROLES:
            raise StaffError("service.staff.bad_role", role=role, roles=", ".join(ROLES))
        if not name or len(name) > 255 or not name.isprintable():
            raise StaffError("service.staff.bad_name", name=name)
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        c = staff_tokens.c
        with self._write() as conn:
            active = conn.execute(select(c.id).where(c.name == name, c.revoked_at.is_(None))).first()
            if active is not None:
                raise StaffError("service.staff.exists", name=name)
            conn.execute(
                insert(staff_tokens).values(
                    name=name, role=role, token_hash=digest(token), created_at=now or now_utc()
                )
            )
        return token

    def members(self) -> list[StaffMember]:
        c = staff_tokens.c
        with self.engine.connect() as conn:
            rows = conn.execute(select(staff_tokens).order_by(c.name, c.id)).all()
        return [StaffMember(r.id, r.name, r.role, r.created_at, r.revoked_at) for r in rows]

    def revoke(self, name: str, *, now: datetime | None = None) -> int:
        """Revoke `name`'s token and end its sessions now; how many sessions ended. StaffError
        when `name` has no token to revoke."""
        c = staff_tokens.c
        with self._write() as conn:
            ids = [row.id for row in conn.execute(select(c.id).where(c.name == name, c.revoked_at.is_(None)))]
            if not ids:
                raise StaffError("service.staff.unknown", name=name)
            conn.execute(update(staff_tokens).where(c.id.in_(ids)).values(revoked_at=now or now_utc()))
            return conn.execute(delete(staff_sessions).where(staff_sessions.c.token_id.in_(ids))).rowcount

    # ------------------------------------------------------------------ sessions (the view)

    def login(self, token: str, *, now: datetime | None = None) -> tuple[str, Session] | None:
        """A new session for a valid, unrevoked token: (the session id for the cookie, the
        session); None for any other token (which one is never said)."""
        if not token or len(token) > 200:
            return None
        now = now or now_utc()
        c = staff_tokens.c
        with self._write() as conn:
            row = conn.execute(
                select(c.id, c.name, c.role).where(c.token_hash == digest(token), c.revoked_at.is_(None))
            ).first()
            if row is None:
                return None
            sid, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
            expires = now + SESSION_LIFETIME
            conn.execute(delete(staff_sessions).where(staff_sessions.c.expires_at < now))  # the stale ones
            conn.execute(
                insert(staff_sessions).values(
                    id_hash=digest(sid), token_id=row.id, csrf=csrf, created_at=now, expires_at=expires
                )
            )
        return sid, Session(row.name, row.role, csrf, expires)

    def session(self, sid: str | None, *, now: datetime | None = None) -> Session | None:
        """The session of a cookie's id while it has not expired and its token is not revoked."""
        if not sid or len(sid) > 100:
            return None
        s, t = staff_sessions.c, staff_tokens.c
        with self.engine.connect() as conn:
            row = conn.execute(
                select(t.name, t.role, s.csrf, s.expires_at)
                .select_from(staff_sessions.join(staff_tokens, s.token_id == t.id))
                .where(s.id_hash == digest(sid), s.expires_at > (now or now_utc()), t.revoked_at.is_(None))
            ).first()
        return None if row is None else Session(row.name, row.role, row.csrf, row.expires_at)

    def logout(self, sid: str) -> None:
        with self._write() as conn:
            conn.execute(delete(staff_sessions).where(staff_sessions.c.id_hash == digest(sid)))
