"""The supervisor: starts one worker, limits it, and leaves nothing of it behind.

Started by the trusted sandbox with `python -I -S supervisor.py CONFIG_JSON` in a session of
its own, it uses only the standard library. It becomes a *child subreaper* (Linux), so any
process the learner's code spawns, even one that double-forks or calls setsid() to escape,
is re-parented to it when its parent dies; when the worker ends, or when the trusted side
closes our stdin, every remaining descendant is killed and reaped.

Between fork and exec the worker is put in a process group of its own, given its resource
limits and, when the config names a user (the grader runs as root), switched to that user
with no supplementary groups, optionally keeping CAP_DAC_READ_SEARCH alone (so it can read a
Python installed under /root) as an ambient capability. On Linux it also gets no_new_privs
(no sudo, no setuid programs) and SIGKILL when the supervisor dies.

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

PR_SET_PDEATHSIG = 1
PR_SET_KEEPCAPS = 8
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE = 47, 2
CAP_DAC_READ_SEARCH = 2
LINUX_CAPABILITY_VERSION_3 = 0x20080522


def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def become_subreaper() -> bool:
    libc = _libc()
    try:
        return libc is not None and libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except AttributeError:
        return False


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def drop_privileges(user: dict) -> None:
    """Become `user` (uid, gid; no supplementary groups), keeping at most CAP_DAC_READ_SEARCH."""
    libc = _libc()
    keep = bool(user.get("read_search")) and libc is not None
    if keep:
        _check(libc.prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0), "PR_SET_KEEPCAPS")
    os.setgroups([])
    os.setresgid(user["gid"], user["gid"], user["gid"])
    os.setresuid(user["uid"], user["uid"], user["uid"])
    if keep:
        header = _CapHeader(LINUX_CAPABILITY_VERSION_3, 0)
        data = (_CapData * 2)()
        bit = 1 << CAP_DAC_READ_SEARCH
        data[0].effective = data[0].permitted = data[0].inheritable = bit
        _check(libc.capset(ctypes.byref(header), data), "capset")
        # Ambient: kept across the exec of the (not setuid) interpreter, and nothing else is.
        _check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_DAC_READ_SEARCH, 0, 0), "ambient")
    if os.getuid() != user["uid"] or os.geteuid() != user["uid"]:
        raise OSError("the user did not change")


def prepare_worker(limits: dict, user: dict | None) -> None:
    """Runs in the worker between fork and exec."""
    os.setpgid(0, 0)
    apply_limits(limits)
    if user is not None:
        drop_privileges(user)
    seal_worker()


def seal_worker() -> None:
    """The worker's last steps before learner code can run: no new privileges, and death with
    its supervisor (after the user change, which clears that setting)."""
    libc = _libc()
    if libc is not None:
        libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        # After the user change, which clears it: the worker dies with its supervisor.
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() == 1:
            os._exit(70)


def apply_limits(limits: dict) -> None:
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
    user = config.get("user")

    def spawn(user: dict | None) -> subprocess.Popen:
        return subprocess.Popen(
            config["argv"], cwd=config["cwd"], env=config["env"], pass_fds=fds,
            stdin=subprocess.DEVNULL, stdout=config["log_fd"], stderr=config["log_fd"],
            preexec_fn=lambda: prepare_worker(config["limits"], user),
        )

    try:
        worker = spawn(user)
    except (OSError, subprocess.SubprocessError) as exc:
        if user is None:
            raise
        # The trusted side checked that the switch should work; if it still fails (a seccomp
        # filter, an odd user namespace), grade anyway, and say so in the worker's log.
        os.write(config["log_fd"], f"autograder: could not run as uid {user['uid']} ({exc}); "
                                   f"running as root\n".encode())
        worker = spawn(None)
    for fd in [*fds, config["log_fd"]]:
        os.close(fd)  # only the worker keeps them: its death must show as EOF to the trusted side
    sys.stdout.write(f"started {worker.pid}\n")
    sys.stdout.flush()
    supervise(worker, sys.stdin, sys.stdout)


def supervise(worker, control, out) -> None:
    """Until `control` reaches EOF (the trusted side is done, or died): report the worker's exit
    on `out` and kill whatever it left; then kill and reap everything. `worker` is a Popen or
    anything with its pid, returncode and poll()."""
    reported = False
    while True:
        ready, _, _ = select.select([control], [], [], 0.1)
        if ready and not os.read(control.fileno(), 4096):
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
