"""The hostile catalog: a learner's code tries to read, write, reach and signal what it must not.

One lesson-03 submission carries every attack at once. Its `attention.py` is the untouched stub
plus a thief that looks for a finished `attention.py` everywhere a learner would (the engine's
package path, the working directory's parents, /proc/PID/cwd of every process, the other
sandboxes under the temporary folder, the checkout's solutions and the graders' reference
pieces) and re-exports the first it can read: it must score exactly what the stub scores (0).
Its `attention_numpy.py` tries each attack of the issue's list in turn and raises one report,
"walls: name=OK|DENIED ...", which comes back as the checks' feedback; every attack must be
DENIED, and afterwards nothing it planted exists, the listener on 127.0.0.1 got nothing, and the
sentinel process (a stand-in for another learner's worker) is alive.

The same submission is graded through the CLI (`autograder grade 03 04`: lesson 04's sandbox,
holding the reference lesson-03 files, exists while lesson 03 is graded) with the warm pool and
with fresh workers, through `grade-all` beside an honest learner, and as an unprivileged user
(created here with useradd, run with runuser) for whom nothing but the walls stands between the
worker and the user's own files.
"""

from __future__ import annotations

import json
import os
import pwd
import random
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support.project import ROOT, SEED
from support.unprivileged import expose_python_to, user_namespaces_for
from support.variants import solution_files

from autograder.sandbox import isolation
from autograder.sandbox.client import worker_user

LINUX = sys.platform.startswith("linux")
WALLS = isolation.probe() if LINUX else {"official": False}
pytestmark = pytest.mark.skipif(not WALLS["official"], reason="needs Landlock and seccomp (Linux >= 5.13)")

MARK = f"agiso{random.SystemRandom().randrange(10**9, 10**10)}"
ATTACKS = (
    "read_key",
    "read_other_learner",
    "list_results",
    "read_results",
    "read_roster",
    "read_checkout",
    "list_checkout",
    "read_graders",
    "read_reference",
    "read_shadow",
    "read_parent_environ",
    "read_proc_cmdline",
    "parent_cwd",
    "write_bashrc",
    "write_checkout",
    "write_graders",
    "write_graders_conftest",
    "write_venv_pth",
    "write_results",
    "write_other_learner",
    "write_tmp",
    "write_var_tmp",
    "write_dev_shm",
    "write_parent_stdout",
    "connect_tcp",
    "send_udp",
    "unix_socket",
    "signal_sentinel",
    "signal_everyone",
    "signal_supervisor",
    "ptrace_sentinel",
    "fork",
    "subprocess",
    "sysv_shm",
    "symlink_in_submission",
)

THIEF = """

# ---- the thief: re-export a finished attention.py found on disk
import glob as _glob, os as _os


def _candidates(name):
    found = list(_KNOWN)
    try:
        import autograder as _ag

        package = _os.path.dirname(_ag.__file__)
        import tempfile as _tempfile

        found += _glob.glob(_tempfile.gettempdir() + "/autograder-derived-*/reference/*/*/" + name)
        found += _glob.glob(_os.path.dirname(package) + "/solutions/*/" + name)
    except Exception:
        pass
    folder = _os.getcwd()
    for _ in range(8):
        folder = _os.path.dirname(folder)
        for pattern in ("/*/", "/*/*/", "/solutions/*/", "/*/submission/"):
            found += _glob.glob(folder + pattern + name)
    try:
        pids = [p for p in _os.listdir("/proc") if p.isdigit()]
    except OSError:
        pids = []
    for pid in ["self", str(_os.getppid()), *pids]:
        try:
            cwd = _os.readlink("/proc/%s/cwd" % pid)
        except OSError:
            continue
        found += _glob.glob(cwd + "/solutions/*/" + name) + _glob.glob(cwd + "/*/" + name)
    found += _glob.glob("/tmp/autograder-*/submission/" + name)
    found += _glob.glob("/tmp/*/autograder-*/submission/" + name)
    return found


def _steal(name, namespace):
    for path in _candidates(name):
        try:
            with open(path, encoding="utf-8") as fh:
                source = fh.read()
        except OSError:
            continue
        if "NotImplementedError" in source or "class CausalSelfAttention" not in source:
            continue
        try:
            exec(compile(source, path, "exec"), namespace)
            return path
        except Exception:
            continue
    return None


STOLEN_FROM = _steal("attention.py", globals())
"""

PROBE = """
import ctypes, os, socket

R = []


def _try(name, attack):
    try:
        attack()
        R.append(name + "=OK")
    except BaseException:
        R.append(name + "=DENIED")


def _read(path):
    with open(path, "rb") as fh:
        if not fh.read(64):
            raise OSError("empty")


def _list(path):
    if not os.listdir(path):
        raise OSError("empty")


def _write(path):
    with open(path, "a") as fh:
        fh.write("planted by the hostile catalog")


def _fork():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


def _ptrace(pid):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.ptrace(16, pid, 0, 0) != 0:  # PTRACE_ATTACH
        raise OSError(ctypes.get_errno(), "ptrace")
    libc.ptrace(17, pid, 0, 0)  # PTRACE_DETACH


def _shm():
    if ctypes.CDLL(None).shmget(0, 4096, 0o1000 | 0o600) < 0:  # IPC_PRIVATE, IPC_CREAT
        raise OSError("shmget")


def _unix():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(UNIX_PATH)


def _no_such_process():
    raise ProcessLookupError("the supervisor is outside this PID namespace")


def _parent_cwd():
    if not os.listdir("/proc/%d/cwd" % os.getppid()):
        raise OSError("empty")


_try("read_key", lambda: _read(KEY))
_try("read_other_learner", lambda: _read(OTHER))
_try("list_results", lambda: _list(OUT))
_try("read_results", lambda: _read(OUT + "/results/" + OTHER_ID + ".json"))
_try("read_roster", lambda: _read(ROSTER))
_try("read_checkout", lambda: _read(CHECKOUT + "/solutions/03-atencion-causal/attention.py"))
_try("list_checkout", lambda: _list(CHECKOUT))
_try("read_graders", lambda: _list(GRADERS))
_try("read_reference", lambda: _read(REFERENCE))
_try("read_shadow", lambda: _read("/etc/shadow"))
_try("read_parent_environ", lambda: _read("/proc/%d/environ" % os.getppid()))
_try("read_proc_cmdline", lambda: _read("/proc/1/cmdline"))
_try("parent_cwd", _parent_cwd)
_try("write_bashrc", lambda: _write(HOME + "/.bashrc"))
_try("write_checkout", lambda: _write(CHECKOUT + "/planted-" + MARK))
_try("write_graders", lambda: _write(GRADERS + "/lesson04/planted_" + MARK + ".py"))
_try("write_graders_conftest", lambda: _write(GRADERS + "/lesson04/conftest.py"))
_try("write_venv_pth", lambda: _write(SITE + "/planted-" + MARK + ".pth"))
_try("write_results", lambda: _write(OUT + "/planted-" + MARK))
_try("write_other_learner", lambda: _write(os.path.dirname(OTHER) + "/planted-" + MARK))
_try("write_tmp", lambda: _write("/tmp/planted-" + MARK))
_try("write_var_tmp", lambda: _write("/var/tmp/planted-" + MARK))
_try("write_dev_shm", lambda: _write("/dev/shm/planted-" + MARK))
_try("write_parent_stdout", lambda: _write("/proc/%d/fd/1" % os.getppid()))
_try("connect_tcp", lambda: socket.create_connection(("127.0.0.1", PORT), timeout=2))
_try("send_udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", UDP_PORT)))
_try("unix_socket", _unix)
_try("signal_sentinel", lambda: os.kill(SENTINEL, 0))
_try("signal_everyone", lambda: os.kill(-1, 0))
# Its supervisor: its parent, unless a PID namespace hides it (getppid() is then 0).
_try("signal_supervisor", lambda: os.kill(os.getppid(), 0) if os.getppid() > 1 else _no_such_process())
_try("ptrace_sentinel", lambda: _ptrace(SENTINEL))
_try("fork", _fork)
_try("subprocess", lambda: __import__("subprocess").run(["/bin/true"], check=True))
_try("sysv_shm", _shm)
_try("symlink_in_submission", lambda: _read("stolen.py"))
# Short, so that no trimming of the message can hide a line of it.
raise RuntimeError("walls: tried=%d ok=%s" % (len(R), ",".join(n[:-3] for n in R if n.endswith("=OK")) or "-"))
"""


def stub_files() -> dict[str, str]:
    folder = ROOT / "exercises" / "03-atencion-causal"
    return {
        name: (folder / name).read_text(encoding="utf-8") for name in ("attention.py", "attention_numpy.py")
    }


def constants(**values) -> str:
    return "".join(f"{name} = {value!r}\n" for name, value in values.items())


class Scene:
    """Everything the attacks aim at, made for one run: a fake key, another learner's
    submission, a results folder with a roster, a listener, a sentinel process."""

    def __init__(self, base: Path, owner: str | None = None) -> None:
        self.base = base
        self.owner = owner
        self.home = base / "home"
        (self.home / ".ssh").mkdir(parents=True)
        self.key = self.home / ".ssh" / "id_ed25519"
        self.key.write_text(f"-----BEGIN OPENSSH PRIVATE KEY----- {MARK}\n")
        self.key.chmod(0o600)
        (self.home / ".bashrc").write_text("# the learner's own\n")
        self.other = base / "submissions" / "alice" / "exercises" / "03-atencion-causal"
        self.other.mkdir(parents=True)
        for name, text in solution_files_03().items():
            (self.other / name).write_text(text, encoding="utf-8")
        self.out = base / "out"
        (self.out / "results").mkdir(parents=True)
        (self.out / "results" / "alice.json").write_text('{"xp": 50}')
        self.roster = base / "roster.csv"
        self.roster.write_text("id,name,email,url\nalice,Alice A,alice@example.org,https://github.com/a/b\n")
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.setblocking(False)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.setblocking(False)
        self.unix_path = str(base / "sock")
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind(self.unix_path)
        self.unix.listen(1)
        self.unix.setblocking(False)
        os.chmod(self.unix_path, 0o777)
        # The sentinel stands for another learner's worker: the same user as this run's workers.
        sentinel_user = owner or (pwd.getpwuid(worker_user()[0]).pw_name if worker_user() else None)
        command = ["sleep", "600"]
        if sentinel_user and os.geteuid() == 0:
            command = ["runuser", "-u", sentinel_user, "--", *command]
        self.sentinel = subprocess.Popen(command)
        if owner is not None:
            subprocess.run(["chown", "-R", owner, str(base)], check=True)

    def sentinel_pid(self) -> int:
        """The sleep itself (runuser may stay as its parent)."""
        for _ in range(100):
            kids = [int(p) for p in os.listdir("/proc") if p.isdigit() and _ppid(int(p)) == self.sentinel.pid]
            if self.sentinel.args[0] != "runuser":
                return self.sentinel.pid
            if kids:
                return kids[0]
            import time

            time.sleep(0.05)
        return self.sentinel.pid

    def submission(self, folder: Path, graders: Path, checkout: Path) -> Path:
        files = stub_files()
        site = next(p for p in isolation.runtime_paths() if p.endswith("site-packages"))
        reference = derived_reference(self.owner)
        known = [
            str(checkout / "solutions" / "03-atencion-causal" / "attention.py"),
            str(reference),
            str(self.other / "attention.py"),
        ]
        files["attention.py"] += "\n" + constants(_KNOWN=known) + THIEF
        files["attention_numpy.py"] = (
            constants(
                KEY=str(self.key),
                OTHER=str(self.other / "attention.py"),
                OTHER_ID="alice",
                OUT=str(self.out),
                ROSTER=str(self.roster),
                CHECKOUT=str(checkout),
                GRADERS=str(graders),
                REFERENCE=str(reference),
                HOME=str(self.home),
                SITE=site,
                MARK=MARK,
                PORT=self.listener.getsockname()[1],
                UDP_PORT=self.udp.getsockname()[1],
                UNIX_PATH=self.unix_path,
                SENTINEL=self.sentinel_pid(),
            )
            + PROBE
        )
        folder.mkdir(parents=True)
        for name, text in files.items():
            (folder / name).write_text(text, encoding="utf-8")
        (folder / "stolen.py").symlink_to(checkout / "solutions" / "03-atencion-causal" / "attention.py")
        return folder

    def assert_untouched(self, checkout: Path, graders: Path) -> None:
        """Nothing planted, nothing received, nobody signalled."""
        site = next(p for p in isolation.runtime_paths() if p.endswith("site-packages"))
        planted = [
            checkout / f"planted-{MARK}",
            graders / "lesson04" / f"planted_{MARK}.py",
            graders / "lesson04" / "conftest.py",
            Path(site) / f"planted-{MARK}.pth",
            self.out / f"planted-{MARK}",
            self.other.parent / f"planted-{MARK}",
            Path("/tmp") / f"planted-{MARK}",
            Path("/var/tmp") / f"planted-{MARK}",
            Path("/dev/shm") / f"planted-{MARK}",
        ]
        try:
            assert [str(p) for p in planted if p.exists()] == []
        finally:
            for path in planted:
                if MARK in path.name:
                    path.unlink(missing_ok=True)
        assert (self.home / ".bashrc").read_text() == "# the learner's own\n"
        with pytest.raises(BlockingIOError):
            self.listener.accept()
        with pytest.raises(BlockingIOError):
            self.udp.recv(16)
        with pytest.raises(BlockingIOError):
            self.unix.accept()
        assert self.sentinel.poll() is None, "the sentinel was killed"

    def close(self) -> None:
        self.sentinel.kill()
        self.sentinel.wait()
        for sock in (self.listener, self.udp, self.unix):
            sock.close()


def derived_reference(user: str | None) -> Path:
    """Lesson 03's reference attention.py where the engine keeps it for the grading user (its
    private <temp>/autograder-derived-<uid> folder, engine/references.py), made to exist before
    grading so that reading it can only fail because of the walls (a missing file would let the
    probe pass for nothing)."""
    from autograder.core.manifest import load_course
    from autograder.engine import references

    course = load_course(ROOT / "course.yml")
    mine = references.reference_files(course, course.lesson("04"), ROOT / "solutions")["attention.py"]
    assert mine.is_file(), mine
    if user is None:
        return mine
    uid, gid = pwd.getpwnam(user).pw_uid, pwd.getpwnam(user).pw_gid
    own_root = next(parent for parent in mine.parents if parent.name.startswith("autograder-derived-"))
    their_root = own_root.with_name(f"autograder-derived-{uid}")
    theirs = their_root / mine.relative_to(own_root)
    if not theirs.is_file():
        their_root.mkdir(mode=0o700, exist_ok=True)
        shutil.copytree(mine.parent.parent, theirs.parent.parent, dirs_exist_ok=True)
        for path in [their_root, *their_root.rglob("*")]:
            os.chown(path, uid, gid)
    return theirs


def _ppid(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def solution_files_03() -> dict[str, str]:
    from autograder.core.manifest import load_course

    return solution_files(load_course(ROOT / "course.yml").lesson("03"))


def walls_report(lesson: dict) -> tuple[int, list[str]]:
    """(how many attacks the probe tried, those that worked), from the report it raised."""
    for check in lesson["checks"]:
        if "walls: tried=" in check["message"]:
            line = check["message"].split("walls: tried=", 1)[1].split("\n", 1)[0]
            tried, _, worked = line.partition(" ok=")
            return int(tried), [] if worked.strip() == "-" else worked.strip().split(",")
    raise AssertionError("the probe's report is not in any check: " + json.dumps(lesson)[:2000])


def assert_contained(data: dict) -> None:
    lesson03 = next(lesson for lesson in data["lessons"] if lesson["id"] == "03")
    tried, worked = walls_report(lesson03)
    assert tried == len(ATTACKS) and worked == []
    # The thief found nothing to steal: exactly what the untouched stub scores.
    assert lesson03["score"] == 0 and lesson03["xp"] == 0, [
        (c["id"], c["status"]) for c in lesson03["checks"] if c["status"] == "passed"
    ]
    assert data["isolation"]["official"] is True, data["isolation"]
    assert lesson03["isolation"]["official"] is True


def run_cli(args: list[str], env: dict | None = None, user: str | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "autograder", *args]
    if user is not None:
        command = expose_python_to(user, command)
    return subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, **(env or {})}
    )


# ------------------------------------------------------------------ as this user (root on CI)


@pytest.mark.parametrize("pool", ["warm-pool", "fresh-worker"])
def test_the_hostile_catalog_is_contained_under_grade(tmp_path, pool):
    scene = Scene(tmp_path / "scene")
    try:
        submission = tmp_path / "mallory"
        scene.submission(submission / "03-atencion-causal", ROOT / "autograder" / "graders", ROOT)
        # Lesson 04 too: its sandbox, holding the reference attention.py, exists while 03 is graded.
        shutil.copytree(ROOT / "exercises" / "04-bloque-transformer", submission / "04-bloque-transformer")
        output = tmp_path / "results.json"
        proc = run_cli(
            [
                "grade",
                "03",
                "04",
                "--submission",
                str(submission),
                "--format",
                "json",
                "--output",
                str(output),
                "--seed",
                str(SEED),
            ],
            env={"AUTOGRADER_WARM_POOL": "1" if pool == "warm-pool" else "0"},
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert_contained(json.loads(output.read_text()))
        scene.assert_untouched(ROOT, ROOT / "autograder" / "graders")
    finally:
        scene.close()


def test_the_hostile_catalog_is_contained_under_grade_all(tmp_path):
    scene = Scene(tmp_path / "scene")
    try:
        submissions = scene.base / "submissions"
        scene.submission(
            submissions / "mallory" / "exercises" / "03-atencion-causal",
            ROOT / "autograder" / "graders",
            ROOT,
        )
        proc = run_cli(
            [
                "grade-all",
                str(submissions),
                "--out",
                str(scene.out),
                "--lessons",
                "03",
                "--jobs",
                "2",
                "--seed",
                str(SEED),
            ]
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        mallory = json.loads((scene.out / "results" / "mallory.json").read_text())
        alice = json.loads((scene.out / "results" / "alice.json").read_text())
        assert_contained(mallory)
        # The honest learner beside the attacker keeps every point the walls let count.
        assert alice["lessons"][0]["completed"] is True, alice
        scene.assert_untouched(ROOT, ROOT / "autograder" / "graders")
    finally:
        scene.close()


def test_grade_all_refuses_to_run_unwalled_unless_told(tmp_path):
    folder = tmp_path / "submissions" / "alice" / "exercises" / "01-tokens-y-lotes"
    folder.mkdir(parents=True)
    args = ["grade-all", str(tmp_path / "submissions"), "--out", str(tmp_path / "out"), "--lessons", "01"]
    proc = run_cli(args, env={"AUTOGRADER_ISOLATION": "off"})
    assert proc.returncode == 2 and "--allow-unisolated" in proc.stderr and "aislar" in proc.stderr, (
        proc.stderr
    )
    assert not (tmp_path / "out" / "results").exists()
    proc = run_cli([*args, "--allow-unisolated"], env={"AUTOGRADER_ISOLATION": "off"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads((tmp_path / "out" / "results" / "alice.json").read_text())
    assert result["isolation"]["official"] is False and result["isolation"]["disabled"] is True


def test_an_unwalled_grade_says_so_once_in_the_learners_language(tmp_path):
    folder = tmp_path / "01"
    shutil.copytree(ROOT / "solutions" / "01-tokens-y-lotes", folder)
    proc = run_cli(["grade", "01", "--submission", str(folder)], env={"AUTOGRADER_ISOLATION": "off"})
    assert proc.stdout.count("Aislamiento desactivado") == 1, proc.stdout
    proc = run_cli(["grade", "01", "--submission", str(folder), "--lang", "en"])
    assert "isolation" not in proc.stdout.lower(), proc.stdout  # all walls held: nothing to say


# ------------------------------------------------------------------ as a plain user


@pytest.mark.parametrize("pool", ["warm-pool", "fresh-worker"])
def test_the_hostile_catalog_is_contained_as_a_plain_user(plain_user, tmp_path_factory, pool):
    """No root anywhere: the worker runs as the learner's own user, who owns the key, the home,
    the other folder, the results and a copy of the graders: only the walls stop it."""
    base = Path(f"/tmp/{MARK}-{pool}")
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(mode=0o755)
    graders = base / "graders"
    shutil.copytree(ROOT / "autograder" / "graders", graders, ignore=shutil.ignore_patterns("__pycache__"))
    scene = Scene(base / "scene", owner=plain_user)
    try:
        submission = scene.submission(base / "mallory", graders, ROOT)
        output = base / "out.json"
        subprocess.run(["chown", "-R", plain_user, str(base)], check=True)
        proc = run_cli(
            [
                "grade",
                "03",
                "--submission",
                str(submission),
                "--format",
                "json",
                "--output",
                str(output),
                "--seed",
                str(SEED),
            ],
            env={
                "AUTOGRADER_GRADERS": str(graders),
                "AUTOGRADER_WARM_POOL": "1" if pool == "warm-pool" else "0",
            },
            user=plain_user,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        data = json.loads(output.read_text())
        assert_contained(data)
        # Where the kernel lets the user make them, a user and a PID namespace of the worker's own.
        expected = ["pid", "user"] if user_namespaces_for(plain_user) else []
        assert data["isolation"]["namespaces"] == expected and "user" not in data["isolation"]["enforced"]
        scene.assert_untouched(ROOT, graders)
    finally:
        scene.close()
        shutil.rmtree(base, ignore_errors=True)
