"""The service's SQL store on a real SQLite file, driven from real processes where it matters:
a submission recorded once however often it arrives, a claim handed to one worker only, leases
that expire and are requeued, the worker lost after the last attempt, the newest push (and the
last before a deadline) graded while older queued pushes are superseded, one result each.
Issue 33: a submission claimable only once the service stored its files (archives), fetches
retried then recorded as errors, older pushes superseded before they are fetched, a worker
claiming only its graders' hash, the push lane always before the regrade lane, results kept per
graders' hash (the current one that of the submission's graders), the workers table, and a store
made before all this upgraded in place (by several processes at once).

Leases are driven by the clock the store is given (`now=`), never by sleeping.

Every test that takes `store` runs twice: on SQLite (the default) and on a PostgreSQL server
of the test's own (started once per module, on 127.0.0.1, as `nobody` when root), the same code
on both. Where PostgreSQL's programs or the psycopg driver are not installed, the PostgreSQL
half is reported skipped, saying which is missing."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy.dialects import postgresql, sqlite
from support.project import ROOT
from support.servers import new_database, postgres  # noqa: F401 - a fixture

from autograder.core import i18n
from autograder.core.results import Text
from autograder.core.roster import Learner
from autograder.service.claims import Admitted, Identity
from autograder.service.store import LOST, Store, claim_query

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)


@dataclass(frozen=True)
class When:
    """A submission time as autograder/service/github_lookup.py's SubmissionTime has it."""

    at: datetime
    source: str = "run"


def admitted(repository_id: int, sha: str, jti: str, learner: str = "ana", renamed: bool = False) -> Admitted:
    ident = Identity(
        repository_id=repository_id,
        repository=f"curso/{learner}",
        repository_owner="curso",
        sha=sha,
        ref="refs/heads/main",
        event_name="push",
        run_id=9000 + repository_id,
        run_attempt=1,
        issued_at=T0,
        token_id=jti,
        actor=learner,
    )
    warnings = (Text("service.claims.renamed", {"was": "curso/old"}),) if renamed else ()
    return Admitted(ident, Learner(learner, repository_id=repository_id), warnings)


def sha(n: int) -> str:
    return f"{n:040x}"


def record(
    store: Store,
    repository_id: int,
    n: int,
    at: datetime,
    learner: str = "ana",
    jti: str | None = None,
    *,
    fetched: bool = True,
    graders: str = "h",
):
    """Record a submission as the app does and (`fetched`) store its files as the service's
    fetcher does, to be graded with `graders`: then it is claimable."""
    sub, new = store.record(
        admitted=admitted(repository_id, sha(n), jti or f"jti-{repository_id}-{n}", learner),
        submitted=When(at),
        received_at=at + timedelta(seconds=5),
    )
    if new and fetched:
        assert store.store_archive(sub.id, FILES, graders, now=at + timedelta(seconds=6))
        sub = store.get(sub.id)
    return sub, new


@dataclass(frozen=True)
class Packed:
    data: bytes = b"archive"
    size: int = 7
    sha256: str = "0" * 64


FILES = Packed()


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path) -> Store:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'servicio.db'}"
    else:
        url = new_database(request.getfixturevalue("postgres"))
    made = Store(url)
    made.create()
    yield made
    made.close()


def run_processes(tmp_path: Path, script: str, count: int, *args: str, timeout: float = 120) -> list[str]:
    """Run `script` in `count` real Python processes at once (each waits for the others before
    it starts: a file barrier in `tmp_path`), each with its index and `args` (as `argv`); their
    stdout, in index order."""
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    prelude = textwrap.dedent(
        """
        import os, sys, time
        index, barrier, count = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
        open(os.path.join(barrier, str(index)), "w").close()
        while len(os.listdir(barrier)) < count:
            time.sleep(0.001)
        argv = sys.argv[4:]
        """
    )
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                prelude + textwrap.dedent(script),
                str(i),
                str(barrier),
                str(count),
                *args,
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(count)
    ]
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, err
        outputs.append(out)
    return outputs


# ------------------------------------------------------------------------------ recording


def test_a_submission_is_recorded_once_by_token_and_by_commit(store):
    first, new = record(store, 101, 1, T0)
    assert new and first.state == "queued" and first.attempts == 0
    assert first.learner == "ana" and first.repository_id == 101 and first.sha == sha(1)
    assert first.submitted_at == T0 and first.time_source == "run"
    assert first.received_at == T0 + timedelta(seconds=5)
    assert len(first.page_key) >= 32  # secrets.token_urlsafe(24)

    # The same token again (whatever else it says), then another token for the same commit.
    again, new = record(store, 101, 2, T0 + timedelta(minutes=1), jti="jti-101-1")
    assert not new and again == first
    rerun, new = record(store, 101, 1, T0 + timedelta(minutes=2), jti="another-run")
    assert not new and rerun == first
    assert [s.id for s in store.submissions()] == [first.id]
    assert store.by_key(first.page_key) == first
    assert store.by_key("not-a-key") is None


def test_two_processes_recording_the_same_commit_make_one_submission(store, tmp_path):
    script = """
        from datetime import datetime, timezone
        from types import SimpleNamespace as NS
        from autograder.service.store import Store
        store = Store(argv[0])
        ident = NS(repository_id=7, repository="curso/eva", sha="ab" * 20, ref="refs/heads/main",
                   event_name="push", run_id=index, token_id=f"jti-{index}", actor="eva")
        when = NS(at=datetime(2026, 3, 2, tzinfo=timezone.utc), source="token")
        sub, new = store.record(admitted=NS(identity=ident, learner=NS(id="eva"), warnings=()),
                                submitted=when, received_at=when.at)
        print(sub.id, new)
    """
    outputs = run_processes(tmp_path, script, 4, store.url)
    ids = {line.split()[0] for line in outputs}
    assert len(ids) == 1, outputs
    assert sorted(line.split()[1] for line in outputs) == ["False", "False", "False", "True"]
    assert len(store.submissions()) == 1


def test_warnings_and_times_keep_their_meaning(store):
    sub, _ = store.record(
        admitted=admitted(5, sha(5), "jti-w", renamed=True),
        submitted=When(datetime(2026, 3, 2, 10, 0, tzinfo=timezone(timedelta(hours=1))), "push"),
        received_at=T0,
    )
    assert sub.warnings == [Text("service.claims.renamed", {"was": "curso/old"})]
    assert sub.submitted_at == T0 and sub.submitted_at.tzinfo == timezone.utc  # 10:00+01:00 is 09:00 UTC
    assert sub.time_source == "push"
    with pytest.raises(ValueError, match="naive datetime"):
        store.record(
            admitted=admitted(5, sha(6), "jti-naive"), submitted=When(datetime(2026, 3, 2)), received_at=T0
        )
    assert len(store.submissions()) == 1


def test_count_recent_counts_one_repository_since_a_moment(store):
    for n in range(3):
        record(store, 11, n, T0 + timedelta(minutes=10 * n))
    record(store, 12, 9, T0)
    assert store.count_recent(11, T0) == 3
    assert store.count_recent(11, T0 + timedelta(minutes=15)) == 1
    assert store.count_recent(12, T0) == 1 and store.count_recent(13, T0) == 0
    assert [s.repository_id for s in store.submissions("ana")] == [11, 11, 11, 12]
    assert store.submissions("nadie") == []


# ------------------------------------------------------------------------------ claiming


def test_claim_takes_the_oldest_and_hands_each_submission_once(store):
    a, _ = record(store, 1, 1, T0, learner="ana")
    b, _ = record(store, 2, 2, T0 - timedelta(hours=1), learner="bea")  # older push, recorded later
    first = store.claim("w1", 30, now=T0)
    assert first.id == a.id and first.state == "grading" and first.worker == "w1"
    assert first.lease_expires == T0 + timedelta(seconds=30)
    second = store.claim("w2", 30, now=T0)
    assert second.id == b.id
    assert store.claim("w3", 30, now=T0) is None


def test_two_processes_claiming_at_once_never_get_the_same_submission(store, tmp_path):
    total = 60
    for n in range(total):
        record(store, 1000 + n, n, T0, learner=f"l{n}")
    script = """
        from autograder.service.store import Store
        store = Store(argv[0])
        got = []
        while (sub := store.claim(f"worker-{index}", 60)) is not None:
            got.append(sub.id)
        print(" ".join(map(str, got)))
    """
    outputs = run_processes(tmp_path, script, 3, store.url)
    claimed = [int(i) for out in outputs for i in out.split()]
    assert sorted(claimed) == sorted(s.id for s in store.submissions())  # each once, none left
    assert len(claimed) == len(set(claimed)) == total
    assert store.counts() == {"grading": total}
    workers = {s.worker for s in store.submissions()}
    assert workers <= {"worker-0", "worker-1", "worker-2"}


def test_the_claim_locks_rows_where_the_database_can_and_skips_locked_ones():
    """PostgreSQL: SELECT ... FOR UPDATE SKIP LOCKED (two workers never wait on one row);
    SQLite has no row locks: the IMMEDIATE transaction and the conditional UPDATE do it."""
    on_postgres = str(claim_query().compile(dialect=postgresql.dialect()))
    assert on_postgres.rstrip().endswith("FOR UPDATE SKIP LOCKED"), on_postgres
    assert "FOR UPDATE" not in str(claim_query().compile(dialect=sqlite.dialect()))


# ------------------------------------------------------------------------------ leases


def test_an_expired_lease_is_requeued_and_the_submission_gets_exactly_one_result(store):
    sub, _ = record(store, 3, 1, T0)
    lost = store.claim("w1", 30, now=T0)
    assert store.heartbeat(sub.id, "w1", 30, now=T0 + timedelta(seconds=20))  # renewed to 50 s
    assert store.reap(now=T0 + timedelta(seconds=40)) == []
    assert store.get(sub.id).state == "grading"

    assert store.reap(now=T0 + timedelta(seconds=51)) == [sub.id]
    requeued = store.get(sub.id)
    assert requeued.state == "queued" and requeued.attempts == 1 and requeued.worker is None
    assert not store.heartbeat(sub.id, "w1", 30)  # the lost worker holds nothing any more

    again = store.claim("w2", 30, now=T0 + timedelta(seconds=52))
    assert again.id == lost.id and again.worker == "w2" and again.attempts == 1
    assert store.complete(sub.id, "w2", status="done", result_json='{"ok": 2}', graders_hash="h", seed=7)
    # The first worker comes back with its own result: ignored.
    assert not store.complete(sub.id, "w1", status="done", result_json='{"ok": 1}', graders_hash="h", seed=1)
    result = store.result(sub.id)
    assert (result.status, result.result_json, result.seed, result.worker) == ("done", '{"ok": 2}', 7, "w2")
    assert store.get(sub.id).state == "done" and store.get(sub.id).lease_expires is None
    assert store.reap(now=T0 + timedelta(days=1)) == []


def test_a_worker_thought_lost_that_comes_back_first_records_the_one_result(store):
    sub, _ = record(store, 4, 1, T0)
    store.claim("w1", 30, now=T0)
    store.reap(now=T0 + timedelta(seconds=31))  # requeued, not yet claimed again
    assert store.complete(sub.id, "w1", status="done", result_json="{}", graders_hash="h")
    assert store.claim("w2", 30) is None  # nothing left to grade
    assert not store.complete(sub.id, "w2", status="done", result_json="{}", graders_hash="h")
    assert store.result(sub.id).worker == "w1"


def test_completions_racing_from_several_processes_record_one_result(store, tmp_path):
    sub, _ = record(store, 5, 1, T0)
    store.claim("w0", 30)
    script = """
        from autograder.service.store import Store
        store = Store(argv[0])
        print(store.complete(int(argv[1]), f"w{index}", status="done",
                             result_json='{"by": %d}' % index, graders_hash="h"))
    """
    outputs = run_processes(tmp_path, script, 4, store.url, str(sub.id))
    assert sorted(out.strip() for out in outputs) == ["False", "False", "False", "True"]
    winner = outputs.index("True\n")
    assert json.loads(store.result(sub.id).result_json) == {"by": winner}


def test_after_the_last_attempt_the_submission_is_an_error_the_instructor_sees(store):
    sub, _ = record(store, 6, 1, T0)
    now = T0
    for attempt in range(3):
        claimed = store.claim(f"w{attempt}", 10, now=now)
        assert claimed.id == sub.id and claimed.attempts == attempt
        now += timedelta(seconds=11)
        assert store.reap(now=now, max_attempts=3, graders_hash="g") == [sub.id]
    final = store.get(sub.id)
    assert final.state == "error" and final.attempts == 3
    result = store.result(sub.id)
    assert result.status == "error" and result.error == LOST and result.graders_hash == "h"  # its graders
    assert json.loads(result.result_json) == {"error": {"key": LOST, "params": {"attempts": 3}}}
    assert store.claim("w9", 10, now=now) is None
    assert not store.complete(sub.id, "w2", status="done", result_json="{}", graders_hash="g")
    for lang in i18n.LANGUAGES:  # the reason reads as a sentence, its count filled
        text = i18n.translate(LOST, lang, attempts=3)
        assert "3" in text and "{" not in text


def test_the_reason_a_worker_gave_back_is_the_error_after_the_last_attempt(store):
    sub, _ = record(store, 7, 1, T0)
    reason = Text("service.worker.fetch_failed", {"reason": Text("service.fetch.unavailable", {})})
    now = T0
    for attempt in range(2):
        store.claim("w", 60, now=now)
        assert store.release(sub.id, "w", reason, now=now)
        assert not store.release(sub.id, "someone-else", reason, now=now)
        now += timedelta(seconds=1)
        assert store.reap(now=now, max_attempts=2, lost_result=lambda s, why: f"lost {s.id} {why.key}") == [
            sub.id
        ]
    result = store.result(sub.id)
    assert result.error == "service.worker.fetch_failed"
    assert result.result_json == f"lost {sub.id} service.worker.fetch_failed"


# ------------------------------------------------------------------------------ superseding


def test_the_newest_push_is_graded_and_older_queued_ones_are_superseded(store):
    old, _ = record(store, 8, 1, T0)
    other, _ = record(store, 9, 1, T0 + timedelta(minutes=1), learner="bea")
    middle, _ = record(store, 8, 2, T0 + timedelta(minutes=2))
    newest, _ = record(store, 8, 3, T0 + timedelta(minutes=3))
    order = [store.claim("w", 30).id for _ in range(2)]
    assert order == [other.id, newest.id]  # the oldest eligible first; ana's newest in its place
    assert store.claim("w", 30) is None
    assert store.get(old.id).state == store.get(middle.id).state == "superseded"
    assert store.result(old.id) is None  # recorded, never graded


def test_the_last_push_before_a_deadline_is_graded_too(store):
    deadline = T0 + timedelta(hours=1)
    early, _ = record(store, 10, 1, T0)
    last_before, _ = record(store, 10, 2, deadline - timedelta(minutes=1))
    late, _ = record(store, 10, 3, deadline + timedelta(minutes=1))
    newest, _ = record(store, 10, 4, deadline + timedelta(minutes=2))
    claimed = [store.claim("w", 30, boundaries=[deadline]).id for _ in range(2)]
    assert claimed == [last_before.id, newest.id]
    assert store.claim("w", 30, boundaries=[deadline]) is None
    assert store.get(early.id).state == store.get(late.id).state == "superseded"


def test_a_late_arriving_older_push_is_superseded_by_a_newer_one_already_graded(store):
    newer, _ = record(store, 20, 2, T0 + timedelta(minutes=5))
    store.claim("w", 30)
    store.complete(newer.id, "w", status="done", result_json="{}", graders_hash="h")
    older, _ = record(store, 20, 1, T0)  # its request arrived after the newer push's
    assert store.claim("w", 30) is None
    assert store.get(older.id).state == "superseded"


def test_a_superseded_commit_pushed_again_as_the_newest_is_queued_again(store):
    first, _ = record(store, 30, 1, T0)
    second, _ = record(store, 30, 2, T0 + timedelta(minutes=1))
    assert store.claim("w", 30).id == second.id
    store.complete(second.id, "w", status="done", result_json="{}", graders_hash="h")
    assert store.get(first.id).state == "superseded"
    # A force-push back to the first commit: the repository's newest push is that commit again.
    back, new = store.record(
        admitted=admitted(30, sha(1), "jti-back"),
        submitted=When(T0 + timedelta(minutes=2)),
        received_at=T0 + timedelta(minutes=2),
    )
    assert not new and back.id == first.id and back.state == "queued"
    assert back.submitted_at == T0 + timedelta(minutes=2)
    assert store.claim("w", 30).id == first.id


def test_a_worker_that_cannot_grade_at_all_requeues_without_spending_an_attempt(store):
    sub, _ = record(store, 40, 1, T0)
    store.claim("broken", 30, now=T0)
    assert not store.requeue(sub.id, "someone-else")
    assert store.requeue(sub.id, "broken")
    back = store.get(sub.id)
    assert (
        back.state == "queued" and back.attempts == 0 and back.worker is None and back.lease_expires is None
    )
    assert store.claim("healthy", 30).id == sub.id


def test_a_reason_holding_another_reason_is_stored_as_words_to_translate_not_as_repr():
    """The worker's reason for a fetch that failed holds the fetch's own refusal: stored and read
    back, both are catalog messages, said in the reader's language."""
    from autograder.core import i18n
    from autograder.core.results import message
    from autograder.service.schema import text_from_json, text_to_json

    inner = message("service.fetch.git_failed", sha="a" * 40, repository="curso/ana", detail="boom")
    reason = message("service.worker.fetch_failed", reason=inner, where={"es": "aquí", "en": "here"})
    stored = text_to_json(reason)
    assert "Text(" not in stored
    assert text_from_json(stored) == reason
    for lang in ("es", "en"):
        said = i18n.translate(reason.key, lang, **text_from_json(stored).params)
        assert "Text(" not in said and "boom" in said and "curso/ana" in said


# ------------------------------------------------------------------------------ issue 33: archives, graders, lanes


def test_a_submission_is_claimable_only_once_its_files_are_stored(store):
    sub, _ = record(store, 20, 1, T0, fetched=False)
    assert sub.state == "queued" and sub.fetched_at is None and store.archive(sub.id) is None
    assert store.claim("w", 30, now=T0) is None  # nothing to grade without the files
    held = store.claim_fetch("f", 60, now=T0)
    assert held.id == sub.id and held.worker == "f"
    assert store.claim_fetch("g", 60, now=T0) is None  # held by the first fetcher's lease
    assert store.store_archive(sub.id, Packed(b"tar", 3, "a" * 64), "hash-1", now=T0)
    assert store.archive(sub.id) == (b"tar", "a" * 64)
    ready = store.get(sub.id)
    assert ready.graders_hash == "hash-1" and ready.fetched_at is not None and ready.worker is None
    assert store.claim("w", 30, graders_hash="hash-2", now=T0) is None  # other graders: refused
    assert store.claimable() == {"hash-1": 1}
    assert store.claim("w", 30, graders_hash="hash-1", now=T0).id == sub.id


def test_a_fetch_lease_renewed_while_fetching_holds_and_one_not_renewed_lapses_soon(store):
    """The archiver renews its fetch lease while the fetch runs (Store.renew_fetch), so the lease
    can be short: a service killed mid-fetch leaves the submission to the next fetcher a lease
    later, not after the fetch's whole time cap."""
    sub, _ = record(store, 21, 1, T0, fetched=False)
    assert store.claim_fetch("f", 5, now=T0).id == sub.id
    assert store.renew_fetch(sub.id, "f", 5, now=T0 + timedelta(seconds=4))
    assert store.claim_fetch("g", 5, now=T0 + timedelta(seconds=8)) is None  # renewed: still f's
    assert not store.renew_fetch(sub.id, "g", 5, now=T0 + timedelta(seconds=8))  # not g's to renew
    # f dies here: no renewal, and a lease later another fetcher takes it.
    assert store.claim_fetch("g", 5, now=T0 + timedelta(seconds=10)).id == sub.id
    assert not store.renew_fetch(sub.id, "f", 5, now=T0 + timedelta(seconds=10))  # lost, not fought for
    assert store.store_archive(sub.id, Packed(b"tar", 3, "a" * 64), "hash-1", now=T0 + timedelta(seconds=11))
    assert not store.renew_fetch(sub.id, "g", 5, now=T0 + timedelta(seconds=12))  # stored: nothing to hold


def test_a_fetch_that_may_work_later_is_retried_then_is_the_error(store):
    sub, _ = record(store, 21, 1, T0, fetched=False)
    reason = Text("service.worker.fetch_failed", {"reason": "down"})
    now = T0
    for attempt in range(2):
        assert store.claim_fetch("f", 60, now=now).id == sub.id
        assert not store.fetch_failed(
            sub.id,
            "f",
            reason,
            retry_s=5,
            max_attempts=3,
            error_result=lambda s, r: "{}",
            graders_hash="g",
            now=now,
        )
        assert store.claim_fetch("f", 60, now=now + timedelta(seconds=4)) is None  # not before the pause
        now += timedelta(seconds=6)
    assert store.claim_fetch("f", 60, now=now).id == sub.id
    assert store.fetch_failed(
        sub.id,
        "f",
        reason,
        retry_s=5,
        max_attempts=3,
        error_result=lambda s, r: '{"e": 1}',
        graders_hash="g",
        now=now,
    )
    final, result = store.get(sub.id), store.result(sub.id)
    assert final.state == "error" and final.attempts == 3
    assert (result.status, result.error, result.result_json) == (
        "error",
        "service.worker.fetch_failed",
        '{"e": 1}',
    )


def test_an_older_push_not_yet_fetched_is_superseded_without_fetching(store):
    old, _ = record(store, 22, 1, T0, fetched=False)
    new, _ = record(store, 22, 2, T0 + timedelta(minutes=1), fetched=False)
    assert store.claim_fetch("f", 60, now=T0 + timedelta(minutes=2)).id == new.id
    assert store.get(old.id).state == "superseded" and store.archive(old.id) is None
    # Fetched while an older one waited fetched: the older is superseded as the newer is stored.
    a, _ = record(store, 23, 1, T0)
    b, _ = record(store, 23, 2, T0 + timedelta(minutes=1), fetched=False)
    store.claim_fetch("f", 60, now=T0 + timedelta(minutes=2))
    assert store.store_archive(b.id, FILES, "h", boundaries=(), now=T0 + timedelta(minutes=2))
    assert store.get(a.id).state == "superseded" and store.get(b.id).state == "queued"


def test_the_push_lane_is_always_claimed_before_the_regrade_lane(store):
    graded, _ = record(store, 24, 1, T0)
    store.claim("w", 30, now=T0)
    assert store.complete(graded.id, "w", status="done", result_json='{"v": 1}', graders_hash="h")
    assert store.queue_regrade("h2") == 1
    assert store.get(graded.id).lane == "regrade" and store.get(graded.id).state == "queued"
    push, _ = record(store, 25, 1, T0 + timedelta(minutes=5), graders="h2")  # queued after the regrade
    assert store.claim("w", 30, graders_hash="h2", now=T0).id == push.id
    assert store.claim("w", 30, graders_hash="h2", now=T0).id == graded.id


def test_a_regrade_keeps_the_old_result_beside_the_new_and_the_current_is_the_new(store):
    sub, _ = record(store, 26, 1, T0)
    store.claim("w", 30, now=T0)
    store.complete(sub.id, "w", status="done", result_json='{"score": 1}', graders_hash="h", seed=1)
    assert store.graded_by_others("h") == 0 and store.graded_by_others("h2") == 1
    assert store.queue_regrade("h2", learners=["nadie"]) == 0  # another learner's only
    assert store.queue_regrade("h2", learners=["ana"]) == 1
    assert store.queue_regrade("h2") == 0  # already queued for those graders: not twice
    assert store.current_result(sub.id).result_json == '{"score": 1}'  # the newest until graded again
    claimed = store.claim("w2", 30, graders_hash="h2", now=T0)
    assert claimed.id == sub.id and claimed.lane == "regrade"
    assert store.complete(sub.id, "w2", status="done", result_json='{"score": 2}', graders_hash="h2", seed=2)
    every = store.results_of(sub.id)
    assert [(r.graders_hash, r.result_json, r.lane) for r in every] == [
        ("h", '{"score": 1}', "push"),
        ("h2", '{"score": 2}', "regrade"),
    ]
    assert store.result(sub.id) == store.current_result(sub.id) == every[1]
    assert store.graded_by_others("h2") == 0 and store.queue_regrade("h2") == 0
    # Back to the first graders (a change undone): their result is current again, nothing regraded.
    assert store.queue_regrade("h") == 0


def test_the_waiting_submissions_take_the_graders_the_service_starts_with(store):
    waiting, _ = record(store, 27, 1, T0, graders="old")
    done, _ = record(store, 28, 1, T0, graders="old")
    store.claim("w", 30, graders_hash="old", now=T0)  # the older id: `waiting`
    store.complete(waiting.id, "w", status="done", result_json="{}", graders_hash="old")
    assert store.restamp_waiting("new") == 1
    assert store.get(done.id).graders_hash == "new" and store.get(waiting.id).graders_hash == "old"


def test_the_workers_table_says_where_each_worker_stands(store):
    for state, current in (("running", None), ("refused", None), ("running", 7)):
        store.worker_seen(
            "m1:10",
            host="m1",
            pid=10,
            graders_hash="h",
            threads=2,
            started_at=T0,
            lease_s=3,
            state=state,
            detail="x" if state == "refused" else "",
            current=current,
            now=T0 + timedelta(seconds=1),
        )
    store.worker_seen(
        "m2:11",
        host="m2",
        pid=11,
        graders_hash="h",
        threads=1,
        started_at=T0,
        lease_s=3,
        state="stopped",
        now=T0,
    )
    rows = store.workers()
    assert [(w.name, w.state, w.current, w.threads) for w in rows] == [
        ("m1:10", "running", 7, 2),
        ("m2:11", "stopped", None, 1),
    ]
    assert not rows[0].gone(T0 + timedelta(seconds=9)) and rows[0].gone(T0 + timedelta(seconds=11))


# ------------------------------------------------------------------------------ a store from before issue 33


def old_store(url: str) -> None:
    """The tables as they were before issue 33 (one result per submission, no lanes), with a
    graded submission and a queued one."""
    from sqlalchemy import BigInteger, Column, ForeignKey, Integer, MetaData, String, Table, Text
    from sqlalchemy import insert as sql_insert

    from autograder.service.schema import UTCDateTime, make_engine

    old = MetaData()
    ident = BigInteger().with_variant(Integer(), "sqlite")
    subs = Table(
        "submissions",
        old,
        Column("id", ident, primary_key=True, autoincrement=True),
        *(
            Column(name, String(255), nullable=False)
            for name in ("page_key", "learner", "repository", "sha", "ref")
        ),
        *(
            Column(name, String(255), nullable=False)
            for name in ("event_name", "actor", "token_id", "time_source")
        ),
        Column("repository_id", BigInteger, nullable=False),
        Column("run_id", BigInteger, nullable=False),
        Column("submitted_at", UTCDateTime, nullable=False),
        Column("received_at", UTCDateTime, nullable=False),
        Column("state", String(16), nullable=False),
        Column("attempts", Integer, nullable=False, default=0),
        Column("worker", String(255)),
        Column("lease_expires", UTCDateTime),
        Column("heartbeat_at", UTCDateTime),
        Column("last_error", Text),
        Column("warnings_json", Text, nullable=False, default="[]"),
    )
    res = Table(
        "results",
        old,
        Column("id", ident, primary_key=True, autoincrement=True),
        Column("submission_id", ident, ForeignKey("submissions.id"), nullable=False, unique=True),
        Column("status", String(16), nullable=False),
        Column("result_json", Text, nullable=False),
        Column("graders_hash", String(64), nullable=False),
        Column("seed", BigInteger),
        Column("error", String(100)),
        Column("worker", String(255), nullable=False, default=""),
        Column("created_at", UTCDateTime, nullable=False),
    )
    engine = make_engine(url)
    old.create_all(engine)
    with engine.begin() as conn:
        for n, state in ((1, "done"), (2, "queued")):
            conn.execute(
                sql_insert(subs).values(
                    page_key=f"k{n}",
                    learner="ana",
                    repository="curso/ana",
                    sha=sha(n),
                    ref="refs/heads/main",
                    event_name="push",
                    actor="ana",
                    token_id=f"t{n}",
                    time_source="run",
                    repository_id=40 + n,
                    run_id=n,
                    submitted_at=T0,
                    received_at=T0,
                    state=state,
                )
            )
        conn.execute(
            sql_insert(res).values(
                submission_id=1,
                status="done",
                result_json='{"score": 1}',
                graders_hash="old",
                worker="w",
                created_at=T0,
            )
        )
    engine.dispose()


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_a_store_from_before_the_lanes_is_upgraded_in_place_and_keeps_its_results(
    database, tmp_path, request
):
    url = (
        f"sqlite:///{tmp_path / 'old.db'}"
        if database == "sqlite"
        else new_database(request.getfixturevalue("postgres"))
    )
    old_store(url)
    # The service and its workers open it at once: one upgrades, the others find it done.
    script = """
        from autograder.service.store import Store
        store = Store(argv[0])
        store.create()
        print(store.result(1).graders_hash)
    """
    assert run_processes(tmp_path, script, 3, url) == ["old\n"] * 3
    upgraded = Store(url)
    try:
        upgraded.create()  # idempotent
        graded, waiting = upgraded.get(1), upgraded.get(2)
        assert (graded.lane, graded.graders_hash, graded.fetched_at) == ("push", "old", None)
        assert waiting.state == "queued" and waiting.fetched_at is None  # the fetcher fetches it
        assert upgraded.result(1).result_json == '{"score": 1}' and upgraded.result(1).lane == "push"
        # Results per graders' hash now: a regrade adds a row beside the old one.
        assert upgraded.queue_regrade("new") == 1
        assert upgraded.claim_fetch("f", 60, now=T0).id == 1  # no archive: fetched again first
        assert upgraded.store_archive(1, FILES, "new", now=T0)
        assert upgraded.claim("w", 30, graders_hash="new", now=T0).id == 1
        assert upgraded.complete(1, "w", status="done", result_json='{"score": 2}', graders_hash="new")
        assert [r.graders_hash for r in upgraded.results_of(1)] == ["old", "new"]
    finally:
        upgraded.close()
