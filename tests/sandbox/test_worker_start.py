"""A worker starts the same way whichever path starts it.

Two paths start a worker on Linux: forked by the warm pool's zygote (autograder/sandbox/pool.py,
worker/zygote.py) or executed through a fresh supervisor (worker/supervisor.py). Both take one
config (Sandbox.worker_config) and go through one sequence (supervisor.run_supervisor on the
supervisor's side, supervisor.harden on the worker's). Every test here runs a real worker down
both paths and reads what the kernel says about it from /proc, from this (trusted) side.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from autograder.sandbox.client import Limits, Sandbox, supervisor_config, worker_user
from autograder.sandbox.pool import ForkedSupervisor
from autograder.sandbox.privileges import cuda_present

LINUX = sys.platform.startswith("linux")
pytestmark = pytest.mark.skipif(not LINUX, reason="both start paths (and /proc) are Linux only")

PATHS = ["warm-pool", "fresh-worker"]
# Limits no other test uses, so that finding them on the worker proves they came from this config.
LIMITS = Limits(memory_bytes=3 << 30, cpu_seconds=123, processes=None, file_bytes=5 << 20)
LIMIT_ROWS = {
    "memory_bytes": "Max address space",
    "cpu_seconds": "Max cpu time",
    "file_bytes": "Max file size",
}


@pytest.fixture(autouse=True)
def warm_pool_on(monkeypatch):
    """Each test picks its path itself: the pool must be on whatever the caller's AUTOGRADER_WARM_POOL."""
    monkeypatch.setenv("AUTOGRADER_WARM_POOL", "1")


def started(folder: Path, path: str, user: tuple[int, int] | None = None) -> Sandbox:
    """A sandbox over `folder` whose worker has started down `path` and said hello."""
    (folder / "m.py").write_text(
        "import os\nx = 1\n\n\ndef seen():\n    return dict(os.environ), os.getcwd()\n"
    )
    sandbox = Sandbox(folder, LIMITS)
    sandbox.warm_pool = path == "warm-pool"
    if user is not None:
        sandbox.user = user
    sandbox.ensure_ready()
    assert isinstance(sandbox._proc, ForkedSupervisor) == (path == "warm-pool")
    return sandbox


def status_of(pid: int) -> dict[str, str]:
    text = Path(f"/proc/{pid}/status").read_text()
    return {
        key: value.strip() for key, value in (line.split(":", 1) for line in text.splitlines() if ":" in line)
    }


def soft_limits(pid: int) -> dict[str, str]:
    """/proc/PID/limits as {row name: soft limit}."""
    rows = Path(f"/proc/{pid}/limits").read_text().splitlines()[1:]
    return {row[:26].strip(): row[26:].split()[0] for row in rows}


@pytest.mark.parametrize("path", PATHS)
def test_the_worker_gets_exactly_the_config_built_for_it(tmp_path, path):
    sandbox = started(tmp_path, path)
    try:
        config = sandbox.worker_config()
        pid = sandbox.worker_pid
        # As the worker's Python sees them: a forked worker's /proc/PID/environ is the zygote's.
        env, cwd = sandbox.call(sandbox.getattr(sandbox.module("m"), "seen"))
        # (torch may add a variable of its own, TORCHINDUCTOR_CACHE_DIR, on import)
        assert config["env"].items() <= env.items() and env["HOME"] == str(sandbox._tmp / "home")
        assert not set(env) - set(config["env"]) - {"TORCHINDUCTOR_CACHE_DIR"}
        assert cwd == os.readlink(f"/proc/{pid}/cwd") == config["cwd"] == str(sandbox.root)
        limits = soft_limits(pid)
        for name, row in LIMIT_ROWS.items():
            if name == "memory_bytes" and cuda_present():
                continue  # left to the driver on a GPU machine
            assert limits[row] == str(getattr(LIMITS, name)) == str(config["limits"][name]), row
        assert limits["Max core file size"] == "0"
        assert (
            config["walls"]["enabled"] and "landlock" in sandbox.isolation_reports[-1]
        )  # it walled itself in
    finally:
        sandbox.close()


def test_the_executed_supervisor_reads_the_same_config_plus_how_to_exec():
    config = {
        "cwd": "/x",
        "env": {"HOME": "/h"},
        "limits": {"cpu_seconds": 1},
        "user": None,
        "walls": {"home": "/h", "enabled": True},
    }
    full = supervisor_config(config, 11, 12, 13)
    assert {key: full[key] for key in config} == config
    assert (full["pass_fds"], full["log_fd"]) == ([11, 12], 13)
    assert full["argv"][0] == sys.executable and full["argv"][4:6] == ["11", "12"]


@pytest.mark.parametrize("path", PATHS)
def test_the_worker_is_walled_in_by_the_same_sequence(tmp_path, path):
    """Own session and process group (not the supervisor's), no_new_privs; as root, the unprivileged
    user without a capability, in namespaces of its own and PID 1 of its own PID namespace."""
    sandbox = started(tmp_path, path)
    try:
        pid, supervisor = sandbox.worker_pid, sandbox._proc.pid
        status = status_of(pid)
        assert os.getpgid(pid) == pid and os.getsid(pid) == pid != os.getsid(supervisor)
        assert status["NoNewPrivs"] == "1" and status["Seccomp"] == "2"
        if worker_user() is None:
            from autograder.sandbox.worker import confine

            if not confine.user_namespaces_work():
                pytest.skip("the grader is not root and may make no user namespace: no namespaces")
            # Without root: PID 1 of its own PID namespace, in a user namespace of its own, with no
            # capability left in it.
            assert status["NSpid"].split()[-1] == "1"
            assert int(status["CapEff"], 16) == 0 and int(status["CapPrm"], 16) == 0
            for name in ("pid", "user"):
                assert os.readlink(f"/proc/{pid}/ns/{name}") != os.readlink(f"/proc/self/ns/{name}"), name
            return
        uid, gid = worker_user()
        assert status["Uid"].split() == [str(uid)] * 4 and status["Gid"].split() == [str(gid)] * 4
        assert status["Groups"] == "" and int(status["CapEff"], 16) == 0 and int(status["CapPrm"], 16) == 0
        assert status["NSpid"].split()[-1] == "1"  # the supervisor's PID namespace, entered before the fork
        for name in ("mnt", "net", "ipc", "pid"):
            assert os.readlink(f"/proc/{pid}/ns/{name}") != os.readlink(f"/proc/self/ns/{name}"), name
    finally:
        sandbox.close()


@pytest.mark.parametrize("path", PATHS)
def test_the_worker_dies_with_its_supervisor(tmp_path, path):
    """Death with the supervisor is set after the user change, which would clear it."""
    sandbox = started(tmp_path, path)
    pid = sandbox.worker_pid
    try:
        os.kill(sandbox._proc.pid, signal.SIGKILL)
        end = time.monotonic() + 30
        while time.monotonic() < end:
            try:
                state = status_of(pid)["State"]
            except (FileNotFoundError, ProcessLookupError):
                break
            if state.startswith("Z"):
                break
            time.sleep(0.05)
        else:
            pytest.fail(f"the worker {pid} outlived its supervisor")
    finally:
        sandbox.close()


@pytest.mark.parametrize("path", PATHS)
def test_a_user_that_cannot_be_taken_leaves_a_sealed_worker_that_says_so(tmp_path, path):
    """uid -1 means "unchanged" to setresuid: the user change fails after the trusted side
    decided it should work. The worker still grades, as root, with every other step done."""
    if worker_user() is None:
        pytest.skip("only a root grader changes the worker's user")
    sandbox = started(tmp_path, path, user=(-1, -1))
    try:
        pid = sandbox.worker_pid
        status = status_of(pid)
        assert status["Uid"].split()[0] == "0"
        assert "could not run as uid -1" in sandbox.log_tail()
        assert os.getpgid(pid) == pid and status["NoNewPrivs"] == "1" and status["Seccomp"] == "2"
        assert soft_limits(pid)["Max cpu time"] == "123"
        assert sandbox.getattr(sandbox.module("m"), "x") == 1
    finally:
        sandbox.close()
