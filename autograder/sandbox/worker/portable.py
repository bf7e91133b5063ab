"""The worker on the portable path (autograder/sandbox/portable.py): the same worker (main.py),
spoken to over its own stdin and stdout, on any system Python runs on.

The Linux worker gets its two protocol pipes as inherited file descriptors (pass_fds), waits on
them with select and is limited and walled in by its supervisor. None of that exists on Windows,
so here the trusted side starts a plain interpreter:

    python -I -c BOOT PACKAGE_PARENT CONFIG_JSON

and this module, before any learner code runs, takes the protocol off fds 0 and 1 (duplicates
that no process the learner starts inherits), points fd 0 at the null device and fd 1 at the log
(fd 2): a learner's print() then lands in the log, never inside a frame. Requests are read with
blocking reads (select cannot wait on a pipe on Windows). The resource limits the platform has
(`resource`: Linux, macOS) are set on this process itself; the walls (Landlock, seccomp,
namespaces) are Linux-only and are not attempted. The first message says all this, before any
learner import, so the result can record what was not enforced.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from autograder.sandbox.worker.main import Worker, prepare_libraries

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


def main() -> None:
    config = json.loads(sys.argv[1])
    req_fd, resp_fd = take_stdio()
    prepare_libraries()
    root = Path.cwd().resolve()
    sys.path.insert(0, str(root))
    sys.dont_write_bytecode = True
    from autograder.sandbox.worker import practice  # noqa: F401  (imported before any learner code)

    report = {"portable": True, "limits": limit_self(config.get("limits") or {})}
    if config.get("disabled"):
        report["disabled"] = True
    # The engine's folder (hidden graders) stays readable on this path (nothing walls the
    # worker in, and the result says so), but it is not left on the learner's import path.
    package = config.get("package")
    sys.path[:] = [p for p in sys.path if p != package]
    StdioWorker(root, req_fd, resp_fd).serve(report)


if __name__ == "__main__":
    main()
