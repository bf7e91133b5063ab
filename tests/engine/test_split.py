"""engine/split.py: a course graded by two trusted processes gets exactly the grade one process
gives, and loses no lesson when the second process dies or fails.

Each case runs in a fresh interpreter (a forking test process would fork pytest-xdist's own
threads too), with the split and the warm pool it needs on, whatever the caller's environment
says. The script tags each lesson's result with the pid that graded it, by wrapping
grading.grade_lesson before the fork, and prints the JSON result and those pids."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from support.project import ROOT, SEED

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the split forks: Linux only")

SCRIPT = r"""
import json, os, sys
from pathlib import Path
from autograder.core.manifest import load_course
from autograder.engine import grading, split
from autograder.render.output import render_json
from autograder.sandbox.client import start_warm_pool

parent, sabotage = os.getpid(), sys.argv[1]
original = grading.grade_lesson

def traced(lesson, *args, **kwargs):
    if os.getpid() != parent and sabotage == "dies":
        os._exit(3)  # the second process killed mid-run
    if os.getpid() != parent and sabotage == "raises":
        raise RuntimeError("a grader broke in the second process")
    result = original(lesson, *args, **kwargs)
    result.graded_by = os.getpid()
    return result

grading.grade_lesson = traced
if sabotage == "no-fork":  # the split's fork is refused (a pids limit); later forks work
    real_fork, refused = os.fork, []
    def refuse_once():
        if not refused:
            refused.append(True)
            raise BlockingIOError(11, "Resource temporarily unavailable")
        return real_fork()
    os.fork = refuse_once
course = load_course(Path(sys.argv[2]) / "course.yml")
lessons = [course.lesson(key) for key in sys.argv[4].split(",")]
start_warm_pool()
seen = []
result = split.grade(course, lessons, Path(sys.argv[2]) / "solutions", seed=int(sys.argv[3]),
                     on_lesson=lambda lesson: seen.append(lesson.id))
print(json.dumps({"json": render_json(result, "es"), "parent": parent, "seen": seen,
                  "pids": [getattr(lesson, "graded_by", None) for lesson in result.lessons]}))
"""

LESSONS = "01,02,03,04"
# A lost second process needs only two lessons to lose one: the two quickest to grade.
TWO_LESSONS = "01,02"


def run(sabotage: str = "none", lessons: str = LESSONS, **env) -> tuple[dict, str]:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, sabotage, str(ROOT), str(SEED), lessons],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "AUTOGRADER_SPLIT": "1", "AUTOGRADER_WARM_POOL": "1", **env},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


@pytest.fixture(scope="module")
def one_process():
    out, _ = run(AUTOGRADER_SPLIT="0")
    assert set(out["pids"]) == {out["parent"]}
    return out


@pytest.fixture(scope="module")
def one_process_two_lessons():
    out, _ = run(lessons=TWO_LESSONS, AUTOGRADER_SPLIT="0")
    assert set(out["pids"]) == {out["parent"]}
    return out


def test_two_processes_give_the_grade_one_process_gives(one_process):
    out, _ = run()
    pids = set(out["pids"])
    assert len(pids) == 2 and out["parent"] in pids  # both took lessons from the queue
    assert out["json"] == one_process["json"]  # same checks, same feedback, same order
    assert sorted(out["seen"]) == LESSONS.split(",")  # on_lesson heard every lesson once
    assert json.loads(out["json"])["score"] == json.loads(out["json"])["max_score"] > 0


@pytest.mark.parametrize("sabotage", ["dies", "raises", "no-fork"])
def test_a_lost_second_process_loses_no_lesson(one_process_two_lessons, sabotage):
    out, stderr = run(sabotage, lessons=TWO_LESSONS)
    assert set(out["pids"]) == {out["parent"]}  # the parent graded what the copy had taken
    assert out["json"] == one_process_two_lessons["json"]
    assert sorted(out["seen"]) == TWO_LESSONS.split(",")
    if sabotage == "raises":
        assert "el segundo proceso de corrección falló" in stderr  # the course's language
        assert "a grader broke in the second process" in stderr


@pytest.mark.parametrize("lessons", ["03", "01,02,01"])
def test_one_lesson_or_a_lesson_named_twice_is_graded_without_a_fork(lessons):
    """Results come back by lesson id: a list naming one twice is graded in one process, as
    many times as it is named."""
    out, _ = run(lessons=lessons)
    assert out["pids"] == [out["parent"]] * len(lessons.split(","))
    assert [lesson["id"] for lesson in json.loads(out["json"])["lessons"]] == lessons.split(",")
