"""The worker on the portable path (autograder/sandbox/portable.py): the same worker (main.py),
spoken to over its own stdin and stdout, on any system Python runs on.

The Linux worker gets its two protocol pipes as inherited file descriptors (pass_fds), waits on
them with select and is limited and walled in by its supervisor. None of that exists on Windows,
so here the trusted side starts a plain interpreter, ahead of need (a spare, see portable.py):

    python -I -c BOOT PACKAGE_PARENT

in a neutral folder with a neutral clean environment. This module takes the protocol off fds 0
and 1 (duplicates that no process the learner starts inherits), points fd 0 at the null device
and fd 1 at the log (fd 2): a learner's print() then lands in the log, never inside a frame. It
imports numpy and torch and then waits for its sandbox: the first frame on the request pipe,
{"config": {cwd, env, limits, disabled}}. Only then, and before any learner code runs,
it enters the sandbox: the sandbox's folder, exactly the sandbox's environment, its home as the
temporary folder, and the resource limits the platform has (`resource`: Linux, macOS) set on
this process itself. The walls (Landlock, seccomp, namespaces) are Linux-only and are not
attempted. Requests are read with blocking reads (select cannot wait on a pipe on Windows). The
first message says all this, before any learner import, so the result can record what was not
enforced. A spare whose trusted process ends before it is taken reads the end of its stdin and
exits.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from autograder.sandbox.protocol import FrameReader, ProtocolError
from autograder.sandbox.worker.main import Worker, listen_for_stack_requests, prepare_libraries

LIMITS = (("RLIMIT_AS", "memory_bytes"), ("RLIMIT_CPU", "cpu_seconds"), ("RLIMIT_FSIZE", "file_bytes"))


class StdioWorker(Worker):
    """main.Worker reading its requests with plain blocking reads."""

    def read_request(self):
        while True:
            frame = self.reader.take()
            if frame is not None:
                return frame
            chunk = os.read(self.req_fd, 1 << 20)
            if not chunk:
                return None  # the trusted side closed our stdin: it is done with us
            self.reader.feed(chunk)


def take_stdio() -> tuple[int, int]:
    """(request fd, response fd): the protocol, moved off fds 0 and 1."""
    req_fd, resp_fd = os.dup(0), os.dup(1)  # not inheritable (PEP 446)
    if sys.platform == "win32":
        import msvcrt

        for fd in (req_fd, resp_fd):
            msvcrt.setmode(fd, os.O_BINARY)  # no newline translation inside a frame
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)  # print() goes to the log
    return req_fd, resp_fd


def limit_self(limits: dict) -> bool:
    """Set this process's resource limits where the platform has them; whether every limit asked
    for was set (False on Windows, which has no `resource` module)."""
    try:
        import resource
    except ImportError:
        return False
    applied = True
    for name, key in (*LIMITS, ("RLIMIT_CORE", None)):
        value = 0 if key is None else limits.get(key)
        if value is None:
            continue
        try:
            limit = getattr(resource, name)
            hard = resource.getrlimit(limit)[1]
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(limit, (value, value))
        except (AttributeError, ValueError, OSError):
            applied = applied and key is None  # a core-dump limit that fails matters little
    return applied


def wait_for_sandbox(req_fd: int, reader: FrameReader) -> dict | None:
    """The config of the sandbox this worker serves: the first frame the trusted side sends
    when it takes this spare. None when it closed our stdin first (it ended, or no longer needs
    us) or sent anything else."""
    while True:
        try:
            frame = reader.take()
        except ProtocolError:
            return None
        if frame is not None:
            msg = frame[0]
            config = msg.get("config") if isinstance(msg, dict) else None
            return config if isinstance(config, dict) else None
        chunk = os.read(req_fd, 1 << 16)
        if not chunk:
            return None
        reader.feed(chunk)


def enter_sandbox(config: dict) -> Path:
    """Become the sandbox's worker: its folder, exactly its environment (not the one this
    interpreter started with), its home as the temporary folder, its resource limits. Returns
    the folder of the learner's files. Nothing of the learner's has run yet."""
    os.chdir(config["cwd"])
    env = config.get("env") or {}
    os.environ.clear()  # os.environ and os.environb share one mapping; both change, and putenv
    os.environ.update({str(k): str(v) for k, v in env.items()})
    # gettempdir() keeps its first answer: drop one computed during the imports, so the learner's
    # temporary files go to the sandbox's home (TMPDIR), never to the spare's neutral folder.
    tempfile.tempdir = None
    return Path.cwd().resolve()


def main() -> None:
    package = sys.argv[1]
    req_fd, resp_fd = take_stdio()
    prepare_libraries()
    sys.dont_write_bytecode = True
    from autograder.sandbox.worker import practice  # noqa: F401  (imported before any learner code)

    reader = FrameReader()
    config = wait_for_sandbox(req_fd, reader)
    if config is None:
        return  # a spare nobody took
    root = enter_sandbox(config)
    sys.path.insert(0, str(root))
    report = {"portable": True, "limits": limit_self(config.get("limits") or {})}
    if config.get("disabled"):
        report["disabled"] = True
    # The engine's folder (hidden graders) stays readable on this path (nothing walls the
    # worker in, and the result says so), but it is not left on the learner's import path.
    sys.path[:] = [p for p in sys.path if p != package]
    listen_for_stack_requests()  # where a check that runs out of time was (not on Windows)
    worker = StdioWorker(root, req_fd, resp_fd)
    worker.reader = reader  # nothing follows the config before our hello, but keep what did
    worker.serve(report)


if __name__ == "__main__":
    main()
