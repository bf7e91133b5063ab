"""Real servers for the service's tests, one per test module (module fixtures listen on
127.0.0.1 only): a PostgreSQL server (Debian's initdb/pg_ctl; initdb refuses root, so it runs as
`nobody` when the tests are root) and a redis-server (no persistence). Import the fixtures into a
test module (`from support.servers import postgres, redis_url  # noqa: F401`).

Where PostgreSQL's programs or the psycopg driver are not installed, a test using `postgres` is
reported skipped saying which is missing; so is one using `redis_url` without redis-server."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

REDIS_SERVER = "/usr/bin/redis-server"


def free_port() -> int:
    """A port free now on 127.0.0.1 (redis-server cannot be told port 0)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def postgres() -> str:
    """A PostgreSQL server for this module: the URL of its server, without a database."""
    pytest.importorskip(
        "psycopg", reason="the psycopg driver is not installed (pip install 'psycopg[binary]')"
    )
    if not all(shutil.which(name) for name in ("initdb", "pg_ctl")):
        pytest.skip("PostgreSQL's initdb and pg_ctl are not installed (apt-get install postgresql)")
    with running_postgres() as url:
        yield url


@contextlib.contextmanager
def running_postgres() -> Iterator[str]:
    """A PostgreSQL server while the block runs (the fixture above, and bench/bench_service_scale.py):
    the URL of its server, without a database."""
    programs = {name: shutil.which(name) for name in ("initdb", "pg_ctl")}
    folder = Path(tempfile.mkdtemp(prefix="autograder-pg-"))
    as_user = {}
    if os.geteuid() == 0:  # the server refuses to run as root
        shutil.chown(folder, "nobody")
        as_user = {"user": "nobody", "group": "nogroup"}
    port = free_port()
    data = folder / "data"

    def run(*argv: str) -> None:
        subprocess.run(argv, cwd=folder, check=True, capture_output=True, timeout=120, **as_user)

    run(programs["initdb"], "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync")
    options = f"-k {folder} -c listen_addresses=127.0.0.1 -p {port} -c fsync=off"
    run(programs["pg_ctl"], "-D", str(data), "-o", options, "-l", str(folder / "log"), "-w", "start")
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}"
    finally:
        subprocess.run(
            [programs["pg_ctl"], "-D", str(data), "-m", "immediate", "stop"],
            cwd=folder,
            capture_output=True,
            **as_user,
        )
        shutil.rmtree(folder, ignore_errors=True)


def new_database(server: str) -> str:
    """A fresh database on the `postgres` fixture's server: its SQLAlchemy URL."""
    import psycopg

    name = f"t_{uuid.uuid4().hex}"
    with psycopg.connect(
        f"{server.replace('postgresql+psycopg', 'postgresql')}/postgres", autocommit=True
    ) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    return f"{server}/{name}"


@pytest.fixture(scope="module")
def redis_url() -> str:
    """A redis-server for this module (no persistence): its redis:// URL."""
    if not os.access(REDIS_SERVER, os.X_OK):
        pytest.skip(f"{REDIS_SERVER} is not installed (apt-get install redis-server)")
    with running_redis() as url:
        yield url


@contextlib.contextmanager
def running_redis() -> Iterator[str]:
    """A redis-server while the block runs (no persistence): its redis:// URL."""
    folder = Path(tempfile.mkdtemp(prefix="autograder-redis-"))
    os.chmod(folder, 0o777)
    port = free_port()
    proc = subprocess.Popen(
        [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        + ["--dir", str(folder), "--protected-mode", "yes"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        end = time.monotonic() + 30
        while True:
            assert proc.poll() is None, "redis-server stopped at start"
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        break
            except OSError:
                pass
            assert time.monotonic() < end, "redis-server never answered"
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(folder, ignore_errors=True)
