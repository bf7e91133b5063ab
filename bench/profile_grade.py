"""Where a grading run's time goes: a timeline of one `autograder grade` and profiles of its two
processes, the trusted one (graders, pytest) and the worker (the learner's code).

Run from the repository root:

    python bench/profile_grade.py [LESSON ...] [--out FILE]

LESSON defaults to 03; several (or `all`) profile one run over those lessons, as the course is
graded. Each lesson is graded on its solution (markers stripped). The report has:

- the timeline: process start -> course loaded -> workers started -> graders collected (their
  torch import) -> each check's wall time and the worker's CPU seconds during it -> done;
- the trusted process's slowest imports (`python -X importtime`, top level only);
- the trusted process's cProfile, by cumulative and by own time.

A measurement for a maintainer, never a test: shared machines are noisy.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STARTED = time.perf_counter()
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def timeline(lessons: list[str], solved: Path) -> tuple[str, str]:
    """(timeline text, cProfile text) of one in-process grading of `lessons`."""
    from autograder.core.manifest import load_course
    from autograder.engine import grading as engine
    from autograder.sandbox import client as sandbox
    from autograder.sandbox import cpu_clock

    marks: list[tuple[float, str]] = []

    def mark(what: str) -> None:
        marks.append((time.perf_counter() - STARTED, what))

    course = load_course(ROOT / "course.yml")
    mark("course.yml loaded (the CLI's own start is before this)")
    worker_cpu: dict[int, float] = {}
    begin, end = sandbox.Sandbox.begin_check, sandbox.Sandbox.end_check

    def begin_check(self, timeout):
        begin(self, timeout)
        if self.worker_pid:
            worker_cpu[id(self)] = cpu_clock.cpu_seconds(self.worker_pid) or 0.0

    def end_check(self):
        pid = self.worker_pid
        if pid and id(self) in worker_cpu:
            spent = (cpu_clock.cpu_seconds(pid) or 0.0) - worker_cpu.pop(id(self))
            self._bench_spent = getattr(self, "_bench_spent", 0.0) + spent
            marks_cpu.append(spent)
        end(self)

    marks_cpu: list[float] = []
    sandbox.Sandbox.begin_check, sandbox.Sandbox.end_check = begin_check, end_check
    collected = engine.GradingPlugin.pytest_collection_modifyitems

    def collection(self, items):
        mark(f"lesson {self.lesson.id}: graders collected ({len(items)} checks; their imports, torch first)")
        return collected(self, items)

    engine.GradingPlugin.pytest_collection_modifyitems = collection
    last = [time.perf_counter()]
    rows: list[str] = []

    def on_check(lesson, check):
        now = time.perf_counter()
        cpu = marks_cpu.pop() if marks_cpu else float("nan")
        rows.append(
            f"    {lesson.id} {check.id:26} {now - last[0]:7.3f} s wall  {cpu:7.3f} s worker CPU  "
            f"{check.status.value}"
        )
        last[0] = now

    def on_worker(lesson, pid):
        mark(f"lesson {lesson.id}: worker {pid} ready")
        last[0] = time.perf_counter()

    profiler = cProfile.Profile()
    profiler.enable()
    chosen = [course.lesson(key) for key in lessons]
    single = len(chosen) == 1
    result = engine.grade(
        course,
        chosen,
        solved / chosen[0].folder if single else solved,
        seed=20261205,
        on_check=on_check,
        on_worker=on_worker,
    )
    profiler.disable()
    mark("graded")
    lines = [f"{t:7.3f} s  {what}" for t, what in marks]
    score = sum(lesson.score for lesson in result.lessons)
    lines.append(f"score {score:g}/{sum(lesson.max_score for lesson in result.lessons):g}")
    lines.append("per check (wall from the previous check's end; the worker's CPU inside the check):")
    lines += rows
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("cumulative").print_stats(30)
    stats.sort_stats("tottime").print_stats(25)
    return "\n".join(lines), out.getvalue()


def import_times(lessons: list[str], solved: Path) -> str:
    """The trusted process's top-level imports over 20 ms, slowest first (python -X importtime)."""
    submission = solved / _folder(lessons[0]) if len(lessons) == 1 else solved
    cmd = [
        sys.executable,
        "-X",
        "importtime",
        "-m",
        "autograder",
        "grade",
        *lessons,
        "--submission",
        str(submission),
        "--format",
        "json",
        "--output",
        str(solved.parent / "importtime.json"),
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line[len("import time:") :].split("|")
        if len(name) - len(name.lstrip()) <= 1 and int(cumulative) > 20_000:
            rows.append((int(cumulative), name.strip()))
    return "\n".join(f"  {us / 1e6:6.3f} s  {name}" for us, name in sorted(rows, reverse=True))


def _folder(lesson_id: str) -> str:
    from autograder.core.manifest import load_course

    return load_course(ROOT / "course.yml").lesson(lesson_id).folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lessons", nargs="*", default=["03"])
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")
    args = parser.parse_args()
    from bench_grade import solved_copy

    from autograder.core.manifest import load_course

    course = load_course(ROOT / "course.yml")
    lessons = [lesson.id for lesson in course.lessons] if args.lessons == ["all"] else args.lessons
    solved = solved_copy(course, Path(tempfile.mkdtemp()))
    torch_started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch"], check=True)
    torch_s = time.perf_counter() - torch_started
    text, profile = timeline(lessons, solved)
    imports = import_times(lessons, solved)
    report = (
        f"# python bench/profile_grade.py {' '.join(args.lessons)}\n"
        f"# python -c 'import torch' took {torch_s:.2f} s in this run\n\n"
        f"## Timeline (one in-process grading, seconds since the script started)\n{text}\n\n"
        f"## Trusted process: top-level imports over 20 ms (python -X importtime, a separate run)\n"
        f"{imports}\n\n## Trusted process: cProfile\n{profile}"
    )
    print(report)
    if args.out is not None:
        args.out.write_text(report, encoding="utf-8")


if __name__ == "__main__":
    main()
