"""A generated cohort of lesson-03 submissions for the `grade-all` tests: one folder per
learner, in both layouts grade-all accepts (a repository root with exercises/ inside, or the
exercises/ folder itself), and git repositories served by local bare remotes for the roster
(over HTTP on 127.0.0.1, see `served`).

The learners: a solution, a stub, two realistic bugs and a correct-but-different variant (from
tests/lessons/lesson03_variants.py), wrong quiz answers, a missing lesson folder, a submission whose
import never ends, and a hostile one that tries to kill the processes above it, fork sleepers
and plant fake results in the output folder.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import random
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from lessons.lesson03_variants import BUGGY, CORRECT

from support.grading import write_submission
from support.project import ROOT
from support.variants import solution_files

# Unique to this test run: tags every process the hostile learner starts.
DIGITS = str(random.SystemRandom().randrange(10**11, 10**12))
SLEEP_ARG = f"600.{DIGITS}"
HANG_MARK = f"700.{DIGITS}"  # the sleeper of the learner whose forward() never returns
FAKE_MARK = f"fake-{DIGITS}"


# An outer bound on one grade-all run, so that a hang fails the test instead of the CI job.
RUN_TIMEOUT = 900


def grade_all(*args, check: bool = True, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`autograder grade-all ARGS` as a real process; with `check`, it must exit 0."""
    proc = subprocess.run(
        [sys.executable, "-m", "autograder", "grade-all", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        env=env,
    )
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def results(out: Path) -> dict[str, dict]:
    """{learner: results JSON} of a grade-all output folder."""
    return {
        p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted((out / "results").glob("*.json"))
    }


def records(out: Path) -> dict[str, dict]:
    """{learner: record JSON} of a grade-all output folder."""
    return {
        p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted((out / "records").glob("*.json"))
    }


def variant(name: str):
    return next(v for v in (*BUGGY, *CORRECT) if v.name == name)


def stub_files(lesson) -> dict[str, str]:
    folder = ROOT / "exercises" / lesson.folder
    return {path.name: path.read_text(encoding="utf-8") for path in folder.iterdir() if path.is_file()}


# At import: fork sleepers that should outlive grading, write fake results wherever grade-all's
# command line says they go, and try to kill every process above the worker.
HOSTILE = """
import json as _json, os as _os, subprocess as _subprocess, sys as _sys

_FAKE = _json.dumps({"score": 100, "xp": 50, "mark": %(mark)r})


def _ancestors():
    pid = _os.getppid()
    while pid > 1:
        yield pid
        try:
            with open(f"/proc/{pid}/stat") as fh:
                pid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return


def _plant():
    for pid in list(_ancestors()):
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")
        except OSError:
            continue
        for flag, value in zip(argv, argv[1:]):
            if flag == b"--out":
                out = value.decode()
                for name in ("results/eva.json", "results/ana.json", "records/eva.json", "grades.csv",
                             "report.md", "results/zz-planted.json"):
                    try:
                        _os.makedirs(_os.path.dirname(_os.path.join(out, name)) or out, exist_ok=True)
                        with open(_os.path.join(out, name), "w") as fh:
                            fh.write(_FAKE)
                    except OSError:
                        pass
    for name in ("results.json", "../results.json"):
        try:
            with open(name, "w") as fh:
                fh.write(_FAKE)
        except OSError:
            pass


def _kill_everyone_above():
    for pid in list(_ancestors()):
        for kill in (lambda: _os.kill(pid, 9), lambda: _os.killpg(_os.getpgid(pid), 9)):
            try:
                kill()
            except OSError:
                pass


for _ in range(3):
    _subprocess.Popen(["sleep", %(sleep)r], start_new_session=True)
if _os.fork() == 0:
    _os.setsid()
    _os.execv("/bin/sleep", ["sleep", %(sleep)r])
if %(privileged)r:
    _plant()
    _kill_everyone_above()
"""


def hostile(stub_attention: str, unprivileged: bool) -> str:
    """The hostile attention.py. Planting files in the output folder and killing the grading
    processes can only be stopped where the learner's code runs as another user (a root grader
    runs it as `nobody`); as the grader's own user it could do both, so that part of the attack
    is tried only where it must fail (see the README: run grade-all as root or in a container)."""
    return HOSTILE % {"mark": FAKE_MARK, "sleep": SLEEP_ARG, "privileged": unprivileged} + stub_attention


WRONG_QUIZ = "pregunta_1: d\npregunta_2: d\npregunta_3: d\n"

HANG_AT_IMPORT = """
import signal as _signal
for _sig in (_signal.SIGTERM, _signal.SIGINT, _signal.SIGALRM, _signal.SIGHUP):
    _signal.signal(_sig, _signal.SIG_IGN)
while True:
    pass
"""

# Every call of forward never returns (it sleeps, sparing the CPU): each check that runs the
# model times out in turn, so grading this learner takes far longer than any sensible
# per-learner limit. At import it starts a tagged sleeper, which tells a test that grading of
# this learner has begun (and must not outlive it).
HANG_NAME = f"h{DIGITS[:14]}"  # the name the hanging worker gives itself once forward() starts
HANG_IN_FORWARD = """
import ctypes as _ctypes, subprocess as _subprocess, time as _time
try:  # refused where the worker may start no process (seccomp): then only its name tells
    _subprocess.Popen(["sleep", %(sleep)r], start_new_session=True)
except OSError:
    pass


def _hang_forever():
    _ctypes.CDLL(None).prctl(15, %(name)r, 0, 0, 0)  # PR_SET_NAME
    _time.sleep(10**6)
""" % {"sleep": HANG_MARK, "name": HANG_NAME.encode()}


def _with_forward_sleep(source: str) -> str:
    head = "    def forward(self, x):\n"
    assert source.count(head) == 1
    return source.replace(head, head + "        _hang_forever()\n")


def lesson03_cohort(
    root: Path, course, *, unprivileged: bool, only: tuple[str, ...] | None = None
) -> dict[str, Path]:
    """{learner id: folder} of the standard cohort (or the learners in `only`), under `root`."""
    lesson = course.lesson("03")
    solved, stub = solution_files(lesson), stub_files(lesson)
    learners: dict[str, tuple[str, dict[str, str]]] = {
        # id: (layout, files of exercises/03-.../); layout "repo" puts them under exercises/
        "ana": ("repo", solved),
        "beto": ("exercises", stub),
        "carla": ("repo", {**solved, **variant("mask-not-cropped").apply(solved)}),
        "dario": ("exercises", {**solved, **variant("scale-sqrt-C").apply(solved)}),
        "eva": ("repo", {**stub, "attention.py": hostile(stub["attention.py"], unprivileged)}),
        "fede": ("repo", {**solved, "attention.py": HANG_AT_IMPORT + solved["attention.py"]}),
        "hugo": ("exercises", {**solved, **variant("einsum-scores").apply(solved)}),
        "ines": ("repo", {**solved, "quiz.yml": WRONG_QUIZ}),
    }
    folders = {}
    for learner, (layout, files) in learners.items():
        if only is not None and learner not in only:
            continue
        base = root / learner
        lesson_dir = (base / "exercises" if layout == "repo" else base) / lesson.folder
        write_submission(lesson_dir, files)
        folders[learner] = base
    if only is None or "gala" in only:
        # gala's repository has no lesson-03 folder at all (she has not begun it).
        gala = root / "gala"
        write_submission(gala, {"README.md": "# mi repositorio\n"})
        (gala / "exercises").mkdir()
        folders["gala"] = gala
    return folders


def forever_hanging(root: Path, course) -> Path:
    """A learner whose every forward() loops forever (and who leaves a tagged sleeper)."""
    lesson = course.lesson("03")
    files = solution_files(lesson)
    files["attention.py"] = HANG_IN_FORWARD + _with_forward_sleep(files["attention.py"])
    return write_submission(root / "exercises" / lesson.folder, files).parent.parent


# ------------------------------------------------------------------------ git remotes

GIT = [
    "git",
    "-c",
    "user.name=Alumna",
    "-c",
    "user.email=alumna@example.org",
    "-c",
    "init.defaultBranch=main",
]


def bare_remote(
    remotes: Path,
    name: str,
    lesson,
    files: dict[str, str],
    *,
    tag: str | None = None,
    date: str | None = None,
) -> Path:
    """A bare repository `name`.git whose main branch holds exercises/<lesson>/ with `files`
    (committed with `date` as its author and committer dates, when given)."""
    bare = remotes / f"{name}.git"
    subprocess.run([*GIT, "init", "-q", "--bare", str(bare)], check=True)
    work = remotes / f"{name}-work"
    subprocess.run([*GIT, "clone", "-q", str(bare), str(work)], check=True, capture_output=True)
    commit(work, lesson, files, "primera entrega", date=date)
    if tag:
        subprocess.run([*GIT, "tag", tag], cwd=work, check=True)
        push(work, tag)
    return bare


def commit(
    work: Path, lesson, files: dict[str, str], text: str, *, date: str | None = None, push_it: bool = True
) -> str:
    """Commit exercises/<lesson>/ with `files` in `work` and push it (unless not `push_it`);
    `date` (any date git reads, e.g. "2001-01-01T12:00:00Z") is the commit's author and committer
    date, as a learner can set them. Returns the commit."""
    folder = work / "exercises" / lesson.folder
    if folder.exists():
        shutil.rmtree(folder)
    write_submission(folder, files)
    env = {**os.environ, **({"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date} if date else {})}
    subprocess.run([*GIT, "add", "-A"], cwd=work, check=True)
    subprocess.run([*GIT, "commit", "-q", "-m", text], cwd=work, check=True, env=env)
    if push_it:
        push(work, "HEAD:main")
    return subprocess.run(
        [*GIT, "rev-parse", "HEAD"], cwd=work, check=True, capture_output=True, text=True
    ).stdout.strip()


def push(work: Path, refspec: str) -> None:
    """Push to the bare remote, forced as a learner may (back to an older commit, say), and
    refresh what `served` gives for it (plain HTTP reads the refs from info/refs, which git
    writes only when asked)."""
    subprocess.run([*GIT, "push", "-q", "--force", "origin", refspec], cwd=work, check=True)
    bare = subprocess.run(
        [*GIT, "remote", "get-url", "origin"], cwd=work, check=True, capture_output=True, text=True
    ).stdout.strip()
    subprocess.run([*GIT, "update-server-info"], cwd=bare, check=True)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@contextlib.contextmanager
def served(remotes: Path) -> Iterator[str]:
    """Serve the bare repositories in `remotes` over plain HTTP on 127.0.0.1 (git's "dumb"
    protocol: static files): the roster refuses local paths and file://, so the tests' real
    clones come from here, with --allow-scheme http --allow-host 127.0.0.1. Yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(remotes))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
