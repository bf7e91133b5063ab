"""Bringing a store made before issue 33 (one result per submission, no lanes, no archives) to
the schema of schema.py, in place, when the service or a worker opens it (Store.create):
create_all makes the new tables but never changes an existing one.

    submissions  gains lane ("push"), graders_hash (that of its result, if any) and fetched_at
                 (NULL: the service's fetcher fetches the commit again when it is queued again,
                 as for a new submission)
    results      gains lane ("push") and loses UNIQUE (submission_id) for UNIQUE (submission_id,
                 graders_hash): SQLite cannot drop a constraint, so the table is made again and
                 its rows copied (one transaction); PostgreSQL drops and adds the constraints

Idempotent, and safe when several processes open an old store at once (Store.create runs it
under the store's creation lock: the first upgrades it, the others find it upgraded): a store
already upgraded (or made new) is left as it is.
"""

from __future__ import annotations

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection

from autograder.service.schema import results


def upgrade(conn: Connection) -> bool:
    """Upgrade the store `conn` reaches if it predates the lanes; True when it did. Run inside
    the caller's writing transaction, which holds the store's creation lock (Store.create)."""
    if "lane" in {column["name"] for column in inspect(conn).get_columns("submissions")}:
        return False
    sqlite = conn.dialect.name == "sqlite"
    for statement in (
        "ALTER TABLE submissions ADD COLUMN lane VARCHAR(16) NOT NULL DEFAULT 'push'",
        "ALTER TABLE submissions ADD COLUMN graders_hash VARCHAR(64)",
        "ALTER TABLE submissions ADD COLUMN fetched_at "
        + ("DATETIME" if sqlite else "TIMESTAMP WITH TIME ZONE"),
        "UPDATE submissions SET graders_hash = "
        "(SELECT results.graders_hash FROM results WHERE results.submission_id = submissions.id)",
    ):
        conn.execute(text(statement))
    if sqlite:
        conn.execute(text("ALTER TABLE results RENAME TO results_before_lanes"))
        results.create(conn)
        kept = "id, submission_id, status, result_json, graders_hash, seed, error, worker, created_at"
        conn.execute(
            text(f"INSERT INTO results ({kept}, lane) SELECT {kept}, 'push' FROM results_before_lanes")
        )
        conn.execute(text("DROP TABLE results_before_lanes"))
    else:
        conn.execute(text("ALTER TABLE results ADD COLUMN lane VARCHAR(16) NOT NULL DEFAULT 'push'"))
        conn.execute(text("ALTER TABLE results DROP CONSTRAINT IF EXISTS results_submission_id_key"))
        conn.execute(
            text(
                "ALTER TABLE results ADD CONSTRAINT one_result_per_graders UNIQUE (submission_id, graders_hash)"
            )
        )
    return True
