"""The warm worker pool: one process that imports torch once and forks a ready worker per sandbox.

Importing torch costs a worker about 1.5 s of CPU, more than most lessons' checks together. The
zygote pays it once per grading process: started by the trusted side (autograder/sandbox/starters.py)
with the same clean environment as any worker, it imports numpy and torch, warms them up, and
then only waits on a socket pair for "start a worker" requests. It never runs learner code.

For each request it forks a child that plays the supervisor's part through the same code as
a freshly executed supervisor (supervisor.run_supervisor, after a session of its own): a child
subreaper that kills and reaps everything the learner's code spawns, and a worker child hardened
by supervisor.harden (its own process group, resource limits, the unprivileged user when the
grader is root, no_new_privs and SIGKILL on the supervisor's death). The only difference is that
the worker is a fork of a process that already imported torch instead of a new interpreter: it
closes every file descriptor but its two pipes and its log, takes the sandbox's environment and
folder, and serves.

Requests are SOCK_SEQPACKET messages: a JSON config (cwd, env, limits, user) with five file
descriptors attached (request pipe, response pipe, log file, status pipe, control pipe); the
reply is the supervisor's pid. Status lines go to the trusted side on the status pipe, as the
exec'd supervisor writes them on its stdout; closing the control pipe means "done".

One zygote may serve several grading processes (`autograder grade-all`, autograder/cohort/pool.py):
on the socket it was started with, and only there, the message {"attach": true} with one
SOCK_SEQPACKET socket attached adds that socket as one more client, greeted like the first. Each
client's requests are answered on its own socket; a client that goes away takes nothing with it
but its socket (its workers end when their control pipes close, as they always do); the zygote
exits once every socket it serves is closed.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys
import traceback
from pathlib import Path

from autograder.sandbox.worker import supervisor

MAX_MESSAGE = 1 << 16
FD_COUNT = 5


class ForkedWorker:
    """The worker child as supervisor.py's helpers see a Popen: pid, returncode, poll()."""

    def __init__(self, pid: int) -> None:
        self.pid, self.returncode = pid, None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


def _close_all_but(keep: set[int]) -> None:
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        fds = list(range(3, 1024))
    for fd in fds:
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _become_worker(config: dict, user: dict | None, req_r: int, resp_w: int, log_fd: int) -> None:
    """In the worker child: isolate, limit, and serve. Never returns."""
    code = 70
    try:
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        _close_all_but({0, 1, 2, req_r, resp_w})
        walls, cwd = config.get("walls"), config["cwd"]
        supervisor.harden(config["limits"], user, walls)
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(config["env"])
        import tempfile

        tempfile.tempdir = None  # follow the sandbox's TMPDIR, not the zygote's
        sys.argv[:] = ["-c", str(req_r), str(resp_w)]  # as an executed worker's (worker/main.py)
        from autograder.sandbox.worker.main import forget_config, serve

        # The request's config lives on in the frames below (the zygote's and the supervisor's,
        # as forked): emptied here, its walls once they are built (serve).
        forget_config({key: value for key, value in config.items() if key != "walls"}, user)
        config.clear()
        serve(Path(cwd).resolve(), req_r, resp_w, walls)
        code = 0
    except BaseException:  # noqa: BLE001 - whatever happens, the log says it and we exit
        try:
            os.write(2, traceback.format_exc().encode(errors="replace"))
        except OSError:
            pass
    finally:
        os._exit(code)


def _become_supervisor(config: dict, fds: list[int]) -> None:
    """In the forked child: the supervisor of one worker. Never returns."""
    code = 0
    try:
        req_r, resp_w, log_fd, status_w, control_r = fds
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()  # an executed supervisor gets its session from the trusted side

        def start_worker(user: dict | None) -> ForkedWorker:
            pid = os.fork()
            if pid == 0:
                _become_worker(config, user, req_r, resp_w, log_fd)
            return ForkedWorker(pid)

        status = os.fdopen(status_w, "w", buffering=1)
        control = os.fdopen(control_r, "rb", buffering=0)
        supervisor.run_supervisor(config, start_worker, [req_r, resp_w, log_fd], control, status)
    except BaseException:  # noqa: BLE001
        code = 71
    finally:
        os._exit(code)


def _attach(data: bytes, fds: list[int]) -> socket.socket | None:
    """The client socket of an attach request, or None when `data` is not one."""
    request = json.loads(data)
    if request != {"attach": True}:
        return None
    if len(fds) != 1:
        raise ValueError(f"an attach request carries 1 file descriptor, got {len(fds)}")
    client = socket.socket(fileno=os.dup(fds[0]))
    if client.family != socket.AF_UNIX or client.type != socket.SOCK_SEQPACKET:
        client.close()
        raise ValueError("an attached client must be an AF_UNIX SOCK_SEQPACKET socket")
    return client


def _serve_request(sock: socket.socket, first: socket.socket, clients: list[socket.socket]) -> None:
    """Read one message from `sock` and act on it; a closed socket leaves `clients`."""
    try:
        data, fds, _flags, _addr = socket.recv_fds(sock, MAX_MESSAGE, FD_COUNT)
    except (ConnectionError, OSError):
        data, fds = b"", []
    if not data:
        for fd in fds:
            os.close(fd)
        clients.remove(sock)
        sock.close()
        return
    reply: dict | None = None
    try:
        client = _attach(data, fds) if sock is first else None
        if client is not None:
            clients.append(client)
            _send(client, {"ready": True}, clients)
            return  # no reply to the attacher: it need not read, and we never block on it
        config = json.loads(data)
        data = b""  # the forked worker's stack keeps this frame: no copy of the config in it
        if len(fds) != FD_COUNT:
            raise ValueError(f"expected {FD_COUNT} file descriptors, got {len(fds)}")
        pid = os.fork()
        if pid == 0:
            for other in clients:  # no supervisor or worker holds any client's socket
                other.close()
            _become_supervisor(config, fds)
        reply = {"pid": pid}
    except Exception as exc:  # noqa: BLE001 - a bad request must not end the pool
        reply = {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        for fd in fds:
            os.close(fd)
    if reply is not None:
        _send(sock, reply, clients)


def _send(sock: socket.socket, reply: dict, clients: list[socket.socket]) -> None:
    try:
        sock.send(json.dumps(reply).encode())
    except OSError:  # that client is gone: the others are still served
        if sock in clients:
            clients.remove(sock)
        sock.close()


def main() -> None:
    first = socket.socket(fileno=int(sys.argv[1]))
    from autograder.sandbox.worker.main import prepare_libraries

    prepare_libraries()
    if os.geteuid() != 0:  # every supervisor forked from here inherits the answer
        from autograder.sandbox.worker import confine

        confine.user_namespaces_work()
    signal.signal(signal.SIGCHLD, lambda _signum, _frame: supervisor.reap())
    clients = [first]
    _send(first, {"ready": True}, clients)
    while clients:
        ready, _, _ = select.select(clients, [], [])
        for sock in ready:
            if sock in clients:  # not closed by an earlier one of this round
                _serve_request(sock, first, clients)
    # Every client is gone: so are we, at once. Tearing torch's modules down would cost ~0.7 s
    # that the grading process waits for at its exit; nothing needs flushing.
    os._exit(0)


if __name__ == "__main__":
    main()
