"""Which files of a course folder count, and one walker over them.

Python and pytest leave caches beside the learner's files (__pycache__, .pytest_cache, .pyc):
they are never generated, compared, hashed, released or graded. Every tool that lists a
folder's files (stubs, the learner release, the notebooks, the learner's digest) asks here, so
they all agree on what a folder holds.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

CACHE_DIRS = frozenset({"__pycache__", ".pytest_cache"})
CACHE_SUFFIXES = (".pyc",)


def is_cache(rel: Path) -> bool:
    """Whether a path (relative to its folder) is, or lies inside, a cache."""
    return rel.name.endswith(CACHE_SUFFIXES) or any(part in CACHE_DIRS for part in rel.parts)


def walk_files(
    folder: Path,
    *,
    skip_dirs: Iterable[str] = (),
    skip_suffixes: tuple[str, ...] = (),
    hidden: bool = True,
    on_link: Callable[[Path], None] | None = None,
) -> list[str]:
    """Files under `folder` as sorted posix paths relative to it, without caches (none when
    `folder` is missing).

    `skip_dirs` (folder names) and `skip_suffixes` (name endings, of files and folders alike)
    leave out more; `hidden=False` leaves out dot-files and dot-folders. `on_link`, when given,
    is called with each symbolic link that would otherwise count (to a file or to a folder) and
    the link is not listed: a caller that copies only plain files raises there. Without it a
    link to a file is listed like a file, and a link to a folder is never entered.
    """
    skip = CACHE_DIRS | frozenset(skip_dirs)
    suffixes = CACHE_SUFFIXES + tuple(skip_suffixes)

    def counts(name: str) -> bool:
        return not name.endswith(suffixes) and (hidden or not name.startswith("."))

    found = []
    for dirpath, dirnames, filenames in os.walk(folder):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if d not in skip and counts(d))
        if on_link is not None:
            for name in [d for d in dirnames if (here / d).is_symlink()]:
                dirnames.remove(name)  # os.walk would not enter it anyway; the caller hears of it
                on_link(here / name)
        for name in filenames:
            if not counts(name):
                continue
            if on_link is not None and (here / name).is_symlink():
                on_link(here / name)
                continue
            found.append((here / name).relative_to(folder).as_posix())
    return sorted(found)


def display_path(path: Path) -> str:
    """The path as a reader wants it: relative to the current directory when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)
