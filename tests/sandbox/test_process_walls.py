"""Walls without root: the learner's code reaches no process but its own, even where the grader has no root.

One attack (ATTACK) tries every call that names a process (prlimit64 with and without a new
limit, the sched_* calls, setpriority and ioprio with every selector, getpgid, getsid, capget,
kcmp, move_pages, migrate_pages, get_robust_list, process_madvise, process_mrelease, setpgid,
setsid, kill) on every pid of a window, finding nothing by probing: without /proc, a pid of the
same user answers prlimit64(pid, NULL) with 0, which is how the issue found the trusted grader,
the zygote, the supervisor and the shell that started the grader. Every answer must be EPERM or
ESRCH, and the worker's own calls (pid 0, its own pid, from any of its threads with 0) still work.

- In a process with the worker's filter installed (cheap: no grading), aimed at this test's own
  process, whose limits, nice value and affinity must not move; torch's threads still run there.
- Through the CLI, as root and as a plain user (useradd + runuser, see test_isolation.py), with the
  warm pool and with fresh workers and under `grade-all --jobs 2` beside an honest learner: the
  grader's parent shell announces its pid, the submission aims at every pid from the shell's on
  (the grader, the zygote, the supervisors all come after it), the grade is the honest grade, the
  other learner's too, and the shell's limits, nice value and affinity are unchanged afterwards.
- The worker's own configuration (deny lists, the host's namespaces and uid, its environment) is
  nowhere among the objects the learner's code can reach once it is imported.
"""

from __future__ import annotations

import json
import os
import platform
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.hostile_snippets import FIRST_CALL
from support.project import ROOT, SEED
from support.unprivileged import expose_python_to
from support.variants import solution_files

from autograder.sandbox import isolation
from autograder.sandbox.client import Sandbox
from autograder.sandbox.worker import seccomp, syscall_table

# A marker for the folders these tests make in /tmp (several runs may share the machine).
MARK = f"agwalls{random.SystemRandom().randrange(10**9, 10**10)}"

LINUX = sys.platform.startswith("linux")
WALLS = isolation.probe() if LINUX else {"official": False}
pytestmark = pytest.mark.skipif(
    not (WALLS["official"] and seccomp.supported()),
    reason="needs Landlock and the seccomp filter (Linux x86-64 or aarch64)",
)
NUMBERS = syscall_table.X86_64 if platform.machine() == "x86_64" else syscall_table.AARCH64
CALLS = (
    "prlimit64",
    "setpriority",
    "getpriority",
    "sched_setaffinity",
    "sched_getaffinity",
    "sched_setscheduler",
    "sched_setparam",
    "sched_setattr",
    "sched_getscheduler",
    "sched_getparam",
    "sched_getattr",
    "sched_rr_get_interval",
    "getpgid",
    "getsid",
    "capget",
    "process_madvise",
    "process_mrelease",
    "kcmp",
    "move_pages",
    "migrate_pages",
    "get_robust_list",
    "ioprio_set",
    "ioprio_get",
    "setpgid",
    "setsid",
    "kill",
    "pidfd_open",
    "gettid",
)

ATTACK = '''
import ctypes as _ct, errno as _errno, os as _os, threading as _threading

NR = %(numbers)r
_libc = _ct.CDLL(None, use_errno=True)


def _sys(name, *args):
    result = _libc.syscall(_ct.c_long(NR[name]), *[_ct.c_long(a) if isinstance(a, int) else a for a in args])
    return "ok" if result >= 0 else _errno.errorcode.get(_ct.get_errno(), str(_ct.get_errno()))


class _Limit(_ct.Structure):
    _fields_ = [("cur", _ct.c_ulong), ("max", _ct.c_ulong)]


def _buffer(size=256):
    return _ct.create_string_buffer(size)


def _on(pid):
    """Every call of the issue aimed at `pid`: name -> "ok" or the errno's name."""
    cpu, queue, mask, attr = _Limit(1, 1), _Limit(12345, 12345), _buffer(128), _buffer(56)
    mask[0] = bytes([1])  # CPU 0 only
    _ct.c_uint32.from_buffer(attr, 0).value, _ct.c_uint32.from_buffer(attr, 4).value = 56, 5  # SCHED_IDLE
    header = (_ct.c_uint32 * 2)(0x20080522, pid)
    return {
        "prlimit_probe": _sys("prlimit64", pid, 0, None, _buffer(16)),  # a NULL new limit: how pids were found
        "prlimit_cpu_1s": _sys("prlimit64", pid, 0, _ct.byref(cpu), None),  # what killed the grader
        "prlimit_msgqueue": _sys("prlimit64", pid, 12, _ct.byref(queue), None),  # ulimit -q 12345
        "setpriority": _sys("setpriority", 0, pid, 19),
        "getpriority": _sys("getpriority", 0, pid),
        "sched_setaffinity": _sys("sched_setaffinity", pid, 128, mask),
        "sched_getaffinity": _sys("sched_getaffinity", pid, 128, _buffer(128)),
        "sched_setscheduler": _sys("sched_setscheduler", pid, 5, _buffer(8)),
        "sched_setparam": _sys("sched_setparam", pid, _buffer(8)),
        "sched_setattr": _sys("sched_setattr", pid, attr, 0),
        "sched_getscheduler": _sys("sched_getscheduler", pid),
        "sched_getparam": _sys("sched_getparam", pid, _buffer(8)),
        "sched_getattr": _sys("sched_getattr", pid, _buffer(56), 56, 0),
        "sched_rr_get_interval": _sys("sched_rr_get_interval", pid, _buffer(16)),
        "getpgid": _sys("getpgid", pid),
        "getsid": _sys("getsid", pid),
        "capget": _sys("capget", header, _buffer(24)),
        "pidfd_open": _sys("pidfd_open", pid, 0),
        "process_madvise": _sys("process_madvise", pid, _buffer(16), 1, 20, 0),
        "process_mrelease": _sys("process_mrelease", pid, 0),
        "kcmp": _sys("kcmp", _os.getpid(), pid, 1, 0, 0),
        "move_pages": _sys("move_pages", pid, 1, _buffer(8), None, _buffer(8), 0),
        "migrate_pages": _sys("migrate_pages", pid, 64, _buffer(8), _buffer(8)),
        "get_robust_list": _sys("get_robust_list", pid, _buffer(8), _buffer(8)),
        "ioprio_set": _sys("ioprio_set", 1, pid, 3 << 13),
        "ioprio_get": _sys("ioprio_get", 1, pid),
        "setpgid_join": _sys("setpgid", 0, pid),
        "setpgid_other": _sys("setpgid", pid, pid),
        "kill": _sys("kill", pid, 0),
    }


def _everyone():
    """Calls that need no pid to reach other processes: the per-user and per-group selectors, and
    leaving the worker's session or group (to be out of reach of the timeout's group kill)."""
    return {
        "setpriority_user": _sys("setpriority", 2, 0, 19),
        "setpriority_group": _sys("setpriority", 1, 0, 19),
        "ioprio_set_user": _sys("ioprio_set", 3, 0, 3 << 13),
        "ioprio_set_group": _sys("ioprio_set", 2, 0, 3 << 13),
        "setsid": _sys("setsid"),
        "setpgid_new_group": _sys("setpgid", 0, 0),
        "kill_everyone": _sys("kill", -1, 0),
    }


def _own():
    """What the worker may do to itself, from its main thread and from another thread (0 = me)."""
    me, out = _os.getpid(), {}
    out.update(prlimit_self=_sys("prlimit64", 0, 0, None, _buffer(16)), prlimit_pid=_sys("prlimit64", me, 0, None, _buffer(16)),
               affinity_self=_sys("sched_getaffinity", 0, 128, _buffer(128)), getpriority=_sys("getpriority", 0, 0),
               getpgid=_sys("getpgid", 0), getsid=_sys("getsid", me), robust=_sys("get_robust_list", 0, _buffer(8), _buffer(8)))

    def thread():
        out["thread_affinity"] = _sys("sched_getaffinity", 0, 128, _buffer(128))
        out["thread_setaffinity"] = _sys("sched_setaffinity", 0, 128, _affinity())  # the mask it has
        out["thread_nice"] = _sys("setpriority", 0, 0, _os.getpriority(_os.PRIO_PROCESS, 0))

    worker = _threading.Thread(target=thread)
    worker.start()
    worker.join()
    return out


def _affinity():
    mask = _buffer(128)
    _libc.syscall(_ct.c_long(NR["sched_getaffinity"]), _ct.c_long(0), _ct.c_long(128), mask)
    return mask


def attack(low, high, extra=()):
    """Probe every pid of [low, high) and `extra` but this process's own; the report as one line."""
    me = _os.getpid()
    targets = sorted({p for p in (*range(max(low, 1), high), *extra) if p > 0 and p != me})
    found = [p for p in targets if _sys("prlimit64", p, 0, None, _buffer(16)) == "ok"]
    bad = []
    for pid in targets:
        for name, answer in _on(pid).items():
            if answer not in ("EPERM", "ESRCH"):
                bad.append("%%s:%%d:%%s" %% (name, pid, answer))
    for name, answer in _everyone().items():
        if answer not in ("EPERM", "ESRCH"):
            bad.append("%%s:%%s" %% (name, answer))
    own = _own()
    return "procwalls: tried=%%d low=%%d high=%%d found=%%s bad=%%s own=%%s" %% (
        len(targets), low, high, ",".join(map(str, found[:20])) or "-", ",".join(bad[:20]) or "-",
        ",".join("%%s:%%s" %% item for item in sorted(own.items())))
''' % {"numbers": {name: NUMBERS[name] for name in CALLS}}


def parse_report(text: str) -> dict[str, str]:
    line = text[text.index("procwalls: ") :].split("\n", 1)[0]
    return dict(re.findall(r"(\w+)=(\S+)", line))


def assert_walled(report: dict[str, str]) -> None:
    assert int(report["tried"]) > 0
    assert report["found"] == "-" and report["bad"] == "-", report
    own = dict(item.split(":") for item in report["own"].split(","))
    assert set(own.values()) == {"ok"}, own


def process_state(pid: int | str = "self") -> dict:
    """Limits, nice value and affinity of a process, as /proc shows them."""
    limits = Path(f"/proc/{pid}/limits").read_text()
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    status = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
    )
    return {"limits": limits, "nice": stat[16], "cpus": status["Cpus_allowed_list"].strip()}


# ------------------------------------------------------------------ the filter alone, in a process

IN_A_FILTERED_PROCESS = (
    """
import ctypes, json, os, sys
from autograder.sandbox.worker import supervisor, seccomp

supervisor.become_session_leader()
ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)  # no_new_privs, as the worker
seccomp.install()
"""
    + ATTACK
    + """
target = int(sys.argv[1])
report = attack(target, target + 1, extra=(os.getppid(),))
import torch

torch.manual_seed(0)
a = torch.randn(256, 256, dtype=torch.float64)
single = a @ a
torch.set_num_threads(2)  # torch's own intra-op threads, started under the filter
threads = torch.get_num_threads()
same = bool(torch.allclose(a @ a, single))
try:
    os.fork()
    forked = "ok"
except OSError as exc:
    forked = type(exc).__name__
dataset = torch.utils.data.TensorDataset(torch.arange(6.0))
batches = [b[0].tolist() for b in torch.utils.data.DataLoader(dataset, batch_size=3)]
try:  # workers are processes: refused, with an error, never a hang
    list(torch.utils.data.DataLoader(dataset, batch_size=3, num_workers=2))
    workers = "ok"
except Exception as exc:
    workers = type(exc).__name__
print(json.dumps({"report": report, "threads": threads, "same": same, "fork": forked, "batches": batches,
                  "workers": workers}))
"""
)


def test_the_filter_keeps_every_call_on_the_worker_itself():
    before = process_state()
    proc = subprocess.run(
        [sys.executable, "-c", IN_A_FILTERED_PROCESS, str(os.getpid())],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert_walled(parse_report(out["report"]))
    assert process_state() == before  # this process's limits, nice value and CPUs did not move
    assert out["threads"] == 2 and out["same"] is True
    assert out["fork"] == "PermissionError"
    assert out["batches"] == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]] and out["workers"] == "PermissionError"


# ------------------------------------------------------------------ no configuration left to find

SEARCH = """
import gc, sys

# Built at run time, so that no constant of this file holds them (identity tells ours apart).
HOST_NS = [ns[::-1] for ns in %(host_ns_reversed)r]
JSON_KEY = '"' + "host" + '_ns"'
# The config's telltale keys (one name alone, like "deny", is also a method of some class).
TELLTALES = ({"host_ns"}, {"host_uid"}, {"deny", "home"}, {"walls", "cwd"}, {"limits", "env"})
MINE = {id(s) for s in HOST_NS} | {id(JSON_KEY)}


def _suspect(obj):
    if isinstance(obj, dict):
        keys = {k for k in obj if isinstance(k, str)}
        hits = [sorted(telltale) for telltale in TELLTALES if telltale <= keys]
        if hits:
            return "dict with %%s" %% hits
    elif isinstance(obj, str) and id(obj) not in MINE and (JSON_KEY in obj or any(ns in obj for ns in HOST_NS)):
        return "string " + repr(obj[:80])
    return None


def _items(obj):
    if isinstance(obj, dict):
        return list(obj.values())
    if isinstance(obj, (list, tuple, set, frozenset)):
        return list(obj)
    return []


def search():
    found = set()

    def look(obj, where):
        for thing in (obj, *_items(obj)):
            why = _suspect(thing)
            if why:
                found.add(where + ": " + why)

    for obj in gc.get_objects():
        look(obj, "gc " + type(obj).__name__)
    # Module globals and a frame's locals are looked at by value: their keys are names of code.
    for name, module in list(sys.modules.items()):
        for value in list(getattr(module, "__dict__", {}).values()):
            look(value, "module " + name)
    look(sys.argv, "sys.argv")
    look(getattr(sys, "orig_argv", []), "sys.orig_argv")
    frame = sys._getframe()
    while frame is not None:
        for value in list(frame.f_locals.values()):
            look(value, "frame " + frame.f_code.co_name)
        frame = frame.f_back
    return sorted(found)


FOUND = search()
_DECOY = {"deny": ["/nowhere"], "host_ns": {"mnt": HOST_NS[0] if HOST_NS else "x"}}
DECOY_FOUND = search()  # the search does find a configuration where there is one
del _DECOY
"""


@pytest.mark.parametrize("pool", ["warm-pool", "fresh-worker"])
def test_learner_code_finds_no_worker_configuration(tmp_path, pool):
    host_ns = sorted(set(isolation.host_namespaces().values()))
    assert host_ns
    (tmp_path / "snoop.py").write_text(SEARCH % {"host_ns_reversed": [ns[::-1] for ns in host_ns]})
    sandbox = Sandbox(tmp_path)
    sandbox.warm_pool = pool == "warm-pool"
    try:
        module = sandbox.module("snoop")
        assert sandbox.getattr(module, "DECOY_FOUND") != []
        found = sandbox.getattr(module, "FOUND")
        assert found == [], found
    finally:
        sandbox.close()


# ------------------------------------------------------------------ through the CLI, beside a shell

SHELL = r"""
state() { echo "state nice=$(cut -d' ' -f19 /proc/$$/stat) cpus=$(grep Cpus_allowed_list /proc/$$/status | cut -f2) limits=$(ulimit -a | tr ' \n' '_;')"; }
echo "shell $$"
read go
state
"$@" &
echo "grader $!"
wait $!
echo "exit $?"
state
"""
REACH = 4096  # pids past the shell's, where the worker has no pid of its own to go by (a PID namespace)


def mallory_files(shell_pid: int) -> dict[str, str]:
    from autograder.core.manifest import load_course

    files = solution_files(load_course(ROOT / "course.yml").lesson("03"))
    head = "def causal_mask(T):\n"
    assert head in files["attention_numpy.py"]
    attack = (
        ATTACK + FIRST_CALL + f"\nREPORT = attack({shell_pid}, max(_os.getpid(), {shell_pid + REACH}) + 64)\n"
    )
    files["attention_numpy.py"] = attack + files["attention_numpy.py"].replace(
        head, head + '    if _first_call("report-once"):\n        raise RuntimeError(REPORT)\n', 1
    )
    return files


def run_beside_a_shell(command: list[str], write_submission, env: dict, user: str | None) -> dict:
    """`command` started by a bash that first says its pid (for `write_submission(pid)`), then its
    state before and after: the grader's parent shell of the issue."""
    shell = ["bash", "-c", SHELL, "bash", *command]
    if user is not None:
        shell = expose_python_to(user, shell)
    proc = subprocess.Popen(
        shell,
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )
    try:
        first = proc.stdout.readline()
        assert first.startswith("shell "), first + proc.stderr.read()[-2000:]
        write_submission(int(first.split()[1]))
        out, err = proc.communicate("go\n", timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    lines = [line for line in (first + out).splitlines() if line]
    states = [line for line in lines if line.startswith("state ")]
    fields = {
        line.split()[0]: line.split()[1] for line in lines if line.split()[0] in ("shell", "grader", "exit")
    }
    assert fields.get("exit") == "0", (lines, err[-3000:])
    assert len(states) == 2, lines
    return {"shell": int(fields["shell"]), "grader": int(fields["grader"]), "states": states, "stderr": err}


def assert_honest(lesson: dict) -> dict[str, str]:
    """Every check passes but np-mask, which carries the attack's report (gpu-parity: no GPU here)."""
    checks = {c["id"]: c for c in lesson["checks"]}
    report = parse_report(checks["np-mask"]["message"])
    assert checks["np-mask"]["status"] == "failed"
    others = {cid: c["status"] for cid, c in checks.items() if cid not in ("np-mask", "gpu-parity")}
    assert set(others.values()) == {"passed"}, others
    assert lesson["score"] == lesson["max_score"] - checks["np-mask"]["max_score"]
    return report


SCENARIOS = [
    (who, how) for who in ("this-user", "plain-user") for how in ("grade-warm", "grade-fresh", "grade-all")
]


@pytest.mark.parametrize("who,how", SCENARIOS)
def test_no_process_but_its_own_through_the_cli(request, tmp_path, who, how):
    """ "this-user": whoever runs the tests (root on CI: the worker is nobody, in a PID namespace of
    its own); "plain-user": a user made for the test, where nothing but the filter stands between
    the worker and the grader, the zygote, the supervisors and the shell, all of its own user."""
    user = request.getfixturevalue("plain_user") if who == "plain-user" else None
    base = Path(f"/tmp/{MARK}-procwalls-{how}") if user else tmp_path / "base"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(mode=0o755, parents=True)
    env = {"AUTOGRADER_WARM_POOL": "0" if how == "grade-fresh" else "1"}
    if how == "grade-all":
        submissions, out = base / "submissions", base / "out"
        folder = submissions / "mallory" / "exercises" / "03-atencion-causal"
        command = [
            sys.executable,
            "-m",
            "autograder",
            "grade-all",
            str(submissions),
            "--out",
            str(out),
            "--lessons",
            "03",
            "--jobs",
            "2",
            "--seed",
            str(SEED),
        ]
        alice = submissions / "alice" / "exercises" / "03-atencion-causal"
        alice.mkdir(parents=True)
        for name, text in mallory_files(0).items():  # the honest learner: the solution, untouched
            if name != "attention_numpy.py":
                (alice / name).write_text(text, encoding="utf-8")
        shutil.copyfile(
            ROOT / "solutions" / "03-atencion-causal" / "attention_numpy.py", alice / "attention_numpy.py"
        )
    else:
        folder, output = base / "mallory", base / "out.json"
        command = [
            sys.executable,
            "-m",
            "autograder",
            "grade",
            "03",
            "--submission",
            str(folder),
            "--format",
            "json",
            "--output",
            str(output),
            "--seed",
            str(SEED),
        ]

    def write(shell_pid: int) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in mallory_files(shell_pid).items():
            (folder / name).write_text(text, encoding="utf-8")
        if user is not None:
            subprocess.run(["chown", "-R", user, str(base)], check=True)

    try:
        run = run_beside_a_shell(command, write, env, user)
        before, after = run["states"]
        assert before == after  # the shell's limits (ulimit -q among them), nice value and CPUs
        if how == "grade-all":
            data = json.loads((out / "results" / "mallory.json").read_text())
            other = json.loads((out / "results" / "alice.json").read_text())
            alice_lesson = other["lessons"][0]
            assert alice_lesson["completed"] is True and alice_lesson["score"] == alice_lesson["max_score"], (
                alice_lesson
            )
        else:
            data = json.loads(output.read_text())
        report = assert_honest(data["lessons"][0])
        assert_walled(report)
        if "pid" not in data["isolation"]["namespaces"]:  # the pids it tried were the grader's and the rest
            assert int(report["low"]) == run["shell"] < run["grader"] < int(report["high"])
        assert data["isolation"]["official"] is True, data["isolation"]
    finally:
        shutil.rmtree(base, ignore_errors=True)
