"""The trusted side of the trust boundary: a learner's submission served by a killable worker.

`Sandbox` copies a submission into a private temporary folder and starts, through the
supervisor (autograder/worker/supervisor.py), a worker process with a clean environment and
resource limits, in a session of its own. Requests and answers are data only (protocol.py).
The learner's code never runs in this process: if the worker crashes, hangs, or answers
nonsense, the sandbox kills it and everything it spawned, reports why, and a later request
starts a fresh worker.
"""

from __future__ import annotations

import functools
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import autograder
from .protocol import FrameReader, Handle, ProtocolError, decode, encode, write_frame
from .results import Feedback, Text, message

PACKAGE_PARENT = Path(autograder.__file__).resolve().parent.parent
SUPERVISOR = Path(__file__).with_name("worker") / "supervisor.py"
WORKER_BOOT = (
    "import sys; sys.path.insert(0, sys.argv.pop(3)); "
    "from autograder.worker.main import main; main()"
)
# Variables a worker may inherit: none of them can carry a secret.
INHERITED_ENV = ("CUDA_VISIBLE_DEVICES", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "SYSTEMROOT",
                 "LD_LIBRARY_PATH")
MAX_FILE_BYTES = 8 * 1024 * 1024
MAX_FILES = 500
STARTUP_TIMEOUT = 120.0


@dataclass(frozen=True)
class Limits:
    memory_bytes: int | None = 4 << 30  # address space; torch itself maps ~0.7 GiB
    cpu_seconds: int | None = 300
    processes: int | None = 256  # ignored for root by the kernel; see the supervisor's subreaper
    file_bytes: int | None = 64 << 20


class StudentError(Exception):
    """The learner's code raised an exception (in the worker)."""

    def __init__(self, type_name: str, message: str, frames: list[dict], root: str) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name, self.message, self.frames, self.root = type_name, message, frames, root

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


@functools.cache
def _limits_warning() -> None:
    warnings.warn("resource limits and process groups are only enforced on Linux/macOS; "
                  "the learner's code runs without them here", RuntimeWarning, stacklevel=3)


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


def copy_submission(src: Path, dest: Path) -> None:
    """Copy a lesson folder's files (not its caches) with bounds on size and count."""
    dest.mkdir(parents=True, exist_ok=True)
    if not src.is_dir():
        return  # every check will report the missing files
    count = 0
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if any(part in ("__pycache__", ".pytest_cache", ".git") for part in rel.parts):
            continue
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
            continue
        count += 1
        if count > MAX_FILES:
            break
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest / rel)


class Sandbox:
    """One submission folder, served by at most one live worker at a time."""

    def __init__(self, submission: Path, limits: Limits = Limits()) -> None:
        self.submission = Path(submission)
        self.limits = limits
        self._tmp = Path(tempfile.mkdtemp(prefix="autograder-"))
        self.root = self._tmp / "submission"
        copy_submission(self.submission, self.root)
        (self._tmp / "home").mkdir()
        self.generation = 0
        self.deadline: float | None = None  # set per check by the grading plugin
        self._proc: subprocess.Popen | None = None
        self._dead: WorkerDied | None = None
        self._ready = False
        self._next_id = 0
        self._modules: dict[str, Any] = {}  # name -> Handle | failure to re-raise
        self.worker_pid: int | None = None

    # ------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Start a worker without waiting for it (its torch import overlaps ours)."""
        if self._proc is not None:
            return
        if os.name == "nt" or not hasattr(os, "killpg"):
            _limits_warning()
        self.generation += 1
        self._dead, self._ready, self._reader = None, False, FrameReader()
        self._log = self._tmp / f"worker-{self.generation}.log"
        req_r, self._req_w = os.pipe()
        self._resp_r, resp_w = os.pipe()
        log_fd = os.open(self._log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        limits = {
            "memory_bytes": None if _cuda_present() else self.limits.memory_bytes,
            "cpu_seconds": self.limits.cpu_seconds,
            "processes": None if os.name != "posix" or os.geteuid() == 0 else self.limits.processes,
            "file_bytes": self.limits.file_bytes,
        }
        argv = [sys.executable, "-I", "-c", WORKER_BOOT, str(req_r), str(resp_w), str(PACKAGE_PARENT)]
        config = {"argv": argv, "cwd": str(self.root), "env": _clean_env(self._tmp / "home"),
                  "pass_fds": [req_r, resp_w], "log_fd": log_fd, "limits": limits}
        import json

        self._proc = subprocess.Popen(
            [sys.executable, "-I", "-S", str(SUPERVISOR), json.dumps(config)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            pass_fds=[req_r, resp_w, log_fd], start_new_session=True,
        )
        for fd in (req_r, resp_w, log_fd):
            os.close(fd)
        self._status_fd = self._proc.stdout.fileno()
        self._status_buf, self._exit_code = b"", None
        for fd in (self._resp_r, self._req_w, self._status_fd):
            os.set_blocking(fd, False)

    def ensure_ready(self, timeout: float = STARTUP_TIMEOUT) -> None:
        """Block until a live worker has imported torch and said hello."""
        if self._proc is not None and self._dead is not None:
            self.kill()
        self.start()
        if self._ready:
            return
        msg, _ = self._receive(time.monotonic() + timeout, starting=True)
        if not isinstance(msg, dict) or "ready" not in msg:
            self._die(message("engine.worker_garbage"))
        self._ready = True

    def kill(self) -> None:
        """Kill the worker and everything it spawned; the next request starts a new one."""
        proc, self._proc = self._proc, None
        if proc is None:
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
            pass
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

    # ------------------------------------------------------------ requests
    def request(self, op: str, **payload: Any) -> Any:
        if self._dead is not None:
            raise self._dead
        self.ensure_ready()
        self._next_id += 1
        payload = {k: v for k, v in payload.items()}
        tree, buffers = encode(payload)
        message = {"op": op, "id": self._next_id, **tree_items(tree)}
        deadline = self.deadline if self.deadline is not None else time.monotonic() + 60
        completed = False
        try:
            self._send(message, buffers, deadline)
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
            raise StudentError(str(err.get("type", "Error")), str(err.get("message", "")),
                               [f for f in err.get("frames", []) if isinstance(f, dict)],
                               str(self.root))
        try:
            return decode(msg.get("ok"), bufs, self._handle)
        except ProtocolError as exc:
            self._die(message("engine.worker_garbage_detail", detail=str(exc)))

    def _handle(self, v: dict) -> Handle:
        return Handle(int(v.get("id", 0)), str(v.get("type", "?"))[:80], str(v.get("repr", ""))[:200],
                      self.generation)

    def _send(self, message: dict, buffers: list[bytes], deadline: float) -> None:
        import json
        import struct
        from .protocol import MAGIC

        header = json.dumps({"msg": message, "buffers": [len(b) for b in buffers]},
                            allow_nan=False, separators=(",", ":")).encode()
        data = memoryview(b"".join([MAGIC, struct.pack(">I", len(header)), header, *buffers]))
        while data:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._die(message("engine.timeout_generic"))
            _, writable, _ = select.select([], [self._req_w], [], min(remaining, 0.5))
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
            ready, _, _ = select.select([self._resp_r, self._status_fd], [], [], min(remaining, 0.5))
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
        return bool(chunk)

    def _exit_reason(self) -> Text:
        # The response pipe closed: give the supervisor a moment to report the exit code.
        end = time.monotonic() + 3
        while self._exit_code is None and time.monotonic() < end:
            ready, _, _ = select.select([self._status_fd], [], [], 0.1)
            if ready and not self._read_status():
                break
        code, tail = self._exit_code, self.log_tail()
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

    def _die(self, reason: Text) -> None:
        self._dead = WorkerDied(Feedback((reason,)))
        self.kill()
        raise self._dead

    # ------------------------------------------------------------ conveniences for graders
    def module(self, name: str) -> Handle:
        """Import the learner's module `name` (once); a failed import fails every later use."""
        cached = self._modules.get(name)
        if isinstance(cached, BaseException):
            raise cached
        if isinstance(cached, Handle) and cached.generation == self.generation:
            return cached
        try:
            handle = self.request("import", module=name)
        except (StudentError, WorkerDied) as exc:
            self._modules[name] = exc
            raise
        except BaseException:
            self._modules[name] = WorkerDied(Feedback.of(message("engine.import_timeout", module=name)))
            raise
        self._modules[name] = handle
        return handle

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


def tree_items(tree: Any) -> dict:
    """The encoded payload dict as plain JSON keys (the request's top level is not tagged)."""
    assert isinstance(tree, dict) and tree.get("$t") == "dict"
    out = {}
    for key, value in tree["items"]:
        out[key] = value
    return out


@functools.cache
def _cuda_present() -> bool:
    # CUDA reserves far more address space than RLIMIT_AS would allow; on a GPU machine the
    # memory limit is left to the GPU driver and the machine.
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False
