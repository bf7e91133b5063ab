"""The portable worker path: the same worker, protocol and checks over what Linux, macOS and
Windows all have.

The Linux path (client.py with pool.py and worker/supervisor.py) forks workers from a warm
zygote, hands them pipes with pass_fds, waits on those with select, kills process groups and
reads CPU time from /proc. Windows has none of these and macOS was never tried. Here:

- the worker is a freshly spawned interpreter (`subprocess.Popen([sys.executable, ...])`, no
  fork), spoken to over its own stdin and stdout (autograder/sandbox/worker/portable.py moves
  them off fds 0 and 1 before any learner code runs, so a print() cannot corrupt a frame);
- a thread reads its answers into a queue and another writes its requests, so the trusted side
  waits with a timeout without select on a pipe (a worker that stops reading cannot block us);
- a third thread drains its stderr (the learner's prints too) into the log, which keeps only its
  last LOG_KEEP bytes once it passes LOG_BYTES: a flood of output costs no disk;
- a timeout, an exit or the end of grading kills the worker's whole process tree: every
  descendant psutil saw while it ran or finds at the end, and on POSIX the process group of the
  session it was started in;
- its home's size is watched as the supervisor watches it on Linux;
- its CPU time is read by autograder/sandbox/cpu_clock.py (psutil where /proc is missing).

Chosen where the Linux path cannot run (not Linux, or no os.fork), or on Linux with
AUTOGRADER_WORKER=portable (the tests use it). Nothing walls the learner's code in on this path:
the worker's first message says so, the result's `isolation` field records it ("portable": true,
the walls and limits in `missing`), and the learner reads it in one line.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

try:
    import psutil
except ImportError:  # a dependency (pyproject.toml); the Linux path, which imports this module, runs without it
    psutil = None

ENV_SWITCH = "AUTOGRADER_WORKER"  # auto (default) | portable
BOOT = ("import sys; sys.path.insert(0, sys.argv.pop(1)); "
        "from autograder.sandbox.worker.portable import main; main()")
LOG_BYTES = 4 << 20  # the log is cut back to its last LOG_KEEP bytes past this size
LOG_KEEP = 64 << 10
WATCH_EVERY = 0.25  # seconds between two looks at the worker's descendants and home
EXIT_GRACE = 0.5  # after the worker ends: how long its last answer may take to reach the queue


def selected() -> bool:
    """Whether workers take the portable path: where the Linux path cannot run, or when asked."""
    choice = os.environ.get(ENV_SWITCH, "auto").strip().lower()
    return choice == "portable" or not (sys.platform.startswith("linux") and hasattr(os, "fork"))


def rlimits_available() -> bool:
    """Whether a worker here can limit its own resources (the `resource` module: not Windows)."""
    try:
        import resource  # noqa: F401
    except ImportError:
        return False
    return True


class PortableWorker:
    """One spawned worker and its process tree, seen from the trusted side."""

    def __init__(self, package_parent: Path, cwd: Path, env: dict[str, str], log: Path, home: Path,
                 limits: dict, *, walls_enabled: bool = True) -> None:
        if psutil is None:
            raise RuntimeError("the portable worker path needs psutil: python -m pip install psutil")
        config = {"limits": limits, "disabled": not walls_enabled, "package": str(package_parent)}
        argv = [sys.executable, "-I", "-c", BOOT, str(package_parent), json.dumps(config)]
        if os.name == "nt":
            # No console window, and no Ctrl-C from the learner's terminal: we stop it ourselves.
            flags = {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP | getattr(subprocess, "CREATE_NO_WINDOW", 0)}
        else:
            flags = {"start_new_session": True}  # its own process group, out of the terminal's
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, bufsize=0, **flags)
        self.pid = self.proc.pid
        self.home = home
        self.disk_used: int | None = None  # set when the worker was stopped for filling its home
        self._root = _process(self.pid)
        self._family: dict[int, psutil.Process] = {}  # every descendant seen while it ran
        self._next_look = 0.0
        self._reaped_family = False
        self._answers: queue.Queue[bytes] = queue.Queue()
        self._requests: queue.Queue[tuple[bytes, threading.Event, list]] = queue.Queue()
        self._log = open(log, "wb")
        self._threads = [threading.Thread(target=target, name=f"portable-worker-{self.pid}-{name}", daemon=True)
                         for target, name in ((self._read_answers, "answers"), (self._drain_log, "log"),
                                              (self._write_requests, "requests"))]
        for thread in self._threads:
            thread.start()

    # ------------------------------------------------------------ threads
    def _read_answers(self) -> None:
        try:
            while chunk := self.proc.stdout.read(1 << 20):
                self._answers.put(chunk)
        except (OSError, ValueError):
            pass
        self._answers.put(b"")  # EOF

    def _drain_log(self) -> None:
        written, tail = 0, bytearray()
        try:
            while chunk := self.proc.stderr.read(1 << 16):
                tail = (tail + chunk)[-LOG_KEEP:]
                if written + len(chunk) > LOG_BYTES:
                    self._log.seek(0)
                    self._log.truncate()
                    self._log.write(tail)
                    written = len(tail)
                else:
                    self._log.write(chunk)
                    written += len(chunk)
                self._log.flush()
        except (OSError, ValueError):
            pass

    def _write_requests(self) -> None:
        while True:
            data, done, failed = self._requests.get()
            if data is None:
                return
            try:
                self.proc.stdin.write(data)
            except (OSError, ValueError) as exc:
                failed.append(exc)
            done.set()

    # ------------------------------------------------------------ the trusted side's calls
    def adopt(self, ready: object) -> int:
        """The pid whose CPU time a check is charged: the one the worker names in its first
        message (sent before any learner code ran) when it is this process or below it (a
        venv's python.exe on Windows is a launcher that runs the real interpreter as its child);
        else the process we started."""
        pid = ready.get("pid") if isinstance(ready, dict) else None
        if isinstance(pid, int) and pid != self.pid and self._root is not None:
            try:
                if pid in {p.pid for p in self._root.children(recursive=True)}:
                    return pid
            except psutil.Error:
                pass
        return self.pid

    def send(self, data: bytes, deadline: float, waiting=lambda: None) -> str:
        """Write one request: "sent", "timeout" (the deadline passed first) or "closed"."""
        done, failed = threading.Event(), []
        self._requests.put((data, done, failed))
        while not done.wait(max(0.0, min(deadline - time.monotonic(), WATCH_EVERY))):
            self._watch()
            waiting()
            if time.monotonic() >= deadline:
                return "timeout"
        return "closed" if failed else "sent"

    def read(self, timeout: float) -> bytes | None:
        """The next chunk of the worker's answers; b"" once it has ended; None if nothing came
        within `timeout`."""
        self._watch()
        try:
            return self._answers.get(timeout=max(0.0, timeout))
        except queue.Empty:
            pass
        if not self._ended():
            return None
        # It ended but its stdout may still be open in a process it forked: what it wrote before
        # ending is read now, or never.
        try:
            return self._answers.get(timeout=EXIT_GRACE)
        except queue.Empty:
            return b""

    def exit_code(self, timeout: float = 3.0) -> int | None:
        """The worker's exit code (negative: killed by that signal), once it ended and whatever
        it left running was killed; None if it is still running after `timeout`."""
        end = time.monotonic() + timeout
        while not self._ended():
            if time.monotonic() >= end:
                return None
            time.sleep(0.02)
        self._kill_family()
        try:
            return self.proc.wait(timeout=max(0.1, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """Kill the worker and every process it started; close everything of ours."""
        self._kill_family()
        try:
            self.proc.kill()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self._requests.put((None, threading.Event(), []))
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        # With the whole tree dead, its pipes are at EOF: the threads end, then their streams are
        # closed (closing a pipe another thread is still reading could hand its fd to a stranger).
        for thread, stream in zip(self._threads, (self.proc.stdout, self.proc.stderr, None)):
            thread.join(timeout=2)
            if stream is not None and not thread.is_alive():
                stream.close()
        if not self._threads[1].is_alive():
            self._log.close()

    # ------------------------------------------------------------ the process tree
    def _ended(self) -> bool:
        """Whether the worker has ended, without reaping it on POSIX: until we reap it, its pid
        (and its process group's id) cannot name anyone else's."""
        if os.name == "nt":
            return self.proc.poll() is not None
        if self.proc.returncode is not None or self._root is None:
            return True
        try:
            return self._root.status() == psutil.STATUS_ZOMBIE
        except psutil.Error:
            return True

    def _watch(self, force: bool = False) -> None:
        """Remember the worker's descendants (one that outlives its parent is still ours to kill)
        and stop a worker whose home grew past what the supervisor allows on Linux."""
        now = time.monotonic()
        if not force and now < self._next_look:
            return
        self._next_look = now + WATCH_EVERY
        if self._root is not None:
            try:
                for child in self._root.children(recursive=True):
                    self._family.setdefault(child.pid, child)
            except psutil.Error:
                pass
        if self.disk_used is None and not force:
            from autograder.sandbox.worker.supervisor import HOME_BYTES, HOME_ENTRIES, home_usage

            used, entries = home_usage(str(self.home))
            if used > HOME_BYTES or entries > HOME_ENTRIES:
                self.disk_used = used
                self._kill_family()
                try:
                    self.proc.kill()
                except OSError:
                    pass

    def _kill_family(self) -> None:
        self._watch(force=True)
        if os.name != "nt" and self.proc.returncode is None:
            # Not reaped yet: the group id is still the worker's. Its session's group holds every
            # process it started that did not start a session of its own.
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except OSError:
                pass
        family = list(self._family.values()) + _orphans_of({self.pid, *self._family}, self._root)
        if self._root is not None:
            family.append(self._root)
        for process in family:
            try:
                process.kill()  # psutil checks the pid still names the process it saw
            except psutil.Error:
                pass
        psutil.wait_procs([p for p in family if p is not self._root], timeout=3)


def _process(pid: int) -> psutil.Process | None:
    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None


def _orphans_of(pids: set[int], root: psutil.Process | None) -> list[psutil.Process]:
    """Live processes whose parent is one of `pids`, started after the worker, and theirs: on
    Windows a process keeps its dead parent's id, so what the worker left is found this way."""
    if root is None:
        return []
    try:
        born = root.create_time()
    except psutil.Error:
        return []
    found: list[psutil.Process] = []
    pids = set(pids)
    grew = True
    listing = list(psutil.process_iter(["ppid", "create_time"]))
    while grew:
        grew = False
        for process in listing:
            info = process.info
            if process.pid not in pids and info.get("ppid") in pids and (info.get("create_time") or 0) >= born:
                pids.add(process.pid)
                found.append(process)
                grew = True
    return found
