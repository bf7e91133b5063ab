"""The warm worker pool: one process that imports torch once and forks a ready worker per sandbox.

Importing torch costs a worker about 1.5 s of CPU, more than most lessons' checks together. The
zygote pays it once per grading process: started by the trusted side (autograder/sandbox/client.py)
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
"""

from __future__ import annotations

import json
import os
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
        supervisor.harden(config["limits"], user, config.get("walls"))
        os.chdir(config["cwd"])
        os.environ.clear()
        os.environ.update(config["env"])
        import tempfile

        tempfile.tempdir = None  # follow the sandbox's TMPDIR, not the zygote's
        sys.argv[:] = ["-c", str(req_r), str(resp_w)]  # as an executed worker's (worker/main.py)
        from autograder.sandbox.worker.main import serve

        serve(Path(config["cwd"]).resolve(), req_r, resp_w, config.get("walls"))
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


def main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    from autograder.sandbox.worker.main import prepare_libraries

    prepare_libraries()
    signal.signal(signal.SIGCHLD, lambda _signum, _frame: supervisor.reap())
    sock.send(b'{"ready": true}')
    while True:
        try:
            data, fds, _flags, _addr = socket.recv_fds(sock, MAX_MESSAGE, FD_COUNT)
        except (ConnectionError, OSError):
            data = b""
        if not data:
            # The trusted side is gone: so are we, at once. Tearing torch's modules down would
            # cost ~0.7 s that the grading process waits for at its exit; nothing needs flushing.
            os._exit(0)
        try:
            config = json.loads(data)
            if len(fds) != FD_COUNT:
                raise ValueError(f"expected {FD_COUNT} file descriptors, got {len(fds)}")
            pid = os.fork()
            if pid == 0:
                sock.close()
                _become_supervisor(config, fds)
            reply = {"pid": pid}
        except Exception as exc:  # noqa: BLE001 - a bad request must not end the pool
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        finally:
            for fd in fds:
                os.close(fd)
        sock.send(json.dumps(reply).encode())


if __name__ == "__main__":
    main()
