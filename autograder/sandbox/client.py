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

Owns the Sandbox and what it raises. Who the worker runs as and what it may do is
privileges.py; how it is started (warm pool, fresh interpreter, portable path) is starters.py;
the bytes to and from it, whichever way it started, go through a channel (channel.py).
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from autograder.core.results import Feedback, Text, message
from autograder.sandbox import cpu_clock, isolation, portable, starters
from autograder.sandbox.channel import CPU_POLL_S, Channel
from autograder.sandbox.cpu_clock import CpuBudget

# Callers import these from here: the submission intake (intake.py), who the worker runs as
# (privileges.py) and how workers are started (starters.py).
from autograder.sandbox.intake import MAX_FILE_BYTES, MAX_FILES, copy_submission, submission_files  # noqa: F401
from autograder.sandbox.privileges import cuda_present, hand_over, limits_warning, process_limit, worker_user
from autograder.sandbox.protocol import FrameReader, Handle, ProtocolError, decode, encode, frame_bytes
from autograder.sandbox.stack_dump import stack_in_dump
from autograder.sandbox.starters import (  # noqa: F401
    PACKAGE_PARENT,
    STARTUP_TIMEOUT,
    share_warm_pool,
    start_shared_zygote,
    start_warm_pool,
    supervisor_config,
)


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

    def __init__(
        self,
        type_name: str,
        message: str,
        frames: list[dict],
        root: str,
        bases: tuple[str, ...] = (),
        cause: dict | None = None,
    ) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name, self.message, self.frames, self.root = type_name, message, frames, root
        # The exception class's MRO by name (the worker sends it), the type itself first.
        self.bases = tuple(bases) or (type_name,)
        # Where the values of the torch operation that failed were made, as the worker traced
        # them (sandbox/worker/provenance.py): untrusted data, read only through
        # engine/provenance.py, which bounds and checks it (blame by cause, engine/blame.py).
        self.cause = cause if isinstance(cause, dict) else None

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


class HeldBack(WorkerDied):
    """The learner's code was not run: the sandbox was told to hold it back (`Sandbox.hold`),
    because it already ran out of time in this lesson and would only do so again."""


# Sampling the worker's stack when a check runs out of time (Sandbox.sample_stack): how long to
# wait for the dump, and how much of the log to read for it.
SAMPLE_WAIT_S = 1.0
SAMPLE_BYTES = 1 << 20


@dataclass(frozen=True)
class Stopped:
    """A worker stopped because a check ran out of time: where its Python code was then
    (`frames`, innermost first, as faulthandler saw them; empty when no sample came), whether
    the wall clock (not the CPU budget) ran out, and whether it was the check's first, shorter
    budget (`begin_check(first=...)`) that ran out."""

    frames: tuple[dict, ...]
    wall: bool
    short: bool = False


class Sandbox:
    """One submission folder, served by at most one live worker at a time."""

    def __init__(
        self, submission: Path, limits: Limits = Limits(), *, provided: dict[str, Path] | None = None
    ) -> None:
        """`provided`: {file name: path} of trusted files (earlier lessons' reference pieces)
        put next to the learner's, replacing any learner file of the same name; the names whose
        path does not exist are listed in `provided_missing`."""
        self.submission = Path(submission)
        self.limits = limits
        self._tmp = Path(tempfile.mkdtemp(prefix="autograder-"))
        self.root = self._tmp / "submission"
        copy_submission(self.submission, self.root)
        self.provided = dict(provided or {})
        self.provided_missing = sorted(
            name for name, path in self.provided.items() if not Path(path).is_file()
        )
        for name, path in self.provided.items():
            if name not in self.provided_missing:
                shutil.copyfile(path, self.root / name)
        (self._tmp / "home").mkdir()
        self.user = worker_user()
        # Workers forked from the warm pool's zygote (autograder/sandbox/pool.py) where it can run.
        self.warm_pool = not portable.selected()
        if self.user is not None:
            hand_over(self._tmp, self.root, self._tmp / "home", self.user)
        self.generation = 0
        self.deadline: float | None = None  # wall-clock end of the current check (begin_check)
        self.cpu_budget: CpuBudget | None = None  # the current check's CPU seconds (begin_check)
        self._cpu_polled = 0.0
        self._channel: Channel | None = None  # to the live worker (channel.py)
        self._disk_used: int | None = None  # the last worker's full home, in bytes
        self._dead: WorkerDied | None = None
        self._ready = False
        self._next_id = 0
        self._modules: dict[str, Any] = {}  # name -> Handle | failure to re-raise
        self.isolation_reports: list[dict] = []  # one per worker started, as each reported it
        self.stopped: Stopped | None = None  # set when the current check's time ran out
        self.held: HeldBack | None = None  # see `hold`
        self.held_modules: frozenset[str] | None = None
        self._full_budget: float | None = None
        self._check_started = 0.0
        self._keep_going = None

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
        if self._channel is not None:
            return
        pool = starters.warm_pool() if self.warm_pool else None
        if pool is not None and not pool.ready and not wait_for_pool:
            return
        if (os.name == "nt" or not hasattr(os, "killpg")) and not portable.selected():
            limits_warning()  # the portable path says what it lacks in the result instead
        if self.generation and self._disk_used is not None:
            # The last worker was stopped for filling its home: the next one starts with an empty
            # home, or the flood it left would stop every check that follows. Otherwise the home
            # is kept, as for any program that runs twice.
            _empty(self._tmp / "home")
        self.generation += 1
        self._dead, self._ready, self._reader = None, False, FrameReader()
        self._log = self._tmp / f"worker-{self.generation}.log"
        self._disk_used = None
        if portable.selected():  # autograder/sandbox/portable.py: a spawned worker on stdin/stdout
            limits = self._common_limits()  # no process count: RLIMIT_NPROC is not portable
            self._channel = starters.start_portable(self.root, self._tmp / "home", self._log, limits)
        else:
            self._channel = starters.start_supervised(self.worker_config(), self._log, pool)

    @property
    def _proc(self) -> Any:
        """The live worker's process as started: its supervisor (a Popen, or a ForkedSupervisor
        from the warm pool) or the portable path's PortableWorker; None when there is none."""
        return None if self._channel is None else self._channel.process

    @property
    def worker_pid(self) -> int | None:
        """The live worker's pid (the process whose CPU time a check is charged), once known."""
        return None if self._channel is None else self._channel.worker_pid

    def worker_config(self) -> dict:
        """What the next worker starts with, whichever way it starts (forked by the warm pool's
        zygote, or executed through the supervisor: `supervisor_config`): its folder, clean
        environment, resource limits, user and walls. One builder, so the two ways cannot drift."""
        home = self._tmp / "home"
        limits = {**self._common_limits(), "processes": process_limit(self.limits.processes, self.user)}
        return {
            "cwd": str(self.root),
            "env": starters.clean_env(home),
            "limits": limits,
            "user": None if self.user is None else dict(zip(("uid", "gid"), self.user)),
            "walls": isolation.walls(home, gpu=cuda_present()),
        }

    def _common_limits(self) -> dict:
        """The resource limits every worker gets, on every path (no memory cap with CUDA: its
        driver maps far more address space than it uses)."""
        return {
            "memory_bytes": None if cuda_present() else self.limits.memory_bytes,
            "cpu_seconds": self.limits.cpu_seconds,
            "file_bytes": self.limits.file_bytes,
        }

    def ensure_ready(self, timeout: float = STARTUP_TIMEOUT) -> None:
        """Block until a live worker has imported torch and said hello."""
        if self._channel is not None and self._dead is not None:
            self.kill()
        self.start(wait_for_pool=True)
        if self._ready:
            return
        msg, _ = self._receive(time.monotonic() + timeout, starting=True)
        if not isinstance(msg, dict) or "ready" not in msg:
            self._die(message("engine.worker_garbage"))
        self._channel.adopt(msg["ready"])
        self._ready = True
        if self.cpu_budget is not None:
            self.cpu_budget.watch(self.worker_pid)  # a worker replaced mid-check: its start is free
        # Sent before any learner code ran: what the kernel enforced on this worker.
        ready = msg["ready"] if isinstance(msg["ready"], dict) else {}
        self.isolation_reports.append(isolation.clean_report(ready.get("isolation")))

    def kill(self) -> None:
        """Kill the worker and everything it spawned; the next request starts a new one."""
        channel, self._channel = self._channel, None
        if channel is None:
            return
        self._disk_used = channel.disk_used  # the next worker starts with an empty home then
        channel.close()
        self._ready = False

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ time limits
    def begin_check(self, timeout: float, *, first: float | None = None, keep_going=None) -> None:
        """Limit the requests of the check that starts now: `timeout` CPU seconds of the worker
        where they can be measured, and a wall-clock bound (autograder/sandbox/cpu_clock.py).

        `first`: a shorter budget to start with. When it runs out, the worker's stack is sampled
        and `keep_going(frames)` decides: True gives the check the rest of its `timeout`, False
        stops the worker there (`stopped.short`). Without `keep_going` the shorter budget is the
        whole budget."""
        budget = timeout if first is None else min(first, timeout)
        now = time.monotonic()
        self.stopped = None
        self._check_started, self._full_budget = now, float(timeout)
        self._keep_going = keep_going if budget < timeout else None
        self.deadline = now + cpu_clock.wall_bound(budget) + 1.0
        self.cpu_budget = CpuBudget(budget) if cpu_clock.measurable() else None
        if self.cpu_budget is not None and self._ready and self._dead is None:
            self.cpu_budget.watch(self.worker_pid)

    def end_check(self) -> None:
        self.deadline, self.cpu_budget, self._keep_going = None, None, None

    def hold(self, feedback: Feedback | None, modules: Iterable[str] | None = None) -> None:
        """From now on importing one of the learner's `modules` fails at once with
        HeldBack(feedback) (`modules` None: every request does, and no worker is started);
        feedback None runs everything again. Learner-side grading holds back the code that ran
        out of time: a later check that runs it would only wait for the same loop."""
        self.held = None if feedback is None else HeldBack(feedback)
        self.held_modules = None if modules is None else frozenset(modules)

    @property
    def holds_everything(self) -> bool:
        return self.held is not None and self.held_modules is None

    def _out_of_time(self, *, wall: bool) -> float:
        """The current check's budget ran out (its CPU time, or the wall clock when `wall`):
        sample where the learner's code is, then either give the check the rest of its budget
        (a shorter first budget whose `keep_going` says so: the new deadline is returned) or
        stop the worker, remembering where it was (`stopped`)."""
        frames = self.sample_stack()
        keep_going, self._keep_going = self._keep_going, None
        if keep_going is not None and self._full_budget is not None:
            if keep_going(frames):
                if self.cpu_budget is not None:
                    self.cpu_budget.seconds = self._full_budget
                self.deadline = self._check_started + cpu_clock.wall_bound(self._full_budget) + 1.0
                return self.deadline
        self.stopped = Stopped(tuple(frames), wall, short=keep_going is not None)
        if wall or self.cpu_budget is None:
            self._die(message("engine.timeout_generic"))
        self._die(message("engine.timeout_cpu", seconds=f"{self.cpu_budget.seconds:g}"), BudgetSpent)
        raise AssertionError("unreachable")  # _die raises

    def sample_stack(self) -> list[dict]:
        """Where the live worker's Python code is now: its frames, innermost first, as
        {"filename", "lineno", "name"}; [] when no sample comes. The worker's faulthandler
        (worker/main.py, listen_for_stack_requests) writes them to its log on SIGUSR1; this reads
        at most SAMPLE_BYTES of the log and waits at most SAMPLE_WAIT_S. Advisory: the learner's
        code may write to the same log."""
        pid = self.worker_pid
        if self._channel is None or not self._ready or pid is None or not hasattr(signal, "SIGUSR1"):
            return []
        try:
            start = os.path.getsize(self._log)
            os.kill(pid, signal.SIGUSR1)
        except OSError:
            return []
        end = time.monotonic() + SAMPLE_WAIT_S
        seen: tuple[int, list[dict]] | None = None
        while time.monotonic() < end:
            time.sleep(0.02)
            try:
                with open(self._log, "rb") as log:
                    log.seek(start)
                    text = log.read(SAMPLE_BYTES).decode("utf-8", errors="replace")
            except OSError:
                return []
            found = stack_in_dump(text)
            if found is not None:
                # The dump is written in one go by the signal handler: read once more so a dump
                # caught while being written is read whole.
                if seen is not None and seen[0] == len(found):
                    return found
                seen = (len(found), found)
        return seen[1] if seen is not None else []

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
            self._out_of_time(wall=False)

    # ------------------------------------------------------------ requests
    def request(self, op: str, *, on_progress=None, **payload: Any) -> Any:
        """One request to the worker and its answer. `on_progress(value)` gets each partial
        answer the worker streams before its last (the practice tests' outcomes, one by one)."""
        if self.holds_everything:
            raise self.held.with_traceback(None)
        if self._dead is not None:
            # Re-raised by every later request: without a reset its traceback would grow by
            # each raise, and pytest's failure report with it (seconds per check).
            raise self._dead.with_traceback(None)
        self.ensure_ready()
        self._next_id += 1
        tree, buffers = encode(payload)
        envelope = {"op": op, "id": self._next_id, **tree_items(tree)}
        if self.deadline is None:
            self.deadline = time.monotonic() + 60
            transient = True
        else:
            transient = False
        try:
            self._send(envelope, buffers, self.deadline)
            while True:
                msg, bufs = self._receive(None)
                if isinstance(msg, dict) and msg.get("id") == self._next_id:
                    if "progress" not in msg:
                        break
                    if on_progress is not None:
                        on_progress(self._decode(msg.get("progress"), bufs))
        except BaseException as exc:
            if self._dead is None:
                # Interrupted (a check's timeout, Ctrl-C): the worker is in an unknown state.
                # A timeout (not Ctrl-C, which should stop at once) first asks where it was.
                if not isinstance(exc, KeyboardInterrupt):
                    self.stopped = Stopped(tuple(self.sample_stack()), wall=True)
                self._dead = WorkerDied(Feedback.of(message("engine.worker_interrupted")))
                self.kill()
            raise
        finally:
            if transient:
                self.deadline = None
        if "error" in msg:
            err = msg["error"] if isinstance(msg["error"], dict) else {}
            raise StudentError(
                str(err.get("type", "Error"))[:100],
                str(err.get("message", ""))[:4000],
                _frames(err.get("frames")),
                str(self.root),
                _names(err.get("bases")),
                err.get("cause") if isinstance(err.get("cause"), dict) else None,
            )
        return self._decode(msg.get("ok"), bufs)

    def _decode(self, tree: Any, bufs: list[bytes]) -> Any:
        try:
            return decode(tree, bufs, self._handle)
        except ProtocolError as exc:
            self._die(message("engine.worker_garbage_detail", detail=str(exc)))

    def _handle(self, v: dict) -> Handle:
        hid = v.get("id", 0)
        if not isinstance(hid, int) or isinstance(hid, bool):
            raise ProtocolError("malformed handle")
        return Handle(hid, str(v.get("type", "?"))[:80], str(v.get("repr", ""))[:200], self.generation)

    def _send(self, envelope: dict, buffers: list[bytes], deadline: float) -> None:
        outcome = self._channel.send(frame_bytes(envelope, buffers), deadline, self._charge_cpu)
        if outcome == "timeout":
            self.stopped = Stopped(tuple(self.sample_stack()), wall=True)
            self._die(message("engine.timeout_generic"))
        if outcome != "sent":
            self._die(self._exit_reason())

    def _receive(self, deadline: float | None, starting: bool = False) -> tuple[Any, list[bytes]]:
        """The next frame from the worker, before `deadline` (None: the check's, which a shorter
        first budget may extend: see `_out_of_time`)."""
        while True:
            try:
                frame = self._reader.take()
            except ProtocolError as exc:
                self._die(message("engine.worker_garbage_detail", detail=str(exc)))
            if frame is not None:
                return frame
            remaining = (self.deadline if deadline is None else deadline) - time.monotonic()
            if remaining <= 0:
                if starting:
                    self._die(message("engine.worker_start_timeout"))
                self._out_of_time(wall=True)
                continue
            chunk = self._channel.read(min(remaining, CPU_POLL_S))
            if not starting:
                self._charge_cpu()
            if chunk == b"":
                self._die(self._exit_reason())
            if chunk:
                self._reader.feed(chunk)

    def _exit_reason(self) -> Text:
        # The answers ended: how the worker did (its channel waits a moment to learn).
        code, tail = self._channel.exit_code(), self.log_tail()
        if self._channel.disk_used is not None:
            return message("engine.worker_disk_full", megabytes=self._channel.disk_used >> 20, output=tail)
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
        if self.held is not None and (self.held_modules is None or name in self.held_modules):
            raise self.held.with_traceback(None)
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

    def call_traced(
        self,
        target: Handle,
        *args: Any,
        method: str | None = None,
        capture: tuple[str, ...] = (),
        spy: tuple[str, ...] = (),
        seed: int | None = None,
        no_grad: bool = False,
        **kwargs: Any,
    ) -> dict:
        options = {"capture": list(capture), "spy": list(spy), "seed": seed, "no_grad": no_grad}
        result = self.request(
            "call", target=target, method=method, args=list(args), kwargs=kwargs, options=options
        )
        if not capture and not spy:
            return {"value": result, "captured": [], "spied": []}
        return result

    def vjp(self, target: Handle, x: Any, cotangents: list) -> list:
        return self.request("vjp", target=target, input=x, cotangents=cotangents)

    def param_vjp(
        self,
        target: Handle,
        args: list,
        cotangents: list,
        *,
        input_grad: bool = False,
        all_params: bool = False,
        **kwargs: Any,
    ) -> dict:
        """One forward call target(*args, **kwargs) and, per cotangent (shaped like the output:
        a tensor, or a tuple with None where nothing is asked), the gradient reaching each
        parameter: {"output": ..., "grads": [{name: gradient} or None when nothing asked for
        depends on a parameter]}. With input_grad, also "input_grads": per cotangent the
        gradient reaching args[0] (zeros where it reaches none; None where nothing was asked).
        With all_params, frozen parameters (requires_grad off) get their gradient too."""
        options = {name: True for name, on in (("input_grad", input_grad), ("all_params", all_params)) if on}
        return self.request(
            "param_vjp", target=target, args=list(args), kwargs=kwargs, cotangents=cotangents, **options
        )


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
            frames.append(
                {
                    "filename": str(f.get("filename", "?"))[:500],
                    "lineno": lineno if isinstance(lineno, int) and not isinstance(lineno, bool) else 0,
                    "name": str(f.get("name", "?"))[:200],
                    "line": str(f.get("line") or "")[:300],
                }
            )
    return frames


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
