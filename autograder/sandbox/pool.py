"""The trusted side of the warm worker pool (autograder/sandbox/worker/zygote.py).

One zygote per grading process, started on first use and kept until the process exits: it has
imported torch once, and forks a ready worker (with its own supervisor) for each sandbox, so a
worker starts in milliseconds instead of the ~1.5 s of CPU a torch import costs. `grade-all`
shares one zygote among its grading processes instead (autograder/cohort/pool.py): its parent
starts it and `attach`es one socket per grading process, which `WarmPool.adopt`s it; if that
zygote dies, a grading process starts a zygote of its own, as after its own zygote's death. Linux only (it
needs fork, SOCK_SEQPACKET and file-descriptor passing); elsewhere, or with
AUTOGRADER_WARM_POOL=0, or if the zygote cannot start, every sandbox executes a fresh worker as
before. Either way the worker is the same: one config (client.Sandbox.worker_config: limits,
user, walls, environment, folder) and one start sequence (worker/supervisor.py's run_supervisor
and harden), in a session of its own.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from autograder.sandbox.worker.zygote import MAX_MESSAGE  # one protocol, defined on the zygote's side

ENV_SWITCH = "AUTOGRADER_WARM_POOL"
ZYGOTE_BOOT = (
    "import sys; sys.path.insert(0, sys.argv.pop(2)); "
    "from autograder.sandbox.worker.zygote import main; main()"
)


class PoolError(Exception):
    """The zygote could not be started or did not answer."""


def enabled() -> bool:
    return (
        sys.platform.startswith("linux")
        and hasattr(os, "fork")
        and hasattr(socket, "send_fds")
        and os.environ.get(ENV_SWITCH, "1").strip() not in ("0", "false", "no", "off")
    )


def zygote_pid() -> int | None:
    """The pid of this process's zygote while it runs, else None."""
    pool = WarmPool._instance
    return pool.pid if pool is not None and pool.owner == os.getpid() and pool.alive() else None


class WarmPool:
    _instance: "WarmPool | None" = None
    _instance_lock = threading.Lock()

    @classmethod
    def shared(cls, package_parent: Path, env_for, startup_timeout: float) -> "WarmPool | None":
        """This process's pool, launched on first use (or relaunched if its zygote died) without
        waiting for it to be ready; None when the pool is disabled or cannot be launched (the
        caller then executes a fresh worker)."""
        if not enabled():
            return None
        with cls._instance_lock:
            pool = cls._instance
            if pool is not None and (pool.owner != os.getpid() or not pool.alive()):
                if pool.owner == os.getpid():
                    pool.close()
                pool = cls._instance = None
            if pool is None:
                try:
                    pool = cls._instance = WarmPool(package_parent, env_for, startup_timeout)
                except (OSError, PoolError, ValueError):
                    return None
            return pool

    @classmethod
    def adopt(cls, sock: socket.socket, pid: int, startup_timeout: float) -> None:
        """Make `sock`, a client socket of a zygote started by another process (`attach`), this
        process's pool; `WarmPool.shared` returns it while that zygote lives."""
        with cls._instance_lock:
            if cls._instance is not None and cls._instance.owner == os.getpid():
                cls._instance.close()
            cls._instance = AttachedPool(sock, pid, startup_timeout)

    def __init__(
        self, package_parent: Path, env_for, startup_timeout: float, *, scratch: Path | None = None
    ) -> None:
        """Launch a zygote; its home (HOME and TMPDIR) is a new folder in `scratch` (default:
        the temporary folder)."""
        self.owner = os.getpid()
        self._lock = threading.Lock()
        self.home = Path(tempfile.mkdtemp(prefix="autograder-pool-", dir=scratch))
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        log = open(self.home / "zygote.log", "wb")
        try:
            # The same clean environment as any worker: the zygote's memory is every worker's.
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-c", ZYGOTE_BOOT, str(theirs.fileno()), str(package_parent)],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                env=env_for(self.home),
            )
        finally:
            theirs.close()
            log.close()
        self.sock = ours
        self.startup_timeout = startup_timeout
        self.ready = False  # until the zygote's greeting: it is importing torch meanwhile
        atexit.register(self.close)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None and self.sock.fileno() >= 0

    def attach(self) -> socket.socket | None:
        """A new client socket of this zygote, for another process to `adopt` (the zygote greets
        it once it has imported torch); None when the zygote is gone. The zygote does not
        answer an attach: nobody has to read this socket, and the zygote never blocks on it."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with self._lock:
                # Queued while the zygote still imports torch; a full queue means it is stuck.
                _, writable, _ = select.select([], [self.sock], [], self.startup_timeout)
                if not writable:
                    raise PoolError("the zygote does not read its socket")
                socket.send_fds(self.sock, [b'{"attach": true}'], [theirs.fileno()])
        except (OSError, PoolError):
            ours.close()
            return None
        finally:
            theirs.close()
        return ours

    def wait_ready(self) -> None:
        """Block until the zygote has imported torch and greeted us (PoolError if it never does)."""
        if self.ready:
            return
        reply = self._receive(self.startup_timeout)
        if reply.get("ready") is not True:
            raise PoolError(f"unexpected greeting {reply!r}")
        self.ready = True

    def spawn(self, config: dict, fds: list[int], timeout: float = 30.0) -> int:
        """Fork a supervisor and its worker for `config`, handing them `fds`; the supervisor's
        pid. The caller still owns (and closes) its copies of `fds`."""
        with self._lock:
            self.wait_ready()
            try:
                socket.send_fds(self.sock, [json.dumps(config).encode()], fds)
            except OSError as exc:
                raise PoolError(f"the zygote is gone ({exc})") from None
            reply = self._receive(timeout)
        if not isinstance(reply.get("pid"), int):
            raise PoolError(str(reply.get("error", reply)))
        return reply["pid"]

    def _receive(self, timeout: float) -> dict:
        ready, _, _ = select.select([self.sock], [], [], timeout)
        if not ready:
            raise PoolError("the zygote did not answer in time")
        try:
            data = self.sock.recv(MAX_MESSAGE)
        except OSError as exc:
            raise PoolError(f"the zygote is gone ({exc})") from None
        if not data:
            raise PoolError("the zygote exited")
        return json.loads(data)

    def close(self) -> None:
        try:
            self.sock.close()  # EOF: the zygote exits by itself
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.home, ignore_errors=True)


class AttachedPool(WarmPool):
    """A zygote that another process started and shares (`WarmPool.attach`), seen through one
    client socket: used exactly as a pool of our own, but closing it only closes that socket
    (the zygote goes on serving its other clients)."""

    def __init__(self, sock: socket.socket, pid: int, startup_timeout: float) -> None:
        self.owner = os.getpid()
        self._lock = threading.Lock()
        self.sock = sock
        self.zygote = pid
        self.startup_timeout = startup_timeout
        self.ready = False

    @property
    def pid(self) -> int:
        return self.zygote

    def alive(self) -> bool:
        """Whether the zygote still holds its end: it hangs up by dying, never by choice."""
        if self.sock.fileno() < 0:
            return False
        poller = select.poll()
        poller.register(self.sock, select.POLLIN)
        return not any(
            events & (select.POLLHUP | select.POLLERR | select.POLLNVAL) for _fd, events in poller.poll(0)
        )

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class ForkedSupervisor:
    """A zygote-forked supervisor, seen through what Sandbox uses of a Popen: pid, stdin (the
    control pipe: closing it means "done"), stdout (status lines), wait, poll and kill. It is
    not our child: its end shows as EOF on the status pipe, which it holds until it exits."""

    def __init__(self, pid: int, control_w: int, status_r: int) -> None:
        self.pid = pid
        self.stdin = os.fdopen(control_w, "wb", buffering=0)
        self.stdout = os.fdopen(status_r, "rb", buffering=0)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and self._at_eof(0):
            self.returncode = 0
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(f"supervisor {self.pid}", timeout)
            self._at_eof(0.1 if left is None else min(left, 0.1))
        return self.returncode

    def kill(self) -> None:
        # Only while it has not exited: after that its pid may already name someone else.
        if self.poll() is None:
            try:
                os.kill(self.pid, 9)
            except OSError:
                pass

    def _at_eof(self, timeout: float) -> bool:
        """Read (and drop) status lines; True once the supervisor has closed the pipe."""
        if self.stdout.closed:
            return True
        fd = self.stdout.fileno()
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            return False
        try:
            return os.read(fd, 4096) == b""
        except BlockingIOError:
            return False
