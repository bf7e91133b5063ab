"""Which files of a course folder count, and one walker over them.

Python and pytest leave caches beside the learner's files (__pycache__, .pytest_cache, .pyc):
they are never generated, compared, hashed, released or graded. Every tool that lists a
folder's files (stubs, the learner release, the notebooks, the learner's digest) asks here, so
they all agree on what a folder holds.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

CACHE_DIRS = frozenset({"__pycache__", ".pytest_cache"})
CACHE_SUFFIXES = (".pyc",)


def is_cache(rel: Path) -> bool:
    """Whether a path (relative to its folder) is, or lies inside, a cache."""
    return rel.name.endswith(CACHE_SUFFIXES) or any(part in CACHE_DIRS for part in rel.parts)


def walk_files(folder: Path, *, skip_dirs: Iterable[str] = (), skip_suffixes: tuple[str, ...] = (),
               hidden: bool = True) -> list[str]:
    """Files under `folder` as sorted posix paths relative to it, without caches. `skip_dirs`
    and `skip_suffixes` leave out more; `hidden=False` leaves out dot-files and dot-folders."""
    skip = CACHE_DIRS | frozenset(skip_dirs)
    suffixes = CACHE_SUFFIXES + tuple(skip_suffixes)
    found = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d not in skip and (hidden or not d.startswith(".")))
        for name in filenames:
            if name.endswith(suffixes) or (not hidden and name.startswith(".")):
                continue
            found.append((Path(dirpath) / name).relative_to(folder).as_posix())
    return sorted(found)
