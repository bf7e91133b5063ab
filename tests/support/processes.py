"""Finding live processes (Linux /proc): what a grading started, and what a submission left
behind."""

from __future__ import annotations

import os
from pathlib import Path


def _children_by_parent() -> dict[int, list[int]]:
    """{parent pid: [child pids]} of every live process (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    return children


def children_of(pid: int) -> list[int]:
    """The live direct children of `pid`."""
    return _children_by_parent().get(pid, [])


def descendants(root: int) -> set[int]:
    """Every live process below `root` (workers, supervisors, the warm pool's zygote)."""
    children = _children_by_parent()
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pids) -> set[int]:
    """The pids of `pids` still running (zombies count as gone)."""
    living = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            living.add(pid)
    return living


def tagged_processes(marker: str, name_prefix: str | None = None) -> list[str]:
    """Live processes whose command line holds `marker` (or whose name starts with
    `name_prefix`): how the trust-boundary tests find anything a submission left behind."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            comm = Path(f"/proc/{entry}/comm").read_bytes() if name_prefix else b""
        except OSError:
            continue
        if marker.encode() in cmdline or (name_prefix and name_prefix.encode() in comm):
            found.append(entry + ": " + cmdline.replace(b"\0", b" ").decode(errors="replace")[:200])
    return found
