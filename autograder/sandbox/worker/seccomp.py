"""A small seccomp filter for the worker: system calls a lesson never needs are refused.

Landlock (landlock.py) walls in files, TCP, signals and ptrace; what it cannot name is refused
here, as root and as a plain user alike:

- creating processes (fork, vfork, clone without CLONE_THREAD; clone3 answers ENOSYS so that
  the C library falls back to clone for threads): nothing the learner starts can outlive
  grading, hold memory beyond the worker's own limit, or be a daemon;
- sockets of any family (UDP, UNIX path sockets, netlink: what Landlock's TCP rules leave);
- SysV IPC objects (shared memory, semaphores, message queues), which outlive a process, and
  memfd files, whose pages the address-space limit does not count;
- ways around the other walls: ptrace and process_vm_*, open_by_handle_at, io_uring,
  namespaces and mounts, bpf, userfaultfd, perf events, kernel keyrings;
- signals to anyone but the worker itself (kill, tgkill and sigqueue to its own pid or process
  group only; tkill and pidfds refused), so signals stay contained on kernels whose Landlock
  cannot scope them (ABI < 6).

Each refused call fails with EPERM (a Python PermissionError in the learner's traceback),
never kills the worker. Written by hand as classic BPF (seccomp(2)): x86_64 and aarch64.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct
import sys

PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
CLONE_THREAD = 0x00010000
LD_W_ABS, JEQ_K, JGE_K, JSET_K, RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
OFFSET_NR, OFFSET_ARCH, OFFSET_ARG0 = 0, 4, 16

_ARCHES = {
    "x86_64": (0xC000003E, {
        "fork": 57, "vfork": 58, "clone": 56, "clone3": 435, "socket": 41,
        "shmget": 29, "semget": 64, "msgget": 68, "ptrace": 101, "process_vm_readv": 310,
        "process_vm_writev": 311, "open_by_handle_at": 304, "io_uring_setup": 425, "unshare": 272,
        "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "bpf": 321,
        "userfaultfd": 323, "perf_event_open": 298, "keyctl": 250, "add_key": 248, "request_key": 249,
        "fsopen": 430, "fsmount": 432, "move_mount": 429, "open_tree": 428,
        "tkill": 200, "pidfd_send_signal": 424, "pidfd_open": 434, "pidfd_getfd": 438,
        "memfd_create": 319, "memfd_secret": 447,
        "kill": 62, "tgkill": 234, "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297,
    }),
    "aarch64": (0xC00000B7, {
        "clone": 220, "clone3": 435, "socket": 198, "shmget": 194, "semget": 190, "msgget": 186,
        "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "open_by_handle_at": 265,
        "io_uring_setup": 425, "unshare": 97, "setns": 268, "mount": 40, "umount2": 39,
        "pivot_root": 41, "chroot": 51, "bpf": 280, "userfaultfd": 282, "perf_event_open": 241,
        "keyctl": 219, "add_key": 217, "request_key": 218, "fsopen": 430, "fsmount": 432,
        "move_mount": 429, "open_tree": 428, "tkill": 130, "pidfd_send_signal": 424, "pidfd_open": 434,
        "pidfd_getfd": 438, "memfd_create": 279, "memfd_secret": 447,
        "kill": 129, "tgkill": 131, "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240,
    }),
}
# Handled by their own blocks below, not refused outright.
_CHECKED = ("clone", "clone3", "kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")
X32_BIT = 0x40000000


class _Filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Filter))]


def supported() -> bool:
    return sys.platform.startswith("linux") and platform.machine() in _ARCHES


def program(pid: int, machine: str | None = None) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions for the process `pid` (its own pid, as it
    sees it: signals may go to it and its process group only), for `machine` (default: this one)."""
    arch, numbers = _ARCHES[machine or platform.machine()]
    deny = RET_ERRNO | errno.EPERM
    denied = [nr for name, nr in numbers.items() if name not in _CHECKED]
    code: list[tuple[int, int, int, int]] = [
        (LD_W_ABS, 0, 0, OFFSET_ARCH),
        (JEQ_K, 1, 0, arch),
        (RET_K, 0, 0, deny),  # another ABI (i386 int 0x80 on x86_64): nothing at all
        (LD_W_ABS, 0, 0, OFFSET_NR),
    ]
    if arch == _ARCHES["x86_64"][0]:
        code += [(JGE_K, 0, 1, X32_BIT), (RET_K, 0, 0, deny)]
    for nr in denied:
        code += [(JEQ_K, 0, 1, nr), (RET_K, 0, 0, deny)]
    # kill(pid | 0 | -pgid): itself or its own group (the worker leads its process group).
    code += [
        (JEQ_K, 0, 6, numbers["kill"]),
        (LD_W_ABS, 0, 0, OFFSET_ARG0),
        (JEQ_K, 3, 0, pid), (JEQ_K, 2, 0, 0), (JEQ_K, 1, 0, (-pid) & 0xFFFFFFFF),
        (RET_K, 0, 0, deny), (RET_K, 0, 0, RET_ALLOW),
    ]
    # tgkill and the sigqueue calls name a thread group first: only its own.
    for name in ("tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"):
        code += [
            (JEQ_K, 0, 4, numbers[name]),
            (LD_W_ABS, 0, 0, OFFSET_ARG0),
            (JEQ_K, 1, 0, pid),
            (RET_K, 0, 0, deny), (RET_K, 0, 0, RET_ALLOW),
        ]
    code += [
        (JEQ_K, 0, 1, numbers["clone3"]), (RET_K, 0, 0, RET_ERRNO | errno.ENOSYS),
        (JEQ_K, 0, 3, numbers["clone"]),
        (LD_W_ABS, 0, 0, OFFSET_ARG0),  # clone's flags (low 32 bits, little-endian)
        (JSET_K, 1, 0, CLONE_THREAD),
        (RET_K, 0, 0, deny),  # a new process
        (RET_K, 0, 0, RET_ALLOW),
    ]
    return code


def install() -> None:
    """Install the filter on this process (after no_new_privs, before any other thread
    exists: a filter binds the calling thread and what it starts); OSError if refused."""
    import os

    code = program(os.getpid())
    filters = (_Filter * len(code))(*[_Filter(*instruction) for instruction in code])
    prog = _Program(len(code), filters)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp: {errno.errorcode.get(err, err)}")


def packed(pid: int, machine: str | None = None) -> bytes:
    """The filter as the kernel reads it."""
    return b"".join(struct.pack("HBBI", *instruction) for instruction in program(pid, machine))
