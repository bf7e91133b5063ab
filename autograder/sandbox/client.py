"""The trusted side of the trust boundary: a learner's submission served by a killable worker.

`Sandbox` copies a submission into a private temporary folder and starts, through the
supervisor (autograder/sandbox/worker/supervisor.py), a worker process with a clean environment and
resource limits, in a session of its own. Requests and answers are data only (protocol.py).
The learner's code never runs in this process: if the worker crashes, hangs, or answers
nonsense, the sandbox kills it and everything it spawned, reports why, and a later request
starts a fresh worker.

Every worker is walled in before the first learner import (autograder/sandbox/isolation.py, and
autograder/sandbox/worker/confine.py on its side): it reads only the Python runtime and its copy of the
submission, writes only its home, opens no socket, starts no process, and signals or traces
nothing outside itself, as root and as a plain user. When the grader runs as root on Linux, the
worker also gets namespaces of its own and runs as the unprivileged user `nobody` (see
`worker_user`).
"""

from __future__ import annotations

import functools
import os
import select
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import autograder
from autograder.sandbox import cpu_clock
from autograder.sandbox import isolation
from autograder.sandbox import portable
from autograder.sandbox.cpu_clock import CpuBudget
# Submission intake lives in autograder/sandbox/intake.py; these names stay importable from here.
from autograder.sandbox.intake import MAX_FILE_BYTES, MAX_FILES, copy_submission, submission_files  # noqa: F401
from autograder.sandbox.pool import AttachedPool, ForkedSupervisor, PoolError, WarmPool
from autograder.sandbox.pool import enabled as pool_enabled
from autograder.sandbox.protocol import frame_bytes, FrameReader, Handle, ProtocolError, decode, encode
from autograder.sandbox.worker.supervisor import process_ids
from autograder.core.results import Feedback, Text, message

PACKAGE_PARENT = Path(autograder.__file__).resolve().parent.parent
SUPERVISOR = Path(__file__).with_name("worker") / "supervisor.py"
WORKER_BOOT = (
    "import sys; sys.path.insert(0, sys.argv.pop(3)); "
    "from autograder.sandbox.worker.main import main; main()"
)
# Variables a worker may inherit: none of them can carry a secret.
INHERITED_ENV = ("CUDA_VISIBLE_DEVICES", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "SYSTEMROOT",
                 "LD_LIBRARY_PATH")
STARTUP_TIMEOUT = 120.0
# How often a check's CPU budget is read while the trusted side waits on the worker: the
# budget is overrun by at most this much, and each poll is one read of /proc/PID/stat.
CPU_POLL_S = 0.25
# Linux capability numbers (linux/capability.h) and the user a root grader's worker runs as.
CAP_SETGID, CAP_SETUID = 6, 7
UNPRIVILEGED_USER = "nobody"


@dataclass(frozen=True)
class Limits:
    memory_bytes: int | None = 4 << 30  # address space; torch itself maps ~0.7 GiB
    cpu_seconds: int | None = 300
    # Processes (threads, on Linux) the worker may create beyond those its user already has:
    # RLIMIT_NPROC counts every task of the user, so a fixed number would starve a learner
    # whose desktop already runs hundreds of threads. Root ignores it: see `worker_user`.
    processes: int | None = 256
    file_bytes: int | None = 64 << 20


class StudentError(Exception):
    """The learner's code raised an exception (in the worker)."""

    def __init__(self, type_name: str, message: str, frames: list[dict], root: str,
                 bases: tuple[str, ...] = ()) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name, self.message, self.frames, self.root = type_name, message, frames, root
        # The exception class's MRO by name (the worker sends it), the type itself first.
        self.bases = tuple(bases) or (type_name,)

    def is_a(self, name: str) -> bool:
        """isinstance(exc, <builtin class `name`>), judged by name along the MRO: a learner's
        subclass of ValueError is a ValueError."""
        return name in self.bases

    def frames_in_root(self) -> bool:
        """Whether any frame of the traceback is in the learner's own files."""
        return any(str(f.get("filename", "")).startswith(self.root) for f in self.frames)

    @property
    def todo_pending(self) -> str | None:
        """The TODO id when this is a stub's NotImplementedError("TODO [id] ...")."""
        if self.type_name == "NotImplementedError" and self.message.startswith("TODO ["):
            return self.message[6:].split("]", 1)[0]
        return None


class WorkerDied(Exception):
    """The worker could not answer: it crashed, exited, timed out or sent garbage."""

    def __init__(self, feedback: Feedback) -> None:
        super().__init__(str(feedback))
        self.feedback = feedback


class BudgetSpent(WorkerDied):
    """The check's CPU budget ran out: the worker was stopped in the middle of the learner's code."""


@functools.cache
def _limits_warning() -> None:
    warnings.warn("resource limits and process groups are only enforced on Linux/macOS; "
                  "the learner's code runs without them here", RuntimeWarning, stacklevel=3)


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
        warnings.warn(f"the grader runs as root but the learner's code cannot be run as "
                      f"{UNPRIVILEGED_USER} ({problem}); it runs as root", RuntimeWarning, stacklevel=2)
        return None
    return uid, gid


@functools.cache
def _can_unshare() -> bool:
    """Whether a child of this process can have mount, network and IPC namespaces of its own."""
    from autograder.sandbox.worker import confine

    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child only answers with its exit code
        try:
            confine._unshare(confine.CLONE_NEWNS | confine.CLONE_NEWNET | confine.CLONE_NEWIPC)
            os._exit(0)
        except BaseException:  # noqa: BLE001
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def _tasks_of(uid: int) -> int | None:
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


def _process_limit(allowance: int | None, user: tuple[int, int, bool] | None) -> int | None:
    """RLIMIT_NPROC for the worker: `allowance` tasks beyond what its user already runs."""
    if allowance is None or os.name != "posix":
        return None
    if os.geteuid() == 0 and user is None:
        return None  # root ignores it anyway; the supervisor's subreaper still cleans up
    if not sys.platform.startswith("linux"):
        return allowance  # macOS counts processes, not threads: the worker itself needs none
    current = _tasks_of(user[0] if user else os.getuid())
    return None if current is None else current + allowance


def _clean_env(home: Path) -> dict[str, str]:
    env = {k: os.environ[k] for k in INHERITED_ENV if k in os.environ}
    env.update({
        "PATH": os.defpath if os.name != "nt" else os.environ.get("PATH", ""),
        "HOME": str(home), "TMPDIR": str(home), "TMP": str(home), "TEMP": str(home),
        "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8",
        "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
    })
    return env


def start_warm_pool(shared: tuple[socket.socket, int] | None = None) -> None:
    """Launch this process's warm pool now (autograder/sandbox/pool.py), without waiting for it: a
    command about to grade calls this first, so the zygote's torch import overlaps the
    command's own start (building its parser, reading course.yml). `shared`: (client socket,
    pid) of a zygote another process started for several (`start_shared_zygote`), used instead."""
    if portable.selected():
        portable.prepare(PACKAGE_PARENT, _clean_env)  # spawned, never forked: a spare starts now
        return
    if shared is not None and pool_enabled():
        WarmPool.adopt(*shared, STARTUP_TIMEOUT)
        return
    WarmPool.shared(PACKAGE_PARENT, _clean_env, STARTUP_TIMEOUT)


def share_warm_pool() -> tuple[socket.socket, int] | None:
    """(client socket, pid) of this process's own running zygote, for a process forked from
    this one to `start_warm_pool(shared=...)` with; None where the warm pool is off, not ours
    (grade-all's processes share their parent's) or gone."""
    pool = WarmPool._instance
    if portable.selected() or not pool_enabled() or pool is None or isinstance(pool, AttachedPool):
        return None
    if pool.owner != os.getpid() or not pool.alive():
        return None
    sock = pool.attach()
    return None if sock is None else (sock, pool.pid)


def start_shared_zygote(scratch: Path | None = None) -> WarmPool | None:
    """A zygote for several grading processes (`grade-all`), started now without waiting for it:
    its `attach()` gives each one a socket for `start_warm_pool(shared=...)`; its home is made
    in `scratch`. None where the warm pool is off (each process then does as it would alone)."""
    if portable.selected() or not pool_enabled():
        return None
    try:
        return WarmPool(PACKAGE_PARENT, _clean_env, STARTUP_TIMEOUT, scratch=scratch)
    except (OSError, PoolError, ValueError):
        return None


class Sandbox:
    """One submission folder, served by at most one live worker at a time."""

    def __init__(self, submission: Path, limits: Limits = Limits(), *,
                 provided: dict[str, Path] | None = None) -> None:
        """`provided`: {file name: path} of trusted files (earlier lessons' reference pieces)
        put next to the learner's, replacing any learner file of the same name; the names whose
        path does not exist are listed in `provided_missing`."""
        self.submission = Path(submission)
        self.limits = limits
        self._tmp = Path(tempfile.mkdtemp(prefix="autograder-"))
        self.root = self._tmp / "submission"
        copy_submission(self.submission, self.root)
        self.provided = dict(provided or {})
        self.provided_missing = sorted(name for name, path in self.provided.items() if not Path(path).is_file())
        for name, path in self.provided.items():
            if name not in self.provided_missing:
                shutil.copyfile(path, self.root / name)
        (self._tmp / "home").mkdir()
        self.user = worker_user()
        # Workers forked from the warm pool's zygote (autograder/sandbox/pool.py) where it can run.
        self.warm_pool = not portable.selected()
        if self.user is not None:
            _hand_over(self._tmp, self.root, self._tmp / "home", self.user)
        self.generation = 0
        self.deadline: float | None = None  # wall-clock end of the current check (begin_check)
        self.cpu_budget: CpuBudget | None = None  # the current check's CPU seconds (begin_check)
        self._cpu_polled = 0.0
        self._proc: subprocess.Popen | None = None
        self._dead: WorkerDied | None = None
        self._ready = False
        self._next_id = 0
        self._modules: dict[str, Any] = {}  # name -> Handle | failure to re-raise
        self.worker_pid: int | None = None
        self.isolation_reports: list[dict] = []  # one per worker started, as each reported it

    @property
    def isolation(self) -> dict | None:
        """What every worker of this sandbox was walled in by (isolation.summary); None when no
        worker ever started."""
        return isolation.summary(self.isolation_reports) if self.isolation_reports else None

    # ------------------------------------------------------------ lifecycle
    def start(self, *, wait_for_pool: bool = False) -> None:
        """Start a worker without waiting for it (its torch import overlaps ours). With the warm
        pool, a zygote still importing torch is not waited for either: the worker is then
        forked by `ensure_ready`, which waits (`wait_for_pool`)."""
        if self._proc is not None:
            return
        pool = WarmPool.shared(PACKAGE_PARENT, _clean_env, STARTUP_TIMEOUT) if self.warm_pool else None
        if pool is not None and not pool.ready and not wait_for_pool:
            return
        if (os.name == "nt" or not hasattr(os, "killpg")) and not portable.selected():
            _limits_warning()  # the portable path says what it lacks in the result instead
        if self.generation and getattr(self, "_disk_used", None) is not None:
            # The last worker was stopped for filling its home: the next one starts with an empty
            # home, or the flood it left would stop every check that follows. Otherwise the home
            # is kept, as for any program that runs twice.
            _empty(self._tmp / "home")
        self.generation += 1
        self._dead, self._ready, self._reader = None, False, FrameReader()
        self._log = self._tmp / f"worker-{self.generation}.log"
        if portable.selected():  # autograder/sandbox/portable.py: a spawned worker on stdin/stdout
            limits = self._common_limits()  # no process count: RLIMIT_NPROC is not portable
            # The spare worker (already importing torch, or done) takes this sandbox's config.
            self._proc = portable.start_worker(PACKAGE_PARENT, _clean_env, self.root, _clean_env(self._tmp / "home"),
                                               self._log, self._tmp / "home", limits, walls_enabled=isolation.enabled())
            self.worker_pid, self._exit_code, self._disk_used = self._proc.pid, None, None
            return
        req_r, self._req_w = os.pipe()
        self._resp_r, resp_w = os.pipe()
        log_fd = os.open(self._log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        config = self.worker_config()
        if pool is not None:
            self._proc = _fork_from_pool(pool, config, req_r, resp_w, log_fd)
        if self._proc is None:
            import json

            # The supervisor gets the clean environment too: the worker can read its parent's
            # /proc/PID/environ, so this process's secrets must not be there either.
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", str(SUPERVISOR),
                 json.dumps(supervisor_config(config, req_r, resp_w, log_fd))],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                pass_fds=[req_r, resp_w, log_fd], start_new_session=True, env=config["env"],
            )
        for fd in (req_r, resp_w, log_fd):
            os.close(fd)
        self._status_fd = self._proc.stdout.fileno()
        self._status_buf, self._exit_code, self._disk_used = b"", None, None
        for fd in (self._resp_r, self._req_w, self._status_fd):
            os.set_blocking(fd, False)

    def worker_config(self) -> dict:
        """What the next worker starts with, whichever way it starts (forked by the warm pool's
        zygote, or executed through the supervisor: `supervisor_config`): its folder, clean
        environment, resource limits, user and walls. One builder, so the two ways cannot drift."""
        home = self._tmp / "home"
        limits = {**self._common_limits(), "processes": _process_limit(self.limits.processes, self.user)}
        return {"cwd": str(self.root), "env": _clean_env(home), "limits": limits,
                "user": None if self.user is None else dict(zip(("uid", "gid"), self.user)),
                "walls": isolation.walls(home, gpu=_cuda_present())}

    def _common_limits(self) -> dict:
        """The resource limits every worker gets, on every path (no memory cap with CUDA: its
        driver maps far more address space than it uses)."""
        return {"memory_bytes": None if _cuda_present() else self.limits.memory_bytes,
                "cpu_seconds": self.limits.cpu_seconds, "file_bytes": self.limits.file_bytes}

    def ensure_ready(self, timeout: float = STARTUP_TIMEOUT) -> None:
        """Block until a live worker has imported torch and said hello."""
        if self._proc is not None and self._dead is not None:
            self.kill()
        self.start(wait_for_pool=True)
        if self._ready:
            return
        msg, _ = self._receive(time.monotonic() + timeout, starting=True)
        if not isinstance(msg, dict) or "ready" not in msg:
            self._die(message("engine.worker_garbage"))
        if isinstance(self._proc, portable.PortableWorker):
            self.worker_pid = self._proc.adopt(msg["ready"])
        self._ready = True
        if self.cpu_budget is not None:
            self.cpu_budget.watch(self.worker_pid)  # a worker replaced mid-check: its start is free
        # Sent before any learner code ran: what the kernel enforced on this worker.
        ready = msg["ready"] if isinstance(msg["ready"], dict) else {}
        self.isolation_reports.append(isolation.clean_report(ready.get("isolation")))

    def kill(self) -> None:
        """Kill the worker and everything it spawned; the next request starts a new one."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if isinstance(proc, portable.PortableWorker):
            proc.kill()
            self._ready, self.worker_pid = False, None
            return
        for fd in (self._req_w, self._resp_r):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            proc.stdin.close()  # the supervisor kills and reaps every descendant, then exits
        except OSError:
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            # The supervisor is stuck: kill the groups ourselves. Only now, while it is alive and
            # has not reaped the worker, are these ids sure not to name someone else's group.
            for target in (self.worker_pid, proc.pid):
                if target:
                    try:
                        os.killpg(target, 9)
                    except (OSError, AttributeError):
                        pass
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        self._ready = False
        self.worker_pid = None

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ time limits
    def begin_check(self, timeout: float) -> None:
        """Limit the requests of the check that starts now: `timeout` CPU seconds of the worker
        where they can be measured, and a wall-clock bound (autograder/sandbox/cpu_clock.py)."""
        self.deadline = time.monotonic() + cpu_clock.wall_bound(timeout) + 1.0
        self.cpu_budget = CpuBudget(timeout) if cpu_clock.measurable() else None
        if self.cpu_budget is not None and self._ready and self._dead is None:
            self.cpu_budget.watch(self.worker_pid)

    def end_check(self) -> None:
        self.deadline, self.cpu_budget = None, None

    def _charge_cpu(self) -> None:
        """Stop the worker once the check's CPU budget is spent (polled while we wait on it)."""
        budget = self.cpu_budget
        if budget is None or not self._ready:
            return
        now = time.monotonic()
        if now - self._cpu_polled < CPU_POLL_S:
            return
        self._cpu_polled = now
        if budget.exhausted():
            self._die(message("engine.timeout_cpu", seconds=f"{budget.seconds:g}"), BudgetSpent)

    # ------------------------------------------------------------ requests
    def request(self, op: str, **payload: Any) -> Any:
        if self._dead is not None:
            # Re-raised by every later request: without a reset its traceback would grow by
            # each raise, and pytest's failure report with it (seconds per check).
            raise self._dead.with_traceback(None)
        self.ensure_ready()
        self._next_id += 1
        tree, buffers = encode(payload)
        envelope = {"op": op, "id": self._next_id, **tree_items(tree)}
        deadline = self.deadline if self.deadline is not None else time.monotonic() + 60
        completed = False
        try:
            self._send(envelope, buffers, deadline)
            while True:
                msg, bufs = self._receive(deadline)
                if isinstance(msg, dict) and msg.get("id") == self._next_id:
                    break
            completed = True
        finally:
            if not completed and self._dead is None:
                # Interrupted (a check's timeout, Ctrl-C): the worker is in an unknown state.
                self._dead = WorkerDied(Feedback.of(message("engine.worker_interrupted")))
                self.kill()
        if "error" in msg:
            err = msg["error"] if isinstance(msg["error"], dict) else {}
            raise StudentError(str(err.get("type", "Error"))[:100], str(err.get("message", ""))[:4000],
                               _frames(err.get("frames")), str(self.root), _names(err.get("bases")))
        try:
            return decode(msg.get("ok"), bufs, self._handle)
        except ProtocolError as exc:
            self._die(message("engine.worker_garbage_detail", detail=str(exc)))

    def _handle(self, v: dict) -> Handle:
        hid = v.get("id", 0)
        if not isinstance(hid, int) or isinstance(hid, bool):
            raise ProtocolError("malformed handle")
        return Handle(hid, str(v.get("type", "?"))[:80], str(v.get("repr", ""))[:200], self.generation)

    def _send(self, envelope: dict, buffers: list[bytes], deadline: float) -> None:
        # Non-blocking, against the check's deadline: a worker that stops reading cannot
        # block the trusted process on a full pipe.
        if isinstance(self._proc, portable.PortableWorker):
            outcome = self._proc.send(frame_bytes(envelope, buffers), deadline, self._charge_cpu)
            if outcome != "sent":
                self._die(message("engine.timeout_generic") if outcome == "timeout" else self._exit_reason())
            return
        data = memoryview(frame_bytes(envelope, buffers))
        while data:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._die(message("engine.timeout_generic"))
            _, writable, _ = select.select([], [self._req_w], [], min(remaining, CPU_POLL_S))
            self._charge_cpu()
            if writable:
                try:
                    data = data[os.write(self._req_w, data):]
                except BrokenPipeError:
                    self._die(self._exit_reason())

    def _receive(self, deadline: float, starting: bool = False) -> tuple[Any, list[bytes]]:
        while True:
            try:
                frame = self._reader.take()
            except ProtocolError as exc:
                self._die(message("engine.worker_garbage_detail", detail=str(exc)))
            if frame is not None:
                return frame
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._die(message("engine.worker_start_timeout" if starting else "engine.timeout_generic"))
            if isinstance(self._proc, portable.PortableWorker):  # no select on pipes there
                chunk = self._proc.read(min(remaining, CPU_POLL_S))
                if not starting:
                    self._charge_cpu()
                if chunk == b"":
                    self._die(self._exit_reason())
                if chunk:
                    self._reader.feed(chunk)
                continue
            ready, _, _ = select.select([self._resp_r, self._status_fd], [], [], min(remaining, CPU_POLL_S))
            if not starting:
                self._charge_cpu()
            if self._status_fd in ready:
                self._read_status()
            if self._resp_r in ready:
                try:
                    chunk = os.read(self._resp_r, 1 << 20)
                except BlockingIOError:
                    continue
                if not chunk:
                    self._die(self._exit_reason())
                self._reader.feed(chunk)

    def _read_status(self) -> bool:
        """Read the supervisor's status lines ("started PID", "exit CODE"); False at EOF."""
        try:
            chunk = os.read(self._status_fd, 4096)
        except BlockingIOError:
            return True
        self._status_buf += chunk
        *lines, self._status_buf = self._status_buf.split(b"\n")
        for raw in lines:
            word, _, value = raw.decode(errors="replace").partition(" ")
            if word == "started" and value.isdigit():
                self.worker_pid = int(value)
            elif word == "exit" and value.lstrip("-").isdigit():
                self._exit_code = int(value)
            elif word == "disk" and value.isdigit():
                self._disk_used = int(value)
        return bool(chunk)

    def _exit_reason(self) -> Text:
        # The response pipe closed: give the supervisor a moment to report the exit code.
        end = time.monotonic() + 3
        if isinstance(self._proc, portable.PortableWorker):
            self._exit_code, self._disk_used, end = self._proc.exit_code(timeout=3), self._proc.disk_used, 0
        while self._exit_code is None and time.monotonic() < end:
            ready, _, _ = select.select([self._status_fd], [], [], 0.1)
            if ready and not self._read_status():
                break
        code, tail = self._exit_code, self.log_tail()
        if self._disk_used is not None:
            return message("engine.worker_disk_full", megabytes=self._disk_used >> 20, output=tail)
        if code is not None and code < 0:
            import signal

            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = str(-code)
            # SIGKILL/SIGSEGV/SIGABRT without our asking are almost always memory exhaustion.
            key = "engine.worker_killed_memory" if -code in (6, 9, 11) else "engine.worker_killed"
            return message(key, signal=name, output=tail)
        return message("engine.worker_exited", code="?" if code is None else code, output=tail)

    def log_tail(self, limit: int = 600) -> str:
        try:
            data = self._log.read_bytes()[-limit:]
        except OSError:
            return ""
        return data.decode(errors="replace").strip()

    def _die(self, reason: Text, kind: type[WorkerDied] = WorkerDied) -> None:
        self._dead = kind(Feedback((reason,)))
        self.kill()
        raise self._dead

    # ------------------------------------------------------------ conveniences for graders
    def read_file(self, name: str, max_bytes: int) -> bytes | None:
        """A learner's data file (e.g. quiz answers) as bytes, for the trusted side to parse.

        The worker may rewrite its copy at any time, so the file is opened without following
        links, must be a regular file, and at most max_bytes + 1 bytes are read (so a caller
        can tell "too big"). None when it is missing or not a regular file.
        """
        import stat

        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        try:
            fd = os.open(self.root / name, flags)
        except OSError:
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            chunks, size = [], 0
            while size <= max_bytes:
                chunk = os.read(fd, max_bytes + 1 - size)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def module(self, name: str) -> Handle:
        """Import the learner's module `name` (once); a failed import fails every later use."""
        cached = self._modules.get(name)
        if isinstance(cached, BaseException):
            raise cached.with_traceback(None)  # see request()
        if isinstance(cached, Handle) and cached.generation == self.generation:
            return cached
        try:
            handle = self.request("import", module=name)
        except BudgetSpent:
            # This check says it ran out of time; the later ones, that the import never ends.
            self._modules[name] = WorkerDied(Feedback.of(message("engine.import_timeout", module=name)))
            raise
        except (StudentError, WorkerDied) as exc:
            self._modules[name] = exc
            raise
        except BaseException:
            self._modules[name] = WorkerDied(Feedback.of(message("engine.import_timeout", module=name)))
            raise
        self._modules[name] = handle
        return handle

    def library(self, name: str) -> Handle:
        """A handle to a library module in the worker (torch, numpy, math, functools), e.g. to
        build a torch.Generator there: sandbox.call(sandbox.getattr(sandbox.library("torch"),
        "Generator"))."""
        return self.request("library", module=name)

    def getattr(self, target: Handle, name: str) -> Any:
        return self.request("getattr", target=target, name=name)

    def call(self, target: Handle, *args: Any, method: str | None = None, **kwargs: Any) -> Any:
        return self.request("call", target=target, method=method, args=list(args), kwargs=kwargs)

    def call_traced(self, target: Handle, *args: Any, method: str | None = None,
                    capture: tuple[str, ...] = (), spy: tuple[str, ...] = (), seed: int | None = None,
                    no_grad: bool = False, **kwargs: Any) -> dict:
        options = {"capture": list(capture), "spy": list(spy), "seed": seed, "no_grad": no_grad}
        result = self.request("call", target=target, method=method, args=list(args), kwargs=kwargs,
                              options=options)
        if not capture and not spy:
            return {"value": result, "captured": [], "spied": []}
        return result

    def vjp(self, target: Handle, x: Any, cotangents: list) -> list:
        return self.request("vjp", target=target, input=x, cotangents=cotangents)

    def param_vjp(self, target: Handle, args: list, cotangents: list, *, input_grad: bool = False,
                  all_params: bool = False, **kwargs: Any) -> dict:
        """One forward call target(*args, **kwargs) and, per cotangent (shaped like the output:
        a tensor, or a tuple with None where nothing is asked), the gradient reaching each
        parameter: {"output": ..., "grads": [{name: gradient} or None when nothing asked for
        depends on a parameter]}. With input_grad, also "input_grads": per cotangent the
        gradient reaching args[0] (zeros where it reaches none; None where nothing was asked).
        With all_params, frozen parameters (requires_grad off) get their gradient too."""
        options = {name: True for name, on in (("input_grad", input_grad), ("all_params", all_params)) if on}
        return self.request("param_vjp", target=target, args=list(args), kwargs=kwargs, cotangents=cotangents,
                            **options)


def _names(raw: Any) -> tuple[str, ...]:
    """A worker's exception class names, reduced to bounded strings."""
    if not isinstance(raw, list):
        return ()
    return tuple(str(name)[:100] for name in raw[:21] if isinstance(name, str))


def _frames(raw: Any) -> list[dict]:
    """A worker's traceback frames, reduced to plain, bounded values."""
    if not isinstance(raw, list):
        return []
    frames = []
    for f in raw[-30:]:
        if isinstance(f, dict):
            lineno = f.get("lineno")
            frames.append({"filename": str(f.get("filename", "?"))[:500],
                           "lineno": lineno if isinstance(lineno, int) and not isinstance(lineno, bool) else 0,
                           "name": str(f.get("name", "?"))[:200], "line": str(f.get("line") or "")[:300]})
    return frames


def _hand_over(tmp: Path, root: Path, home: Path, user: tuple[int, int]) -> None:
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


def _empty(folder: Path) -> None:
    """Remove everything inside `folder`, never following a link. A worker may have taken the
    bits off its own folders, so every folder under it is made ours again first."""
    stack = [str(folder)]
    while stack:
        path = stack.pop()
        try:
            if path != str(folder):
                os.chmod(path, 0o700)
            with os.scandir(path) as listing:
                stack.extend(e.path for e in listing if e.is_dir(follow_symlinks=False))
        except OSError:
            continue
    for entry in list(os.scandir(folder)):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            try:
                os.unlink(entry.path)
            except OSError:
                pass


def tree_items(tree: Any) -> dict:
    """The encoded payload dict as plain JSON keys (the request's top level is not tagged)."""
    assert isinstance(tree, dict) and tree.get("$t") == "dict"
    out = {}
    for key, value in tree["items"]:
        out[key] = value
    return out


def supervisor_config(config: dict, req_r: int, resp_w: int, log_fd: int) -> dict:
    """A worker's `config` (Sandbox.worker_config) as an executed supervisor reads it
    (autograder/sandbox/worker/supervisor.py): plus the worker's command line, the engine's
    package to import from, and the fds to hand on, which a forked one gets from the zygote."""
    import json

    argv = [sys.executable, "-I", "-c", WORKER_BOOT, str(req_r), str(resp_w), str(PACKAGE_PARENT),
            json.dumps(config["walls"])]
    return {**config, "argv": argv, "package": str(PACKAGE_PARENT), "pass_fds": [req_r, resp_w],
            "log_fd": log_fd}


def _fork_from_pool(pool: WarmPool, config: dict, req_r: int, resp_w: int, log_fd: int) -> ForkedSupervisor | None:
    """A supervisor and worker forked by the warm pool's zygote, or None (then the caller
    executes a fresh one: a pool problem must never cost a learner their grade)."""
    control_r, control_w = os.pipe()
    status_r, status_w = os.pipe()
    try:
        pid = pool.spawn(config, [req_r, resp_w, log_fd, status_w, control_r])
    except (PoolError, OSError, ValueError):
        for fd in (control_r, control_w, status_r, status_w):
            os.close(fd)
        return None
    os.close(control_r)
    os.close(status_w)
    return ForkedSupervisor(pid, control_w, status_r)


@functools.cache
def _cuda_present() -> bool:
    """Whether an NVIDIA GPU may be used, decided without importing torch (which costs seconds).

    CUDA reserves far more address space than RLIMIT_AS would allow, so on a GPU machine the
    memory limit is left to the driver and the machine.
    """
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/proc/driver/nvidia/version")
