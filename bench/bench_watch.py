"""Benchmark: how long a save takes to show its first verdict in `autograder watch`.

Run from the repository root:  python bench/bench_watch.py [--lesson 03] [--saves 10]

`autograder watch LESSON` runs in a pseudo-terminal, as a learner runs it, on a temporary copy
of the course whose lesson is solved. Once its first grading is shown, the benchmark saves the
lesson's file again and again, alternating a realistic mistake in one TODO (the lesson's buggy
variants, tests/lessons/lessonNN_variants.py, one TODO after another) with its fix, and times from the
write to:
- "seen": the save is noticed ("cambios en ..." is printed);
- "first verdict": the first verdict on screen (the edited TODO's line, or the lesson's points
  line where watch shows nothing before the whole lesson);
- "lesson": the whole lesson's summary ("Esperando ..." is printed again).
Medians and ranges are printed and written to bench/results/watch-latency.txt with the command
that made them and the machine's load. `--checkout DIR` benchmarks another checkout of the
engine (e.g. `git archive <commit> | tar -x -C DIR`), for before/after comparisons on the same
machine. A measurement, never a test: shared machines are too noisy for timed assertions.
"""

from __future__ import annotations

import argparse
import datetime
import fcntl
import importlib
import os
import pty
import re
import select
import shlex
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")
SEEN = re.compile(r"cambios en ")
FIRST = re.compile(r"(?m)^\s*[✔✘] TODO \[[\w-]+\]|\d+/\d+ puntos")
DONE = re.compile(r"Esperando a que guardes")


class Terminal:
    """The command in a pseudo-terminal; `text` is what it printed, without colours."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            try:
                os.chdir(cwd)
                os.execvpe(argv[0], argv, env)
            finally:
                os._exit(127)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 110, 0, 0))
        self.raw = b""

    @property
    def text(self) -> str:
        return ANSI.sub("", self.raw.decode("utf-8", "replace"))

    def until(self, pattern: re.Pattern, start: int, timeout: float) -> float | None:
        """monotonic() when `pattern` first showed in the output from `start` on, or None."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pattern.search(self.text, start):
                return time.monotonic()
            ready, _, _ = select.select([self.fd], [], [], 0.01)
            if ready:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    return None
                self.raw += chunk
        return None

    def stop(self) -> None:
        try:
            os.write(self.fd, b"\x03")
            self.until(re.compile(r"Hasta la próxima"), 0, 30)
            os.waitpid(self.pid, 0)
        except OSError:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except OSError:
                pass
        os.close(self.fd)


def make_course(course, lesson, target: Path) -> Path:
    """target/: course.yml and the lesson's exercise folder, solved (markers stripped)."""
    from autograder.course.stubs import REGION_SUFFIXES, lesson_files, strip_markers

    target.mkdir(parents=True)
    shutil.copy2(ROOT / "course.yml", target / "course.yml")
    folder = target / "exercises" / lesson.folder
    # The solved folder: exercises/ overlaid with the marked files of solutions/ (only those).
    for rel, source in lesson_files(ROOT, lesson.folder).items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, path)
        if path.name.endswith(REGION_SUFFIXES):
            path.write_text(strip_markers(path.read_text(encoding="utf-8"), path.name), encoding="utf-8")
    return folder


def mistakes(lesson_id: str, files: dict[str, str]) -> list:
    """One buggy variant per TODO, in the lesson's TODO order, that applies to these files."""
    sys.path.insert(0, str(ROOT / "tests"))
    catalog = importlib.import_module(f"lessons.lesson{lesson_id}_variants").BUGGY
    chosen, seen = [], set()
    for variant in catalog:
        if variant.todo is None or variant.todo in seen or variant.file not in files:
            continue
        if all(count == 1 for count in variant.occurrences(files)):
            chosen.append(variant)
            seen.add(variant.todo)
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lesson", default="03")
    parser.add_argument("--saves", type=int, default=10, help="saves timed (half mistakes, half fixes)")
    parser.add_argument("--settle", type=float, default=0.5, help="seconds of quiet between saves")
    parser.add_argument(
        "--checkout",
        type=Path,
        default=None,
        help="run the engine of this checkout instead of this one (PYTHONPATH)",
    )
    parser.add_argument("--output", type=Path, default=ROOT / "bench" / "results" / "watch-latency.txt")
    parser.add_argument("--append", action="store_true", help="add to --output instead of replacing it")
    parser.add_argument("--note", default="", help="a line to put in the report's header (what was measured)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from autograder.core.manifest import load_course

    course = load_course(ROOT / "course.yml")
    lesson = course.lesson(args.lesson)
    tmp = Path(tempfile.mkdtemp(prefix="bench-watch-"))
    folder = make_course(course, lesson, tmp / "course")
    solved = {name: (folder / name).read_text(encoding="utf-8") for name in lesson.files}
    variants = mistakes(lesson.id, solved)
    if not variants:
        raise SystemExit(f"no buggy variant of lesson {lesson.id} applies to its solution")

    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOGRADER_")}
    env.update(TERM="xterm-256color", COLUMNS="110")
    engine = args.checkout.resolve() if args.checkout else ROOT
    env["PYTHONPATH"] = str(engine)
    load_before = os.getloadavg()
    term = Terminal(
        [
            sys.executable,
            "-m",
            "autograder",
            "--course",
            str(tmp / "course" / "course.yml"),
            "watch",
            lesson.id,
        ],
        tmp / "course",
        env,
    )
    rows = []
    try:
        started = time.monotonic()
        if term.until(DONE, 0, 300) is None:
            raise SystemExit("watch never showed its first grading:\n" + term.text[-3000:])
        first_grading = time.monotonic() - started
        for index in range(args.saves):
            variant = variants[(index // 2) % len(variants)]
            fixing = index % 2 == 1
            text = solved[variant.file] if fixing else variant.apply(solved)[variant.file]
            time.sleep(args.settle)
            mark = len(term.text)
            saved = time.monotonic()
            (folder / variant.file).write_text(text, encoding="utf-8")
            seen = term.until(SEEN, mark, 120)
            first = term.until(FIRST, mark, 120)
            done = term.until(DONE, mark, 120)
            if None in (seen, first, done):
                raise SystemExit(f"save {index} was not graded:\n" + term.text[mark:][-3000:])
            rows.append(
                ("fix" if fixing else "mistake", variant.todo, seen - saved, first - saved, done - saved)
            )
            print(
                f"save {index + 1:2d} {rows[-1][0]:7} TODO [{variant.todo}]  seen {rows[-1][2]:.3f} s  "
                f"first verdict {rows[-1][3]:.3f} s  lesson {rows[-1][4]:.3f} s",
                flush=True,
            )
    finally:
        term.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    load_after = os.getloadavg()

    def stats(values: list[float]) -> str:
        return f"median {statistics.median(values):.3f} s  (min {min(values):.3f}, max {max(values):.3f})"

    commit = (
        subprocess.run(
            ["git", "-C", str(engine), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        or "?"
    )
    dirty = subprocess.run(
        ["git", "-C", str(engine), "status", "--porcelain", "--", "autograder"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    command = "python bench/bench_watch.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    lines = [
        f"# {command.strip()}",
        f"# {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, "
        f"engine {engine if args.checkout else 'this checkout'} (commit {commit}{', modified' if dirty else ''}), "
        f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after",
        *([f"# {args.note}"] if args.note else []),
        f"# watch {lesson.id}: {len(rows)} saves alternating a mistake in one TODO and its fix; "
        f"first grading shown after {first_grading:.1f} s",
        "# save-to-first-verdict: from the write to the first verdict on screen",
        "",
        f"{'save':>4} {'kind':8} {'TODO':20} {'seen s':>7} {'first s':>8} {'lesson s':>9}",
        *(
            f"{n:4d} {kind:8} {todo:20} {seen:7.3f} {first:8.3f} {done:9.3f}"
            for n, (kind, todo, seen, first, done) in enumerate(rows, start=1)
        ),
        "",
        f"save noticed:        {stats([r[2] for r in rows])}",
        f"first verdict shown: {stats([r[3] for r in rows])}",
        f"whole lesson shown:  {stats([r[4] for r in rows])}",
    ]
    report = "\n".join(lines) + "\n"
    print(report)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with args.output.open("a" if args.append else "w", encoding="utf-8") as fh:
        fh.write(report + "\n")


if __name__ == "__main__":
    main()
