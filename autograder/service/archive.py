"""The learner's files of one submission as a bounded archive: what the service stores with the
submission (schema.archives) after fetching the commit, and what a worker on another machine
unpacks to grade it (it shares no filesystem with the service and holds no credential).

    pack(folder, limits)        -> Packed(data, size, sha256): a gzip'd tar of `folder`'s regular
                                   files (sorted, no owner, no times, mode 0644), refused beyond
                                   `limits` (files, bytes before compression)
    unpack(data, dest, limits)  -> dest/learner, a fresh folder shaped like the learner's clone

Nothing in an archive is trusted on the way out (a row of the database is the worker's input):
only regular-file members are written, each path checked (no absolute path, no "..", "." or
empty part, no .git folder), by this process with O_EXCL|O_NOFOLLOW in folders it made; the
declared sizes and the number of members are capped before anything is read, and so is what
is read (a member that says it is small and is not). Links, devices, folders and anything else
in the archive are skipped. A refusal is an ArchiveError whose `text` says why (for the result).
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import tarfile
from dataclasses import dataclass
from pathlib import Path

from autograder.core.results import Text, message
from autograder.service.fetch import OUTPUT, FetchLimits, create_new_file

__all__ = ["ArchiveError", "Packed", "pack", "unpack"]

CHUNK = 1 << 20


class ArchiveError(Exception):
    """An archive refused (too big, too many files, a path that escapes, not an archive)."""

    def __init__(self, key: str, **params) -> None:
        super().__init__(key)
        self.text: Text = message(key, **params)


@dataclass(frozen=True)
class Packed:
    data: bytes
    size: int  # len(data)
    sha256: str


def pack(folder: Path, limits: FetchLimits = FetchLimits()) -> Packed:
    """`folder`'s regular files (links and anything else skipped, nothing followed) as an archive."""
    folder = Path(folder)
    entries: list[tuple[str, Path]] = []
    total = 0
    for root, dirs, files in os.walk(folder, followlinks=False):
        dirs.sort()
        for name in sorted(files):
            path = Path(root) / name
            info = os.lstat(path)
            if not stat.S_ISREG(info.st_mode):
                continue
            entries.append((path.relative_to(folder).as_posix(), path))
            total += info.st_size
            if len(entries) > limits.files:
                raise ArchiveError("service.archive.too_many_files", files=limits.files)
            if total > limits.bytes:
                raise ArchiveError("service.archive.too_big", mib=f"{limits.bytes / (1 << 20):g}")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for name, path in entries:
            data = path.read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    data = buffer.getvalue()
    return Packed(data, len(data), hashlib.sha256(data).hexdigest())


def unpack(data: bytes, dest: Path, limits: FetchLimits = FetchLimits(), sha256: str | None = None) -> Path:
    """dest/learner with the archive's regular files (see the module docstring); `sha256`, when
    given, must be the archive's."""
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        raise ArchiveError("service.archive.corrupt", detail="sha256")
    out = Path(dest) / OUTPUT
    out.mkdir(mode=0o755, parents=True)
    members = total = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            for member in tar:
                members += 1
                if members > limits.files:
                    raise ArchiveError("service.archive.too_many_files", files=limits.files)
                if not member.isreg():
                    continue
                parts = _safe_parts(member.name)
                if parts is None:
                    raise ArchiveError("service.archive.bad_path", path=member.name[:200])
                total += member.size
                if total > limits.bytes:
                    raise ArchiveError("service.archive.too_big", mib=f"{limits.bytes / (1 << 20):g}")
                source = tar.extractfile(member)
                if source is None:
                    continue
                _write_file(out, parts, source, member.size)
    except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
        raise ArchiveError("service.archive.corrupt", detail=type(exc).__name__) from None
    return out


def _safe_parts(name: str) -> list[str] | None:
    parts = name.split("/")
    if name.startswith("/") or any(part in ("", ".", "..") or "\0" in part for part in parts):
        return None
    if any(part.lower() == ".git" for part in parts):
        return None
    return parts


def _write_file(out: Path, parts: list[str], source, size: int) -> None:
    """At most `size` bytes of `source` into out/<parts>, a new regular file (create_new_file)."""
    try:
        fd = create_new_file(str(out), parts)
    except (FileExistsError, NotADirectoryError):  # a name twice, or a file and a folder
        raise ArchiveError("service.archive.bad_path", path="/".join(parts)[:200]) from None
    with os.fdopen(fd, "wb") as target:
        left = size
        while left:
            chunk = source.read(min(left, CHUNK))
            if not chunk:
                break
            target.write(chunk)
            left -= len(chunk)
