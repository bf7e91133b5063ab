"""An interrupted `autograder grade-all` (Ctrl-C, or SIGTERM from a scheduler) says what it kept
and that running the same command again resumes; and it does. Real command, real grading
processes: ana hands in the solution, lento's forward() never returns, so the run is still
grading lento whenever it is interrupted."""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
from support.cohort_factory import forever_hanging, results
from support.grading import write_submission
from support.learner_course import ctrl_c_as_in_a_shell
from support.processes import alive, descendants
from support.project import ROOT
from support.variants import solution_files

pytestmark = pytest.mark.timeout(900)
WAIT = 300  # seconds to wait for a line grade-all prints (a hang guard, not a speed target)


class Run:
    """`autograder grade-all ARGS` in the background, its stderr read line by line."""

    def __init__(self, *args) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "autograder", "grade-all", *map(str, args)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=ctrl_c_as_in_a_shell,  # Ctrl-C reaches it, as from an instructor's shell
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.put(line)
        self.lines.put("")

    def wait_for(self, needle: str) -> str:
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=1)
            except queue.Empty:
                continue
            self.seen.append(line)
            if needle in line:
                return line
            if line == "":
                break
        self.proc.kill()
        pytest.fail(f"grade-all never said {needle!r}: {''.join(self.seen)[-3000:]}")

    def stop(self, signum: int) -> tuple[int, str, set[int]]:
        """Send `signum`: (exit status, everything it said on stderr, its processes still alive
        once it has exited)."""
        below = descendants(self.proc.pid)
        self.proc.send_signal(signum)
        try:
            self.proc.wait(timeout=60)  # stderr is the reader thread's; stdout holds a line at most
        except subprocess.TimeoutExpired:
            self.proc.kill()
            pytest.fail("grade-all did not stop within 60 s of " + signal.Signals(signum).name)
        rest = []
        while True:
            try:
                rest.append(self.lines.get(timeout=5))
            except queue.Empty:
                break
            if rest[-1] == "":
                break
        deadline = time.monotonic() + 30
        while alive(below) and time.monotonic() < deadline:
            time.sleep(0.2)
        return self.proc.returncode, "".join(self.seen + rest) + self.proc.stdout.read(), alive(below)


def test_an_interrupted_run_says_that_running_again_resumes_and_it_does(tmp_path, course):
    lesson = course.lesson("03")
    submissions, out = tmp_path / "submissions", tmp_path / "out"
    write_submission(submissions / "ana" / "exercises" / lesson.folder, solution_files(lesson))
    forever_hanging(submissions / "lento", course)
    command = (submissions, "--out", out, "--lessons", "03", "--jobs", 1)

    # Ctrl-C while lento is being graded (ana is done).
    run = Run(*command)
    run.wait_for("[1/2] ana:")
    code, said, survivors = run.stop(signal.SIGINT)
    assert code == 130, said
    assert "grade-all interrumpido (SIGINT)" in said, said
    assert f"se queda en {out} (1 resultado)" in said and "vuelve a ejecutar la misma orden" in said, said
    assert "Traceback" not in said and "KeyboardInterrupt" not in said, said
    assert not survivors
    assert set(results(out)) == {"ana"}

    # The same command again resumes: ana's result is kept, only lento is graded. A scheduler's
    # SIGTERM then stops it with the same words, not silently.
    run = Run(*command)
    start = run.wait_for("2 alumnos: ")
    assert "2 alumnos: 1 por corregir y 1 sin cambios" in start, start
    code, said, survivors = run.stop(signal.SIGTERM)
    assert code == 143, said
    assert "grade-all interrumpido (SIGTERM)" in said and "(1 resultado)" in said, said
    assert "vuelve a ejecutar la misma orden para seguir" in said, said
    assert "Traceback" not in said, said
    assert not survivors
    assert set(results(out)) == {"ana"}


def test_ctrl_c_while_fetching_the_roster_starts_no_more_fetches(tmp_path):
    """Ctrl-C reaches the whole foreground job, as in a terminal: the running git fetches stop
    with it, the ones not started yet never start (each would hang on this host), and grade-all
    says it was interrupted with nothing graded yet."""
    silent = socket.create_server(("127.0.0.1", 0))  # accepts, never answers: a hung host
    port, accepted = silent.getsockname()[1], []

    def accept() -> None:
        while True:
            try:
                accepted.append(silent.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    roster = tmp_path / "roster.csv"
    roster.write_text(
        "id,url\n" + "".join(f"l{i:02d},http://127.0.0.1:{port}/r{i}.git\n" for i in range(30)),
        encoding="utf-8",
    )
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "autograder", "grade-all", str(tmp_path / "subs"), "--roster", str(roster)]
        + ["--out", str(out), "--lessons", "01", "--allow-scheme", "http", "--allow-host", "127.0.0.1"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, which the test's Ctrl-C reaches whole
        preexec_fn=ctrl_c_as_in_a_shell,
    )
    try:
        deadline = time.monotonic() + WAIT
        while not accepted and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert accepted, "grade-all never started fetching"
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
        silent.close()
    assert proc.returncode == 130, err
    assert "grade-all interrumpido (SIGINT)" in err and "(0 resultados)" in err, err
    assert len(accepted) < 30, "every fetch started after Ctrl-C"
