"""The service's own fetch of a learner's commit: only that commit's regular files, nothing of
the learner's repository run or read as configuration.

`fetch_commit(repository, sha, dest, ...)` returns dest/learner, a folder shaped like the
learner's clone (exercises/ inside) that grade-all's intake then reads (autograder/sandbox/
intake.py: never below a symlink, bounded in size and number); `fetch` does the same and also
says what it skipped. How:

- the URL is `url_template` with the claim's OWNER/NAME in place of {repository}
  (default https://github.com/{repository}.git); its scheme and host must be in `allowed`
  (grade-all's rule, autograder/cohort/roster.py: refuse_url). file:// is taken only when
  `allowed.schemes` names "file" (tests and local mirrors), for an absolute local path;
- git runs in a fresh empty bare repository (dest/git, removed afterwards) with no configuration
  but ours: no system or global file (GIT_CONFIG_NOSYSTEM, GIT_CONFIG_GLOBAL=/dev/null), no
  hooks (core.hooksPath=/dev/null), no credential helper, no redirects, every protocol refused
  but the URL's (protocol.allow=never and GIT_ALLOW_PROTOCOL), no terminal prompt. Settings go
  through GIT_CONFIG_COUNT/KEY/VALUE in git's environment, the credential among them as
  `http.<origin>/.extraHeader: Authorization: Basic base64(x-access-token:TOKEN)` (as
  actions/checkout sends it): never in the URL, never in a command line that `ps` shows;
- `git fetch --depth=1 --no-tags --no-recurse-submodules origin <sha>`: that commit and its tree
  only, kept as one pack (fetch.unpackLimit=1) so that RLIMIT_FSIZE bounds it; then the object
  store's size is checked;
- the tree is listed (`git ls-tree -r -z --long`) and checked before anything is written: at
  most `limits.files` entries and `limits.bytes` of blobs (a small pack may inflate a lot);
  an absolute path or one with `..` or an empty part refuses the commit (git never writes such
  a tree: someone made it by hand);
- only regular files are written (`git cat-file --batch`, by this process, O_EXCL|O_NOFOLLOW):
  symlinks (mode 120000) and submodules (160000) are skipped and counted, and so is anything
  under a folder named .git (grade-all would take such a folder for a clone of its own);
- everything above within `limits.seconds` in all (the process group is killed at the deadline).

Who runs git: when this process is root, the unprivileged `user` (default nobody; setuid and
setgid in the child, no supplementary groups; dest/git is owned by it, dest made traversable);
otherwise this process's own user. git's environment holds the token while it runs, and
/proc/<pid>/environ is readable by processes of the same user: learners' code must not run as
that user outside its walls (the sandbox's PID namespace hides git from it); a user of its own
for git (`user`) is the stronger setup.

Each failure is a ServiceRefusal "service.fetch.<reason>" whose status tells the worker whether
to try again later (5xx: git or GitHub unreachable, the repository not found, the time cap) or
to record the error now (4xx: the commit is not in the repository, too big, too many files, a
forged tree).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from autograder.cohort.roster import Allowed, redact_url, refuse_url, url_origin
from autograder.core.roster import is_repository
from autograder.service.credentials import Credential
from autograder.service.errors import ServiceRefusal
from autograder.service.git_scratch import (
    DETAIL_CHARS,
    GitFailed,
    ScratchGit,
    git_account,
    git_settings,
    kill_group,
)

__all__ = ["DEFAULT_URL_TEMPLATE", "DEFAULT_USER", "FetchLimits", "Fetched", "fetch", "fetch_commit"]

DEFAULT_URL_TEMPLATE = "https://github.com/{repository}.git"
DEFAULT_USER = "nobody"
OUTPUT, GIT_DIR = "learner", "git"  # below dest
MiB = 1024 * 1024

_SHA = re.compile(r"[0-9a-f]{40}")
# What git says (LANG=C), by reason.
_NO_COMMIT = ("not our ref", "couldn't find remote ref", "unadvertised object", "no such remote ref")
_NO_REPOSITORY = (
    "does not appear to be a git repository",
    "repository not found",
    "' not found",
    "error: 404",
)
_DENIED = (
    "authentication failed",
    "could not read username",
    "terminal prompts disabled",
    "error: 401",
    "error: 403",
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FetchLimits:
    seconds: float = 60.0  # the whole fetch: network, listing, writing
    bytes: int = 50 * MiB  # the object store after the fetch, and the files written
    files: int = 5000  # entries of the commit's tree (files, links, submodules)


@dataclass(frozen=True)
class Fetched:
    folder: Path  # the learner's files, shaped like their clone
    files: int  # regular files written
    bytes: int
    links: tuple[str, ...] = ()  # symlinks skipped (paths in the commit)
    submodules: tuple[str, ...] = ()
    other: tuple[str, ...] = ()  # under a .git folder, or a mode git does not make


def fetch_commit(
    repository: str,
    sha: str,
    dest: Path,
    *,
    url_template: str = DEFAULT_URL_TEMPLATE,
    allowed: Allowed = Allowed(),
    credential: Credential | None = None,
    limits: FetchLimits = FetchLimits(),
    user: str | None = DEFAULT_USER,
) -> Path:
    """dest/learner holding `sha`'s regular files (see the module docstring). `user`: whom git
    runs as when this process is root (None: as root itself, for a machine where no other user
    can reach dest)."""
    fetched = fetch(
        repository,
        sha,
        dest,
        url_template=url_template,
        allowed=allowed,
        credential=credential,
        limits=limits,
        user=user,
    )
    if fetched.links or fetched.submodules or fetched.other:
        log.info(
            "%s@%s: %d symlinks, %d submodules, %d other entries skipped",
            repository,
            sha[:12],
            *map(len, (fetched.links, fetched.submodules, fetched.other)),
        )
    return fetched.folder


def fetch(
    repository: str,
    sha: str,
    dest: Path,
    *,
    url_template: str = DEFAULT_URL_TEMPLATE,
    allowed: Allowed = Allowed(),
    credential: Credential | None = None,
    limits: FetchLimits = FetchLimits(),
    user: str | None = DEFAULT_USER,
) -> Fetched:
    """As fetch_commit, and what was written and skipped."""
    if not isinstance(sha, str) or not _SHA.fullmatch(sha):
        raise ServiceRefusal("service.fetch.bad_sha", 422, sha=str(sha)[:80])
    if not isinstance(repository, str) or not is_repository(repository):
        raise ServiceRefusal("service.fetch.bad_repository", 422, repository=str(repository)[:200])
    url, scheme = build_url(url_template, repository, allowed)
    job = _Job(repository, sha, redact_url(url), limits)
    account = git_account(user)
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    gitdir, out, global_config = dest / GIT_DIR, dest / OUTPUT, dest / "gitconfig"
    gitdir.mkdir(mode=0o700)
    out.mkdir(mode=0o755)
    try:
        git = ScratchGit(gitdir, account, limits, scheme, git_settings(url, scheme, credential))
        if account is not None:
            os.chown(gitdir, *account)
            os.chmod(dest, stat.S_IMODE(os.stat(dest).st_mode) | 0o711)  # git must reach dest/git
        if scheme == "file":
            # git's check that a repository is its user's covers the local upload-pack too, and
            # drops our GIT_CONFIG_* settings there: the one exception, for that path only, in a
            # global file of the scratch's own.
            global_config.write_text(f"[safe]\n\tdirectory = {urlsplit(url).path}\n", encoding="utf-8")
            os.chmod(global_config, 0o644)
            git.env["GIT_CONFIG_GLOBAL"] = str(global_config)
        git.run("init", "--quiet", "--bare", "--template=")
        try:
            git.run("fetch", "--quiet", "--depth=1", "--no-tags", "--no-recurse-submodules", "origin", sha)
        except GitFailed as failed:
            if _largest_file(gitdir) >= limits.bytes:  # RLIMIT_FSIZE stopped the pack there
                raise job.too_big() from None
            raise job.fetch_refusal(failed) from None
        if sum(_sizes(gitdir / "objects")) > limits.bytes:
            raise job.too_big()
        if git.run("cat-file", "-t", sha).strip() != "commit":
            raise job.refusal("no_commit", 422)
        return _write(git, _list_tree(git, job), out, job)
    except (GitFailed, OSError) as exc:  # a local step (the repository we just made), or dest
        detail = exc.detail if isinstance(exc, GitFailed) else str(exc)[:DETAIL_CHARS]
        shutil.rmtree(out, ignore_errors=True)
        raise job.refusal("git_failed", 502, detail=detail) from None
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)  # nothing half-written is left to grade
        raise
    finally:
        shutil.rmtree(gitdir, ignore_errors=True)
        global_config.unlink(missing_ok=True)


def build_url(url_template: str, repository: str, allowed: Allowed) -> tuple[str, str]:
    """(the URL to fetch, the protocol git may use) for `repository`, or ServiceRefusal
    ("service.fetch.url_not_allowed", 500: the service's settings, not the learner's doing)."""
    if "{repository}" not in url_template:
        raise ServiceRefusal("service.fetch.url_template", 500, template=redact_url(url_template))
    url = url_template.replace("{repository}", repository)
    refused = ServiceRefusal(
        "service.fetch.url_not_allowed",
        500,
        url=redact_url(url),
        schemes=", ".join(allowed.schemes),
        hosts=", ".join(allowed.hosts),
    )
    parts = urlsplit(url)
    if parts.scheme.lower() == "file":
        path_parts = parts.path.split("/")
        if (
            "file" not in allowed.schemes
            or parts.netloc not in ("", "localhost")
            or not parts.path.startswith("/")
            or ".." in path_parts
            or parts.query
            or parts.fragment
        ):
            raise refused
        return url, "file"
    origin = url_origin(url)
    if origin is None or refuse_url(url, allowed, "fetch") is not None:
        raise refused
    return url, origin[0]


# ------------------------------------------------------------------------------ git


# ------------------------------------------------------------------------------ reasons


@dataclass(frozen=True)
class _Job:
    """One fetch, for the words of its refusals."""

    repository: str
    sha: str
    url: str  # without credentials
    limits: FetchLimits

    def refusal(self, reason: str, status: int, **params) -> ServiceRefusal:
        return ServiceRefusal(
            f"service.fetch.{reason}", status, repository=self.repository, sha=self.sha, **params
        )

    def too_big(self) -> ServiceRefusal:
        return self.refusal("too_big", 413, mib=f"{self.limits.bytes / MiB:g}")

    def timeout(self) -> ServiceRefusal:
        return self.refusal("timeout", 504, seconds=f"{self.limits.seconds:g}")

    def fetch_refusal(self, failed: GitFailed) -> ServiceRefusal:
        """Why `git fetch` failed, from what git said (LANG=C)."""
        said = failed.stderr.lower()
        if failed.timed_out:
            return self.timeout()
        if failed.returncode == -signal.SIGXFSZ:
            return self.too_big()
        if any(words in said for words in _NO_COMMIT):
            return self.refusal("no_commit", 422)
        if any(words in said for words in _DENIED):
            return self.refusal("denied", 502, url=self.url)
        if any(words in said for words in _NO_REPOSITORY):
            return self.refusal("no_repository", 502, url=self.url)
        return self.refusal("git_failed", 502, detail=failed.detail)


# ------------------------------------------------------------------------------ the tree


@dataclass(frozen=True)
class _Entry:
    mode: str
    kind: str
    oid: str
    size: int  # -1 for what is not a blob
    path: bytes


def _list_tree(git: ScratchGit, job: _Job) -> list[_Entry]:
    """Every entry of the commit's tree, checked for number, size and paths before any is
    written. Read as it comes: a tree of a million entries is refused after limits.files + 1."""
    limits = job.limits
    proc, watchdog = git.start("ls-tree", "-r", "-z", "--long", "--full-tree", job.sha)
    entries: list[_Entry] = []
    total = 0
    buffer = b""
    try:
        while True:
            chunk = proc.stdout.read(1 << 16)
            if not chunk:
                break
            buffer += chunk
            *records, buffer = buffer.split(b"\0")
            for record in records:
                entry = _parse(record)
                entries.append(entry)
                if len(entries) > limits.files:
                    raise job.refusal("too_many_files", 422, files=limits.files)
                if entry.kind == "blob" and entry.mode.startswith("100"):
                    total += entry.size
                    if total > limits.bytes:
                        raise job.too_big()
        err = proc.stderr.read()
        proc.wait()
    finally:
        watchdog.cancel()
        kill_group(proc)
        proc.stdout.close()
        proc.stderr.close()
    if watchdog.fired and proc.returncode != 0:
        raise job.timeout()
    if proc.returncode != 0 or buffer:
        raise GitFailed(("ls-tree",), proc.returncode, err.decode("utf-8", "replace"), False)
    return entries


def _parse(record: bytes) -> _Entry:
    """One `ls-tree --long -z` record: "<mode> SP <type> SP <object> SP+ <size> TAB <path>"."""
    head, _, path = record.partition(b"\t")
    fields = head.decode("ascii", "replace").split()
    if len(fields) != 4 or not path:
        raise GitFailed(("ls-tree",), 0, f"unexpected ls-tree output: {record[:120]!r}", False)
    mode, kind, oid, size = fields
    return _Entry(mode, kind, oid, int(size) if size.isdigit() else -1, path)


def _safe_parts(path: bytes) -> list[bytes] | None:
    parts = path.split(b"/")
    if path.startswith(b"/") or any(part in (b"", b".", b"..") for part in parts):
        return None
    return parts


def _write(git: ScratchGit, entries: list[_Entry], out: Path, job: _Job) -> Fetched:
    """Only the regular files, by this process; links, submodules and .git folders counted."""
    links, submodules, other, regular = [], [], [], []
    for entry in entries:
        parts = _safe_parts(entry.path)
        shown = os.fsdecode(entry.path)
        if parts is None:
            raise job.refusal("bad_path", 422, path=shown[:200])
        if entry.mode == "120000":
            links.append(shown)
        elif entry.mode == "160000":
            submodules.append(shown)
        elif (
            any(part.lower() == b".git" for part in parts)
            or entry.kind != "blob"
            or not entry.mode.startswith("100")
        ):
            other.append(shown)
        else:
            regular.append((entry, parts))
    written = 0
    proc, watchdog = git.start("cat-file", "--batch", stdin=subprocess.PIPE)
    try:
        for entry, parts in regular:
            proc.stdin.write(entry.oid.encode("ascii") + b"\n")
            proc.stdin.flush()
            header = proc.stdout.readline().split()
            if len(header) != 3 or header[1] != b"blob" or not header[2].isdigit():
                break  # git killed at the deadline, or an object missing: said below
            size = int(header[2])
            written += size
            if written > job.limits.bytes:
                raise job.too_big()
            _write_file(out, parts, proc.stdout, size, job)
            if proc.stdout.read(1) != b"\n":
                break
        else:
            proc.stdin.close()
            proc.wait()
            return Fetched(out, len(regular), written, tuple(links), tuple(submodules), tuple(other))
    except BrokenPipeError:
        pass
    finally:
        watchdog.cancel()
        kill_group(proc)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            try:
                pipe.close()
            except OSError:
                pass
        proc.wait()
    if watchdog.fired:
        raise job.timeout()
    raise GitFailed(("cat-file",), proc.returncode or 0, "an object of the commit's tree is missing", False)


def create_new_file(out: str | bytes, parts: list) -> int:
    """A new regular file out/<parts> opened for writing (its fd), in folders made here: `out` is
    ours and fresh, so nothing in it is a link, and O_EXCL|O_NOFOLLOW holds that for the file.
    FileExistsError or NotADirectoryError for a name twice, or a file and a folder of one name.
    `parts` are str or bytes, as `out` is (the fetch writes git's bytes, the archive its names)."""
    folder = out
    for part in parts[:-1]:
        folder = os.path.join(folder, part)
        try:
            os.mkdir(folder, 0o755)
        except FileExistsError:
            if not stat.S_ISDIR(os.lstat(folder).st_mode):
                raise
    return os.open(
        os.path.join(folder, parts[-1]),
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o644,
    )


def _write_file(out: Path, parts: list[bytes], source, size: int, job: _Job) -> None:
    """`size` bytes of `source` into out/<parts>, a new regular file (create_new_file)."""
    try:
        fd = create_new_file(os.fsencode(out), parts)
    except (FileExistsError, NotADirectoryError):  # a name twice, or a file and a folder
        raise job.refusal("bad_path", 422, path=os.fsdecode(b"/".join(parts))[:200]) from None
    with os.fdopen(fd, "wb") as target:
        left = size
        while left:
            chunk = source.read(min(left, 1 << 20))
            if not chunk:
                raise BrokenPipeError("cat-file stopped mid-object")
            target.write(chunk)
            left -= len(chunk)


def _sizes(folder: Path) -> list[int]:
    """Sizes of the files below `folder`, links not followed."""
    sizes = []
    for root, _dirs, files in os.walk(folder):
        for name in files:
            try:
                sizes.append(os.lstat(os.path.join(root, name)).st_size)
            except OSError:
                pass
    return sizes


def _largest_file(folder: Path) -> int:
    return max(_sizes(folder), default=0)
