"""An exclusive lock between processes, on Linux, macOS and Windows.

`autograder check` and `autograder watch` may run at the same time in one learner's folder and
both append to the local history (.autograder/history.jsonl). One append in O_APPEND mode is
atomic on POSIX, but not on Windows, and reading the last byte before writing (to never glue a
record to a damaged line) is a race everywhere. Holding this lock around the read-then-write
makes it one step for every process:

    with exclusive(history_path):
        ...read the end, append...

The lock is taken on a side file, `<name>.lock` next to the guarded file, never on the file
itself: the guarded file can then be replaced (os.replace) or truncated while locked, and the
lock never touches its content. The side file is left in place: deleting it would let two
processes lock two different files under the same name.

POSIX uses flock(2) and Windows msvcrt.locking (one byte at offset 0); both are released by the
operating system when the holder exits or is killed, so a crashed `check` never blocks `watch`.
The lock is not re-entrant: taking it twice in one process (through two `with`) waits on itself
until the timeout.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Iterator

if os.name == "nt":  # pragma: no cover - exercised on the Windows CI leg only
    import msvcrt

    def _try_lock(fd: int) -> bool:
        os.lseek(fd, 0, os.SEEK_SET)  # msvcrt locks bytes from the current position
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:  # EACCES / EDEADLOCK: another handle holds it
            return False
        return True

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


DEFAULT_TIMEOUT = 10.0  # seconds: far above one append, far below a learner giving up
_POLL = 0.02  # seconds between tries; neither call above can wait with a timeout of its own


class LockTimeout(TimeoutError):
    """Another process held the lock longer than `timeout` seconds."""

    def __init__(self, path: Path, timeout: float) -> None:
        super().__init__(
            f"could not lock {path} within {timeout:g} s: another autograder "
            f"process (check or watch) is holding it"
        )
        self.path, self.timeout = path, timeout


def lock_path(path: Path) -> Path:
    """The side file that stands for `path`'s lock."""
    path = Path(path)
    return path.with_name(path.name + ".lock")


@contextlib.contextmanager
def exclusive(path: Path, timeout: float = DEFAULT_TIMEOUT) -> Iterator[Path]:
    """Hold the exclusive lock of `path` (see the module's docstring) for the `with` block;
    raises LockTimeout when it is not free within `timeout` seconds (0: one try), OSError
    when the side file cannot be created. Yields the side file's path."""
    side = lock_path(path)
    fd = os.open(side, os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o644)
    try:
        deadline = time.monotonic() + max(timeout, 0.0)
        while not _try_lock(fd):
            if time.monotonic() >= deadline:
                raise LockTimeout(side, timeout)
            time.sleep(_POLL)
        try:
            yield side
        finally:
            _unlock(fd)
    finally:
        os.close(fd)


def append_line(path: Path, data: bytes) -> None:
    """Append `data` (whole lines, ending in a newline) to `path` under its lock, so that two
    processes never interleave their lines, and never glued to a last line a killed writer left
    cut short: a newline goes first where the file does not end in one. Written in full (a raw
    write may take less than it is given) and flushed to the disk before the lock is released."""
    with exclusive(path), open(path, "a+b", buffering=0) as fh:
        size = fh.seek(0, os.SEEK_END)
        if size:
            fh.seek(size - 1)
            if fh.read(1) != b"\n":
                data = b"\n" + data
        view = memoryview(data)
        while view:
            view = view[fh.write(view) :]
        os.fsync(fh.fileno())
