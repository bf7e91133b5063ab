"""Helpers for the learner's-loop tests (check, watch, hint, progress): a copy of the course
with chosen lessons stubbed or solved, the real CLI in a subprocess, and a pseudo-terminal."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

from autograder.course.stubs import lesson_files, strip_markers
from support.processes import descendants
from support.project import ROOT
from support.variants import solution_folder

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
NEVER = r"(?!)"  # a pattern that never matches: read_until(NEVER, t) just reads for t seconds
CACHES = shutil.ignore_patterns("__pycache__", ".pytest_cache", "*.pyc")


def make_course(root: Path, lessons: dict[str, str]) -> Path:
    """A course at `root`: the real course.yml and, per lesson id, its exercise folder as the
    learner receives it ("stub") or finished ("solved": the solutions without markers)."""
    from autograder.core.manifest import load_course

    course = load_course(ROOT / "course.yml")
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy2(ROOT / "course.yml", root / "course.yml")
    for lesson_id, state in lessons.items():
        lesson = course.lesson(lesson_id)
        target = root / "exercises" / lesson.folder
        if state == "stub":
            shutil.copytree(ROOT / "exercises" / lesson.folder, target, ignore=CACHES)
        elif state == "solved":
            solution_folder(lesson.folder, target, strip=True)
        else:
            raise ValueError(f"lesson state must be 'stub' or 'solved', not {state!r}")
    return root


def solved_text(lesson_folder: str, name: str) -> str:
    """A finished file of a lesson: its solution without region markers."""
    return strip_markers(lesson_files(ROOT, lesson_folder)[name].read_text(encoding="utf-8"), name)


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOGRADER_")}
    env.update(extra)
    return env


def run_cli(course_root: Path, *args, env: dict[str, str] | None = None, timeout: float = 300):
    """`python -m autograder --course <root>/course.yml ARGS` run from the course root."""
    return subprocess.run(
        [sys.executable, "-m", "autograder", "--course", str(course_root / "course.yml"), *map(str, args)],
        cwd=course_root,
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
        env=env or cli_env(),
    )


def todo_line(path: Path, todo: str, occurrence: int = 0) -> int:
    """The 1-based line of the `occurrence`-th `# TODO [todo]` comment of a file."""
    rows = [
        n
        for n, row in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if row.lstrip().startswith(f"# TODO [{todo}]")
    ]
    return rows[occurrence]


def history_lines(course_root: Path) -> list[str]:
    path = course_root / ".autograder" / "history.jsonl"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def ctrl_c_as_in_a_shell() -> None:
    """In a child before it runs the command: Ctrl-C's default action, as a learner's shell gives
    its commands. A suite started in the background inherits SIGINT ignored (a non-interactive
    shell ignores it for `&` jobs), and Python keeps an ignored SIGINT ignored: the command would
    never see the learner's Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Terminal:
    """A command run in a pseudo-terminal, as a learner runs it: it is the session leader with
    the terminal as its controlling terminal, so Ctrl-C (written as \\x03) reaches it as SIGINT."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str], columns: int = 110) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: become the command
            try:
                os.chdir(cwd)
                ctrl_c_as_in_a_shell()
                os.execvpe(argv[0], argv, env)
            finally:
                os._exit(127)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
        self.raw = b""
        self.exit_code: int | None = None

    @property
    def text(self) -> str:
        return ANSI.sub("", self.raw.decode("utf-8", "replace")).replace("\r\n", "\n")

    def read_until(self, pattern: str, timeout: float, start: int = 0) -> re.Match | None:
        """Read until `pattern` matches the output from `start` on (plain text), or timeout."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            found = regex.search(self.text, start)
            if found or time.monotonic() > deadline:
                return found
            ready, _, _ = select.select([self.fd], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:  # the command exited and closed the terminal
                    chunk = b""
                if not chunk:
                    return regex.search(self.text, start)
                self.raw += chunk

    def send(self, data: bytes) -> None:
        os.write(self.fd, data)

    def wait(self, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.exit_code = os.waitstatus_to_exitcode(status)
                self.read_until(NEVER, 0.5)  # what it printed last
                return self.exit_code
            self.read_until(NEVER, 0.2)
        return None

    def descendants(self) -> set[int]:
        """Live processes below the command (workers, supervisors, the warm pool's zygote)."""
        return descendants(self.pid)

    def close(self) -> None:
        if self.exit_code is None:
            try:
                os.kill(self.pid, 9)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        os.close(self.fd)
