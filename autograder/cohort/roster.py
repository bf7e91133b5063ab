"""The cohort's learners for `autograder grade-all`: from a folder of submissions, or from a
roster whose repositories are cloned (or updated) with git first.

Roster: the course's one roster format (autograder/core/roster.py: YAML, or CSV with a header
row; the fields are documented in autograder/core/roster.schema.json). What grade-all uses of
each learner:

    id      the folder name under SUBMISSIONS and the file names in the output; required
    url     the learner's repository: as written, else https://github.com/{repository}.git, the
            repository itself defaulting to {organization}/{repository_prefix}{github}. It must
            be a remote URL with one of the schemes and hosts the instructor allows (grade-all's
            --allow-scheme, default https, and --allow-host, default github.com; `git@host:path`
            counts as ssh); never a local path or file://. A refused URL, or a learner without
            one, is an error of the roster as a whole, like any other
    ref     branch, tag or commit to grade; optional (default: the remote's HEAD)
    name    or first_name and last_name; email: optional, kept in the gradebook

A learner's folder holds either a clone of their repository (with exercises/ inside) or just
the contents of exercises/. Cloning is "fetch + detached checkout" in a folder of its own:
rerunning updates it, and a repository that cannot be fetched (unreachable, private, a ref that
does not exist) is reported for that learner only. git runs with no hooks and checks symlinks out
as plain files (core.symlinks=false), and may use only the allowed schemes (GIT_ALLOW_PROTOCOL,
which also holds for URLs rewritten by the instructor's own `url.<base>.insteadOf`, such as a
token for https). The system and global git configuration stay in force: they hold the
instructor's credentials.

A learner's folder that is itself a symlink is not graded (reported for that learner); below
it, nothing that is a symlink is ever followed (autograder/sandbox/intake.py).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from autograder.cohort.store import BatchError
from autograder.core import roster as schema
from autograder.core.roster import valid_learner_id

GIT_TIMEOUT = 600  # seconds for one fetch: a large history over a slow link
SCHEMES = ("https", "ssh", "http")  # what --allow-scheme may allow
# Every git command: no hooks, symlinks checked out as plain files, no local repositories as
# remotes, no fsmonitor command from a learner's .git/config.
GIT_OPTIONS = (
    "-c",
    "advice.detachedHead=false",
    "-c",
    "core.symlinks=false",
    "-c",
    "core.hooksPath=" + os.devnull,
    "-c",
    "protocol.file.allow=never",
    "-c",
    "core.fsmonitor=false",
)
# git's `transport::address` (remote helpers such as ext::) and scp-like `[user@]host:path`.
_HELPER = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*::")
_SCP = re.compile(r"(?:[^@/:]+@)?(?P<host>\[[^\]/]+\]|[^:/\[\]]+):(?!//).*")
_SSH_ALIASES = {"git+ssh": "ssh", "ssh+git": "ssh"}


class RosterError(BatchError):
    """The roster file cannot be used as a whole (the message names the file and line)."""


@dataclass(frozen=True)
class Allowed:
    """Where the roster's repositories may be: grade-all's --allow-scheme and --allow-host."""

    schemes: tuple[str, ...] = ("https",)
    hosts: tuple[str, ...] = ("github.com",)


def url_origin(url: str) -> tuple[str, str] | None:
    """(scheme, host) of a remote git URL, a scp-like `[user@]host:path` being ssh; None for
    whatever else git would take (a local path, file://, a remote helper such as ext::) and for
    characters no URL needs (spaces, backslashes, control characters)."""
    if not url or _HELPER.match(url) or any(ch.isspace() or ch == "\\" or ord(ch) < 32 for ch in url):
        return None
    if "://" not in url:
        match = _SCP.fullmatch(url)
        return ("ssh", match["host"].strip("[]").lower()) if match else None
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (a port that is not a number raises here)
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    return (_SSH_ALIASES.get(scheme, scheme), parts.hostname) if parts.hostname else None


def refuse_url(url: str, allowed: Allowed, where: str) -> RosterError | None:
    """The error for a roster URL that is not allowed (naming `where`, the URL without its
    credentials, and what is allowed), or None when it is."""
    origin = url_origin(url)
    params = {
        "where": where,
        "url": redact_url(url),
        "schemes": ", ".join(allowed.schemes),
        "hosts": ", ".join(allowed.hosts),
    }
    if origin is None:
        return RosterError("batch.roster_url_local", **params)
    scheme, host = origin
    if scheme not in allowed.schemes:
        return RosterError("batch.roster_url_scheme", scheme=scheme, **params)
    if host not in allowed.hosts:
        return RosterError("batch.roster_url_host", host=host, **params)
    return None


@dataclass
class Learner:
    id: str
    folder: Path  # under SUBMISSIONS: a clone (with exercises/) or an exercises/ folder itself
    first_name: str = ""
    last_name: str = ""
    email: str = ""
    url: str | None = None
    ref: str | None = None
    commit: str | None = None  # after fetching, or for a folder that is a git clone
    problem: tuple[str, str] | None = None  # (kind, detail): "fetch", "folder" or "link"

    @property
    def exercises(self) -> Path:
        """What `autograder grade --submission` gets: exercises/ of a clone, else the folder.
        An exercises/ that is a symlink is returned as it is, never followed nor passed over for
        the folder: grading below `folder` then finds every lesson missing."""
        inner = self.folder / "exercises"
        try:
            mode = os.lstat(inner).st_mode
        except OSError:
            return self.folder
        return inner if stat.S_ISDIR(mode) or stat.S_ISLNK(mode) else self.folder


def read_roster(path: Path, submissions: Path, allowed: Allowed = Allowed()) -> list[Learner]:
    """The roster's learners, each with the URL to fetch; RosterError (naming the file, the line
    and the field) for anything unusable, before anything is fetched."""
    try:
        roster = schema.load(path)
    except schema.RosterError as exc:
        raise RosterError(exc.text.key, **exc.text.params) from None
    if roster.encoding == "csv" and "url" not in roster.csv_fields:
        line, cells = roster.csv_header
        raise RosterError(
            "batch.roster_header", where=f"{path}:{line}", missing="url", found=", ".join(cells)
        )
    learners = []
    for entry in roster.learners:
        where = f"{path}:{entry.line}"
        url = roster.url(entry)
        if not url:
            raise RosterError("batch.roster_no_url", where=where, id=entry.id)
        refusal = refuse_url(url, allowed, where)
        if refusal is not None:
            raise refusal
        first, last = entry.names
        learners.append(
            Learner(entry.id, submissions / entry.id, first, last, entry.email or "", url, entry.ref)
        )
    return learners


def learners_in(submissions: Path) -> tuple[list[Learner], list[str]]:
    """One learner per folder of `submissions` (hidden folders aside); also the names of the
    folders skipped because they cannot be a learner id. A learner's folder that is a symlink
    (to a folder) is not followed: that learner gets an error result (problem "link") naming it."""
    learners, skipped = [], []
    for path in sorted(submissions.iterdir()):
        link = path.is_symlink()
        if path.name.startswith(".") or not path.is_dir():
            continue
        if not valid_learner_id(path.name):
            skipped.append(path.name)
            continue
        learner = Learner(path.name, path)
        if link:
            learner.problem = ("link", str(path))
        elif _is_clone(path):
            learner.commit = _head(path)
        learners.append(learner)
    return learners, skipped


def _head(folder: Path) -> str | None:
    try:
        return _git(folder, "rev-parse", "HEAD", check=False) or None
    except GitError:  # git cannot even run there (an unreadable folder): no commit to record
        return None


def _is_clone(folder: Path) -> bool:
    try:
        return (folder / ".git").exists()
    except OSError:  # an unreadable folder: grading finds no files there
        return False


def fetch_all(learners: list[Learner], jobs: int, allowed: Allowed = Allowed()) -> None:
    """Clone or update every roster learner's repository, `jobs` at a time; a failure is kept
    on the learner (`problem`), never raised."""
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(lambda learner: fetch(learner, allowed), learners))


def fetch(learner: Learner, allowed: Allowed = Allowed()) -> None:
    folder, created = learner.folder, False
    refusal = refuse_url(learner.url or "", allowed, learner.id)
    if refusal is not None:  # read_roster refused it already; a Learner made elsewhere
        learner.problem = (
            "fetch",
            f"{redact_url(learner.url or '')}: not allowed (--allow-scheme, --allow-host)",
        )
        return
    try:
        if folder.is_symlink():
            learner.problem = ("link", str(folder))
            return
        if not folder.exists():
            folder.mkdir(parents=True)
            created = True
            _git(folder, "init", "--quiet")
            _git(folder, "remote", "add", "origin", learner.url)
        elif not (folder / ".git").is_dir():
            learner.problem = ("folder", str(folder))
            return
        else:
            _git(folder, "remote", "set-url", "origin", learner.url)
        # Only the ref asked for (or the remote's HEAD), then a detached checkout of exactly it:
        # the same commands whether the folder is new or a clone from an earlier run.
        _git(
            folder,
            "fetch",
            "--quiet",
            "--no-tags",
            "origin",
            learner.ref or "HEAD",
            protocols=allowed.schemes,
        )
        _git(folder, "checkout", "--quiet", "--force", "--detach", "FETCH_HEAD")
        learner.commit = _git(folder, "rev-parse", "HEAD")
    except GitError as exc:
        learner.problem = ("fetch", redact_url(str(exc)))
        if created:  # a clone that never got a commit: nothing of the learner's to keep
            shutil.rmtree(folder, ignore_errors=True)


class GitError(Exception):
    pass


def git_environment(protocols: tuple[str, ...] = ()) -> dict[str, str]:
    """The environment every git of grade-all runs in: never a prompt for credentials, and
    remotes reachable only over `protocols` (none: it stays local)."""
    return {
        **os.environ,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "true",
        "GIT_SSH_COMMAND": os.environ.get("GIT_SSH_COMMAND", "ssh -o BatchMode=yes"),
        "GIT_ALLOW_PROTOCOL": ":".join(protocols),
    }


def _git(folder: Path, *args: str, check: bool = True, protocols: tuple[str, ...] = ()) -> str:
    """Run git in `folder`; it may reach remotes only over `protocols` (none: it stays local)."""
    env = git_environment(protocols)
    try:
        proc = subprocess.run(
            ["git", *GIT_OPTIONS, *args],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0]}: no answer after {GIT_TIMEOUT} s") from None
    except OSError as exc:
        raise GitError(f"git could not run: {exc}") from None
    if proc.returncode != 0:
        if not check:
            return ""
        # git's own words, its "fatal:" line first (it names the URL or the ref), bounded.
        lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
        lines.sort(key=lambda line: not line.startswith(("fatal:", "error:")))
        raise GitError(" ".join(lines)[:500] or f"git {args[0]} exited with {proc.returncode}")
    return proc.stdout.strip()


def redact_url(text: str) -> str:
    """URLs with their credentials hidden: https://user:token@host -> https://***@host."""
    return re.sub(r"([a-z][a-z0-9+.-]*://)[^/@\s]+@", r"\1***@", text, flags=re.IGNORECASE)


def add_allow_options(parser, scheme_help, host_help, schemes: tuple[str, ...] = SCHEMES) -> None:
    """--allow-scheme and --allow-host, as grade-all and the grading service both take them: what
    a learner's clone URL may use (each repeatable; default https on github.com)."""
    parser.add_argument(
        "--allow-scheme", action="append", choices=schemes, default=None, metavar="SCHEME", help=scheme_help
    )
    parser.add_argument("--allow-host", action="append", default=None, metavar="HOST", help=host_help)
