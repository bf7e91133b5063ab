"""The worker's walls: what it may read, write, reach and signal once learner code can run.

Two steps, both standard library only, both on the worker's side of the boundary:

`enter_namespaces` (only when the grader is root, between fork and the drop to the unprivileged
user): new mount, network and IPC namespaces. In the mount namespace /dev/shm becomes an empty
tmpfs of its own, and a runtime that the unprivileged user
could not reach (a Python under /root) is bind-mounted, read-only, at its own path under a
fresh tmpfs that hides everything else of the folder it lived in. So the worker never needs a
capability. The network namespace has no interface up: no connection at all. The IPC namespace
takes every SysV object with it when the worker ends. (The supervisor gives the worker a PID
namespace of its own too: see `enter_pid_namespace`.)

`enter_user_and_pid_namespace` (a supervisor that is not root, before it forks the worker, where
the kernel lets a plain user do it): a user namespace mapping only the grader's own ids and a PID
namespace, so the worker is PID 1 and no other pid means anything to it.

`confine` (on every Linux path, root or not, after the worker's libraries are warm and before
the first learner import): Landlock allows reading only the Python runtime, the system libraries,
a handful of /etc and /dev files and the worker's own copy of the submission, writing only its
home, no TCP, and (ABI >= 6) no signal or abstract socket outside its own domain; then the
seccomp filter (seccomp.py) refuses new processes, sockets, SysV IPC and the ways around, and lets
every call that names a process (prlimit64, sched_*, setpriority...) act on the worker itself only.

Both return what they enforced; the worker reports it in its first message, before any learner
code has run, so the trusted side can record it in the result (`isolation`).
"""

from __future__ import annotations

import ctypes
import functools
import os
import stat
import sys

from autograder.sandbox.worker import landlock, seccomp

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWPID = 0x00020000, 0x08000000, 0x40000000, 0x20000000
CLONE_NEWUSER = 0x10000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT = 1, 2, 4, 32
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18

# Outside the runtime, what CPython, numpy and torch open at run time.
SYSTEM_LIBRARIES = ("/lib", "/lib32", "/lib64", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/local/lib")
ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/usr/share/zoneinfo",
    "/etc/nsswitch.conf",
)
DEVICES_READ = ("/dev/urandom", "/dev/random", "/dev/zero")
CPU_INFO = ("/sys/devices/system/cpu", "/sys/fs/cgroup/cpu.max", "/proc/cpuinfo")
GPU_DEVICES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset")
GPU_READ = (
    "/proc/driver/nvidia",
    "/sys/bus/pci",
    "/sys/devices",
    "/proc/self/maps",
    "/usr/share/nvidia",
    "/etc/nvidia",
)


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def enc(s: str | None) -> bytes | None:
        return None if s is None else s.encode()

    _check(
        _libc().mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
        f"mount {target}",
    )


def unshare(flags: int) -> None:
    _check(_libc().unshare(ctypes.c_int(flags)), "unshare")


# ------------------------------------------------------------------------------ root only


def enter_pid_namespace() -> bool:
    """In a root supervisor, before it forks the worker: the worker becomes PID 1 of a namespace
    of its own, sees no other process, and everything it starts dies with it."""
    try:
        unshare(CLONE_NEWPID)
        return True
    except (OSError, AttributeError):
        return False


# ------------------------------------------------------------------------------ without root


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _own_user_and_pid_namespace(uid: int, gid: int) -> None:
    """A user namespace that maps only `uid` and `gid` (to themselves), and a PID namespace for
    the children to come; OSError where the kernel refuses either."""
    unshare(CLONE_NEWUSER | CLONE_NEWPID)
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")


@functools.cache
def user_namespaces_work() -> bool:
    """Whether a child of this process can make its own user and PID namespaces AND fork into
    them: Ubuntu 23.10+ (AppArmor) lets the unshare succeed and refuses what follows, so the
    probe goes as far as a grandchild that is PID 1 of the new namespace. Once per process (the
    warm pool's zygote asks before it forks anyone: ~30 ms per fork of a process holding torch)."""
    uid, gid = os.getuid(), os.getgid()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - answers with its exit code only
        code = 1
        try:
            _own_user_and_pid_namespace(uid, gid)
            child = os.fork()
            if child == 0:
                os._exit(0 if os.getpid() == 1 else 1)
            code = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
        except BaseException:  # noqa: BLE001
            code = 1
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def enter_user_and_pid_namespace() -> bool:
    """In a supervisor that is not root, before it forks the worker: the worker becomes PID 1 of
    a PID namespace of its own, in a user namespace of its own that maps only our ids, so no pid
    it can name is the grader's, the zygote's, the supervisor's or the shell's. False (and nothing
    done) where the kernel refuses it: the result's `isolation.namespaces` then stays empty."""
    if not hasattr(os, "fork") or not user_namespaces_work():
        return False
    try:
        _own_user_and_pid_namespace(os.getuid(), os.getgid())
        return True
    except (OSError, AttributeError):
        return False


def _reachable(path: str) -> bool:
    """Whether any user can traverse to `path` (search permission on every parent folder)."""
    parts = os.path.abspath(path).split(os.sep)
    for index in range(2, len(parts)):
        try:
            if not os.stat(os.sep.join(parts[:index]) or os.sep).st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
    return True


def _hidden_ancestor(path: str) -> str | None:
    """The topmost folder above `path` that other users cannot search, if any."""
    parts = os.path.realpath(path).split(os.sep)
    for index in range(2, len(parts)):
        folder = os.sep.join(parts[:index])
        try:
            if not os.stat(folder).st_mode & stat.S_IXOTH:
                return folder
        except OSError:
            return None
    return None


def _expose(runtime: list[str]) -> list[str]:
    """Bind-mount (read-only) every runtime folder the unprivileged user cannot reach at its own
    path, under a tmpfs that replaces the hidden folder above it; the folders exposed."""
    hidden: dict[str, list[str]] = {}
    for path in runtime:
        if not path:
            continue
        real = os.path.realpath(path)
        ancestor = _hidden_ancestor(real) if os.path.exists(real) else None
        if ancestor is not None:
            hidden.setdefault(ancestor, []).append(real)
    exposed = []
    for ancestor, paths in hidden.items():
        # Keep a handle on each folder before the tmpfs covers the way to it.
        handles = {path: os.open(path, os.O_PATH | os.O_CLOEXEC) for path in sorted(set(paths))}
        try:
            _mount("tmpfs", ancestor, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
            for path, fd in handles.items():
                if os.path.isdir(f"/proc/self/fd/{fd}"):
                    os.makedirs(path, mode=0o755, exist_ok=True)
                else:
                    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
                    open(path, "a").close()
                _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
                _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
                exposed.append(path)
        finally:
            for fd in handles.values():
                os.close(fd)
    return exposed


def enter_namespaces(config: dict, user: dict) -> dict:
    """As root, before becoming `user`: the mount, network and IPC namespaces (module docstring).
    What was done, for the report; raises OSError when the namespaces cannot be made at all.
    With the walls off (AUTOGRADER_ISOLATION=off) only the runtime is exposed, so that the
    unprivileged user can still run Python: that is no wall, only what the user change needs."""
    if not config.get("enabled", True):
        unshare(CLONE_NEWNS)
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
        return {
            "namespaces": ["mount"],
            "exposed": _expose([*config.get("runtime", []), config.get("package", "")]),
        }
    unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC)
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    done = {"namespaces": ["mount", "network", "ipc"]}
    if os.path.isdir("/dev/shm"):
        try:
            _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755")
        except OSError:
            pass
    # The engine's package too: an executed worker imports its own code from it before walling
    # itself in (Landlock then denies the package, graders included, like any other folder).
    done["exposed"] = _expose([*config.get("runtime", []), config.get("root", ""), config.get("package", "")])
    return done


def runtime_reachable(runtime: list[str]) -> bool:
    return all(_reachable(path) for path in runtime if os.path.exists(path))


# ------------------------------------------------------------------------------ every path


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def _mapped_folders() -> set[str]:
    """Folders of the shared libraries this process has loaded (a conda or Nix libc, say)."""
    found = set()
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                path = line.split(None, 5)[5].strip() if line.count(" ") >= 5 else ""
                if path.startswith("/") and ".so" in path and os.path.isfile(path):
                    found.add(os.path.dirname(path))
    except (OSError, IndexError):
        pass
    return found


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _allow_except(rules: landlock.Ruleset, path: str, rights: int, deny: list[str], depth: int = 0) -> None:
    """Allow `path` with `rights`, except what lies under a `deny` folder: a folder that holds
    one is allowed child by child instead (Landlock can only add, never subtract)."""
    real = os.path.realpath(path)
    if real in deny:
        return
    if not any(_inside(folder, real) for folder in deny) or depth > 8:
        rules.allow(real, rights)
        return
    try:
        names = os.listdir(real)
    except OSError:
        return
    for name in names:
        _allow_except(rules, os.path.join(real, name), rights, deny, depth + 1)


def _own_namespaces(host: dict) -> list[str]:
    """The namespaces this process does not share with the trusted side."""
    names = {"mnt": "mount", "net": "network", "ipc": "ipc", "pid": "pid", "user": "user"}
    own = []
    for name in names:
        try:
            if name in host and os.readlink(f"/proc/self/ns/{name}") != host[name]:
                own.append(name)
        except OSError:
            pass
    return own


def confine(config: dict) -> dict:
    """Wall this process in (module docstring); what was enforced. Nothing is raised: what the
    kernel refuses is reported as missing, and grading goes on."""
    report: dict = {
        "landlock": 0,
        "filesystem": False,
        "network": False,
        "signals": False,
        "processes": False,
        "ipc": False,
    }
    if not sys.platform.startswith("linux"):
        return report
    version = landlock.abi()
    report["landlock"] = version
    report["namespaces"] = _own_namespaces(config.get("host_ns") or {})
    uid = os.getuid()
    report["user"] = "root" if uid == 0 else "unprivileged" if uid != config.get("host_uid", uid) else "same"
    deny = [os.path.realpath(path) for path in config.get("deny", []) if path]
    if version >= 1:
        try:
            if _threads() != 1:  # Landlock binds the calling thread (and what it starts) only
                raise OSError(f"{_threads()} threads")
            rules = landlock.Ruleset(version)
            root, home = config["root"], config["home"]
            runtime = [*config.get("runtime", []), *sorted(_mapped_folders()), *SYSTEM_LIBRARIES]
            for path in runtime:
                _allow_except(rules, path, landlock.READ_EXEC, deny)
            for path in (*ETC_FILES, *DEVICES_READ, *CPU_INFO):
                rules.allow(path, landlock.READ)
            rules.allow(os.devnull, landlock.READ_FILE | landlock.WRITE_FILE | landlock.TRUNCATE)
            if config.get("gpu"):
                for path in GPU_DEVICES + tuple(f"/dev/nvidia{i}" for i in range(16)):
                    rules.allow(path, landlock.READ_FILE | landlock.WRITE_FILE | landlock.IOCTL_DEV)
                for path in GPU_READ:
                    rules.allow(path, landlock.READ)
            rules.allow(root, landlock.READ)
            rules.allow(home, landlock.WRITE)
            rules.restrict()
            report["filesystem"] = True
            report["network"] = version >= 4  # TCP, until seccomp below refuses every socket
            report["signals"] = version >= 6
        except OSError as exc:
            report["landlock_error"] = str(exc)[:200]
    if seccomp.supported():
        try:
            seccomp.install()
            report.update(processes=True, ipc=True, network=True, signals=True, seccomp=True)
        except OSError as exc:
            report["seccomp_error"] = str(exc)[:200]
    return report
