"""Submission intake: reading a learner's files without following links out of their folder.

Everything the trusted side reads of a submission goes through here: the copy a worker gets
(`copy_submission`), the content hash grade-all resumes by (autograder/cohort/store.py), and the
lookups of the learner's own files (autograder/engine/grading.py, with `contained`). A learner who
commits a symlink (a lesson folder pointing at solutions/, `exercises` pointing at the
instructor's private course, a file pointing at /etc/passwd) gets nothing from it: below the
folder the user chose, a link is never followed, at any level, and counts as a missing file.

A walk of a lesson folder (`submission_files`) enters only real directories and lists only
regular files, in sorted order, bounded in size and number; each is then opened with O_NOFOLLOW
and checked again on the open descriptor, and what is copied or hashed is exactly the bytes read
through it. Anything odd (a FIFO, a device, a file of /proc, a file that vanished, an unreadable
folder) is skipped, never raised: it costs only that learner, as missing files.

Between the walk and the open a directory swapped for a link would be followed; only a process
writing the learner's folder at that moment could do that, and such a process could as well
write the files themselves (the learner on their own machine; in grade-all nothing writes the
clones while they are read, and learners' code runs on copies, walled in).
"""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Iterator
from pathlib import Path

MAX_FILE_BYTES = 8 * 1024 * 1024
MAX_FILES = 500
SKIPPED_NAMES = frozenset({"__pycache__", ".pytest_cache", ".git"})
# A path below which nothing can exist: what a refused lesson folder becomes (see `refused`).
NOWHERE = Path(os.devnull)
_READ_CHUNK = 1 << 20
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_BINARY", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def contained(boundary: Path, path: Path) -> bool:
    """Whether `path` is `boundary` or below it with no component strictly below `boundary`
    (`path` itself included) a symlink. `boundary` itself is trusted: the user chose it.
    Compared lexically, then checked with lstat: any error (a missing component) is False."""
    boundary, path = Path(boundary).absolute(), Path(path).absolute()
    try:
        parts = path.relative_to(boundary).parts
    except ValueError:
        return False
    if ".." in parts:  # ../ after a real folder is harmless, but never needed: refuse it
        return False
    current = boundary
    try:
        for part in parts:
            current = current / part
            if stat.S_ISLNK(os.lstat(current).st_mode):
                return False
    except OSError:
        return False
    return True


def refused(path: Path) -> Path:
    """Where a folder that is not `contained` is looked for instead: a path with the same name
    that cannot exist, so grading treats it as missing (every check says which file is missing)."""
    return NOWHERE / Path(path).name


def submission_files(src: Path) -> Iterator[Path]:
    """The files of a lesson folder that `copy_submission` copies, in sorted order: regular
    files (never a link, never below one) of at most MAX_FILE_BYTES, outside caches and .git,
    the first MAX_FILES. `src` itself may be a link (the caller checked it, see `contained`)."""
    count = 0
    for path in _regular_files(Path(src)):
        count += 1
        if count > MAX_FILES:
            return
        yield path


def read_files(src: Path) -> Iterator[tuple[str, bytes]]:
    """(path relative to `src`, in POSIX form; its bytes) of each of `submission_files(src)`
    that can be read without following a link: what the copy and the content hash both use."""
    src = Path(src)
    for path in submission_files(src):
        data = read_no_follow(path)
        if data is not None:
            yield path.relative_to(src).as_posix(), data


def copy_submission(src: Path, dest: Path) -> None:
    """Copy a lesson folder's files (`read_files`) into `dest`; a missing or odd `src` copies
    nothing, and every check then reports the missing files."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for rel, data in read_files(src):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def read_no_follow(path: Path, max_bytes: int = MAX_FILE_BYTES) -> bytes | None:
    """The bytes of `path` when it is a regular file of at most `max_bytes` (checked on the open
    descriptor, so a link, FIFO or device swapped in meanwhile is never read); None otherwise."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes or _pseudo(info):
            return None
        chunks, size = [], 0
        while size <= max_bytes:
            chunk = os.read(fd, _READ_CHUNK)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
        return None  # it grew past the bound while we read it
    except OSError:
        return None
    finally:
        os.close(fd)


def _regular_files(src: Path) -> Iterator[Path]:
    """Depth first, each folder's entries sorted by name (the order of sorted(rglob)), without
    recursion: a deep tree cannot exhaust the stack."""
    stack = [_sorted_entries(src)]
    while stack:
        entry = next(stack[-1], None)
        if entry is None:
            stack.pop()
            continue
        if entry.name in SKIPPED_NAMES:
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                stack.append(_sorted_entries(Path(entry.path)))
            elif entry.is_file(follow_symlinks=False):
                info = entry.stat(follow_symlinks=False)
                if info.st_size <= MAX_FILE_BYTES and not _pseudo(info):
                    yield Path(entry.path)
        except OSError:
            continue  # vanished or unreadable: as if it were not there


def _sorted_entries(folder: Path) -> Iterator[os.DirEntry]:
    try:
        with os.scandir(folder) as entries:
            return iter(sorted(entries, key=lambda entry: entry.name))
    except OSError:  # missing, not a folder, unreadable
        return iter(())


def _pseudo(info: os.stat_result) -> bool:
    """Whether a file lives on /proc or /sys: its "contents" are the kernel's, reading them may
    fail or have effects, and they are never a learner's work."""
    return info.st_dev in _pseudo_devices()


@functools.cache
def _pseudo_devices() -> frozenset[int]:
    devices = set()
    for root in ("/proc", "/sys"):
        try:
            devices.add(os.stat(root).st_dev)
        except OSError:
            pass
    return frozenset(devices)
