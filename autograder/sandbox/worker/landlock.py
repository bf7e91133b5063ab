"""Landlock, the Linux kernel's unprivileged sandbox, through ctypes (standard library only).

A process that calls `restrict()` can, from then on, open only the paths under the rules it
was given, connect or bind no TCP port (ABI >= 4), and signal nothing and reach no abstract
UNIX socket outside its own Landlock domain (ABI >= 6); ptrace outside the domain is refused
from ABI 1 on. The restriction is inherited by every thread and child and can never be undone.
It needs no root, only no_new_privs, so it protects a learner's laptop, a CI runner and a
non-root instructor alike.

Why our own ctypes layer and not the `landlock` package on PyPI: it runs in the forked worker
before learner code, where we want no import beyond the standard library and full control of
every ABI feature (network from ABI 4, scoping from ABI 6); the kernel interface is three
system calls and three structs (see landlock(7)).
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys

# System call numbers: the generic table, the same on x86_64 and aarch64.
SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1 << 0
RULE_PATH_BENEATH, RULE_NET_PORT = 1, 2

# Filesystem access rights and the ABI that introduced each.
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1, 5: (1 << 16) - 1}
# The rights a rule on a file (not a folder) may carry.
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV

NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

READ = READ_FILE | READ_DIR
READ_EXEC = READ | EXECUTE
WRITE = (
    WRITE_FILE
    | READ_FILE
    | READ_DIR
    | REMOVE_DIR
    | REMOVE_FILE
    | MAKE_DIR
    | MAKE_REG
    | MAKE_SYM
    | REFER
    | TRUNCATE
)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class LandlockError(OSError):
    pass


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _syscall(libc, number: int, *args) -> int:
    result = libc.syscall(ctypes.c_long(number), *args)
    if result < 0:
        err = ctypes.get_errno()
        raise LandlockError(err, os.strerror(err))
    return result


def abi() -> int:
    """The kernel's Landlock ABI version; 0 where Landlock is missing or disabled."""
    if not sys.platform.startswith("linux") or platform.machine() not in ("x86_64", "aarch64", "AMD64"):
        return 0
    try:
        return max(
            0,
            _syscall(
                _libc(), SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION)
            ),
        )
    except (OSError, AttributeError):
        return 0


def handled_fs(version: int) -> int:
    return _FS_BY_ABI.get(version, _FS_BY_ABI[5])


class Ruleset:
    """Rules being gathered: `allow(path, rights)` for each path, then `restrict()`."""

    def __init__(self, version: int) -> None:
        if version < 1:
            raise LandlockError(38, "Landlock is not available")
        self.version = version
        self.fs = handled_fs(version)
        self.net = NET_BIND_TCP | NET_CONNECT_TCP if version >= 4 else 0
        self.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if version >= 6 else 0
        self._libc = _libc()
        attr = _RulesetAttr(self.fs, self.net, self.scoped)
        size = 8 if version < 4 else 16 if version < 6 else 24
        self.fd = _syscall(
            self._libc, SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)
        )
        self.allowed: list[tuple[str, int]] = []

    def allow(self, path: str, rights: int) -> bool:
        """Allow `rights` on `path` and below; False (and nothing allowed) if it is missing.
        A file gets only the rights a file can have."""
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            import stat

            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                rights &= FILE_RIGHTS
            rights &= self.fs
            if not rights:
                return False
            attr = _PathBeneathAttr(rights, fd)
            _syscall(
                self._libc,
                SYS_ADD_RULE,
                ctypes.c_int(self.fd),
                ctypes.c_int(RULE_PATH_BENEATH),
                ctypes.byref(attr),
                ctypes.c_uint32(0),
            )
            self.allowed.append((path, rights))
            return True
        finally:
            os.close(fd)

    def restrict(self) -> None:
        """Enforce the rules on this process (and all it will start), for good."""
        try:
            _syscall(self._libc, SYS_RESTRICT_SELF, ctypes.c_int(self.fd), ctypes.c_uint32(0))
        finally:
            os.close(self.fd)
