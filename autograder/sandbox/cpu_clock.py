"""A check's time limit, counted in the CPU time of the worker that runs the learner's code.

A wall-clock limit turns machine load into grades: on a busy laptop, a shared Codespace or a
2-core runner grading a cohort, a correct model that needs 3 s of CPU may get only a quarter of
a core and miss a 10 s limit. So where the worker's CPU time can be read (Linux, from
/proc/PID/stat, which counts every thread of the process), a check's `timeout` in course.yml is a
budget of CPU seconds the learner's code may spend on it. Load stretches the wall-clock time of a
check, never its CPU time, so the verdict is the same on an idle and a loaded machine.

A worker that sleeps, waits on input() or blocks spends no CPU, so a generous wall-clock bound
(`wall_bound`, far above the budget) still stops it. The workers are single-threaded (one torch
thread; they may not start processes), so their CPU time never runs ahead of the clock unless the
learner's code asks torch for more threads.

Elsewhere (macOS, Windows: the learner's own machine, on the portable worker path of
autograder/sandbox/portable.py) the worker's CPU time is read through psutil, so a check's budget
means the same there; only where neither /proc nor psutil can read it does `timeout` stay a
wall-clock limit.
"""

from __future__ import annotations

import os
import sys

# A stuck or sleeping worker is stopped after WALL_FACTOR times its budget plus WALL_SLACK_S: a
# worker that gets a quarter of a core still finishes inside, while a program waiting forever
# costs at most a minute or so per check.
WALL_FACTOR = 4.0
WALL_SLACK_S = 10.0

try:
    _TICKS = os.sysconf("SC_CLK_TCK")
except (AttributeError, ValueError, OSError):
    _TICKS = 100


def measurable() -> bool:
    """Whether a worker's CPU time can be read here (then budgets are CPU seconds)."""
    return _proc_readable() or _psutil() is not None


def _proc_readable() -> bool:
    return sys.platform.startswith("linux") and os.path.exists("/proc/self/stat")


def _psutil():
    try:
        import psutil
    except ImportError:
        return None
    return psutil


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds process `pid` (all its threads) has used; None when the process
    is gone or its accounting cannot be read."""
    if not _proc_readable():
        return _psutil_cpu_seconds(pid)
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as stat:
            data = stat.read()
    except (OSError, ValueError):
        return None
    # "PID (NAME) STATE ...": the name may hold spaces and parentheses, so split after the last ")".
    fields = data.rpartition(b")")[2].split()
    try:
        return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime (fields 14 and 15)
    except (IndexError, ValueError):
        return None


def _psutil_cpu_seconds(pid: int) -> float | None:
    psutil = _psutil()
    if psutil is None:
        return None
    try:
        times = psutil.Process(int(pid)).cpu_times()
    except (psutil.Error, ValueError, OSError):
        return None
    return times.user + times.system


def wall_bound(timeout: float) -> float:
    """The wall-clock seconds a check with this `timeout` may run before it is stopped."""
    return timeout * WALL_FACTOR + WALL_SLACK_S if measurable() else float(timeout)


class CpuBudget:
    """The CPU seconds one check may spend, across every worker that serves it (a worker killed
    in the middle of a check is replaced; its CPU time still counts)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = float(seconds)
        self._spent_before = 0.0  # by workers of this check that are gone
        self._pid: int | None = None
        self._base = self._last = 0.0

    def watch(self, pid: int | None) -> None:
        """Count from now the CPU time of worker `pid` (a worker that just became ready: its
        start, torch's import, is not the check's)."""
        if self._pid is not None:
            self._spent_before += self._last - self._base
        now = cpu_seconds(pid) if pid is not None else None
        self._pid = pid if now is not None else None
        self._base = self._last = now or 0.0

    def spent(self) -> float:
        if self._pid is not None:
            now = cpu_seconds(self._pid)
            if now is not None:
                self._last = now
        return self._spent_before + self._last - self._base

    def exhausted(self) -> bool:
        return self.spent() > self.seconds
