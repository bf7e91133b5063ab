"""Fixtures and pytest hooks only: the real course, and grading real submissions through the real
engine. What tests share besides fixtures lives in tests/support/ (imported as support.<module>)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from support.grading import grade_folder, write_submission
from support.ordering import longest_first, shared_fixture_group
from support.project import ROOT, SEED
from support.unprivileged import plain_user  # noqa: F401 - a fixture, offered to every test module
from support.variants import solution_files

from autograder.core.manifest import load_course
from autograder.core.results import LessonResult

# The tests assert the course's language (Spanish) wherever no --lang is given: a developer's
# own AUTOGRADER_LANG must not change what every subprocess they start speaks.
os.environ.pop("AUTOGRADER_LANG", None)


@pytest.fixture(scope="session")
def course():
    return load_course(ROOT / "course.yml")


@pytest.fixture(scope="session")
def lesson03(course):
    return course.lesson("03")


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
    the graders' verdicts do not depend on load (CPU-time limits, tests/sandbox/test_cpu_clock.py).
    Measured on 2 cores: `.ci/run` 8 min 54 s with 2 workers, 7 min 27 s with 3.
    PYTEST_XDIST_AUTO_NUM_WORKERS still decides when set."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return (os.cpu_count() or 1) + 1


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(config, items):
    """The longest tests first, and the tests sharing an expensive module fixture on one worker
    (tests/support/ordering.py), so that no worker is left running them alone at the end of the
    run and no fixture is made on every worker."""
    for item in items:
        group = shared_fixture_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    longest_first(items)
