"""The grading history on the learner's `grades` branch: read it, and append one record.

The branch holds:
  history.jsonl   one record per graded commit (history.dump_line); append-only: each new
                  version is exactly the previous bytes plus one line
  progress.json   derived: XP, streaks, per-lesson state (history.Progress.to_json)
  badge.json      derived: a shields.io endpoint badge (history.badge)
  README.md       what the branch is (bilingual, from the catalog)
Anything else a learner puts there is carried over untouched.

In a learner's repository every record is a practice grade (no hidden graders there), and the
branch says so: the badge's label reads "<course> · práctica" and the README has a practice
paragraph (the official grade comes from the instructor's `grade-all`). The branch is "practice"
when the record just appended graded some lesson in mode "practice", or when some earned XP was
only ever earned in practice (history.Progress.practice).

Writing must be safe while the learner's checkout is in use and while other grading runs push
at the same time, so commits are built with plumbing only (hash-object, mktree, commit-tree):
the working tree, index, HEAD and local branches are never touched. The remote branch is
fetched into a private ref (refs/autograder/<branch>) and updated with a plain, non-force push
of a commit whose parent is the fetched tip; when another run moved the branch first, the push
is rejected and the record is rebuilt on the new tip. The first commit is a root commit,
unrelated to the learner's code. This works in a shallow clone (actions/checkout uses
fetch-depth 1): the grades history is fetched whole, and it shares nothing with the code.
"""

from __future__ import annotations

import json
import random
import subprocess
import time
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

from autograder.core import git, i18n
from autograder.core.history import Progress, Record, badge, compute_progress, dump_line, parse_history

HISTORY = "history.jsonl"
PROGRESS = "progress.json"
BADGE = "badge.json"
README = "README.md"
IDENTITY = ("autograder", "autograder@users.noreply.github.com")
# Network operations (fetch, push) may be slow on a busy runner, but must not hang a job.
NETWORK_TIMEOUT = 120
LOCAL_TIMEOUT = git.LOCAL_TIMEOUT


class GitStoreError(RuntimeError):
    """Git could not read or write the history (no such remote, authentication, ...)."""


@dataclass
class AppendResult:
    added: bool  # False: the commit was already recorded, nothing was pushed
    records: list[Record]  # the history after the append, in file order
    progress: Progress  # with the record as `current`: passing_now is about this run
    pushed_commit: str | None  # the new tip of the branch, when added
    problems: list[str]  # malformed history lines, skipped ("line 7: ...")
    attempts: int = 0  # pushes tried (more than one: another run pushed first)


def _git(
    repo: Path,
    *args: str,
    input: bytes | None = None,
    check: bool = True,
    timeout: float = LOCAL_TIMEOUT,
) -> subprocess.CompletedProcess[bytes]:
    """git (autograder.core.git.run) with our commits' identity; its errors are GitStoreError,
    what the workflow's steps catch."""
    try:
        return git.run(repo, *args, input=input, check=check, timeout=timeout, identity=IDENTITY)
    except git.GitError as exc:
        raise GitStoreError(str(exc)) from None


def _private_ref(branch: str) -> str:
    return f"refs/autograder/{branch}"


def commit_time(repo: Path, sha: str) -> datetime:
    """The committer date of a commit, with the committer's UTC offset."""
    # The raw commit object, so that no log/pretty configuration can change the format.
    text = _git(Path(repo), "cat-file", "commit", sha).stdout.decode("utf-8", "replace")
    for line in text.split("\n"):
        if not line:
            break  # end of the headers
        if line.startswith("committer "):
            stamp, offset = line.rsplit(" ", 2)[1:]
            sign = -1 if offset.startswith("-") else 1
            delta = timedelta(hours=int(offset[1:3]), minutes=int(offset[3:5]))
            return datetime.fromtimestamp(int(stamp), timezone(sign * delta))
    raise GitStoreError(f"commit {sha} in {repo} has no committer line")


def _has_remote(repo: Path, remote: str) -> bool:
    return remote in git.output(_git(repo, "remote")).split()


def _fetch(repo: Path, remote: str, branch: str) -> str | None:
    """Fetch the remote branch into the private ref; its tip, or None if there is no branch."""
    proc = _git(repo, "ls-remote", "--heads", remote, f"refs/heads/{branch}", timeout=NETWORK_TIMEOUT)
    lines = [line.split("\t") for line in git.output(proc).splitlines()]
    tips = [sha for sha, ref in lines if ref == f"refs/heads/{branch}"]
    if not tips:
        return None
    # Skip the download when we already hold that commit (e.g. a retry after a lock conflict).
    have = _git(repo, "cat-file", "-e", f"{tips[0]}^{{commit}}", check=False).returncode == 0
    if not have:
        _git(
            repo,
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--recurse-submodules=no",
            remote,
            f"+refs/heads/{branch}:{_private_ref(branch)}",
            timeout=NETWORK_TIMEOUT,
        )
        # The branch may have moved between ls-remote and fetch: the fetched tip is what we hold.
        return git.output(_git(repo, "rev-parse", "--verify", f"{_private_ref(branch)}^{{commit}}"))
    _git(repo, "update-ref", _private_ref(branch), tips[0])
    return tips[0]


def _read_file(repo: Path, tip: str, name: str) -> bytes | None:
    listing = git.output(_git(repo, "ls-tree", tip, "--", name))
    if not listing or listing.split()[1] != "blob":
        return None
    return _git(repo, "cat-file", "blob", f"{tip}:{name}").stdout


def read_history(
    repo: Path, *, remote: str = "origin", branch: str = "grades"
) -> tuple[list[Record], list[str]]:
    """The records on the remote branch and the problems found; empty when there is no such
    remote or branch yet."""
    repo = Path(repo)
    if not _has_remote(repo, remote):
        return [], []
    tip = _fetch(repo, remote, branch)
    if tip is None:
        return [], []
    return parse_history(_read_file(repo, tip, HISTORY) or b"")


def _tree(repo: Path, tip: str | None, files: dict[str, bytes]) -> str:
    """A tree with `files` replaced and every other entry of the tip's tree kept."""
    entries = []
    if tip is not None:
        for entry in _git(repo, "ls-tree", "-z", tip).stdout.split(b"\0"):
            if entry and entry.split(b"\t", 1)[1].decode("utf-8", "surrogateescape") not in files:
                entries.append(entry)
    for name, content in files.items():
        # --no-filters: stored byte for byte (no end-of-line conversion), so the history stays
        # exactly the old bytes plus one line.
        blob = git.output(_git(repo, "hash-object", "-w", "--no-filters", "--stdin", input=content))
        entries.append(f"100644 blob {blob}\t{name}".encode())
    # --missing: the kept entries come from a tree we hold; a submodule entry names a commit
    # that is not ours to have.
    return git.output(_git(repo, "mktree", "-z", "--missing", input=b"\0".join(entries) + b"\0"))


def _readme_section(course: str, lang: str, practice: bool) -> str:
    def t(key: str) -> str:
        return i18n.translate(f"progress.readme_{key}", lang, course=course)

    title = t("title") + (f" ({t('practice_tag')})" if practice else "")
    lines = [f"## {title}", "", t("intro"), ""]
    if practice:
        lines += [f"**{t('practice')}**", ""]
    lines += [
        f"- `{HISTORY}`: {t('history')}",
        f"- `{PROGRESS}`: {t('progress')}",
        f"- `{BADGE}`: {t('badge')}",
    ]
    return "\n".join([*lines, "", t("code"), ""])


def _readme(course: str, practice: bool = False) -> str:
    """README.md of the branch: Spanish, then English."""
    return _readme_section(course, "es", practice) + "\n---\n\n" + _readme_section(course, "en", practice)


def is_practice(records: list[Record], progress: Progress) -> bool:
    """Whether the branch shows a practice grade (see the module docstring): the latest record
    (the one just appended) graded a lesson in practice, or earned XP is practice-only."""
    latest = records[-1] if records else None
    return progress.practice or (
        latest is not None and any(lesson.mode == "practice" for lesson in latest.lessons)
    )


def _badge(progress: Progress, practice: bool, lang: str, course: str) -> dict:
    """history.badge, with a practice history said once, on the label ("<course> · práctica")."""
    if not practice:
        return badge(progress, lang, course)
    data = badge(replace(progress, practice=False), lang, course)
    data["label"] = i18n.translate("progress.badge_label_practice", lang, course=course)
    return data


def _derived(
    records: list[Record], tz: str, lang: str, course: str, now: datetime | None
) -> dict[str, bytes]:
    """progress.json, badge.json and README.md for a history."""
    progress = compute_progress(records, tz, now=now)
    practice = is_practice(records, progress)
    progress_json = {"course": course, "tz": tz, **progress.to_json()}
    return {
        PROGRESS: (json.dumps(progress_json, indent=2, ensure_ascii=False) + "\n").encode(),
        BADGE: (
            json.dumps(_badge(progress, practice, lang, course), indent=2, ensure_ascii=False) + "\n"
        ).encode(),
        README: _readme(course, practice).encode(),
    }


def _as_current(records: list[Record], record: Record, tz: str, now: datetime | None) -> Progress:
    # The caller reports on the grading in progress: passing_now is about this run's record,
    # while progress.json on the branch is derived from the history alone.
    return compute_progress(records, tz, now=now, current=record)


def _push(repo: Path, remote: str, branch: str, commit: str) -> str | None:
    """Push without force; None when it landed, else git's explanation."""
    args = (
        "push",
        "--quiet",
        "--no-verify",
        "--recurse-submodules=no",
        remote,
        f"{commit}:refs/heads/{branch}",
    )
    proc = _git(repo, *args, check=False, timeout=NETWORK_TIMEOUT)
    return None if proc.returncode == 0 else git.failure(repo, args, proc)


def append_record(
    repo: Path,
    record: Record,
    *,
    tz: str,
    lang: str,
    course: str,
    remote: str = "origin",
    branch: str = "grades",
    attempts: int = 8,
    now: datetime | None = None,
) -> AppendResult:
    """Append `record` to the remote history unless its commit is already there, and rewrite
    the derived files; retried on a fresh tip when another run pushed first."""
    repo = Path(repo)
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, got {attempts}")
    i18n.catalog(lang)  # validate before touching the remote
    if not _has_remote(repo, remote):
        remotes = ", ".join(git.output(_git(repo, "remote")).split()) or "none"
        raise GitStoreError(
            f"{repo} has no git remote named {remote!r} (remotes: {remotes}); cannot store the grading history"
        )
    why: str | None = None
    tip = _fetch(repo, remote, branch)
    for attempt in range(1, attempts + 1):
        old = (_read_file(repo, tip, HISTORY) or b"") if tip else b""
        records, problems = parse_history(old)
        if any(r.commit == record.commit for r in records):
            return AppendResult(
                False, records, _as_current(records, record, tz, now), None, problems, attempt - 1
            )

        records = [*records, record]
        files = _derived(records, tz, lang, course, now)
        # Exactly the old bytes plus one line; a last line without its newline gets one first,
        # or our record would be glued to it.
        separator = b"\n" if old and not old.endswith(b"\n") else b""
        files[HISTORY] = old + separator + dump_line(record).encode("utf-8")
        tree = _tree(repo, tip, files)
        message = f"autograder: record {record.commit[:12]} ({record.xp}/{record.xp_max} XP)"
        parents = ["-p", tip] if tip else []
        new = git.output(_git(repo, "commit-tree", "--no-gpg-sign", tree, *parents, "-m", message))

        why = _push(repo, remote, branch, new)
        if why is None:
            _git(repo, "update-ref", _private_ref(branch), new)
            return AppendResult(True, records, _as_current(records, record, tz, now), new, problems, attempt)
        # A run that pushed first makes ours fail as "non-fast-forward" or "fetch first" when it
        # landed before our push started, or as "remote rejected" (the remote's ref lock, an old
        # value that no longer matches) when both pushes overlapped. Rather than parse git's
        # words, look at the branch: if it moved, rebuild on the new tip; if not, the failure
        # was something else (authentication, a protected branch, a hook).
        time.sleep(random.uniform(0.5, 1.0) * min(2.0, 0.05 * 2**attempt))  # jitter: collide less
        moved = _fetch(repo, remote, branch)
        if moved == new:  # it landed although git reported a failure (e.g. a dropped connection)
            return AppendResult(True, records, _as_current(records, record, tz, now), new, problems, attempt)
        if moved == tip:
            raise GitStoreError(why)
        tip = moved
    raise GitStoreError(
        f"could not append to {remote}/{branch} after {attempts} attempts: other runs kept pushing first. Last: {why}"
    )
