"""git for the service's fetch, in one scratch repository: no configuration but the settings it
is given (through GIT_CONFIG_COUNT/KEY/VALUE in its environment, the credential among them, never
on a command line), as an unprivileged user when the service is root, every command within one
deadline (its process group killed at it) and with RLIMIT_FSIZE on what it writes. What to fetch
and what to make of it is fetch.py's.
"""

from __future__ import annotations

import base64
import os
import pwd
import resource
import signal
import subprocess
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

from autograder.cohort.roster import redact_url
from autograder.service.credentials import Credential
from autograder.service.errors import ServiceRefusal

DETAIL_CHARS = 300  # git's own words kept in a refusal


class GitFailed(Exception):
    def __init__(self, args: tuple[str, ...], returncode: int, stderr: str, timed_out: bool) -> None:
        super().__init__(args[0])
        self.returncode, self.stderr, self.timed_out = returncode, stderr, timed_out
        # git's own words, its fatal/error lines first, one line, bounded, without credentials
        lines = [line.strip() for line in stderr.splitlines() if line.strip()]
        lines.sort(key=lambda line: not line.startswith(("fatal:", "error:")))
        self.detail = redact_url(" ".join(lines))[:DETAIL_CHARS] or f"git {args[0]} exited with {returncode}"


def git_account(user: str | None) -> tuple[int, int] | None:
    """(uid, gid) git runs as: `user` when we are root, else None (git runs as we do)."""
    if user is None or os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        raise ServiceRefusal("service.fetch.no_user", 500, user=user) from None
    if entry.pw_uid == 0:
        raise ServiceRefusal("service.fetch.root_user", 500, user=user)
    return entry.pw_uid, entry.pw_gid


def git_settings(url: str, scheme: str, credential: Credential | None) -> dict[str, str]:
    """git's whole configuration (besides the repository's own, which we made empty)."""
    settings = {
        "core.hooksPath": os.devnull,
        "core.fsmonitor": "false",
        "protocol.allow": "never",
        f"protocol.{scheme}.allow": "always",
        "credential.helper": "",
        "http.followRedirects": "false",  # a redirect elsewhere would carry the header there
        "fetch.unpackLimit": "1",
        "transfer.unpackLimit": "1",
        "fetch.recurseSubmodules": "false",
        "fetch.writeCommitGraph": "false",
        "gc.auto": "0",
        "maintenance.auto": "false",
        "remote.origin.url": url,
    }
    if credential is not None and scheme in ("http", "https"):
        token = credential.token()
        parts = urlsplit(url)
        basic = base64.b64encode(f"x-access-token:{token}".encode()).decode("ascii")
        settings[f"http.{parts.scheme}://{parts.netloc}/.extraHeader"] = f"Authorization: Basic {basic}"
    return settings


class ScratchGit:
    """git commands in one scratch repository, as `account`, within one deadline."""

    def __init__(
        self,
        gitdir: Path,
        account: tuple[int, int] | None,
        limits,  # fetch.FetchLimits: .seconds for the deadline, .bytes for RLIMIT_FSIZE
        scheme: str,
        settings: dict[str, str],
    ) -> None:
        self.gitdir, self.account, self.limits = gitdir, account, limits
        self.deadline = time.monotonic() + limits.seconds
        self.env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(gitdir),
            "XDG_CONFIG_HOME": str(gitdir),
            "LANG": "C",
            "LC_ALL": "C",
            "GIT_DIR": str(gitdir),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_ALLOW_PROTOCOL": scheme,
            "GIT_SSH_COMMAND": "ssh -o BatchMode=yes",
            "GIT_CONFIG_COUNT": str(len(settings)),
        }
        for i, (key, value) in enumerate(settings.items()):
            self.env[f"GIT_CONFIG_KEY_{i}"], self.env[f"GIT_CONFIG_VALUE_{i}"] = key, value

    def start(self, *args: str, stdin: int | None = subprocess.DEVNULL) -> tuple[subprocess.Popen, Watchdog]:
        """git `args` running, and the timer that kills its process group at the deadline."""
        file_bytes = self.limits.bytes

        def limit_writes() -> None:  # in the child, after the user switch: only a setrlimit
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))

        user = {}
        if self.account is not None:
            user = {"user": self.account[0], "group": self.account[1], "extra_groups": []}
        proc = subprocess.Popen(
            ["git", *args],
            cwd=self.gitdir,
            env=self.env,
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=limit_writes,
            **user,
        )
        return proc, Watchdog(proc, self.deadline - time.monotonic())

    def run(self, *args: str) -> str:
        """git `args`' output; GitFailed when it fails or the deadline passes."""
        proc, watchdog = self.start(*args)
        try:
            out, err = proc.communicate()
        finally:
            watchdog.cancel()
        if proc.returncode != 0:
            raise GitFailed(args, proc.returncode, err.decode("utf-8", "replace"), watchdog.fired)
        return out.decode("utf-8", "replace")


class Watchdog:
    """Kills a git process group at the deadline; `fired` says whether it did."""

    def __init__(self, proc: subprocess.Popen, seconds: float) -> None:
        self.fired = False
        self._timer = threading.Timer(max(0.0, seconds), self._fire, (proc,))
        self._timer.daemon = True
        self._timer.start()

    def _fire(self, proc: subprocess.Popen) -> None:
        self.fired = True
        kill_group(proc)

    def cancel(self) -> None:
        self._timer.cancel()


def kill_group(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
