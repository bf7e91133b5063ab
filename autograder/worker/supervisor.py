"""The supervisor: starts one worker, limits it, and leaves nothing of it behind.

Started by the trusted sandbox with `python -I -S supervisor.py CONFIG_JSON` in a session of
its own, it uses only the standard library. It becomes a *child subreaper* (Linux), so any
process the learner's code spawns, even one that double-forks or calls setsid() to escape,
is re-parented to it when its parent dies; when the worker ends, or when the trusted side
closes our stdin, every remaining descendant is killed and reaped.

Stdout carries short status lines to the trusted side: "started PID" and "exit CODE".
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def apply_limits(limits: dict) -> None:
    """Runs in the worker between fork and exec."""
    os.setpgid(0, 0)
    try:
        import resource
    except ImportError:  # not on this platform: the trusted side already warned
        return
    for name, value in (("RLIMIT_AS", limits.get("memory_bytes")),
                        ("RLIMIT_CPU", limits.get("cpu_seconds")),
                        ("RLIMIT_NPROC", limits.get("processes")),
                        ("RLIMIT_FSIZE", limits.get("file_bytes")),
                        ("RLIMIT_CORE", 0)):
        if value is None or not hasattr(resource, name):
            continue
        try:
            resource.setrlimit(getattr(resource, name), (value, value))
        except (ValueError, OSError):
            pass


def children_of(pid: int) -> list[int]:
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid:
            found.append(int(entry))
    return found


def reap(worker: subprocess.Popen) -> None:
    """Collect exited children (orphans re-parented to us included), keeping the worker's code."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid == worker.pid and worker.returncode is None:
            worker.returncode = os.waitstatus_to_exitcode(status)


def kill_everything(worker: subprocess.Popen) -> None:
    try:
        os.killpg(worker.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, AttributeError):
        pass
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        kids = children_of(os.getpid())
        if not kids:
            break
        for pid in kids:
            for kill in (lambda p: os.killpg(p, signal.SIGKILL), lambda p: os.kill(p, signal.SIGKILL)):
                try:
                    kill(pid)
                except (ProcessLookupError, PermissionError):
                    pass
        time.sleep(0.02)
        reap(worker)
    reap(worker)


def main() -> None:
    config = json.loads(sys.argv[1])
    become_subreaper()
    fds = config["pass_fds"]
    worker = subprocess.Popen(
        config["argv"], cwd=config["cwd"], env=config["env"], pass_fds=fds,
        stdin=subprocess.DEVNULL, stdout=config["log_fd"], stderr=config["log_fd"],
        preexec_fn=lambda: apply_limits(config["limits"]),
    )
    for fd in [*fds, config["log_fd"]]:
        os.close(fd)  # only the worker keeps them: its death must show as EOF to the trusted side
    out = sys.stdout
    out.write(f"started {worker.pid}\n")
    out.flush()
    reported = False
    while True:
        ready, _, _ = select.select([sys.stdin], [], [], 0.1)
        if ready and not os.read(sys.stdin.fileno(), 4096):
            break  # the trusted side is done with us, or died
        code = worker.poll()
        if code is not None and not reported:
            kill_everything(worker)  # whatever the learner's code left running
            out.write(f"exit {code}\n")
            out.flush()
            reported = True
        reap(worker)
    kill_everything(worker)
    if not reported and worker.poll() is not None:
        out.write(f"exit {worker.returncode}\n")
        out.flush()


if __name__ == "__main__":
    main()
