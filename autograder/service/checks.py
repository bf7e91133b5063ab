"""Official verdicts as GitHub check runs on the learner's commit: the one signal of a grade a
learner cannot forge on GitHub (a workflow can write anything to its own log or a commit status;
only the course's GitHub App can create its check runs).

With a GitHub App configured (credentials.py: AUTOGRADER_GITHUB_APP_ID, _KEY, _INSTALLATION; the
App installed on the course's organization with the "Checks: write" permission), `serve` starts
a publisher thread beside the app (`start_publisher(services, say)`; `.stop()` ends it). It
polls the store for results it has not seen (checks_table.py keeps one row per result), and
posts each as a check run (checks_body.py: name, head_sha, conclusion, title and summary in the
course's language, details_url the submission's page) with the App's installation token.

GitHub's content-creation limits bind it ("Rate limits for the REST API": 80 content-creating
requests a minute and 500 an hour per identity). So:

- a backlog keeping only the newest verdict per learner: a verdict not posted yet is dropped
  when a newer verdict of the same learner arrives (by arrival: the higher result id);
- a sliding window of `per_minute` and `per_hour` posts (AUTOGRADER_CHECKS_PER_MINUTE, default
  80; AUTOGRADER_CHECKS_PER_HOUR, default 500), seeded after a restart from the table's sending
  times, oldest pending verdict first;
- a rate-limited answer (403/429 with Retry-After, or x-ratelimit-remaining 0 with
  x-ratelimit-reset, or a secondary limit without headers: a minute) pauses every post until
  then, the verdict kept; a success with x-ratelimit-remaining 0 pauses until the reset;
- a 5xx, GitHub unreachable, or the installation token not to be had pauses every post and
  retries that verdict with a growing delay (2 s, 4 s, ... up to 10 minutes); after
  `max_attempts` (12: about 45 minutes of failures) it is set aside as given up, and tried again
  at the next start of the service unless a newer verdict of the learner was posted meanwhile;
  any other refusal (a 404: the App not installed on that repository, a 422) is recorded as
  failed at once, with GitHub's status and message;
- nothing lives only in memory: a restart finds pending verdicts in the table and resumes. A crash
  between GitHub's answer and the table's update posts that verdict again (GitHub then shows the
  newer run of the same name: harmless).

At 500 an hour this suits a course of a few hundred learners (each learner's newest verdict
reaches GitHub within the hour even at a deadline's peak), or final verdicts after a deadline
(2,000 learners' newest verdicts take four hours). Beyond that the backlog still keeps only the
newest verdict per learner: the check run is late, never wrong, and the service's page and poll
answer stay immediate. Check runs need a GitHub App: with a token instead (AUTOGRADER_SERVICE_TOKEN),
or AUTOGRADER_CHECKS=off, no publisher starts.

The clock and the limits are injected (`Publisher(clock=...)`, `CheckLimits`): the tests drive
`step()` with a fake clock. Logs say result ids, learners' ids and GitHub's status, never a token.
"""

from __future__ import annotations

import email.utils
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import select

from autograder.github.rest import GitHubAPI, GitHubError
from autograder.service import checks_table as table
from autograder.service.checks_body import check_run_body
from autograder.service.errors import ServiceRefusal
from autograder.service.schema import result_from_row, results, submission_from_row, submissions

log = logging.getLogger(__name__)

SWITCH = "AUTOGRADER_CHECKS"  # "off" disables the publisher even with an App configured
PER_MINUTE, PER_HOUR = "AUTOGRADER_CHECKS_PER_MINUTE", "AUTOGRADER_CHECKS_PER_HOUR"
SECONDARY_WAIT_S = 60.0  # GitHub: a secondary limit without Retry-After: wait at least a minute


@dataclass(frozen=True)
class CheckLimits:
    per_minute: int = 80
    per_hour: int = 500
    poll_s: float = 5.0  # how often the store is asked for new verdicts
    max_attempts: int = 12  # 5xx / unreachable answers for one verdict before it is set aside
    backoff_s: float = 2.0  # the first retry delay, doubled each attempt
    backoff_max_s: float = 600.0
    batch: int = 500  # new results read from the store per step
    posts_per_step: int = 50  # so that stop() is heard between posts
    timeout_s: float = 20.0  # one HTTP request to GitHub


def limits_from_env(env: Mapping[str, str]) -> tuple[CheckLimits, str | None]:
    """The limits the environment sets, and the name of a variable that is not a positive
    integer (its default is used then), or None."""
    values: dict[str, int] = {}
    for name, field in ((PER_MINUTE, "per_minute"), (PER_HOUR, "per_hour")):
        raw = (env.get(name) or "").strip()
        if not raw:
            continue
        if not raw.isdigit() or int(raw) < 1:
            return CheckLimits(), name
        values[field] = int(raw)
    return CheckLimits(**values), None


class Window:
    """Sliding windows of one minute and one hour over the times posts were sent."""

    def __init__(self, per_minute: int, per_hour: int, sent: list[float] = ()) -> None:
        self.per_minute, self.per_hour = per_minute, per_hour
        self._sent: deque[float] = deque(sorted(sent))

    def _forget(self, now: float) -> None:
        while self._sent and self._sent[0] <= now - 3600:
            self._sent.popleft()

    def free_at(self, now: float) -> float:
        """The first moment (now or later) at which one more post stays within both limits."""
        self._forget(now)
        at = now
        if len(self._sent) >= self.per_hour:
            at = max(at, self._sent[len(self._sent) - self.per_hour] + 3600)
        last_minute = [t for t in self._sent if t > now - 60]
        if len(last_minute) >= self.per_minute:
            at = max(at, last_minute[len(last_minute) - self.per_minute] + 60)
        return at

    def add(self, now: float) -> None:
        self._sent.append(now)


def _utc(moment: float) -> datetime:
    return datetime.fromtimestamp(moment, timezone.utc)


class Publisher:
    """Posts the store's verdicts as check runs (see the module docstring). `step()` does what
    is due now and says when to come back; `start()` runs it in a thread until `stop()`."""

    def __init__(
        self,
        store,
        course,
        credential,
        api_url: str,
        page_url: Callable[[str], str],
        *,
        limits: CheckLimits = CheckLimits(),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store, self.course, self.credential = store, course, credential
        self.api_url, self.page_url = api_url, page_url
        self.limits, self.clock = limits, clock
        self._seen = 0  # the highest result id recorded in the table by this process
        self._resume_at = 0.0  # no post before (a rate limit GitHub answered)
        self._window: Window | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -------------------------------------------------------------------- one step

    def step(self) -> float:
        """Record new verdicts, post what the limits allow now; the seconds until the next step
        is worth making (at most poll_s)."""
        now = self.clock()
        if self._window is None:
            with table.writing(self.store.engine) as conn:
                table.revive(conn)  # what GitHub failed before the restart is tried again
                sent = table.sent_since(conn, _utc(now - 3600))
            self._window = Window(self.limits.per_minute, self.limits.per_hour, [t.timestamp() for t in sent])
        while True:  # every new result first: the drops happen before anything is posted
            with table.writing(self.store.engine) as conn:
                self._seen, added = table.discover(conn, self._seen, _utc(now), self.limits.batch)
            if added < self.limits.batch:
                break
        for _ in range(self.limits.posts_per_step):
            if self._stop.is_set():
                break
            now = self.clock()
            if now < self._resume_at or self._window.free_at(now) > now:
                break
            with table.reading(self.store.engine) as conn:
                row = table.next_due(conn, _utc(now))
            if row is None:
                break
            self._post(row, now)
        return self._next_in(self.clock())

    def _next_in(self, now: float) -> float:
        wake = now + self.limits.poll_s
        with table.reading(self.store.engine) as conn:
            due = table.next_due(conn, _utc(now))
            retry = table.earliest_retry(conn)
        if due is not None:
            wake = min(wake, max(self._resume_at, self._window.free_at(now)))
        if retry is not None:
            wake = min(wake, max(retry.timestamp(), self._resume_at))
        return max(0.0, wake - now)

    def _post(self, row, now: float) -> None:
        rid = row.result_id
        with table.reading(self.store.engine) as conn:
            found = conn.execute(select(results).where(results.c.id == rid)).first()
            sub_row = (
                conn.execute(select(submissions).where(submissions.c.id == row.submission_id)).first()
                if found is not None
                else None
            )
        if found is None or sub_row is None:
            with table.writing(self.store.engine) as conn:
                table.mark(conn, rid, state="failed", detail="the result is no longer in the store")
            return
        submission, result = submission_from_row(sub_row), result_from_row(found)
        try:
            body = check_run_body(
                submission, result, rid, course=self.course, page=self.page_url(f"/s/{submission.page_key}")
            )
        except Exception as exc:  # noqa: BLE001 - one verdict that cannot be said must not block the rest
            log.exception("check run for result %s could not be rendered", rid)
            with table.writing(self.store.engine) as conn:
                table.mark(conn, rid, state="failed", detail=f"not rendered: {type(exc).__name__}")
            return
        try:
            token = self.credential.token()
        except ServiceRefusal as refusal:  # the App's token could not be had: GitHub is down?
            self._retry(row, now, f"installation token: {refusal.params.get('answer', '?')}")
            return
        self._window.add(now)
        with table.writing(self.store.engine) as conn:
            table.mark(conn, rid, sent_at=_utc(now))
        try:
            api = GitHubAPI(self.api_url, token, None, timeout=self.limits.timeout_s)
            answer = api.exchange("POST", f"/repos/{submission.repository}/check-runs", body)
        except GitHubError as exc:
            self._refused(row, now, exc)
            return
        self._after_success(answer.headers)
        run_id = answer.data.get("id") if isinstance(answer.data, dict) else None
        with table.writing(self.store.engine) as conn:
            table.mark(
                conn, rid, state="posted", posted_at=_utc(self.clock()), check_run_id=run_id, detail=None
            )
        log.info(
            "check run posted for result %s",
            rid,
            extra={"fields": {"result": rid, "learner": row.learner, "conclusion": body["conclusion"]}},
        )

    def _refused(self, row, now: float, exc: GitHubError) -> None:
        wait = self._rate_wait(exc, now)
        if wait is not None:
            self._resume_at = max(self._resume_at, now + wait)
            log.warning(
                "check runs rate-limited by GitHub (%s): none posted for %.0f s",
                exc.status,
                wait,
                extra={"fields": {"status": exc.status, "wait_s": round(wait, 1), "result": row.result_id}},
            )
            return
        if exc.status == 0 or exc.status >= 500:
            self._retry(row, now, f"{exc.status} {exc.message}")
            return
        with table.writing(self.store.engine) as conn:
            table.mark(
                conn,
                row.result_id,
                state="failed",
                attempts=row.attempts + 1,
                detail=f"{exc.status} {exc.message}",
            )
        log.error(
            "check run for result %s refused by GitHub: %s %s",
            row.result_id,
            exc.status,
            exc.message[:200],
            extra={"fields": {"status": exc.status, "message": exc.message[:200], "result": row.result_id}},
        )

    def _retry(self, row, now: float, detail: str) -> None:
        attempts = row.attempts + 1
        limits = self.limits
        with table.writing(self.store.engine) as conn:
            if attempts >= limits.max_attempts:
                table.mark(conn, row.result_id, state="given_up", attempts=attempts, detail=detail)
                log.error(
                    "check run for result %s given up: %s",
                    row.result_id,
                    detail,
                    extra={"fields": {"result": row.result_id, "detail": detail}},
                )
                return
            delay = min(limits.backoff_max_s, limits.backoff_s * 2 ** (attempts - 1))
            table.mark(
                conn,
                row.result_id,
                attempts=attempts,
                not_before=_utc(now) + timedelta(seconds=delay),
                detail=detail,
            )
        # GitHub failing is seldom one request's fault: no post at all until then.
        self._resume_at = max(self._resume_at, now + delay)
        log.warning(
            "check run for result %s to retry in %.0f s: %s",
            row.result_id,
            delay,
            detail,
            extra={
                "fields": {"result": row.result_id, "attempt": attempts, "delay_s": delay, "detail": detail}
            },
        )

    def _rate_wait(self, exc: GitHubError, now: float) -> float | None:
        """Seconds GitHub asks to wait before any further post; None when not a rate limit."""
        if exc.status not in (403, 429):
            return None
        headers = exc.headers
        retry_after = headers.get("retry-after") if headers is not None else None
        if retry_after:
            seconds = _seconds(retry_after, now)
            if seconds is not None:
                return seconds
        if headers is not None and headers.get("x-ratelimit-remaining") == "0":
            reset = _number(headers.get("x-ratelimit-reset"))
            if reset is not None:
                return max(1.0, reset - now + 1)
        if exc.status == 429 or "rate limit" in exc.message.lower():
            return SECONDARY_WAIT_S
        return None

    def _after_success(self, headers: Any) -> None:
        if headers is not None and headers.get("x-ratelimit-remaining") == "0":
            reset = _number(headers.get("x-ratelimit-reset"))
            if reset is not None:
                self._resume_at = max(self._resume_at, reset + 1)

    # -------------------------------------------------------------------- the thread

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                wait = self.step()
            except Exception:  # noqa: BLE001 - the store or GitHub failed this step: the next retries
                log.exception("check-run publisher step failed")
                wait = self.limits.poll_s
            self._stop.wait(min(max(wait, 0.01), self.limits.poll_s))

    def start(self) -> Publisher:
        self._thread = threading.Thread(target=self.run, name="autograder-checks", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def _seconds(retry_after: str, now: float) -> float | None:
    """Retry-After as seconds (GitHub's form) or as an HTTP date."""
    number = _number(retry_after.strip())
    if number is not None:
        return max(0.0, number)
    try:
        return max(0.0, email.utils.parsedate_to_datetime(retry_after).timestamp() - now)
    except (TypeError, ValueError):
        return None


def start_publisher(services, say, *, env: Mapping[str, str] = os.environ) -> Publisher | None:
    """The publisher, started, when a GitHub App is configured and AUTOGRADER_CHECKS is not off;
    None otherwise (said on the command's log when a token stands where an App would be)."""
    from autograder.service.credentials import AppInstallation

    credential = getattr(services.lookup, "credential", None)
    if (env.get(SWITCH) or "").strip().lower() in ("off", "0", "no", "false"):
        return None
    if not isinstance(credential, AppInstallation):
        if credential is not None:
            say.line("service.checks.no_app")
        return None
    limits, bad = limits_from_env(env)
    if bad is not None:
        say.line("service.checks.bad_limit", variable=bad, value=env.get(bad, ""))
    services.store.create()  # the check_runs table, on a store made before this module was imported
    publisher = Publisher(
        services.store,
        services.course,
        credential,
        services.config.api_url,
        services.config.url,
        limits=limits,
    )
    say.line("service.checks.started", per_minute=limits.per_minute, per_hour=limits.per_hour)
    return publisher.start()
