"""The worker's seccomp filter: every system call is allowed, refused or allowed on itself only.

Landlock (landlock.py) walls in files, TCP, signals and ptrace; what it cannot name is decided
here, as root and as a plain user alike. Every name of the architecture's table (syscall_table.py,
x86-64 and aarch64) has a verdict and a one-line reason in `POLICY`; tests/sandbox/test_seccomp_table.py
fails on a name left out. In short:

- creating processes is refused (fork, vfork, clone without CLONE_THREAD; clone3 answers ENOSYS so
  that the C library falls back to clone for threads): nothing the learner starts can outlive
  grading, hold memory beyond the worker's own limit, or be a daemon; so are setpgid and setsid
  (the worker already leads a session and a process group of its own: supervisor.harden), so
  that the timeout's group kill reaches everything it runs;
- sockets, SysV and POSIX IPC objects, memfd files, and the ways around the other walls (ptrace,
  process_vm_*, handles, io_uring, namespaces, mounts, bpf, keyrings, kernel modules...);
- every call that names another process acts on the worker itself only (`CHECKED`): the pid
  argument must be 0 or the worker's own pid, as the filter is built; anything else answers
  ESRCH, as if no such process existed, whether it exists or not (so pids cannot be found by
  probing). A thread's own tid is not its process's pid: a thread names itself with 0, as the
  C library and OpenMP do for sched_setaffinity(0, ...). Signals go to the worker or its own
  process group only (EPERM otherwise); setpriority and ioprio_set only with the per-process
  selector (the per-user one reaches every process of the user).

A refused call fails with EPERM (a Python PermissionError in the learner's traceback), or ESRCH
where it names another process, and never kills the worker. A number the table does not know (a
call added by a later kernel) answers ENOSYS, as on a kernel that predates it: libraries then take
their older path, and a new call that reaches other processes stays closed until it is classified
here. Written by hand as classic BPF (seccomp(2)), with a binary search over the numbers.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct
import sys

from autograder.sandbox.worker import syscall_table

PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
CLONE_THREAD = 0x00010000
LD_W_ABS, JA, JEQ_K, JGE_K, JSET_K, RET_K = 0x20, 0x05, 0x15, 0x35, 0x45, 0x06
OFFSET_NR, OFFSET_ARCH, OFFSET_ARGS = 0, 4, 16
X32_BIT = 0x40000000
MAX_INSTRUCTIONS = 4096  # BPF_MAXINSNS

_ARCHES = {"x86_64": (0xC000003E, syscall_table.X86_64), "aarch64": (0xC00000B7, syscall_table.AARCH64)}

ALLOW, REFUSE, CHECK = "allow", "refuse", "check"

# (verdict, reason, names): the reason holds for each name of its line.
_CLASSES = (
    (
        ALLOW,
        "I/O on a descriptor the worker holds: Landlock vetted it when it was opened",
        "read write readv writev pread64 pwrite64 preadv pwritev preadv2 pwritev2 close close_range dup "
        "dup2 dup3 lseek fcntl flock fsync fdatasync syncfs sync_file_range ftruncate fallocate fadvise64 "
        "readahead sendfile splice tee vmsplice copy_file_range ioctl",
    ),
    (
        ALLOW,
        "a path: Landlock decides what the worker may read, write or create",
        "open openat openat2 creat access faccessat faccessat2 stat lstat fstat newfstatat statx statfs "
        "fstatfs readlink readlinkat getdents getdents64 getcwd chdir fchdir mkdir mkdirat rmdir unlink "
        "unlinkat rename renameat renameat2 link linkat symlink symlinkat truncate chmod fchmod fchmodat "
        "chown fchown fchownat lchown umask utime utimes utimensat futimesat mknod mknodat getxattr "
        "lgetxattr fgetxattr listxattr llistxattr flistxattr setxattr lsetxattr fsetxattr removexattr "
        "lremovexattr fremovexattr",
    ),
    (
        ALLOW,
        "the worker's own memory, bounded by its address-space and memlock limits",
        "brk mmap munmap mremap mprotect madvise mincore msync mlock mlock2 munlock mlockall munlockall "
        "remap_file_pages pkey_alloc pkey_free pkey_mprotect membarrier mbind set_mempolicy "
        "get_mempolicy set_mempolicy_home_node",
    ),
    (
        ALLOW,
        "threads of the worker and their synchronisation (torch's intra-op pool)",
        "futex futex_waitv set_robust_list set_tid_address rseq sched_yield gettid getpid getppid getpgrp "
        "exit exit_group restart_syscall arch_prctl set_thread_area get_thread_area "
        "sched_get_priority_max sched_get_priority_min getcpu",
    ),
    (
        ALLOW,
        "clocks and timers of the worker's own (setting the machine's clock is refused below)",
        "clock_gettime clock_getres clock_nanosleep nanosleep gettimeofday time times getitimer "
        "setitimer alarm timer_create timer_delete timer_getoverrun timer_gettime timer_settime "
        "timerfd_create timerfd_gettime timerfd_settime",
    ),
    (
        ALLOW,
        "signal handling inside the worker (sending is checked below)",
        "rt_sigaction rt_sigprocmask rt_sigreturn rt_sigpending rt_sigsuspend rt_sigtimedwait "
        "sigaltstack signalfd signalfd4 pause",
    ),
    (
        ALLOW,
        "waiting on the worker's own descriptors and children",
        "poll ppoll select pselect6 epoll_create epoll_create1 epoll_ctl epoll_wait epoll_pwait "
        "epoll_pwait2 eventfd eventfd2 pipe pipe2 wait4 waitid io_setup io_destroy io_submit io_cancel "
        "io_getevents io_pgetevents",
    ),
    (
        ALLOW,
        "reads the worker's own identity, limits and the machine's public facts",
        "getuid geteuid getgid getegid getresuid getresgid getgroups getrlimit getrusage uname sysinfo "
        "getrandom",
    ),
    (
        ALLOW,
        "changes only the calling process (no_new_privs and this filter stay)",
        "setrlimit personality prctl execve execveat landlock_create_ruleset landlock_add_rule "
        "landlock_restrict_self",
    ),
    (
        ALLOW,
        "a socket call on a descriptor: only socketpair makes one, and it reaches no one else",
        "socketpair accept accept4 bind listen connect getsockname getpeername getsockopt setsockopt "
        "sendto recvfrom sendmsg recvmsg sendmmsg recvmmsg shutdown",
    ),
    (
        REFUSE,
        "new processes: nothing the learner starts may outlive grading or escape its limits",
        "fork vfork",
    ),
    (
        REFUSE,
        "clone3 cannot be checked (its flags are in memory): ENOSYS, and the C library uses clone",
        "clone3",
    ),
    (
        REFUSE,
        "the worker leads its own session and process group; leaving them escapes the group kill",
        "setpgid setsid",
    ),
    (
        REFUSE,
        "a socket of any family (UDP, UNIX path sockets, netlink): what Landlock's TCP rules leave",
        "socket",
    ),
    (
        REFUSE,
        "SysV and POSIX IPC objects outlive the worker and may be another user's",
        "shmget shmat shmctl shmdt semget semop semtimedop semctl msgget msgsnd msgrcv msgctl mq_open "
        "mq_unlink mq_timedsend mq_timedreceive mq_notify mq_getsetattr",
    ),
    (REFUSE, "memory files: their pages escape the address-space limit", "memfd_create memfd_secret"),
    (
        REFUSE,
        "reaches into another process (the pid or pidfd may name any process of the user)",
        "ptrace process_vm_readv process_vm_writev pidfd_open pidfd_getfd pidfd_send_signal tkill "
        "process_madvise process_mrelease",
    ),
    (
        REFUSE,
        "capget's pid lies in memory the filter cannot read; capset changes privileges",
        "capget capset",
    ),
    (
        REFUSE,
        "a way around Landlock: file handles, watches on paths it does not vet, io_uring",
        "open_by_handle_at name_to_handle_at inotify_init inotify_init1 inotify_add_watch "
        "inotify_rm_watch fanotify_init fanotify_mark io_uring_setup io_uring_enter io_uring_register",
    ),
    (
        REFUSE,
        "namespaces and mounts: a view of the machine other than the walled one",
        "unshare setns mount umount2 pivot_root chroot fsopen fsconfig fsmount fspick move_mount "
        "open_tree mount_setattr",
    ),
    (
        REFUSE,
        "kernel facilities a lesson never needs and attacks often use",
        "bpf userfaultfd perf_event_open keyctl add_key request_key seccomp modify_ldt iopl ioperm "
        "lookup_dcookie syslog",
    ),
    (
        REFUSE,
        "identity changes: the worker keeps the user it was started as",
        "setuid setgid setreuid setregid setresuid setresgid setfsuid setfsgid setgroups",
    ),
    (
        REFUSE,
        "acts on the whole machine (needs privileges a worker must not use even as root)",
        "reboot kexec_load kexec_file_load init_module finit_module delete_module swapon swapoff acct "
        "quotactl quotactl_fd settimeofday clock_settime clock_adjtime adjtimex sethostname "
        "setdomainname vhangup sync nfsservctl _sysctl",
    ),
    (
        REFUSE,
        "obsolete or never implemented on this architecture",
        "create_module query_module get_kernel_syms uselib ustat sysfs afs_syscall tuxcall security "
        "vserver getpmsg putpmsg epoll_ctl_old epoll_wait_old",
    ),
    (
        CHECK,
        "names a process: the worker itself only (pid 0 or its own), else ESRCH",
        "prlimit64 sched_setaffinity sched_getaffinity sched_setscheduler sched_setparam sched_setattr "
        "sched_getscheduler sched_getparam sched_getattr sched_rr_get_interval getpgid getsid "
        "move_pages migrate_pages get_robust_list",
    ),
    (CHECK, "compares two processes' resources: both must be the worker itself, else ESRCH", "kcmp"),
    (
        CHECK,
        "the per-process selector and the worker itself only (per-user reaches every process)",
        "setpriority getpriority ioprio_set ioprio_get",
    ),
    (
        CHECK,
        "a signal to the worker itself or its own process group only",
        "kill tgkill rt_sigqueueinfo rt_tgsigqueueinfo",
    ),
    (CHECK, "threads only (CLONE_THREAD): a new process is refused", "clone"),
)


def _policy() -> dict[str, tuple[str, str]]:
    policy: dict[str, tuple[str, str]] = {}
    for verdict, reason, names in _CLASSES:
        for name in names.split():
            if name in policy:
                raise ValueError(f"seccomp policy: {name} is classified twice")
            policy[name] = (verdict, reason)
    return policy


POLICY = _policy()

# Argument checks: (argument index, allowed values); SELF and NEG_SELF stand for the worker's
# pid and minus it, 0 for "the caller". Only the low 32 bits are compared: the kernel reads these
# arguments as int (pid_t), so the high bits of the register mean nothing to it either.
SELF, NEG_SELF = "self", "-self"
PRIO_PROCESS, IOPRIO_WHO_PROCESS = 0, 1
_SELF_PID = ((0, (0, SELF)),)
CHECKED: dict[str, tuple[tuple[tuple[int, tuple], ...], int]] = {
    **{name: (_SELF_PID, errno.ESRCH) for name in POLICY if POLICY[name][1].startswith("names a process")},
    "kcmp": (((0, (SELF,)), (1, (SELF,))), errno.ESRCH),
    "setpriority": (((0, (PRIO_PROCESS,)), (1, (0, SELF))), errno.EPERM),
    "getpriority": (((0, (PRIO_PROCESS,)), (1, (0, SELF))), errno.EPERM),
    "ioprio_set": (((0, (IOPRIO_WHO_PROCESS,)), (1, (0, SELF))), errno.EPERM),
    "ioprio_get": (((0, (IOPRIO_WHO_PROCESS,)), (1, (0, SELF))), errno.EPERM),
    # kill(pid | 0 | -pgid): the worker leads its process group, so -pid is its own group.
    "kill": (((0, (0, SELF, NEG_SELF)),), errno.EPERM),
    # tgkill and the sigqueue calls name a thread group first: only its own.
    "tgkill": (((0, (SELF,)),), errno.EPERM),
    "rt_sigqueueinfo": (((0, (SELF,)),), errno.EPERM),
    "rt_tgsigqueueinfo": (((0, (SELF,)),), errno.EPERM),
}
REFUSED_ERRNO = {"clone3": errno.ENOSYS}


class _Filter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_ushort),
        ("jt", ctypes.c_ubyte),
        ("jf", ctypes.c_ubyte),
        ("k", ctypes.c_uint),
    ]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Filter))]


def supported() -> bool:
    return sys.platform.startswith("linux") and platform.machine() in _ARCHES


def _value(value, pid: int) -> int:
    return {SELF: pid, NEG_SELF: -pid}.get(value, value) & 0xFFFFFFFF


def _checked(name: str, pid: int) -> list[tuple[int, int, int, int]]:
    """The instructions that decide a checked call (every path ends in a RET)."""
    if name == "clone":
        return [
            (LD_W_ABS, 0, 0, OFFSET_ARGS),  # clone's flags (low 32 bits, little-endian)
            (JSET_K, 1, 0, CLONE_THREAD),
            (RET_K, 0, 0, RET_ERRNO | errno.EPERM),  # a new process
            (RET_K, 0, 0, RET_ALLOW),
        ]
    rules, err = CHECKED[name]
    code: list[tuple[int, int, int, int]] = []
    for index, allowed in rules:
        values = sorted({_value(v, pid) for v in allowed})
        code.append((LD_W_ABS, 0, 0, OFFSET_ARGS + 8 * index))
        # A match jumps past the other comparisons and the refusal, to the next rule.
        code += [(JEQ_K, len(values) - i, 0, value) for i, value in enumerate(values)]
        code.append((RET_K, 0, 0, RET_ERRNO | err))
    return code + [(RET_K, 0, 0, RET_ALLOW)]


def _intervals(numbers: dict[str, int]) -> list[tuple[int, object]]:
    """(first number, action) for consecutive runs of numbers with the same action, covering
    0..2**32; an action is a RET value, or the name of a checked call."""
    by_number: dict[int, object] = {}
    for name, nr in numbers.items():
        verdict = POLICY[name][0]  # KeyError: an unclassified call (tests/sandbox/test_seccomp_table.py)
        if verdict == ALLOW:
            by_number[nr] = RET_ALLOW
        elif verdict == REFUSE:
            by_number[nr] = RET_ERRNO | REFUSED_ERRNO.get(name, errno.EPERM)
        else:
            by_number[nr] = name
    unknown = RET_ERRNO | errno.ENOSYS
    runs: list[tuple[int, object]] = []
    for nr in range(max(by_number) + 2):
        action = by_number.get(nr, unknown)
        if not runs or action != runs[-1][1] or isinstance(action, str):
            runs.append((nr, action))
    return runs


def _search(runs: list[tuple[int, object]], pid: int) -> list[tuple[int, int, int, int]]:
    """A binary search over `runs` on the syscall number in the accumulator."""
    if len(runs) == 1:
        action = runs[0][1]
        return _checked(action, pid) if isinstance(action, str) else [(RET_K, 0, 0, action)]
    middle = len(runs) // 2
    low, high = _search(runs[:middle], pid), _search(runs[middle:], pid)
    # number >= split: the JA jumps over the low half (JA's offset has 32 bits, jt/jf only 8).
    return [(JGE_K, 0, 1, runs[middle][0]), (JA, 0, 0, len(low)), *low, *high]


def program(pid: int, machine: str | None = None) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions for the process `pid` (its own pid, as it
    sees it: the one process the checked calls may name), for `machine` (default: this one)."""
    arch, numbers = _ARCHES[machine or platform.machine()]
    deny = RET_ERRNO | errno.EPERM
    code: list[tuple[int, int, int, int]] = [
        (LD_W_ABS, 0, 0, OFFSET_ARCH),
        (JEQ_K, 1, 0, arch),
        (RET_K, 0, 0, deny),  # another ABI (i386 int 0x80 on x86_64): nothing at all
        (LD_W_ABS, 0, 0, OFFSET_NR),
    ]
    if arch == _ARCHES["x86_64"][0]:
        code += [(JGE_K, 0, 1, X32_BIT), (RET_K, 0, 0, deny)]  # the x32 ABI's numbers
    code += _search(_intervals(numbers), pid)
    if len(code) > MAX_INSTRUCTIONS:
        raise ValueError(f"seccomp: {len(code)} instructions, the kernel takes {MAX_INSTRUCTIONS}")
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
