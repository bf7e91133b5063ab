"""Commits two learners' repositories share: cheap and decisive evidence of one repository pushed
from another's history (a template generated per learner gives each learner commits of their own).

Each learner's history is `git rev-list` of the commit grade-all graded (its record's `commit`),
else of the clone's HEAD; a folder that is not a git clone has no history. The hand-out's own
commits are not evidence: those of every `--template` repository given (a local clone of the
template or the release the learners started from), and any commit found in the histories of
at least COMMON_SHARE of the learners with a history (and at least COMMON_MIN of them): what most
of a cohort holds came from the hand-out, not from one learner. Any other commit in two learners'
histories flags the pair.

git runs in folders the learners control: with core/git.py's guards (no hooks, no prompt) plus
grade-all's (autograder/cohort/roster.py: no fsmonitor command, no symlinks, no local remotes),
reading only, and at most MAX_COMMITS commits per history.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from autograder.cohort.roster import GIT_OPTIONS
from autograder.core import git

MAX_COMMITS = 20000
COMMON_SHARE = 0.5
COMMON_MIN = 3
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


@dataclass
class History:
    learner: str
    commits: set[str]
    problem: str | None = None  # why there is no history ("not a clone", git's words)


def history(learner: str, folder: Path, commit: str | None) -> History:
    """The commits reachable from `commit` (else HEAD) in `folder`'s clone."""
    try:
        # A real .git folder only: a symlink or a `gitdir:` file could point at another learner's
        # repository and lend it their commits.
        if folder.is_symlink() or not stat.S_ISDIR(os.lstat(folder / ".git").st_mode):
            return History(learner, set(), "not a clone")
    except FileNotFoundError:
        return History(learner, set(), "not a clone")
    except OSError as exc:
        return History(learner, set(), f"unreadable: {type(exc).__name__}")
    start = commit if commit and _SHA.fullmatch(commit) else "HEAD"
    try:
        proc = git.run(
            folder, *GIT_OPTIONS, "rev-list", f"--max-count={MAX_COMMITS}", start, "--", check=False
        )
    except git.GitError as exc:
        return History(learner, set(), str(exc)[:200])
    if proc.returncode != 0:
        detail = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        return History(learner, set(), (detail[0] if detail else f"git exited {proc.returncode}")[:200])
    shas = {line for line in proc.stdout.decode("ascii", "replace").split() if _SHA.fullmatch(line)}
    return History(learner, shas)


def template_commits(templates: list[Path]) -> tuple[set[str], list[str]]:
    """The commits of every template clone given (all its refs), and the problems met."""
    found: set[str] = set()
    problems = []
    for folder in templates:
        try:
            proc = git.run(
                folder, *GIT_OPTIONS, "rev-list", f"--max-count={MAX_COMMITS}", "--all", check=False
            )
        except git.GitError as exc:
            problems.append(f"{folder}: {exc}")
            continue
        if proc.returncode != 0:
            problems.append(f"{folder}: {proc.stderr.decode('utf-8', 'replace').strip()[:200]}")
            continue
        found |= {line for line in proc.stdout.decode("ascii", "replace").split() if _SHA.fullmatch(line)}
    return found, problems


def shared_commits(
    histories: list[History], hand_out: set[str] = frozenset()
) -> tuple[dict[tuple[str, str], list[str]], set[str]]:
    """{(a, b): the commits both hold, sorted} for every pair sharing one beyond the hand-out's,
    and the commits taken for the hand-out's because most of the cohort holds them."""
    holders: dict[str, list[str]] = {}
    with_history = [h for h in histories if h.commits]
    for found in with_history:
        for sha in found.commits:
            holders.setdefault(sha, []).append(found.learner)
    common_at = max(COMMON_MIN, COMMON_SHARE * len(with_history))
    common = {sha for sha, who in holders.items() if len(who) >= common_at}
    pairs: dict[tuple[str, str], list[str]] = {}
    for sha, who in holders.items():
        if len(who) < 2 or sha in hand_out or sha in common:
            continue
        who = sorted(who)
        for i, a in enumerate(who):
            for b in who[i + 1 :]:
                pairs.setdefault((a, b), []).append(sha)
    return {key: sorted(value) for key, value in pairs.items()}, common
