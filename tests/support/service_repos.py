"""What the service's process-level tests share (tests/service/test_service_end_to_end.py,
test_worker.py, test_distributed.py): learners' repositories as bare git repositories, a learner
file that makes its grading slow and findable in /proc (to kill a worker mid-grading), and a
bounded wait (a hang fails the test instead of blocking the run; never a speed target)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

WAIT = 300  # seconds: an outer bound on any one wait
GIT = [
    "git",
    "-c",
    "user.name=Alumna",
    "-c",
    "user.email=alumna@example.org",
    "-c",
    "init.defaultBranch=main",
]


def wait_for(condition: Callable[[], object], what: str, seconds: float = WAIT):
    """`condition()`'s first true value, asked every 50 ms; AssertionError after `seconds`."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"never happened within {seconds} s: {what}")


def slow_start(name: str, seconds: float) -> str:
    """Code for the top of a learner's file: once grading imports it, the sandboxed process names
    itself `name` (a test finds it in /proc) and sleeps a while."""
    return (
        "import ctypes as _ctypes, time as _time\n"
        f"_ctypes.CDLL(None).prctl(15, {name.encode()!r}, 0, 0, 0)  # PR_SET_NAME\n"
        f"_time.sleep({seconds})\n"
    )


def named(name: str) -> list[int]:
    """Live processes that gave themselves `name` (their comm, cut at 15 bytes)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if Path(f"/proc/{entry}/comm").read_text().strip() == name[:15]:
                    found.append(int(entry))
            except OSError:
                continue
    return found


class Remotes:
    """Learners' repositories: bare git repositories under one folder, fetchable by sha over
    file:// (uploadpack.allowAnySHA1InWant, as GitHub serves a sha), readable by the unprivileged
    user the service's git runs as."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def push(self, repository: str, files: dict[str, str]) -> str:
        """A commit of `files` (paths from the repository's root, nothing else) on main; its sha."""
        bare, work = self.root / f"{repository}.git", self.root / "work" / repository
        if not bare.exists():
            bare.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run([*GIT, "init", "-q", "--bare", str(bare)], check=True)
            subprocess.run(["git", "config", "uploadpack.allowAnySHA1InWant", "true"], cwd=bare, check=True)
            subprocess.run([*GIT, "clone", "-q", str(bare), str(work)], check=True, capture_output=True)
        for path in work.iterdir():
            if path.name != ".git":
                shutil.rmtree(path) if path.is_dir() else path.unlink()
        for name, text in files.items():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            (work / name).write_text(text, encoding="utf-8")
        subprocess.run([*GIT, "add", "-A"], cwd=work, check=True)
        subprocess.run([*GIT, "commit", "-q", "--allow-empty", "-m", "entrega"], cwd=work, check=True)
        subprocess.run([*GIT, "push", "-q", "--force", "origin", "HEAD:main"], cwd=work, check=True)
        subprocess.run(["chmod", "-R", "a+rX", str(self.root)], check=True)
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=work, check=True, capture_output=True, text=True
        ).stdout.strip()
