"""A push recorded in the service's store as the app records one, without a token or GitHub: for
the tests that need submissions in a store and not the way there (the live page's tests)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from autograder.core.roster import Learner
from autograder.service.claims import Admitted, Identity
from autograder.service.store import Store, Submission


@dataclass(frozen=True)
class When:
    """A submission time as autograder/service/github_lookup.py's SubmissionTime has it."""

    at: datetime
    source: str = "run"


def record_push(
    store: Store, learner: str, n: int, *, at: datetime, repository: str | None = None
) -> Submission:
    """Learner `learner`'s push number `n` (its sha is n in hex), made and received at `at`."""
    ident = Identity(
        repository_id=1000 + sum(map(ord, learner)),
        repository=repository or f"curso/{learner}",
        repository_owner="curso",
        sha=f"{n:040x}",
        ref="refs/heads/main",
        event_name="push",
        run_id=5000 + n,
        run_attempt=1,
        issued_at=at,
        token_id=f"jti-{learner}-{n}",
        actor=learner,
    )
    submission, _ = store.record(
        admitted=Admitted(ident, Learner(learner, repository_id=ident.repository_id), ()),
        submitted=When(at),
        received_at=at,
    )
    return submission
