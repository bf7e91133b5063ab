"""The portable worker path: the same worker, protocol and checks over what Linux, macOS and
Windows all have.

The Linux path (client.py and starters.py with pool.py and worker/supervisor.py) forks workers from a warm
zygote, hands them pipes with pass_fds, waits on those with select, kills process groups and
reads CPU time from /proc. Windows has none of these and macOS was never tried. Here:

- the worker is a freshly spawned interpreter (`subprocess.Popen([sys.executable, ...])`, no
  fork), spoken to over its own stdin and stdout (autograder/sandbox/worker/portable.py moves
  them off fds 0 and 1 before any learner code runs, so a print() cannot corrupt a frame);
- it is spawned ahead of need (`Spares`): a spare starts in a neutral folder with a neutral
  clean environment, imports torch (seconds) and waits; a sandbox that needs a worker takes the
  spare and sends it its config (folder, environment, home, limits), which the worker applies
  before any learner code runs, and a new spare is spawned once the taken one is ready. Where
  Linux forks every worker from one zygote that imported torch once, each worker here imports
  it again, so this hides that import behind the grading of the lesson before (the next save in
  `watch`, the next learner). A spare is taken once, by one sandbox, and is brand new: it never
  ran anyone's code. It dies with this process: killed at exit, and, should this process die
  without running its exit handlers, it reads the end of its stdin and exits;
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

import atexit
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from autograder.sandbox.protocol import frame_bytes

try:
    import psutil
except (
    ImportError
):  # a dependency (pyproject.toml); the Linux path, which imports this module, runs without it
    psutil = None

ENV_SWITCH = "AUTOGRADER_WORKER"  # auto (default) | portable
BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); from autograder.sandbox.worker.portable import main; main()"
)
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

    def __init__(self, package_parent: Path, start_env: dict[str, str], start_dir: Path) -> None:
        """Spawn a worker that imports torch in `start_dir` with `start_env` (neutral: no
        sandbox's) and then waits for `assign`."""
        if psutil is None:
            raise RuntimeError("the portable worker path needs psutil: python -m pip install psutil")
        argv = [sys.executable, "-I", "-c", BOOT, str(package_parent)]
        if os.name == "nt":
            # No console window, and no Ctrl-C from the learner's terminal: we stop it ourselves.
            flags = {
                "creationflags": subprocess.CREATE_NEW_PROCESS_GROUP
                | getattr(subprocess, "CREATE_NO_WINDOW", 0)
            }
        else:
            flags = {"start_new_session": True}  # its own process group, out of the terminal's
        self.proc = subprocess.Popen(
            argv,
            cwd=start_dir,
            env=start_env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
            **flags,
        )
        self.pid = self.proc.pid
        self.home: Path | None = None  # the sandbox's, once assigned
        self.assigned = False
        self.disk_used: int | None = None  # set when the worker was stopped for filling its home
        self._root = _process(self.pid)
        self._family: dict[int, psutil.Process] = {}  # every descendant seen while it ran
        self._next_look = 0.0
        self._reaped_family = False
        self._when_ready = None  # called once, when the trusted side sees it ready (`adopt`)
        self._answers: queue.Queue[bytes] = queue.Queue()
        self._requests: queue.Queue[tuple[bytes, threading.Event, list]] = queue.Queue()
        # Its stderr before it is assigned (a warning while importing torch) is kept here and
        # written at the top of the sandbox's log.
        self._log = None
        self._log_lock = threading.Lock()
        self._early = bytearray()
        self._logged = 0  # bytes in the log since it was last cut back
        self._threads = [
            threading.Thread(target=target, name=f"portable-worker-{self.pid}-{name}", daemon=True)
            for target, name in (
                (self._read_answers, "answers"),
                (self._drain_log, "log"),
                (self._write_requests, "requests"),
            )
        ]
        for thread in self._threads:
            thread.start()

    def assign(
        self,
        cwd: Path,
        env: dict[str, str],
        log: Path,
        home: Path,
        limits: dict,
        *,
        walls_enabled: bool = True,
    ) -> None:
        """Hand this worker to one sandbox: its folder, environment, home and limits, applied by
        the worker before any learner code runs (the first frame it reads). Once only."""
        if self.assigned:
            raise RuntimeError("a portable worker serves one sandbox only")
        self.assigned, self.home = True, home
        with self._log_lock:
            self._log = open(log, "wb")
            self._log.write(self._early)
            self._log.flush()
            self._logged = len(self._early)
            self._early = bytearray()
        config = {"cwd": str(cwd), "env": dict(env), "limits": limits, "disabled": not walls_enabled}
        # Not waited for: a few kilobytes fit in the pipe, and a worker that died meanwhile is
        # found by the hello that never comes.
        self._requests.put((frame_bytes({"config": config}), threading.Event(), []))

    # ------------------------------------------------------------ threads
    def _read_answers(self) -> None:
        try:
            while chunk := self.proc.stdout.read(1 << 20):
                self._answers.put(chunk)
        except (OSError, ValueError):
            pass
        self._answers.put(b"")  # EOF

    def _drain_log(self) -> None:
        tail = bytearray()
        try:
            while chunk := self.proc.stderr.read(1 << 16):
                tail = (tail + chunk)[-LOG_KEEP:]
                with self._log_lock:
                    if self._log is None:  # not assigned yet
                        self._early = tail[:]
                        continue
                    if self._logged + len(chunk) > LOG_BYTES:
                        self._log.seek(0)
                        self._log.truncate()
                        self._log.write(tail)
                        self._logged = len(tail)
                    else:
                        self._log.write(chunk)
                        self._logged += len(chunk)
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
        else the process we started. It is ready: the next spare may start importing now, on
        the other core, without slowing this one's start."""
        when_ready, self._when_ready = self._when_ready, None
        if when_ready is not None:
            when_ready()
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
        if not self._threads[1].is_alive() and self._log is not None:
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
        if self.disk_used is None and not force and self.home is not None:
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


class Spares:
    """This process's spare worker: at most one, spawned ahead of need and taken by exactly one
    sandbox (`start_worker`). Its own per process: a process forked from this one (a grading
    job) gets a pool of its own and leaves its parent's spare alone."""

    _instance: "Spares | None" = None
    _instance_lock = threading.Lock()

    @classmethod
    def shared(cls, package_parent: Path, env_for) -> "Spares":
        """`env_for(home)`: the clean environment of a worker whose home is `home` (starters.clean_env);
        a spare starts with the one of a neutral, empty folder."""
        with cls._instance_lock:
            if cls._instance is None or cls._instance.owner != os.getpid():
                cls._instance = Spares(package_parent, env_for)
            return cls._instance

    def __init__(self, package_parent: Path, env_for) -> None:
        self.owner = os.getpid()
        self.package_parent = package_parent
        self.folder = Path(tempfile.mkdtemp(prefix="autograder-spare-"))  # no learner's file ever
        self.start_env = env_for(self.folder)
        self._spare: PortableWorker | None = None
        self._lock = threading.Lock()
        self._closed = False
        atexit.register(self.close)

    def fill(self) -> None:
        """Spawn a spare unless a live one waits already."""
        with self._lock:
            if self._closed or self.owner != os.getpid():
                return
            if self._spare is not None and self._spare._ended():
                self._spare.kill()
                self._spare = None
            if self._spare is None:
                self._spare = self._spawn()

    def take(self) -> PortableWorker:
        """The spare (a fresh one when there is none, or it died): never handed out twice. A
        new spare is spawned when the one taken is ready (`PortableWorker.adopt`)."""
        with self._lock:
            worker, self._spare = self._spare, None
        if worker is not None and worker._ended():
            worker.kill()
            worker = None
        if worker is None:
            worker = self._spawn()
        worker._when_ready = self.fill
        return worker

    def _spawn(self) -> PortableWorker:
        return PortableWorker(self.package_parent, self.start_env, self.folder)

    def close(self) -> None:
        """Kill the spare (at exit, or when a test wants a fresh one); a process forked from the
        owner leaves it alone. Later calls to `fill` do nothing; `take` still spawns."""
        if self.owner != os.getpid():
            return
        with self._lock:
            spare, self._spare, self._closed = self._spare, None, True
        if spare is not None:
            spare.kill()
        shutil.rmtree(self.folder, ignore_errors=True)
        with Spares._instance_lock:
            if Spares._instance is self:
                Spares._instance = None


def prepare(package_parent: Path, env_for) -> None:
    """Spawn this process's spare now, without waiting for it: a command about to grade calls
    this first, so the worker's torch import overlaps the command's own start."""
    Spares.shared(package_parent, env_for).fill()


def start_worker(
    package_parent: Path,
    env_for,
    cwd: Path,
    env: dict[str, str],
    log: Path,
    home: Path,
    limits: dict,
    *,
    walls_enabled: bool = True,
) -> PortableWorker:
    """A worker for one sandbox: the spare (or a fresh one), given the sandbox's folder `cwd`,
    environment `env`, `home` and `limits`; its stderr goes to `log`."""
    worker = Spares.shared(package_parent, env_for).take()
    worker.assign(cwd, env, log, home, limits, walls_enabled=walls_enabled)
    return worker


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
            if (
                process.pid not in pids
                and info.get("ppid") in pids
                and (info.get("create_time") or 0) >= born
            ):
                pids.add(process.pid)
                found.append(process)
                grew = True
    return found
