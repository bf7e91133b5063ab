"""Running the suite's commands as an unprivileged user, for real: the user (made with useradd
once), a fixture that provides it or skips with the reason, and the command line that runs a
program as that user with this machine's Python reachable."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from support.project import ROOT

TEST_USER = "agisolearner"


def expose_python_to(user: str, command: list[str]) -> list[str]:
    """`command` run as `user`, in a mount namespace where this machine's Python (under /root,
    which other users cannot enter) is reachable at its own path, as it is on a machine where
    Python is installed for everyone. Nothing else of /root is."""
    prefix = Path(sys.base_prefix).resolve()
    hidden = next(
        (
            str(p)
            for p in [*reversed(prefix.parents), prefix]
            if p != Path("/") and not os.stat(p).st_mode & 0o001
        ),
        None,
    )
    env = f"HOME={Path('/home') / user}"
    if hidden is None:
        return ["runuser", "-u", user, "--", "env", env, *command]
    script = textwrap.dedent(f"""\
        set -e
        stage=$(mktemp -d /tmp/agstage.XXXXXX)
        mount --bind {prefix} "$stage"
        mount -t tmpfs -o mode=0755 tmpfs {hidden}
        mkdir -p {prefix}
        mount --move "$stage" {prefix}
        rmdir "$stage"
        exec runuser -u {user} -- env {env} "$@"
        """)
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *command]


def user_namespaces_for(user: str) -> bool:
    """Whether `user` may make a user and a PID namespace here (and fork into them)."""
    probe = subprocess.run(
        expose_python_to(
            user,
            [
                sys.executable,
                "-c",
                "from autograder.sandbox.worker import confine; print(confine.user_namespaces_work())",
            ],
        ),
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return probe.stdout.strip() == "True"


@pytest.fixture(scope="module")
def plain_user():
    if os.geteuid() != 0:
        pytest.skip("creating the test's unprivileged user needs root (this run is already unprivileged)")
    if not (shutil.which("useradd") and shutil.which("runuser") and shutil.which("unshare")):
        pytest.skip("useradd, runuser or unshare is missing")
    try:
        pwd.getpwnam(TEST_USER)
    except KeyError:
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", TEST_USER], check=True)
    probe = subprocess.run(
        expose_python_to(TEST_USER, [sys.executable, "-c", "import torch, autograder"]),
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        pytest.skip(f"Python cannot be made reachable for {TEST_USER}: {probe.stderr[-300:]}")
    return TEST_USER
