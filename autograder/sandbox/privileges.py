"""Who a worker runs as and what it may do: the privileges the trusted side asks for.

Owns: the user a root grader's worker runs as (`worker_user`: `nobody`, when this process can
switch to it and `nobody` can reach the runtime), how the submission copy is handed over to that
user (`hand_over`), how many tasks the worker may start (`process_limit`: RLIMIT_NPROC counts
every task of its user), whether a GPU's driver rather than RLIMIT_AS bounds its memory
(`cuda_present`), and the warning where none of these limits can be enforced.
"""

from __future__ import annotations

import functools
import os
import sys
import warnings
from pathlib import Path

from autograder.sandbox import isolation
from autograder.sandbox.worker.supervisor import process_ids

# Linux capability numbers (linux/capability.h) and the user a root grader's worker runs as.
CAP_SETGID, CAP_SETUID = 6, 7
UNPRIVILEGED_USER = "nobody"


@functools.cache
def limits_warning() -> None:
    warnings.warn(
        "resource limits and process groups are only enforced on Linux/macOS; "
        "the learner's code runs without them here",
        RuntimeWarning,
        stacklevel=3,
    )


def _status_field(pid: int | str, name: str) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith(name + ":"):
                    return line.split(":", 1)[1].split()
    except OSError:
        pass
    return None


def _effective_caps() -> int:
    field = _status_field("self", "CapEff")
    try:
        return int(field[0], 16) if field else 0
    except ValueError:
        return 0


def _id_mapped(map_file: str, ident: int) -> bool:
    """Whether `ident` exists in this user namespace (/proc/self/uid_map or gid_map)."""
    try:
        with open(map_file, encoding="utf-8") as fh:
            for line in fh:
                inside, _outside, count = (int(x) for x in line.split())
                if inside <= ident < inside + count:
                    return True
    except (OSError, ValueError):
        return True  # no user namespaces here: every id exists
    return False


@functools.cache
def worker_user() -> tuple[int, int] | None:
    """(uid, gid) the worker runs as, or None when it runs as this process's user.

    Only when this process is root on Linux: the worker then runs as `nobody`, without
    supplementary groups or capabilities. A runtime that `nobody` cannot reach (a Python under
    /root) is bind-mounted for it in its own mount namespace (autograder/sandbox/worker/confine.py);
    where neither works (no CAP_SETUID, `nobody` not mapped in a user namespace, no mount
    namespaces for an unreachable runtime) the worker stays root, with a warning, and Landlock
    and seccomp still wall it in.
    """
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return None
    try:
        import pwd

        entry = pwd.getpwnam(UNPRIVILEGED_USER)
        uid, gid = entry.pw_uid, entry.pw_gid
    except (ImportError, KeyError):
        uid = gid = 65534
    from autograder.sandbox.worker import confine

    caps = _effective_caps()
    problem = None
    runtime = [*isolation.runtime_paths(), sys.executable]
    if not (caps >> CAP_SETUID & 1 and caps >> CAP_SETGID & 1):
        problem = "no CAP_SETUID/CAP_SETGID"
    elif not (_id_mapped("/proc/self/uid_map", uid) and _id_mapped("/proc/self/gid_map", gid)):
        problem = f"uid/gid {uid} is not mapped in this user namespace"
    elif not confine.runtime_reachable(runtime) and not _can_unshare():
        problem = f"{sys.executable} is not reachable by other users and there are no mount namespaces"
    if problem is not None:
        warnings.warn(
            f"the grader runs as root but the learner's code cannot be run as "
            f"{UNPRIVILEGED_USER} ({problem}); it runs as root",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    return uid, gid


@functools.cache
def _can_unshare() -> bool:
    """Whether a child of this process can have mount, network and IPC namespaces of its own."""
    from autograder.sandbox.worker import confine

    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child only answers with its exit code
        try:
            confine.unshare(confine.CLONE_NEWNS | confine.CLONE_NEWNET | confine.CLONE_NEWIPC)
            os._exit(0)
        except BaseException:  # noqa: BLE001
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def hand_over(tmp: Path, root: Path, home: Path, user: tuple[int, int]) -> None:
    """Let an unprivileged worker in: its home is its own; the submission copy it can read
    but not change (so it cannot plant files, or links, for the trusted side to read)."""
    uid, gid = user
    os.chmod(tmp, 0o711)
    for dirpath, dirnames, filenames in os.walk(root):
        os.chmod(dirpath, 0o755)
        for name in filenames:
            os.chmod(os.path.join(dirpath, name), 0o644)
    os.chown(home, uid, gid)
    os.chmod(home, 0o700)


def tasks_of(uid: int) -> int | None:
    """How many tasks (threads included: what RLIMIT_NPROC counts on Linux) `uid` has now."""
    if not sys.platform.startswith("linux"):
        return None
    pids = process_ids()
    if pids is None:
        return None
    count = 0
    for pid in pids:
        fields = _status_field(pid, "Uid"), _status_field(pid, "Threads")
        if fields[0] and fields[1] and fields[0][0] == str(uid):
            count += int(fields[1][0]) if fields[1][0].isdigit() else 1
    return count


def process_limit(allowance: int | None, user: tuple[int, int, bool] | None) -> int | None:
    """RLIMIT_NPROC for the worker: `allowance` tasks beyond what its user already runs."""
    if allowance is None or os.name != "posix":
        return None
    if os.geteuid() == 0 and user is None:
        return None  # root ignores it anyway; the supervisor's subreaper still cleans up
    if not sys.platform.startswith("linux"):
        return allowance  # macOS counts processes, not threads: the worker itself needs none
    current = tasks_of(user[0] if user else os.getuid())
    return None if current is None else current + allowance


@functools.cache
def cuda_present() -> bool:
    """Whether an NVIDIA GPU may be used, decided without importing torch (which costs seconds).

    CUDA reserves far more address space than RLIMIT_AS would allow, so on a GPU machine the
    memory limit is left to the driver and the machine.
    """
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/proc/driver/nvidia/version")
