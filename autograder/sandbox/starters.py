"""How a worker is started: forked by the warm pool's zygote, executed in a fresh interpreter
through the supervisor, or spawned on the portable path; each gives the Sandbox a channel.

Owns: the worker's clean environment (`clean_env`: nothing of this process's secrets), the
warm pool's lifecycle as commands see it (`start_warm_pool`, `share_warm_pool`,
`start_shared_zygote`, autograder/sandbox/pool.py), the executed supervisor's command line
(`supervisor_config`), and the three ways to start one worker (`start_supervised`,
`start_portable`). Whichever way it starts, the worker gets the one config the Sandbox builds
(client.Sandbox.worker_config), so the ways cannot drift.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import autograder
from autograder.sandbox import isolation, portable
from autograder.sandbox.channel import PortableChannel, SupervisedChannel
from autograder.sandbox.pool import AttachedPool, ForkedSupervisor, PoolError, WarmPool
from autograder.sandbox.pool import enabled as pool_enabled

PACKAGE_PARENT = Path(autograder.__file__).resolve().parent.parent
SUPERVISOR = Path(__file__).with_name("worker") / "supervisor.py"
WORKER_BOOT = (
    "import sys; sys.path.insert(0, sys.argv.pop(3)); from autograder.sandbox.worker.main import main; main()"
)
# Variables a worker may inherit: none of them can carry a secret.
INHERITED_ENV = (
    "CUDA_VISIBLE_DEVICES",
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
    "SYSTEMROOT",
    "LD_LIBRARY_PATH",
)
STARTUP_TIMEOUT = 120.0


def clean_env(home: Path) -> dict[str, str]:
    env = {k: os.environ[k] for k in INHERITED_ENV if k in os.environ}
    env.update(
        {
            "PATH": os.defpath if os.name != "nt" else os.environ.get("PATH", ""),
            "HOME": str(home),
            "TMPDIR": str(home),
            "TMP": str(home),
            "TEMP": str(home),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "PYTHONHASHSEED": "0",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONIOENCODING": "utf-8",
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1",
        }
    )
    return env


# ---------------------------------------------------------------- the warm pool, per command
def start_warm_pool(shared: tuple[socket.socket, int] | None = None) -> None:
    """Launch this process's warm pool now (autograder/sandbox/pool.py), without waiting for it: a
    command about to grade calls this first, so the zygote's torch import overlaps the
    command's own start (building its parser, reading course.yml). `shared`: (client socket,
    pid) of a zygote another process started for several (`start_shared_zygote`), used instead."""
    if portable.selected():
        portable.prepare(PACKAGE_PARENT, clean_env)  # spawned, never forked: a spare starts now
        return
    if shared is not None and pool_enabled():
        WarmPool.adopt(*shared, STARTUP_TIMEOUT)
        return
    WarmPool.shared(PACKAGE_PARENT, clean_env, STARTUP_TIMEOUT)


def share_warm_pool() -> tuple[socket.socket, int] | None:
    """(client socket, pid) of this process's own running zygote, for a process forked from
    this one to `start_warm_pool(shared=...)` with; None where the warm pool is off, not ours
    (grade-all's processes share their parent's) or gone."""
    pool = WarmPool._instance
    if portable.selected() or not pool_enabled() or pool is None or isinstance(pool, AttachedPool):
        return None
    if pool.owner != os.getpid() or not pool.alive():
        return None
    sock = pool.attach()
    return None if sock is None else (sock, pool.pid)


def start_shared_zygote(scratch: Path | None = None) -> WarmPool | None:
    """A zygote for several grading processes (`grade-all`), started now without waiting for it:
    its `attach()` gives each one a socket for `start_warm_pool(shared=...)`; its home is made
    in `scratch`. None where the warm pool is off (each process then does as it would alone)."""
    if portable.selected() or not pool_enabled():
        return None
    try:
        return WarmPool(PACKAGE_PARENT, clean_env, STARTUP_TIMEOUT, scratch=scratch)
    except (OSError, PoolError, ValueError):
        return None


def warm_pool() -> WarmPool | None:
    """This process's warm pool (started now if it is not yet), or None where it is off."""
    return WarmPool.shared(PACKAGE_PARENT, clean_env, STARTUP_TIMEOUT)


# ---------------------------------------------------------------- one worker
def supervisor_config(config: dict, req_r: int, resp_w: int, log_fd: int) -> dict:
    """A worker's `config` (Sandbox.worker_config) as an executed supervisor reads it
    (autograder/sandbox/worker/supervisor.py): plus the worker's command line, the engine's
    package to import from, and the fds to hand on, which a forked one gets from the zygote."""
    argv = [
        sys.executable,
        "-I",
        "-c",
        WORKER_BOOT,
        str(req_r),
        str(resp_w),
        str(PACKAGE_PARENT),
        json.dumps(config["walls"]),
    ]
    return {
        **config,
        "argv": argv,
        "package": str(PACKAGE_PARENT),
        "pass_fds": [req_r, resp_w],
        "log_fd": log_fd,
    }


def _fork_from_pool(
    pool: WarmPool, config: dict, req_r: int, resp_w: int, log_fd: int
) -> ForkedSupervisor | None:
    """A supervisor and worker forked by the warm pool's zygote, or None (then the caller
    executes a fresh one: a pool problem must never cost a learner their grade)."""
    control_r, control_w = os.pipe()
    status_r, status_w = os.pipe()
    try:
        pid = pool.spawn(config, [req_r, resp_w, log_fd, status_w, control_r])
    except (PoolError, OSError, ValueError):
        for fd in (control_r, control_w, status_r, status_w):
            os.close(fd)
        return None
    os.close(control_r)
    os.close(status_w)
    return ForkedSupervisor(pid, control_w, status_r)


def start_supervised(config: dict, log: Path, pool: WarmPool | None) -> SupervisedChannel:
    """A worker under its supervisor, forked by `pool`'s zygote where it can, else executed in a
    fresh interpreter; its output goes to `log`."""
    req_r, req_w = os.pipe()
    resp_r, resp_w = os.pipe()
    log_fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    proc = _fork_from_pool(pool, config, req_r, resp_w, log_fd) if pool is not None else None
    if proc is None:
        # The supervisor gets the clean environment too: the worker can read its parent's
        # /proc/PID/environ, so this process's secrets must not be there either.
        proc = subprocess.Popen(
            [
                sys.executable,
                "-I",
                "-S",
                str(SUPERVISOR),
                json.dumps(supervisor_config(config, req_r, resp_w, log_fd)),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            pass_fds=[req_r, resp_w, log_fd],
            start_new_session=True,
            env=config["env"],
        )
    for fd in (req_r, resp_w, log_fd):
        os.close(fd)
    return SupervisedChannel(proc, req_w, resp_r)


def start_portable(root: Path, home: Path, log: Path, limits: dict) -> PortableChannel:
    """A worker on the portable path (autograder/sandbox/portable.py): the spare already
    importing torch, or done, takes this sandbox's folder, environment and limits."""
    worker = portable.start_worker(
        PACKAGE_PARENT, clean_env, root, clean_env(home), log, home, limits, walls_enabled=isolation.enabled()
    )
    return PortableChannel(worker)
