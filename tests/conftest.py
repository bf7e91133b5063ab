"""Shared fixtures: the real course, and grading real submissions through the real engine."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from variants import solution_files  # noqa: F401 - the tests import it from here

from autograder.core.manifest import load_course
from autograder.core.results import LessonResult, Status
from autograder.engine.grading import grade

ROOT = Path(__file__).resolve().parent.parent
# The tests assert the course's language (Spanish) wherever no --lang is given: a developer's
# own AUTOGRADER_LANG must not change what every subprocess they start speaks.
os.environ.pop("AUTOGRADER_LANG", None)
SEED = 20261202  # fixed so a failing test can be replayed; the graders draw inputs from it


@pytest.fixture(scope="session")
def course():
    return load_course(ROOT / "course.yml")


@pytest.fixture(scope="session")
def lesson03(course):
    return course.lesson("03")


def write_submission(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def grade_folder(course, lesson, folder: Path, seed: int = SEED) -> LessonResult:
    """Grade one lesson's folder with the real engine (real worker processes)."""
    return grade(course, [lesson], folder, seed=seed).lessons[0]


def failed(result: LessonResult) -> list:
    return [c for c in result.checks if c.status in (Status.FAILED, Status.ERROR)]


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


@pytest.fixture
def grade_files(course, lesson03, tmp_path):
    """grade_files({"attention.py": text, ...}) -> LessonResult; unspecified files are the solution's."""

    def run(overrides: dict[str, str | None], lesson=None, seed: int = SEED) -> LessonResult:
        lesson = lesson or lesson03
        files = solution_files(lesson)
        for name, text in overrides.items():
            if text is None:
                files.pop(name, None)
            else:
                files[name] = text
        folder = tmp_path / f"submission-{len(list(tmp_path.iterdir()))}"
        return grade_folder(course, lesson, write_submission(folder, files), seed)

    return run


@pytest.fixture
def copy_of(tmp_path):
    def run(src: Path) -> Path:
        dest = tmp_path / src.name
        shutil.copytree(src, dest)
        return dest

    return run


def pytest_xdist_auto_num_workers(config):
    """`-n auto`: one worker more than the cores. Most of this suite's time is real grading runs
    and installs, each waiting on a worker process, git, pip or nbgrader, so a core is often idle;
    the graders' verdicts do not depend on load (CPU-time limits, tests/test_cpu_clock.py).
    Measured on 2 cores: `.ci/run` 8 min 54 s with 2 workers, 7 min 27 s with 3.
    PYTEST_XDIST_AUTO_NUM_WORKERS still decides when set."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return (os.cpu_count() or 1) + 1
