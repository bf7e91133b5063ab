"""The bytes between the trusted side and one worker: one class per kind of connection.

Owns: writing a request's frame and reading answer chunks against a deadline, learning how the
worker ended (exit code, a home it filled), and closing the connection with the worker and
everything it started. `SupervisedChannel` is the Linux path: a supervisor (executed, or forked
by the warm pool's zygote) with a request pipe, a response pipe and a status pipe of its
"started PID" / "exit CODE" / "disk BYTES" lines. `PortableChannel` is a spawned worker on
stdin/stdout (autograder/sandbox/portable.py), where pipes cannot be selected. Both have the
same methods, so the Sandbox (client.py) never asks which one it holds.

A channel only reports what happened ("timeout", "closed", b"" at the end); the Sandbox turns
that into the learner's feedback.
"""

from __future__ import annotations

import os
import select
import subprocess
import time
from typing import Any, Callable

from autograder.sandbox import portable
from autograder.sandbox.pool import ForkedSupervisor

# How often a check's CPU budget is read while the trusted side waits on the worker: the
# budget is overrun by at most this much, and each poll is one read of /proc/PID/stat.
CPU_POLL_S = 0.25


class Channel:
    """What the Sandbox uses of a worker connection (the interface both kinds implement)."""

    process: Any  # the supervisor (a Popen or ForkedSupervisor) or the PortableWorker
    worker_pid: int | None  # the process whose CPU time a check is charged
    disk_used: int | None  # bytes in the worker's home, when it was stopped for filling it

    def send(self, data: bytes, deadline: float, waiting: Callable[[], None]) -> str:
        """Write one request's frame without blocking past `deadline`, calling `waiting` while
        it waits: "sent", "timeout" or "closed" (the worker is gone)."""
        raise NotImplementedError

    def read(self, timeout: float) -> bytes | None:
        """The next chunk of answers; b"" once the worker has ended; None if nothing came."""
        raise NotImplementedError

    def adopt(self, ready: object) -> None:
        """The worker said hello (`ready`, sent before any learner code ran)."""

    def exit_code(self) -> int | None:
        """How the worker ended (negative: killed by that signal), waiting a moment for it to
        be known; None if it is not. Called once its answers have ended."""
        raise NotImplementedError

    def close(self) -> None:
        """Kill the worker and everything it spawned; close everything of ours."""
        raise NotImplementedError


class SupervisedChannel(Channel):
    """A supervisor and its worker, on three non-blocking pipes (request, response, status)."""

    def __init__(self, process: subprocess.Popen | ForkedSupervisor, req_w: int, resp_r: int) -> None:
        self.process, self.req_w, self.resp_r = process, req_w, resp_r
        self.status_fd = process.stdout.fileno()
        self.status_buf = b""
        self.worker_pid: int | None = None
        self.code: int | None = None
        self.disk_used: int | None = None
        for fd in (resp_r, req_w, self.status_fd):
            os.set_blocking(fd, False)

    def send(self, data: bytes, deadline: float, waiting: Callable[[], None]) -> str:
        # Non-blocking, against the check's deadline: a worker that stops reading cannot
        # block the trusted process on a full pipe.
        view = memoryview(data)
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            _, writable, _ = select.select([], [self.req_w], [], min(remaining, CPU_POLL_S))
            waiting()
            if writable:
                try:
                    view = view[os.write(self.req_w, view) :]
                except BrokenPipeError:
                    return "closed"
        return "sent"

    def read(self, timeout: float) -> bytes | None:
        ready, _, _ = select.select([self.resp_r, self.status_fd], [], [], timeout)
        if self.status_fd in ready:
            self.read_status()
        if self.resp_r not in ready:
            return None
        try:
            return os.read(self.resp_r, 1 << 20)
        except BlockingIOError:
            return None

    def read_status(self) -> bool:
        """Read the supervisor's status lines ("started PID", "exit CODE"); False at EOF."""
        try:
            chunk = os.read(self.status_fd, 4096)
        except BlockingIOError:
            return True
        self.status_buf += chunk
        *lines, self.status_buf = self.status_buf.split(b"\n")
        for raw in lines:
            word, _, value = raw.decode(errors="replace").partition(" ")
            if word == "started" and value.isdigit():
                self.worker_pid = int(value)
            elif word == "exit" and value.lstrip("-").isdigit():
                self.code = int(value)
            elif word == "disk" and value.isdigit():
                self.disk_used = int(value)
        return bool(chunk)

    def exit_code(self) -> int | None:
        # The response pipe closed: give the supervisor a moment to report the exit code.
        end = time.monotonic() + 3
        while self.code is None and time.monotonic() < end:
            ready, _, _ = select.select([self.status_fd], [], [], 0.1)
            if ready and not self.read_status():
                break
        return self.code

    def close(self) -> None:
        proc = self.process
        for fd in (self.req_w, self.resp_r):
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


class PortableChannel(Channel):
    """A spawned worker on its stdin and stdout, read and written by its own threads."""

    def __init__(self, process: portable.PortableWorker) -> None:
        self.process = process
        self.worker_pid: int | None = process.pid
        self.disk_used: int | None = None

    def send(self, data: bytes, deadline: float, waiting: Callable[[], None]) -> str:
        return self.process.send(data, deadline, waiting)

    def read(self, timeout: float) -> bytes | None:
        return self.process.read(timeout)

    def adopt(self, ready: object) -> None:
        self.worker_pid = self.process.adopt(ready)

    def exit_code(self) -> int | None:
        code = self.process.exit_code(timeout=3)
        self.disk_used = self.process.disk_used
        return code

    def close(self) -> None:
        self.process.kill()
