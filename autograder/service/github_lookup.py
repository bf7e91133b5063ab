"""What the service asks GitHub with its own credential: a repository's name and default branch,
and when a submission was made.

`GitHubLookup(api_url, credential)`:

- `repository(repository_id)`: GET /repositories/{id} (by id: a renamed repository still
  answers) -> RepoInfo (full_name, default_branch, clone_url), or None when it cannot be known.
- `submission_time(ident)`: the one definition of a submission's time (DESIGN.md), from facts
  GitHub records and the learner cannot write:
    1. "run": the workflow run's `created_at` (GET /repos/{owner}/{repo}/actions/runs/{run_id},
       the token's `run_id`), used only when the run's `head_sha` is the token's sha and its
       repository id the token's; otherwise the run tells nothing about this commit;
    2. "push": else the time the branch got that sha (GET /repos/{owner}/{repo}/activity on the
       token's ref, the earliest entry whose `after` is the sha: a push, a force push, a merge);
    3. "token": else the token's `iat`.
  Each is capped at `iat`: the token was issued inside the run, so anything later is impossible
  and `iat` is taken instead (source "token"). Never a commit's date: the learner writes those.

GitHub down, a 404, a 403 or 429 (rate limited), an answer of another shape, no credential at all:
the next step of the rule, logged, never an error: a lookup must not fail a submission. Nothing
here waits for a rate limit to reset (the learner's job is waiting for the reply).
"""

from __future__ import annotations

import logging
import urllib.parse
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from autograder.github.rest import DEFAULT_API_URL, GitHubAPI, GitHubError
from autograder.service.claims import Identity
from autograder.service.credentials import Credential, parse_time
from autograder.service.errors import ServiceRefusal

__all__ = ["GitHubLookup", "RepoInfo", "SubmissionTime"]

LOOKUP_TIMEOUT_S = 5.0  # each call; the learner's job waits for the reply meanwhile
ACTIVITY_PAGE = 100  # one page of the newest activity: a submission's push is among them
# Activity that leaves `after` on the ref; branch_deletion leaves nothing.
MOVES_REF = ("push", "force_push", "branch_creation", "pr_merge", "merge_queue_merge")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RepoInfo:
    id: int
    full_name: str
    default_branch: str
    clone_url: str


@dataclass(frozen=True)
class SubmissionTime:
    at: datetime  # aware, UTC
    source: str  # "run" | "push" | "token"


class GitHubLookup:
    def __init__(
        self,
        api_url: str = DEFAULT_API_URL,
        credential: Credential | None = None,
        *,
        timeout_s: float = LOOKUP_TIMEOUT_S,
    ) -> None:
        self.api_url, self.credential, self.timeout_s = api_url, credential, timeout_s

    def __repr__(self) -> str:
        return f"GitHubLookup({self.api_url!r}, {self.credential!r})"

    def repository(self, repository_id: int) -> RepoInfo | None:
        data = self._get(f"/repositories/{int(repository_id)}")
        if not isinstance(data, dict) or data.get("id") != repository_id:
            return None
        name, branch, clone = data.get("full_name"), data.get("default_branch"), data.get("clone_url")
        if not (isinstance(name, str) and name and isinstance(branch, str) and branch):
            log.warning("GET /repositories/%s: no full_name or default_branch in the answer", repository_id)
            return None
        return RepoInfo(repository_id, name, branch, clone if isinstance(clone, str) else "")

    def submission_time(self, ident: Identity) -> SubmissionTime:
        for source, find in (("run", self._run_created), ("push", self._pushed)):
            at = find(ident)
            if at is not None:
                if at > ident.issued_at:  # after the token that ran inside it: impossible
                    log.warning(
                        "%s time %s of %s@%s is after the token's iat: iat taken",
                        source,
                        at.isoformat(),
                        ident.repository,
                        ident.sha[:12],
                    )
                    return SubmissionTime(ident.issued_at, "token")
                return SubmissionTime(at, source)
        return SubmissionTime(ident.issued_at, "token")

    # -- the rule's steps: None when the step tells nothing

    def _run_created(self, ident: Identity) -> datetime | None:
        run = self._get(f"/repos/{ident.repository}/actions/runs/{ident.run_id}")
        if not isinstance(run, dict):
            return None
        repository = run.get("repository") if isinstance(run.get("repository"), dict) else {}
        head = run.get("head_sha")
        if (
            not isinstance(head, str)
            or head.lower() != ident.sha
            or repository.get("id") != ident.repository_id
        ):
            log.warning(
                "run %s of %s is not the token's commit or repository (head_sha %r, repository id %r): ignored",
                ident.run_id,
                ident.repository,
                head,
                repository.get("id"),
            )
            return None
        return _time(run.get("created_at"), f"run {ident.run_id}")

    def _pushed(self, ident: Identity) -> datetime | None:
        query = urllib.parse.urlencode({"ref": ident.ref, "per_page": ACTIVITY_PAGE})
        entries = self._get(f"/repos/{ident.repository}/activity?{query}")
        if not isinstance(entries, list):
            return None
        times = [
            _time(entry.get("timestamp"), f"activity {entry.get('id')}")
            for entry in entries
            if isinstance(entry, dict)
            and entry.get("activity_type") in MOVES_REF
            and isinstance(entry.get("after"), str)
            and entry["after"].lower() == ident.sha
            and entry.get("ref") in (ident.ref, None)
        ]
        times = [t for t in times if t is not None]
        return min(times) if times else None

    # -- transport

    def _get(self, path: str) -> Any:
        """The decoded answer, or None (logged) for anything but a 200 with JSON."""
        if self.credential is None:
            return None
        try:
            api = GitHubAPI(self.api_url, self.credential.token(), None, timeout=self.timeout_s)
            return api.request("GET", path)
        except ServiceRefusal as refusal:  # no installation token now
            log.warning("GET %s: no credential: %s", path, refusal)
        except GitHubError as exc:
            log.warning("GET %s: %s", path, exc)
        except ValueError as exc:  # a token GitHubAPI refuses (empty): said without the token
            log.warning("GET %s: %s", path, exc)
        return None


def _time(value: object, what: str) -> datetime | None:
    try:
        return parse_time(value)
    except ValueError:
        log.warning("%s: no usable time in %r", what, value)
        return None
