"""The supervisor: starts one worker, limits it, and leaves nothing of it behind.

Started by the trusted sandbox with `python -I -S supervisor.py CONFIG_JSON` in a session of
its own, it uses only the standard library. It becomes a *child subreaper* (Linux), so any
process the learner's code spawns, even one that double-forks or calls setsid() to escape,
is re-parented to it when its parent dies; when the worker ends, or when the trusted side
closes our stdin, every remaining descendant is killed and reaped.

Between fork and exec the worker is hardened (`harden`): a session and process group of its own,
its resource limits and, when the config names a user (the grader runs as root), namespaces of its
own (autograder/sandbox/worker/confine.py; a PID namespace from this supervisor) and that user, with no
supplementary groups and no capability. On Linux it also gets no_new_privs (no sudo, no setuid
programs) and SIGKILL when the supervisor dies. The worker walls itself in (Landlock, seccomp)
once its libraries are loaded, before the first learner import.

The warm pool's zygote (zygote.py) forks supervisors instead of executing this file; both kinds
live through `run_supervisor` and harden their worker with `harden`, so the sequence that walls a
worker in is written once, here.

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
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38


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


def drop_privileges(user: dict) -> None:
    """Become `user` (uid, gid; no supplementary groups), with no capability left."""
    os.setgroups([])
    os.setresgid(user["gid"], user["gid"], user["gid"])
    os.setresuid(user["uid"], user["uid"], user["uid"])
    if os.getuid() != user["uid"] or os.geteuid() != user["uid"]:
        raise OSError("the user did not change")


def harden(limits: dict, user: dict | None, walls: dict | None) -> None:
    """The worker's steps between fork and its first line of Python of its own, the same for a
    forked (zygote.py) and an executed worker, in this order: its own session and process group,
    resource limits; as root, namespaces (confine.enter_namespaces, which need root) and then the
    unprivileged user; no_new_privs and death with the supervisor last (the user change clears
    the latter). The walls that need no root come later (confine.confine).

    A user that cannot be taken (a seccomp filter, an odd user namespace: the trusted side
    checked that it should work) leaves the worker root, with every other step, and its log
    (fd 2) says so: grading goes on."""
    become_session_leader()
    apply_limits(limits)
    if os.geteuid() != 0:
        drop_capabilities()
    if user is not None:
        if walls is not None:
            from autograder.sandbox.worker import confine

            try:
                confine.enter_namespaces(walls, user)
            except OSError as exc:  # the worker reports the namespaces as missing
                os.write(2, f"autograder: no namespaces for the worker ({exc})\n".encode())
        try:
            drop_privileges(user)
        except OSError as exc:
            say_running_as_root(2, user, exc)
    seal_worker()


def become_session_leader() -> None:
    """A session and a process group of the worker's own, led by it: the seccomp filter then
    refuses setsid and setpgid, so nothing it runs can join the supervisor's group (which a
    kill(0, ...) of the worker would reach) or leave the worker's (which the timeout kills)."""
    try:
        os.setsid()
    except OSError:  # already a group leader (never for a freshly forked worker)
        os.setpgid(0, 0)


def drop_capabilities() -> None:
    """No capability left: a worker forked in a user namespace of its own (run_supervisor) holds
    every capability of that namespace until it drops them (an executed one would lose them at
    exec). Nothing to drop, and nothing done, for an ordinary process that is not root."""
    libc = _libc()
    if libc is None:
        return
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    try:
        libc.capset(header, (ctypes.c_uint32 * 6)())
    except AttributeError:
        pass


def say_running_as_root(log_fd: int, user: dict, exc: BaseException) -> None:
    os.write(log_fd, f"autograder: could not run as uid {user['uid']} ({exc}); running as root\n".encode())


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
    for name, value in (
        ("RLIMIT_AS", limits.get("memory_bytes")),
        ("RLIMIT_CPU", limits.get("cpu_seconds")),
        ("RLIMIT_NPROC", limits.get("processes")),
        ("RLIMIT_FSIZE", limits.get("file_bytes")),
        ("RLIMIT_CORE", 0),
    ):
        if value is None or not hasattr(resource, name):
            continue
        try:
            resource.setrlimit(getattr(resource, name), (value, value))
        except (ValueError, OSError):
            pass


def process_ids() -> list[int] | None:
    """Every process /proc lists now; None where there is no /proc to read."""
    try:
        return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return None


def children_of(pid: int) -> list[int]:
    found = []
    for child in process_ids() or ():
        try:
            with open(f"/proc/{child}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid:
            found.append(child)
    return found


def reap(worker: subprocess.Popen | None = None) -> None:
    """Collect exited children (orphans re-parented to us included), keeping the worker's code
    (the zygote, which has no worker of its own, reaps its supervisors with `reap()`)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if worker is not None and pid == worker.pid and worker.returncode is None:
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


def run_supervisor(config: dict, start_worker, handed: list[int], control, out) -> None:
    """One supervisor's whole life, the same for an executed one (`main`) and one forked by the
    warm pool's zygote, in this order: become a child subreaper (every orphan of the learner's
    code comes back to us); as root with walls on, a PID namespace, entered before the fork
    because it only takes effect for children (the worker is its PID 1); `start_worker(user)`
    forks the worker, whose child runs `harden`; close our copies of `handed`, the fds only the
    worker may keep (its death must show as EOF to the trusted side); say "started PID"; then
    `supervise` until `control` reaches EOF. Without root, a user namespace and a PID namespace
    where the kernel allows them (confine.enter_user_and_pid_namespace), before the fork too.
    `config`: the worker config of
    autograder/sandbox/client.py (user, walls; the rest is `start_worker`'s)."""
    become_subreaper()
    user, walls = config.get("user"), config.get("walls")
    if walls is not None and walls.get("enabled", True):
        from autograder.sandbox.worker import confine

        if user is not None:
            confine.enter_pid_namespace()
        elif os.geteuid() != 0:  # without root: a user namespace makes the PID namespace possible
            confine.enter_user_and_pid_namespace()
    worker = start_worker(user)
    for fd in handed:
        os.close(fd)
    out.write(f"started {worker.pid}\n")
    out.flush()
    supervise(worker, control, out, (walls or {}).get("home"))


def main() -> None:
    config = json.loads(sys.argv[1])
    sys.path.insert(0, config["package"])  # -I: for autograder.sandbox.worker.confine only
    fds = config["pass_fds"]

    def spawn(user: dict | None) -> subprocess.Popen:
        return subprocess.Popen(
            config["argv"],
            cwd=config["cwd"],
            env=config["env"],
            pass_fds=fds,
            stdin=subprocess.DEVNULL,
            stdout=config["log_fd"],
            stderr=config["log_fd"],
            preexec_fn=lambda: harden(config["limits"], user, config.get("walls")),
        )

    def start_worker(user: dict | None) -> subprocess.Popen:
        try:
            return spawn(user)
        except (OSError, subprocess.SubprocessError) as exc:
            if user is None:
                raise
            # Executed as `user`, the interpreter could not start (a runtime it cannot reach):
            # grade anyway, as `harden` does when the user change itself fails, and say so.
            say_running_as_root(config["log_fd"], user, exc)
            return spawn(None)

    run_supervisor(config, start_worker, [*fds, config["log_fd"]], sys.stdin, sys.stdout)


HOME_BYTES = 256 << 20  # what a worker may keep in its home, all files together
HOME_ENTRIES = 10_000
DISK_EVERY = 0.25  # seconds between two looks at the home (files are also capped one by one)


def home_usage(home: str, limit_entries: int = HOME_ENTRIES) -> tuple[int, int]:
    """(bytes allocated, entries) under `home`, never following a link; stops counting entries
    past `limit_entries` (a worker that made that many is stopped anyway)."""
    total = entries = 0
    stack = [home]
    while stack and entries <= limit_entries:
        try:
            with os.scandir(stack.pop()) as listing:
                for entry in listing:
                    entries += 1
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += getattr(info, "st_blocks", 0) * 512 or info.st_size
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
        except OSError:
            continue
    return total, entries


def supervise(worker, control, out, home: str | None = None, home_bytes: int = HOME_BYTES) -> None:
    """Until `control` reaches EOF (the trusted side is done, or died): report the worker's exit
    on `out` and kill whatever it left; then kill and reap everything. `worker` is a Popen or
    anything with its pid, returncode and poll(). A worker whose `home` grows past `home_bytes`
    (or HOME_ENTRIES files) is killed, and "disk BYTES" says why before its exit."""
    reported = False
    next_look = time.monotonic() + DISK_EVERY
    while True:
        ready, _, _ = select.select([control], [], [], 0.1)
        if ready and not os.read(control.fileno(), 4096):
            break  # the trusted side is done with us, or died
        if home is not None and not reported and time.monotonic() >= next_look:
            used, entries = home_usage(home)
            if used > home_bytes or entries > HOME_ENTRIES:
                out.write(f"disk {used}\n")
                out.flush()
                kill_everything(worker)
            next_look = time.monotonic() + DISK_EVERY
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
