"""The service's Prometheus metrics, read from the store at scrape time (ops.py serves them at
/metrics, behind a bearer token). Nothing here is counted in memory by the app: every number
comes from the SQL store, so each replica of the service answers the same, a restart loses
nothing, and the workers (other processes, other machines) need no metrics endpoint of their own.

    autograder_submissions{state,lane}            gauge: submissions by state (queued, grading,
                                                  done, ...) and lane (push, regrade): the queue's
                                                  depth is state="queued"
    autograder_oldest_queued_seconds               gauge: how long the oldest queued submission
                                                  has waited (0 when none)
    autograder_results_total{status,lane}          counter: results recorded (done / error);
                                                  grades per minute = rate(...[5m]) * 60
    autograder_grading_latency_seconds             histogram: received -> result recorded, for
                                                  the push lane (a regrade's wait is the
                                                  instructor's choice, not latency)
    autograder_workers{state}                      gauge: worker processes by state (running,
                                                  stopped, refused) and "gone" (not seen for
                                                  3 leases); only when the store has the
                                                  workers table
    autograder_check_runs{state}                   gauge: verdicts for GitHub check runs by
                                                  state (pending, posted, dropped, failed)

No label names a learner, a repository or a submission: the labels' values are the fixed sets
above. The latency histogram is read incrementally (results above the last id read, each scrape),
so a scrape costs the new results only; the first scrape after a start reads them all once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone

from prometheus_client.core import (
    CollectorRegistry,
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from sqlalchemy import func, select

from autograder.service import schema
from autograder.service.checks_table import check_runs, counts
from autograder.service.schema import results, submissions

LATENCY_BUCKETS = (1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 4 * 3600.0)
READ_BATCH = 5000
GONE_AFTER_LEASES = getattr(schema, "GONE_AFTER_LEASES", 3)


def _lane(table):
    return table.c.lane if "lane" in table.c else None


def _by(conn, column, table) -> list[tuple]:
    """(value of `column`, lane or None, count) rows of `table`."""
    lane = _lane(table)
    if lane is None:
        return [
            (value, None, count)
            for value, count in conn.execute(select(column, func.count()).group_by(column))
        ]
    return [tuple(row) for row in conn.execute(select(column, lane, func.count()).group_by(column, lane))]


class StoreCollector:
    """A prometheus_client collector over the store (see the module docstring)."""

    def __init__(self, store, clock: Callable[[], float] = time.time) -> None:
        self.store, self.clock = store, clock
        self._lock = threading.Lock()
        self._last_id = 0
        self._buckets = [0] * (len(LATENCY_BUCKETS) + 1)  # the last: above every bound (+Inf)
        self._sum = 0.0

    def describe(self) -> list:
        return []  # no description up front: nothing is read from the store at registration

    def collect(self) -> Iterator[Metric]:
        now = datetime.fromtimestamp(self.clock(), timezone.utc)
        with self.store.engine.connect() as conn:
            yield from self._queue(conn, now)
            yield from self._results(conn)
            yield self._latency(conn)
            if "workers" in schema.metadata.tables:
                yield self._workers(conn, now)
            if check_runs.name in schema.metadata.tables:
                gauge = GaugeMetricFamily(
                    "autograder_check_runs", "Verdicts for GitHub check runs by state.", labels=["state"]
                )
                for state, count in sorted(counts(conn).items()):
                    gauge.add_metric([state], count)
                yield gauge

    def _queue(self, conn, now: datetime) -> Iterator[Metric]:
        c = submissions.c
        gauge = GaugeMetricFamily(
            "autograder_submissions", "Submissions by state and lane.", labels=["state", "lane"]
        )
        seen = {(state, lane or "push"): count for state, lane, count in _by(conn, c.state, submissions)}
        for state in getattr(schema, "STATES", ()):
            for lane_value in getattr(schema, "LANES", ("push",)):
                seen.setdefault((state, lane_value), 0)
        for (state, lane_value), count in sorted(seen.items()):
            gauge.add_metric([state, lane_value], count)
        yield gauge
        oldest = conn.execute(select(func.min(c.received_at)).where(c.state == "queued")).scalar_one()
        if isinstance(oldest, datetime) and oldest.tzinfo is None:
            oldest = oldest.replace(tzinfo=timezone.utc)
        waited = max(0.0, (now - oldest).total_seconds()) if oldest is not None else 0.0
        yield GaugeMetricFamily(
            "autograder_oldest_queued_seconds",
            "How long the oldest queued submission has waited.",
            value=waited,
        )

    def _results(self, conn) -> Iterator[Metric]:
        counter = CounterMetricFamily(
            "autograder_results", "Results recorded (grades and errors).", labels=["status", "lane"]
        )
        rows = {
            (status, lane or "push"): count for status, lane, count in _by(conn, results.c.status, results)
        }
        for (status, lane), count in sorted(rows.items()):
            counter.add_metric([status, lane], count)
        yield counter

    def _latency(self, conn) -> Metric:
        r, s, lane = results.c, submissions.c, _lane(results)
        with self._lock:
            while True:
                query = (
                    select(r.id, r.created_at, s.received_at)
                    .select_from(results.join(submissions, s.id == r.submission_id))
                    .where(r.id > self._last_id)
                    .order_by(r.id)
                    .limit(READ_BATCH)
                )
                if lane is not None:
                    query = query.where(lane == "push")
                rows = conn.execute(query).all()
                for row in rows:
                    seconds = max(0.0, (row.created_at - row.received_at).total_seconds())
                    index = next((i for i, bound in enumerate(LATENCY_BUCKETS) if seconds <= bound), -1)
                    self._buckets[index] += 1
                    self._sum += seconds
                    self._last_id = max(self._last_id, row.id)
                if len(rows) < READ_BATCH:
                    break
            cumulative, running = [], 0
            for bound, count in zip((*map(str, LATENCY_BUCKETS), "+Inf"), self._buckets):
                running += count
                cumulative.append((bound, running))
            total = self._sum
        histogram = HistogramMetricFamily(
            "autograder_grading_latency_seconds",
            "From a push received to its result recorded (push lane).",
        )
        histogram.add_metric([], cumulative, sum_value=total)
        return histogram

    def _workers(self, conn, now: datetime) -> Metric:
        table = schema.metadata.tables["workers"]
        gauge = GaugeMetricFamily("autograder_workers", "Worker processes by state.", labels=["state"])
        tally = dict.fromkeys(
            (*getattr(schema, "WORKER_STATES", ("running", "stopped", "refused")), "gone"), 0
        )
        for row in conn.execute(select(table)).mappings():
            tally[worker_state(row, now)] = tally.get(worker_state(row, now), 0) + 1
        for state, count in sorted(tally.items()):
            gauge.add_metric([state], count)
        return gauge


def worker_state(row, now: datetime) -> str:
    """A worker's row's state, or "gone" when it was not seen for GONE_AFTER_LEASES leases."""
    seen = row["seen_at"]
    if seen is not None and seen.tzinfo is None:
        seen = seen.replace(tzinfo=timezone.utc)
    lease = float(row.get("lease_s") or 30.0)
    if row.get("state") != "stopped" and (
        seen is None or (now - seen).total_seconds() > GONE_AFTER_LEASES * lease
    ):
        return "gone"
    return str(row.get("state") or "running")


def registry(store, clock: Callable[[], float] = time.time) -> CollectorRegistry:
    """A registry of its own (not prometheus_client's global one): one per app."""
    made = CollectorRegistry(auto_describe=False)
    made.register(StoreCollector(store, clock))
    return made
