"""The portable worker path (autograder/sandbox/portable.py), forced on Linux with
AUTOGRADER_WORKER=portable: what a learner on macOS or Windows gets. Real engine and CLI runs,
real spawned workers.

The proof, on this path: every lesson's solution gets full marks and its stub 0 (all six lessons,
each in one grading run), and one reverted TODO per lesson is caught (a representative, not the
whole set of tests/lessons/test_proof.py, which would take minutes here: each worker imports torch
afresh): 01 targets-shift, 02 sampling, 03 scaling, 04 residual, 05 grad-clip, 06 kv-cache.
The hostile submissions that make sense without walls are contained: a hang, a crash (a
segfault through ctypes), an exit at import (sys.exit, os._exit), a flood of output, a process
left behind. The result says which walls were missing, and the learner reads it in one line.

The spare worker (portable.Spares: spawned ahead of need, importing torch, then given its
sandbox): the learner's code sees exactly its sandbox's folder, environment, home and limits,
never the spare's start or a secret of the trusted process; a spare serves one sandbox and is
brand new; its torch import is not charged to a check; none outlives the CLI, even one killed.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest
from support.grading import failed, write_submission
from support.hostile_snippets import FIRST_CALL
from support.project import ROOT, SEED
from support.variants import solution_files

from autograder.core.i18n import feedback_text
from autograder.core.manifest import load_course
from autograder.core.results import REQUIRED_WALLS, Status, combine_isolation
from autograder.course.stubs import parse_regions, revert_region, strip_markers
from autograder.engine.grading import grade
from autograder.render.output import isolation_note, render_text
from autograder.sandbox import cpu_clock, isolation, portable
from autograder.sandbox.client import Limits, Sandbox, WorkerDied, start_warm_pool
from autograder.sandbox.pool import WarmPool
from autograder.sandbox.privileges import cuda_present
from autograder.sandbox.starters import clean_env

COURSE = load_course(ROOT / "course.yml")
LESSONS = COURSE.lessons
# One reverted TODO per lesson: (file, region id); the first region of that id is reverted.
REVERTED = {
    "01": ("data.py", "targets-shift"),
    "02": ("bigram.py", "sampling"),
    "03": ("attention.py", "scaling"),
    "04": ("model.py", "residual"),
    "05": ("train.py", "grad-clip"),
    "06": ("generate.py", "kv-cache"),
}
MARK = f"agportable{random.SystemRandom().randrange(10**9, 10**10)}"  # tags what a submission starts
FIRST_FORWARD = "future-leak"  # lesson 03's first check that calls forward()
NOTE_ES = "Modo portátil"


@pytest.fixture(autouse=True, scope="module")
def portable_workers():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(portable.ENV_SWITCH, "portable")
        yield
    close_spares()  # no idle worker interpreter left in this process for the modules after


def close_spares() -> None:
    if portable.Spares._instance is not None:
        portable.Spares._instance.close()


def run_cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, portable.ENV_SWITCH: "portable"}
    return subprocess.run(
        [sys.executable, "-m", "autograder", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def assert_portable(isolation: dict | None) -> None:
    """The result says the walls were missing because the path was portable; on Linux the
    worker limits itself (rlimits), so only the walls are missing."""
    assert isolation is not None and isolation["portable"] is True, isolation
    assert isolation["official"] is False and isolation["enforced"] == []
    assert isolation["missing"] == list(REQUIRED_WALLS), isolation


def marked_processes() -> list[str]:
    """Live processes (zombies aside) with this run's mark in their command line."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        cmdline = process.info.get("cmdline") or []
        if process.info.get("status") != psutil.STATUS_ZOMBIE and any(MARK in part for part in cmdline):
            found.append(f"{process.pid}: {' '.join(cmdline)[:200]}")
    return found


# ------------------------------------------------------------------ the proof


def test_every_solution_gets_full_marks_and_the_result_says_portable():
    result = grade(COURSE, LESSONS, ROOT / "solutions", seed=SEED)
    for lesson, spec in zip(result.lessons, LESSONS):
        problems = {c.id: feedback_text(c.feedback, "es") for c in failed(lesson)}
        assert problems == {}, spec.id
        assert lesson.score == lesson.max_score > 0 and lesson.completed and lesson.xp == spec.xp
        assert_portable(lesson.isolation)
    assert_portable(result.isolation)
    # The learner reads it in one line, in their language.
    for lang, words in (("es", NOTE_ES), ("en", "Portable mode")):
        text = render_text(result, lang, color=False, width=1000)
        notes = [line for line in text.splitlines() if words in line]
        assert len(notes) == 1, text
        assert "Landlock" not in notes[0]  # the portable note, not the Linux one


def test_the_stubs_score_zero_under_the_cli_which_says_so_in_one_line():
    proc = run_cli("grade")  # exercises/, every lesson, as a learner types it
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    # One note (wrapped to the terminal's width), before the lessons.
    assert proc.stdout.count(NOTE_ES) == 1 and "lanzara otros procesos" in proc.stdout, proc.stdout
    assert proc.stdout.index(NOTE_ES) < proc.stdout.index("Lección 01"), proc.stdout
    assert "Warning" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    for spec in LESSONS:
        heading = next(line for line in lines if line.startswith(f"Lección {spec.id} "))
        assert " 0/100 puntos" in heading, heading
    assert any(line.startswith("Total: 0/") for line in lines), proc.stdout


def _reverted_tree(folder: Path) -> Path:
    for lesson in LESSONS:
        name, region_id = REVERTED[lesson.id]
        titles = {todo.id: todo.title["es"] for todo in lesson.todos}
        files = solution_files(lesson)
        original = (ROOT / "solutions" / lesson.folder / name).read_text(encoding="utf-8")
        index = [r.id for r in parse_regions(original, name)].index(region_id)
        files[name] = strip_markers(revert_region(original, name, index, titles), name)
        write_submission(folder / lesson.folder, files)
    return folder


def test_a_reverted_todo_of_each_lesson_is_caught(tmp_path):
    result = grade(COURSE, LESSONS, _reverted_tree(tmp_path / "course"), seed=SEED)
    for lesson, spec in zip(result.lessons, LESSONS):
        region_id = REVERTED[spec.id][1]
        assert not lesson.completed, spec.id
        caught = [c.id for c in failed(lesson) if c.todo == region_id]
        assert caught, f"lesson {spec.id}: reverting {region_id} was not caught"


# ------------------------------------------------------------------ hostile submissions (lesson 03)


LEAVE_A_SLEEPER_AND_FLOOD = f"""
import subprocess as _subprocess, sys as _sys
_subprocess.Popen([_sys.executable, "-c", "import time; time.sleep(600)", {MARK!r}])
for _ in range(100):
    print("x" * 50_000)
    print("y" * 50_000, file=_sys.stderr)
"""

SEGFAULT = "import ctypes\nctypes.string_at(0)"


def with_forward_prefix(source: str, code: str) -> str:
    head = "    def forward(self, x):\n"
    assert source.count(head) == 1
    body = "".join("        " + line + "\n" for line in code.strip("\n").splitlines())
    return source.replace(head, head + body)


def grade_lesson03(folder: Path, files: dict[str, str]):
    lesson = COURSE.lesson("03")
    result = grade(COURSE, [lesson], write_submission(folder, files), seed=SEED).lessons[0]
    assert [c.id for c in result.checks] == [spec.id for spec in lesson.checks]  # grading completed
    return (
        result,
        {c.id: c.status for c in result.checks},
        {c.id: feedback_text(c.feedback, "es") for c in result.checks},
    )


def test_a_hang_a_crash_a_flood_a_process_left_behind_and_an_exit_at_import_are_contained(tmp_path):
    files = solution_files(COURSE.lesson("03"))
    # attention.py: at every import, floods stdout and stderr (10 MB) and starts a sleeper; its
    # first forward() hangs, the next one (in a fresh worker) segfaults. attention_numpy.py:
    # sys.exit at import.
    crash = "".join(f"    {line}\n" for line in SEGFAULT.splitlines())
    files["attention.py"] = (
        FIRST_CALL
        + LEAVE_A_SLEEPER_AND_FLOOD
        + with_forward_prefix(
            files["attention.py"],
            f'if _first_call("hang-once"):\n    while True:\n        pass\nelif _first_call("crash-once"):\n{crash}',
        )
    )
    files["attention_numpy.py"] = "import sys\nsys.exit(3)\n" + files["attention_numpy.py"]
    result, state, said = grade_lesson03(tmp_path / "s", files)
    assert state[FIRST_FORWARD] is Status.ERROR and "Tiempo agotado" in said[FIRST_FORWARD], said[
        FIRST_FORWARD
    ]
    crashed = [c for c in state if "SIGSEGV" in said[c]]
    assert len(crashed) == 1 and state[crashed[0]] is Status.ERROR, said
    numpy_checks = [c for c in state if c.startswith("np-")]
    for check in numpy_checks:
        assert state[check] is Status.FAILED and "SystemExit" in said[check], said[check]
    # The run went on with fresh workers: everything else passes, whatever was printed.
    for check, status in state.items():
        if check not in (FIRST_FORWARD, *crashed, "gpu-parity", *numpy_checks):
            assert status is Status.PASSED, (check, said[check])
    assert_portable(result.isolation)
    assert marked_processes() == []  # the sleepers of all three workers were killed with them


def test_an_exit_at_import_then_a_hang_with_a_child_out_of_the_workers_group(tmp_path):
    """Below the engine: a module that calls os._exit at import ends that request with its exit
    code; the next request gets a fresh worker, whose module starts a sleeper in a session of its
    own (out of the worker's process group) and hangs. The check's time runs out; neither the
    worker nor the sleeper is left."""
    folder = write_submission(
        tmp_path / "s",
        {
            "bye.py": "import os\nos._exit(7)\n",
            "escape.py": (
                "import subprocess, sys\n"
                f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', {MARK!r}],"
                " start_new_session=True)\n"
                "while True:\n    pass\n"
            ),
        },
    )
    pool = WarmPool._instance
    start_warm_pool()
    assert WarmPool._instance is pool  # no zygote is started on this path (watch's neither)
    with Sandbox(folder) as box:
        assert box.warm_pool is False
        with pytest.raises(WorkerDied) as raised:
            box.module("bye")
        said = feedback_text(raised.value.feedback, "es")
        assert "terminó" in said and "7" in said, said
        box.ensure_ready()  # as the engine does before each check: a fresh worker
        box.begin_check(1.0)
        with pytest.raises(WorkerDied) as raised:
            box.module("escape")
        assert "Tiempo agotado" in feedback_text(raised.value.feedback, "es")
        assert box.generation == 2
        assert marked_processes() == []


# ------------------------------------------------------------------ choosing the path, reporting it


def test_the_portable_path_is_taken_off_linux_or_when_asked(monkeypatch):
    monkeypatch.setenv(portable.ENV_SWITCH, "auto")
    assert portable.selected() is not (sys.platform.startswith("linux") and hasattr(os, "fork"))
    for system in ("darwin", "win32"):
        monkeypatch.setattr(sys, "platform", system)
        assert portable.selected() is True
    monkeypatch.setattr(sys, "platform", "linux")
    assert portable.selected() is False
    monkeypatch.setenv(portable.ENV_SWITCH, "portable")
    assert portable.selected() is True
    assert isolation.probe.__wrapped__()["portable"] is True  # what grade-all checks first


def test_a_system_without_resource_limits_says_so_too():
    """Windows has no `resource` module: its workers report limits: false, and the one line
    names them beside the walls."""
    summary = isolation.summary([{"portable": True, "limits": False}, {"portable": True, "limits": True}])
    assert summary["portable"] is True and summary["missing"] == [*REQUIRED_WALLS, "limits"]
    # A course result holds the weakest of its lessons' walls: a portable lesson stays portable.
    combined = combine_isolation([summary, isolation.summary([{wall: True for wall in REQUIRED_WALLS}])])
    assert combined["portable"] is True and combined["missing"] == summary["missing"]
    for lang, words in (("es", "usara más memoria"), ("en", "using more memory")):
        note = isolation_note(SimpleNamespace(isolation=combined), lang)
        assert note is not None and words in note and "\n" not in note


# ------------------------------------------------------------------ the spare worker

WORKER_ARGV = "autograder.sandbox.worker.portable"  # in every portable worker's command line
PROBE = """
import builtins, os, sys, tempfile
LEFT_BY_AN_EARLIER_SANDBOX = getattr(builtins, "agportable_mark", None)
builtins.agportable_mark = os.getcwd()
ENV = dict(os.environ)
CWD = os.getcwd()
TMP = tempfile.gettempdir()
PID = os.getpid()
PATH = list(sys.path)
try:  # the environment the interpreter started with: Linux shows it
    with open("/proc/self/environ", "rb") as fh:
        START_ENV = fh.read().decode("utf-8", "replace")
except OSError:
    START_ENV = None
try:
    import resource
    MEMORY = resource.getrlimit(resource.RLIMIT_AS)[0]
except ImportError:  # Windows
    MEMORY = None
"""


def probe(box: Sandbox) -> dict:
    module = box.module("probe")
    return {
        name: box.getattr(module, name)
        for name in ("LEFT_BY_AN_EARLIER_SANDBOX", "ENV", "CWD", "TMP", "PID", "PATH", "START_ENV", "MEMORY")
    }


def same_folder(seen: str, expected: Path) -> bool:
    """Whether a worker's path names `expected` (macOS's /var is /private/var)."""
    return Path(seen).resolve() == Path(expected).resolve()


def waiting_spare() -> portable.PortableWorker | None:
    spares = portable.Spares._instance
    return None if spares is None else spares._spare


def test_a_taken_spare_runs_in_its_sandbox_with_exactly_its_environment(tmp_path, monkeypatch):
    secret = f"ghp_{MARK}"
    monkeypatch.setenv("AGPORTABLE_TOKEN", secret)  # what the trusted process holds
    close_spares()  # the next spare starts in this process's environment, secret included
    start_warm_pool()  # as the CLI does: a spare starts now
    spare = waiting_spare()
    assert spare is not None and not spare.assigned
    folder = write_submission(tmp_path / "s", {"probe.py": PROBE})
    with Sandbox(folder) as box:
        box.ensure_ready()
        assert box.worker_pid == spare.pid and spare.assigned  # the spare was taken...
        seen = probe(box)
        home = box._tmp / "home"
        # ...and runs in this sandbox: its copy of the files, its environment (exactly: not the
        # spare's start, nothing of ours), its home as the temporary folder, its limits.
        assert same_folder(seen["CWD"], box.root) and same_folder(seen["PATH"][0], box.root)
        assert seen["ENV"] == clean_env(home)
        assert same_folder(seen["TMP"], home)
        if portable.rlimits_available() and not cuda_present():  # a GPU's memory is the driver's
            assert seen["MEMORY"] == Limits().memory_bytes
        assert str(portable.Spares._instance.folder) not in repr(seen["ENV"])
        # The environment the interpreter started with (what Linux's /proc shows) holds no
        # secret either.
        if seen["START_ENV"] is not None:
            assert secret not in seen["START_ENV"] and "AGPORTABLE_TOKEN" not in seen["START_ENV"]
        assert str(Path(portable.__file__).parents[2]) not in seen["PATH"]  # the engine's folder
        # A new spare was started once this one was ready; it has no secret and no sandbox yet.
        after = waiting_spare()
        assert after is not None and after.pid != spare.pid and not after.assigned
        if sys.platform.startswith("linux"):  # elsewhere reading it may need privileges
            assert secret not in " ".join(psutil.Process(after.pid).environ().values())


def test_a_spare_serves_one_sandbox_and_is_brand_new(tmp_path):
    folder = write_submission(tmp_path / "s", {"probe.py": PROBE})
    pids = []
    with Sandbox(folder) as first, Sandbox(folder) as second:
        first.ensure_ready()
        second.ensure_ready()  # both alive at once: two workers, one each
        for box in (first, second):
            seen = probe(box)
            assert seen["LEFT_BY_AN_EARLIER_SANDBOX"] is None  # nothing of anyone's ran there before
            assert same_folder(seen["CWD"], box.root)
            pids.append(seen["PID"])
        assert pids[0] != pids[1]
        # A killed worker is replaced by another interpreter, never by one that served before.
        first.kill()
        first.ensure_ready()
        seen = probe(first)
        assert seen["PID"] not in pids and seen["LEFT_BY_AN_EARLIER_SANDBOX"] is None
        assert same_folder(seen["CWD"], first.root)
        pids.append(seen["PID"])
        spare = waiting_spare()
        assert spare is not None and spare.pid not in pids
        with pytest.raises(RuntimeError):  # a worker is given to one sandbox, once
            first._proc.assign(second.root, {}, tmp_path / "log", tmp_path, {})


def test_a_checks_cpu_time_does_not_include_the_spares_torch_import(tmp_path):
    folder = write_submission(tmp_path / "s", {"probe.py": PROBE})
    start_warm_pool()
    with Sandbox(folder) as box:
        box.begin_check(0.5)  # as the engine does, before the worker is ready
        box.ensure_ready()
        box.module("probe")
        # The worker spent more than the budget importing torch before it was taken, yet the
        # check's clock started when it was ready.
        assert cpu_clock.cpu_seconds(box.worker_pid) > 0.5
        assert not box.cpu_budget.exhausted(), box.cpu_budget.spent()


def _worker_interpreters(root: psutil.Process) -> dict[int, float]:
    """{pid: start time} of the portable workers (spares included) below `root`."""
    found = {}
    try:
        for child in root.children(recursive=True):
            try:
                if any(WORKER_ARGV in part for part in child.cmdline()):
                    found[child.pid] = child.create_time()
            except psutil.Error:
                pass
    except psutil.Error:
        pass
    return found


def _still_running(workers: dict[int, float | None]) -> list[int]:
    """Those of `workers` still running (a pid whose start time differs is someone else's)."""
    running = []
    for pid, born in workers.items():
        try:
            process = psutil.Process(pid)
            if (
                born is not None
                and process.create_time() == born
                and process.status() != psutil.STATUS_ZOMBIE
            ):
                running.append(pid)
        except psutil.Error:
            pass
    return running


def test_no_worker_or_spare_outlives_the_cli():
    env = {**os.environ, portable.ENV_SWITCH: "portable"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "autograder",
            "grade",
            "03",
            "--submission",
            str(ROOT / "solutions" / COURSE.lesson("03").folder),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    root, seen = psutil.Process(proc.pid), {}
    while proc.poll() is None:
        seen.update(_worker_interpreters(root))
        time.sleep(0.05)
    out, err = proc.communicate()
    assert proc.returncode == 0, err.decode()[-3000:]
    assert b" 100/100 puntos" in out, out.decode()
    # The lesson's worker and the spare started once it was ready: both gone with the CLI.
    assert len(seen) >= 2, seen
    assert _still_running(seen) == []


def test_a_spare_ends_by_itself_when_its_trusted_process_dies_without_exit_handlers():
    """A trusted process killed (SIGKILL, a closed terminal) runs no exit handler, as with
    os._exit: the spare, once done importing, reads the end of its stdin and exits."""
    script = (
        "import os\n"
        "from autograder.sandbox import portable\n"
        "from autograder.sandbox.client import start_warm_pool\n"
        "start_warm_pool()\n"
        "print(portable.Spares._instance._spare.pid, flush=True)\n"
        "os._exit(3)\n"
    )
    env = {**os.environ, portable.ENV_SWITCH: "portable"}
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 3, proc.stderr[-2000:]
    spare = {int(proc.stdout.strip()): None}
    try:
        process = psutil.Process(*spare)
        if any(WORKER_ARGV in part for part in process.cmdline()):
            spare = {process.pid: process.create_time()}
    except psutil.Error:
        pass  # already gone
    end = time.monotonic() + 120  # a bound for a loaded machine, not a timing assertion
    while _still_running(spare) and time.monotonic() < end:
        time.sleep(0.1)
    left = _still_running(spare)
    for pid in left:  # do not leave it behind for the next tests
        psutil.Process(pid).kill()
    assert left == []
