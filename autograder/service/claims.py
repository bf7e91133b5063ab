"""Who and what a verified token names (`identity`), and whether the course grades it (`admit`).

`identity(claims)` reads GitHub's claims into an Identity, checking each one's type as GitHub
sends it: ids and counters are JSON strings of decimal digits ("repository_id": "74",
"run_id": "...", "run_attempt": "2"), `sha` 40 hex digits, `iat` a number. A claim missing or
of another shape is refused ("service.claims.missing" / "service.claims.bad_value", 401): the
token is signed, so this means an issuer that is not GitHub's or a change of GitHub's format,
and nothing is guessed.

`admit(ident, roster, default_branch)` decides whether the course grades that push:

- the learner is the roster's entry with the token's `repository_id`, and only that: names
  change (repositories get renamed, transferred, recreated with an old name) and `actor` is
  whoever pushed or re-ran the workflow, so neither identifies anyone. A name that differs from
  the roster's is a warning (the repository was renamed), never a refusal;
- `event_name` is push or workflow_dispatch: a pull_request token carries a merge commit that
  is in no branch of the learner's;
- `ref` is the default branch (refs/heads/<default_branch>): the branch that counts is the one
  GitHub shows first, which the learner cannot make ambiguous by pushing elsewhere.

Each refusal is a ServiceRefusal "service.claims.<reason>" (403, or 503 when the default branch
is not known) whose text says what to do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from autograder.core.results import Text, message
from autograder.core.roster import Learner, Roster, is_repository
from autograder.service.errors import ServiceRefusal
from autograder.service.tokens import shown

__all__ = ["EVENTS", "Admitted", "Identity", "admit", "identity"]

EVENTS = ("push", "workflow_dispatch")
_ID = re.compile(r"[1-9][0-9]{0,18}")  # a positive id that fits a signed 64-bit column
_SHA = re.compile(r"[0-9a-f]{40}")
_MAX_TEXT = 255  # a claim stored in a column: GitHub's names and refs are far shorter


@dataclass(frozen=True)
class Identity:
    """The verified facts of one submission: which repository (by id), which commit, which run."""

    repository_id: int
    repository: str  # OWNER/NAME when the token was issued: a hint, not an identity
    repository_owner: str
    sha: str
    ref: str
    event_name: str
    run_id: int
    run_attempt: int
    issued_at: datetime  # UTC, from iat
    token_id: str  # jti
    actor: str  # display only, never identity


@dataclass(frozen=True)
class Admitted:
    """A submission the course grades: its identity, the roster's learner, and what to tell them
    about it that is not a refusal (the repository was renamed, ...)."""

    identity: Identity
    learner: Learner
    warnings: tuple[Text, ...] = ()


# ------------------------------------------------------------------------------ identity


def _refuse(claim: str, value: Any, rule: str) -> ServiceRefusal:
    return ServiceRefusal(
        "service.claims.bad_value",
        401,
        claim=claim,
        value=shown(value),
        rule=message(f"service.claims.rule_{rule}"),
    )


def _get(claims: dict[str, Any], claim: str) -> Any:
    if claim not in claims:
        raise ServiceRefusal("service.claims.missing", 401, claim=claim)
    return claims[claim]


def _text(claims: dict[str, Any], claim: str, pattern: re.Pattern | None = None, rule: str = "text") -> str:
    value = _get(claims, claim)
    if not isinstance(value, str) or not value or len(value) > _MAX_TEXT or not value.isprintable():
        raise _refuse(claim, value, rule)
    if pattern is not None and not pattern.fullmatch(value):
        raise _refuse(claim, value, rule)
    return value


def _id(claims: dict[str, Any], claim: str) -> int:
    # GitHub sends ids as strings; an int here is not GitHub's format, so it is refused rather
    # than accepted by a different path than the real tokens take.
    return int(_text(claims, claim, _ID, "digits"))


def identity(claims: dict[str, Any]) -> Identity:
    """The Identity of verified `claims`; ServiceRefusal (401) naming the first claim that is
    missing or not of GitHub's shape."""
    repository = _text(claims, "repository", rule="repository")
    if not is_repository(repository):
        raise _refuse("repository", repository, "repository")
    ref = _text(claims, "ref", rule="ref")
    if not ref.startswith("refs/"):
        raise _refuse("ref", ref, "ref")
    iat = _get(claims, "iat")
    if isinstance(iat, bool) or not isinstance(iat, (int, float)) or iat < 0:
        raise _refuse("iat", iat, "time")
    actor = claims.get("actor", "")
    return Identity(
        repository_id=_id(claims, "repository_id"),
        repository=repository,
        repository_owner=_text(claims, "repository_owner"),
        sha=_text(claims, "sha", _SHA, "sha"),
        ref=ref,
        event_name=_text(claims, "event_name"),
        run_id=_id(claims, "run_id"),
        run_attempt=_id(claims, "run_attempt"),
        issued_at=datetime.fromtimestamp(iat, tz=timezone.utc),
        token_id=_text(claims, "jti"),
        actor=shown(actor) if isinstance(actor, str) else "",
    )


# ------------------------------------------------------------------------------ admission


def admit(ident: Identity, roster: Roster, default_branch: str | None) -> Admitted:
    """The roster's learner for `ident`, if the course grades this push; ServiceRefusal otherwise
    (see the module docstring)."""
    learner = next((one for one in roster.learners if one.repository_id == ident.repository_id), None)
    if learner is None:
        raise _not_on_roster(ident, roster)
    if ident.event_name not in EVENTS:
        raise ServiceRefusal("service.claims.event", 403, event=ident.event_name, allowed=", ".join(EVENTS))
    if default_branch is None:
        # Not known (GitHub's API did not answer, or the service's credential cannot read the
        # repository). Grading anyway would let any branch count; refusing with 503 says "try
        # again", and the service could not fetch the commit in that state anyway.
        raise ServiceRefusal("service.claims.branch_unknown", 503, repository=ident.repository)
    if ident.ref != f"refs/heads/{default_branch}":
        raise ServiceRefusal(
            "service.claims.branch", 403, ref=_ref_name(ident.ref), default_branch=default_branch
        )
    warnings: list[Text] = []
    written = roster.repository(learner)
    if written and written.lower() != ident.repository.lower():  # GitHub ignores case in names
        warnings.append(
            message(
                "service.claims.renamed",
                id=learner.id,
                roster_repository=written,
                repository=ident.repository,
                repository_id=ident.repository_id,
            )
        )
    return Admitted(ident, learner, tuple(warnings))


def _not_on_roster(ident: Identity, roster: Roster) -> ServiceRefusal:
    named = next(
        (
            one
            for one in roster.learners
            if one.repository_id is None
            and (roster.repository(one) or "").lower() == ident.repository.lower()
        ),
        None,
    )
    if named is not None:
        # The roster names this repository but has not recorded its id (written by handout):
        # the name alone is not trusted, and the instructor can fix it in one step.
        return ServiceRefusal(
            "service.claims.roster_without_id",
            403,
            repository=ident.repository,
            repository_id=ident.repository_id,
        )
    return ServiceRefusal(
        "service.claims.not_on_roster", 403, repository=ident.repository, repository_id=ident.repository_id
    )


def _ref_name(ref: str) -> str:
    return ref.removeprefix("refs/heads/")
