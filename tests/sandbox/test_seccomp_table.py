"""The worker's seccomp policy covers every system call of each architecture's table.

x86-64: the table in autograder/sandbox/worker/syscall_table.py must equal this machine's kernel
headers (asm/unistd_64.h), name for name and number for number, and every name must have a
verdict and a reason in seccomp.POLICY. aarch64 cannot run here: its table is compared with the
generic header (asm-generic/unistd.h, read by the C preprocessor as arm64 reads it) where one is
installed, and its filter is checked as a table only, by running the BPF program in the small
interpreter below, the same way as x86-64's (whose real filter the process tests also run).
"""

from __future__ import annotations

import errno
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from autograder.sandbox.worker import seccomp, syscall_table

X86_HEADER = Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h")
GENERIC_HEADER = Path("/usr/include/asm-generic/unistd.h")
# What arm64's asm/unistd.h sets before it includes the generic table.
ARM64_SWITCHES = (
    "__ARCH_WANT_RENAMEAT",
    "__ARCH_WANT_NEW_STAT",
    "__ARCH_WANT_SET_GET_RLIMIT",
    "__ARCH_WANT_SYS_CLONE3",
    "__ARCH_WANT_MEMFD_SECRET",
)
TABLES = {"x86_64": syscall_table.X86_64, "aarch64": syscall_table.AARCH64}
ARCH_IDS = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
PID = 4242  # the worker's pid, as the filter is built for it


def run_bpf(program: list[tuple[int, int, int, int]], nr: int, arch: int, args=(0,) * 6) -> int:
    """What the kernel would answer: classic BPF over struct seccomp_data, for the opcodes the
    filter uses (absolute word loads, jumps, returns); an unknown opcode fails the test."""
    data = {seccomp.OFFSET_NR: nr, seccomp.OFFSET_ARCH: arch}
    for index, value in enumerate(args):
        data[seccomp.OFFSET_ARGS + 8 * index] = value & 0xFFFFFFFF
        data[seccomp.OFFSET_ARGS + 8 * index + 4] = (value >> 32) & 0xFFFFFFFF
    pc, acc = 0, 0
    for _ in range(len(program) + 1):  # a filter only jumps forward: it must end by then
        code, jt, jf, k = program[pc]
        if code == seccomp.RET_K:
            return k
        if code == seccomp.LD_W_ABS:
            acc, pc = data[k], pc + 1
        elif code == seccomp.JA:
            pc += 1 + k
        elif code in (seccomp.JEQ_K, seccomp.JGE_K, seccomp.JSET_K):
            taken = {seccomp.JEQ_K: acc == k, seccomp.JGE_K: acc >= k, seccomp.JSET_K: bool(acc & k)}[code]
            pc += 1 + (jt if taken else jf)
        else:
            raise AssertionError(f"opcode {code:#x} at {pc}")
    raise AssertionError("the filter ran past its end")


def header_table_x86() -> dict[str, int]:
    found = re.findall(r"^#define __NR_(\w+) (\d+)$", X86_HEADER.read_text(), re.MULTILINE)
    return {name: int(nr) for name, nr in found}


def header_table_generic() -> dict[str, int]:
    defines = subprocess.run(
        ["cpp", "-dM", *(f"-D{switch}" for switch in ARM64_SWITCHES), str(GENERIC_HEADER)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    raw = dict(re.findall(r"^#define (__NR\w*) (\S+)$", defines, re.MULTILINE))

    def number(value: str) -> int:
        return int(value) if value.isdigit() else number(raw[value])

    return {
        name[5:]: number(value)
        for name, value in raw.items()
        if name.startswith("__NR_") and name not in ("__NR_syscalls", "__NR_arch_specific_syscall")
    }


# ------------------------------------------------------------------ the tables


@pytest.mark.skipif(not X86_HEADER.exists(), reason="no x86-64 kernel headers here")
def test_the_x86_64_table_is_the_kernel_headers():
    assert syscall_table.X86_64 == header_table_x86()


@pytest.mark.skipif(not (GENERIC_HEADER.exists() and shutil.which("cpp")), reason="no generic headers or cpp")
def test_the_aarch64_table_is_the_generic_header_as_arm64_reads_it():
    assert syscall_table.AARCH64 == header_table_generic()


@pytest.mark.parametrize("machine", TABLES)
def test_every_call_of_the_table_is_classified_with_a_reason(machine):
    names = set(TABLES[machine])
    if machine == "x86_64" and X86_HEADER.exists():
        names |= set(header_table_x86())  # a name the module's table lacks counts too
    unclassified = sorted(names - set(seccomp.POLICY))
    assert unclassified == [], f"classify these in seccomp._CLASSES: {unclassified}"
    for name in names:
        verdict, reason = seccomp.POLICY[name]
        assert verdict in (seccomp.ALLOW, seccomp.REFUSE, seccomp.CHECK) and reason.strip()
        assert "\n" not in reason


def test_the_policy_names_only_real_calls_and_checks_what_it_says():
    known = set().union(*TABLES.values())
    assert sorted(set(seccomp.POLICY) - known) == []
    checked = {name for name, (verdict, _) in seccomp.POLICY.items() if verdict == seccomp.CHECK}
    assert checked == set(seccomp.CHECKED) | {"clone"}


# ------------------------------------------------------------------ the filter, run as a table


@pytest.mark.parametrize("machine", TABLES)
def test_each_call_gets_its_verdict(machine):
    program, arch = seccomp.program(PID, machine), ARCH_IDS[machine]
    assert len(program) <= seccomp.MAX_INSTRUCTIONS
    for name, nr in TABLES[machine].items():
        verdict = seccomp.POLICY[name][0]
        answer = run_bpf(program, nr, arch)
        if verdict == seccomp.ALLOW:
            assert answer == seccomp.RET_ALLOW, name
        elif verdict == seccomp.REFUSE:
            assert answer == seccomp.RET_ERRNO | seccomp.REFUSED_ERRNO.get(name, errno.EPERM), name


@pytest.mark.parametrize("machine", TABLES)
def test_calls_that_name_a_process_act_on_the_worker_only(machine):
    program, arch, table = seccomp.program(PID, machine), ARCH_IDS[machine], TABLES[machine]
    allow, esrch, eperm = seccomp.RET_ALLOW, seccomp.RET_ERRNO | errno.ESRCH, seccomp.RET_ERRNO | errno.EPERM
    others = (1, PID - 1, PID + 1, 0x7FFFFFFF, -1, -PID)
    for name in (
        "prlimit64",
        "sched_setaffinity",
        "sched_getaffinity",
        "sched_setscheduler",
        "sched_setparam",
        "sched_setattr",
        "sched_getscheduler",
        "sched_getparam",
        "sched_getattr",
        "sched_rr_get_interval",
        "getpgid",
        "getsid",
        "move_pages",
        "migrate_pages",
        "get_robust_list",
    ):
        for pid in (0, PID, PID | 1 << 32):  # the kernel reads pid_t: the high bits do not matter to it
            assert run_bpf(program, table[name], arch, (pid, 5, 0, 0, 0, 0)) == allow, (name, pid)
        for pid in others:
            assert run_bpf(program, table[name], arch, (pid, 0, 0, 0, 0, 0)) == esrch, (name, pid)
    nr = table["kcmp"]
    assert run_bpf(program, nr, arch, (PID, PID, 0, 0, 0, 0)) == allow
    assert run_bpf(program, nr, arch, (PID, PID + 1, 0, 0, 0, 0)) == esrch
    assert run_bpf(program, nr, arch, (1, PID, 0, 0, 0, 0)) == esrch
    for name, per_process in (("setpriority", 0), ("getpriority", 0), ("ioprio_set", 1), ("ioprio_get", 1)):
        for who in (0, PID):
            assert run_bpf(program, table[name], arch, (per_process, who, 19, 0, 0, 0)) == allow, (name, who)
        assert run_bpf(program, table[name], arch, (per_process, PID + 1, 19, 0, 0, 0)) == eperm, name
        for selector in range(4):  # process group and user selectors, even with "0 = mine"
            if selector != per_process:
                assert run_bpf(program, table[name], arch, (selector, 0, 19, 0, 0, 0)) == eperm, (
                    name,
                    selector,
                )
    for pid in (0, PID, -PID):
        assert run_bpf(program, table["kill"], arch, (pid, 9, 0, 0, 0, 0)) == allow
    for pid in (-1, 1, PID + 1, -(PID + 1)):
        assert run_bpf(program, table["kill"], arch, (pid, 9, 0, 0, 0, 0)) == eperm
    for name in ("tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"):
        assert run_bpf(program, table[name], arch, (PID, 123, 9, 0, 0, 0)) == allow
        assert run_bpf(program, table[name], arch, (PID + 1, PID, 9, 0, 0, 0)) == eperm


@pytest.mark.parametrize("machine", TABLES)
def test_threads_yes_processes_no_and_unknown_numbers_are_enosys(machine):
    program, arch, table = seccomp.program(PID, machine), ARCH_IDS[machine], TABLES[machine]
    assert (
        run_bpf(program, table["clone"], arch, (seccomp.CLONE_THREAD | 0x3D0F00, 0, 0, 0, 0, 0))
        == seccomp.RET_ALLOW
    )
    assert run_bpf(program, table["clone"], arch, (0x11, 0, 0, 0, 0, 0)) == seccomp.RET_ERRNO | errno.EPERM
    for name in ("setpgid", "setsid"):
        assert run_bpf(program, table[name], arch) == seccomp.RET_ERRNO | errno.EPERM
    enosys = seccomp.RET_ERRNO | errno.ENOSYS
    assert run_bpf(program, table["clone3"], arch) == enosys
    for nr in (max(table.values()) + 1, 469, 1000, 0x3FFFFFFF):  # later kernels' calls (469: file_setattr)
        assert run_bpf(program, nr, arch) == enosys, nr
    assert run_bpf(program, table["getpid"], 0x40000003) == seccomp.RET_ERRNO | errno.EPERM  # i386's ABI
    if machine == "x86_64":
        assert run_bpf(program, table["getpid"] | seccomp.X32_BIT, arch) == seccomp.RET_ERRNO | errno.EPERM
