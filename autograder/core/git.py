"""git, run the one way the engine runs it in a learner's repository.

Two users: the grading workflow's `grades` branch (autograder/github/grades_branch.py reads and
writes it with plumbing) and the learner's `progress` (autograder/learner/progress.py reads the
branch a clone holds, and fetches it on --fetch). Both run git in a repository the learner
controls, so nothing in its configuration may run code (hooks) or change what is written
(signing, automatic gc), git must never wait for a password, and its messages are in English
for the developer's error text.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

LOCAL_TIMEOUT = 60  # seconds; a network operation passes its own


class GitError(RuntimeError):
    """git could not run, did not finish in time, or (with check) exited with an error."""


def environment(identity: tuple[str, str] | None = None) -> dict[str, str]:
    """This process's environment for git: no prompt, English messages, and `identity`
    (name, email) as author and committer when given."""
    env = dict(os.environ)
    if identity is not None:
        env.update(
            GIT_AUTHOR_NAME=identity[0],
            GIT_AUTHOR_EMAIL=identity[1],
            GIT_COMMITTER_NAME=identity[0],
            GIT_COMMITTER_EMAIL=identity[1],
        )
    env.update(
        GIT_TERMINAL_PROMPT="0",  # fail on missing credentials instead of waiting for a password
        LC_ALL="C",  # git's messages in English, for the developer's error message
    )
    # Dates of our own commits are "now"; a caller's fixed dates must not leak into them. And
    # `-C repo` decides the repository, not a GIT_DIR inherited from, say, a hook.
    for name in ("GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE", "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        env.pop(name, None)
    return env


def run(
    repo: Path,
    *args: str,
    input: bytes | None = None,
    check: bool = True,
    timeout: float = LOCAL_TIMEOUT,
    identity: tuple[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """`git args` in `repo`; raises GitError when git cannot run or times out, and (with
    `check`) when it exits with an error. Without `check` the caller reads returncode."""
    argv = [
        "git",
        "-C",
        str(repo),
        # Nothing in the learner's configuration may run code or change what we write.
        "-c",
        "core.hooksPath=/dev/null",
        "-c",
        "commit.gpgSign=false",
        "-c",
        "gc.auto=0",
        "-c",
        "maintenance.auto=false",
        *args,
    ]
    try:
        proc = subprocess.run(
            argv, input=input, capture_output=True, env=environment(identity), timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        raise GitError(f"git {' '.join(args)} in {repo} did not finish in {timeout} s") from None
    except OSError as exc:
        raise GitError(f"could not run git: {exc}") from None
    if check and proc.returncode != 0:
        raise GitError(failure(repo, args, proc))
    return proc


def failure(repo: Path, args: tuple[str, ...], proc: subprocess.CompletedProcess[bytes]) -> str:
    """What a failed git command said, for the developer."""
    stderr = proc.stderr.decode("utf-8", "replace").strip() or "(no output)"
    return f"git {' '.join(args)} failed in {repo} (exit {proc.returncode}): {stderr}"


def output(proc: subprocess.CompletedProcess[bytes]) -> str:
    """A command's standard output as text, stripped."""
    return proc.stdout.decode("utf-8", "replace").strip()
