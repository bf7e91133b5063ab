"""What the instructor's live view shows, read from the store (read-only; live.py serves it):

    grid     learner x lesson: each lesson's score in the learner's latest graded submission (the
             export's definition, export.latest_results: the newest by submission time with a
             result), their last push and the state of their newest submission
    queue    submissions waiting (by lane, where the store has lanes), grading (by worker),
             failed, and the workers the store knows (their `workers` table, where it exists)
    stuck    where the cohort is stuck, by cause: the cohort report's own statistics
             (cohort/report.py: TODOs and checks most learners are stuck on, lessons that do not
             run, checks that ran out of time) over the latest graded results, and the learners
             whose grading failed
    history  one learner's submissions, each with its result(s) (old scores beside new ones)

Every text is catalog text in the reader's language; every value a learner chose (a name, a
repository, an error's words) is data for the page's script, which sets it as text only.

Polled every few seconds by every open page: a result never changes once recorded, so each is
parsed once (its lesson scores, its report entry) and kept by id; what changes (states, the
queue) is a few small queries per poll.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select

from autograder.cohort.causes import distinct
from autograder.cohort.report import Cohort, Entry, check_rates, hung_checks, not_running, todo_rates
from autograder.cohort.store import Record
from autograder.core import i18n
from autograder.core.manifest import Course
from autograder.core.roster import Roster
from autograder.render.results_json import from_json_dict
from autograder.service import schema
from autograder.service.schema import results, submissions

MAX_RATES = 12  # the TODOs / checks most stuck on, shown
MAX_FAILED = 20  # recent failed gradings listed
GONE_AFTER_LEASES = getattr(schema, "GONE_AFTER_LEASES", 3)  # a worker not seen for so many leases is gone


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def _has(table, column: str) -> bool:
    return column in table.c


@dataclass
class _Parsed:
    """One result, parsed once: its lessons' (score, max) and its report entry (None when it
    is not a grade: an error result)."""

    scores: dict[str, tuple[float, float]]
    entry_result: Any
    result_json: str = ""  # kept for an error result only (small): its reason is read from it


class LiveData:
    def __init__(self, store, course: Course, roster: Roster, lessons: list, lease_s: float) -> None:
        self.store, self.course, self.roster, self.lessons = store, course, roster, lessons
        self.lease_s = lease_s
        self._parsed: dict[int, _Parsed] = {}
        self._stuck_key: tuple | None = None
        self._stuck: dict[str, Any] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ reading the store

    def _rows(self):
        s, r = submissions.c, results.c
        sub_cols = [s.id, s.learner, s.repository, s.sha, s.state, s.submitted_at, s.received_at, s.worker]
        sub_cols += [s.heartbeat_at, s.page_key, s.attempts, s.last_error]
        for extra in ("lane", "graders_hash"):
            if _has(submissions, extra):
                sub_cols.append(submissions.c[extra])
        res_cols = [r.id, r.submission_id, r.status, r.graders_hash, r.error, r.worker, r.created_at]
        if _has(results, "lane"):
            res_cols.append(r.lane)
        with self.store.engine.connect() as conn:
            subs = conn.execute(select(*sub_cols).order_by(s.id)).all()
            res = conn.execute(select(*res_cols).order_by(r.id)).all()
        return subs, res

    def _current(self, subs, res) -> dict[int, Any]:
        """{submission id: its current result}: the one made with the submission's graders hash,
        else the newest (the contract of issue 33; one result each before it)."""
        wanted = {row.id: getattr(row, "graders_hash", None) for row in subs}
        current: dict[int, Any] = {}
        for row in res:  # by id: a newer one replaces an older one unless the older is wanted
            held = current.get(row.submission_id)
            if (
                held is None
                or held.graders_hash != wanted.get(row.submission_id)
                or (row.graders_hash == wanted.get(row.submission_id))
            ):
                current[row.submission_id] = row
        return current

    def _parse(self, result_ids: list[int]) -> None:
        missing = [rid for rid in result_ids if rid not in self._parsed]
        if not missing:
            return
        r = results.c
        with self.store.engine.connect() as conn:
            for start in range(0, len(missing), 200):
                chunk = missing[start : start + 200]
                for row in conn.execute(select(r.id, r.status, r.result_json).where(r.id.in_(chunk))):
                    self._parsed[row.id] = _parse_result(row.status, row.result_json)

    # ------------------------------------------------------------------ the state

    def state(self, lang: str, learner: str | None = None) -> dict[str, Any]:
        with self._lock:  # one poll computes at a time; the caches are shared
            subs, res = self._rows()
            current = self._current(subs, res)
            latest: dict[str, tuple[Any, Any]] = {}  # learner -> (submission, result): export's rule
            newest: dict[str, Any] = {}  # learner -> their newest submission
            for sub in sorted(subs, key=lambda one: (one.submitted_at, one.id)):
                newest[sub.learner] = sub
                result = current.get(sub.id)
                if result is not None:  # a submission queued again for a regrade keeps its score
                    latest[sub.learner] = (sub, result)
            self._parse([result.id for _, result in latest.values()])
            alive = {result.id for _, result in latest.values()}
            for rid in [rid for rid in self._parsed if rid not in alive]:
                del self._parsed[rid]  # superseded by a newer result: never shown again
            out = {
                "lessons": [
                    {"id": lesson.id, "title": str(i18n.localize(lesson.title, lang))}
                    for lesson in self.lessons
                ],
                "grid": self._grid(lang, latest, newest),
                "queue": self._queue(lang, subs),
                "stuck": self._stuck_state(lang, latest),
            }
            if learner is not None:
                out["history"] = self._history(lang, learner, subs, res, current)
            return out

    def _grid(self, lang: str, latest, newest) -> list[dict[str, Any]]:
        people = [one.id for one in self.roster.learners]
        people += sorted(set(newest) - set(people))  # a learner since removed from the roster
        rows = []
        for learner in people:
            sub = newest.get(learner)
            graded = latest.get(learner)
            parsed = self._parsed.get(graded[1].id) if graded is not None else None
            cells = []
            for lesson in self.lessons:
                if parsed is None or lesson.id not in parsed.scores:
                    cells.append({"lesson": lesson.id, "score": None, "max": None, "status": "none"})
                    continue
                score, top = parsed.scores[lesson.id]
                status = "passed" if top and score >= top else "partial" if score > 0 else "failed"
                cells.append({"lesson": lesson.id, "score": score, "max": top, "status": status})
            state = sub.state if sub is not None else "none"
            if (
                graded is not None
                and graded[1].status == "error"
                and graded[0].id == getattr(sub, "id", None)
            ):
                state = "error"
            rows.append(
                {
                    "learner": learner,
                    "last_push": _iso(sub.submitted_at) if sub is not None else None,
                    "state": state,
                    "state_text": i18n.translate(f"service.live.state_{state}", lang),
                    "cells": cells,
                }
            )
        return rows

    def _queue(self, lang: str, subs) -> dict[str, Any]:
        lanes: dict[str, int] = {}
        grading, failed = [], []
        by_worker: dict[str, int] = {}
        for sub in subs:
            if sub.state == "queued":
                lane = getattr(sub, "lane", None) or "push"
                lanes[lane] = lanes.get(lane, 0) + 1
            elif sub.state == "grading":
                grading.append(
                    {"learner": sub.learner, "worker": sub.worker or "", "since": _iso(sub.heartbeat_at)}
                )
                by_worker[sub.worker or ""] = by_worker.get(sub.worker or "", 0) + 1
            elif sub.state == "error":
                failed.append(sub)
        failed_rows = []
        if failed:
            recent = failed[-MAX_FAILED:]
            r = results.c
            with self.store.engine.connect() as conn:
                found = conn.execute(
                    select(r.submission_id, r.error, r.result_json)
                    .where(r.submission_id.in_([s.id for s in recent]))
                    .order_by(r.id)
                ).all()
            reasons = {row.submission_id: row for row in found}  # the newest of each
            for sub in reversed(recent):
                row = reasons.get(sub.id)
                key = (row.error if row is not None else None) or ""
                failed_rows.append(
                    {
                        "learner": sub.learner,
                        "at": _iso(sub.submitted_at),
                        "reason": _reason_of(key, row.result_json if row else "", sub.last_error, lang),
                        "lost": key == schema.LOST,
                    }
                )
        return {
            "waiting": [
                {"lane": lane, "text": i18n.translate(f"service.live.lane_{lane}", lang), "n": n}
                for lane, n in sorted(lanes.items())
            ],
            "grading": grading,
            "failed": len(failed),
            "failed_recent": failed_rows,
            "workers": self._workers(lang, by_worker),
        }

    def _workers(self, lang: str, by_worker: dict[str, int]) -> list[dict[str, Any]]:
        """The workers the store knows (issue 33's `workers` table), else those grading now."""
        table = schema.metadata.tables.get("workers")
        rows: list[dict[str, Any]] = []
        if table is not None:
            now = schema.now_utc()
            with self.store.engine.connect() as conn:
                for row in conn.execute(select(table).order_by(table.c.name)).mappings():
                    seen = row.get("seen_at")
                    state = str(row.get("state") or "running")
                    gone = timedelta(seconds=GONE_AFTER_LEASES * float(row.get("lease_s") or self.lease_s))
                    if state == "running" and seen is not None and now - seen > gone:
                        state = "gone"
                    rows.append(
                        {
                            "name": str(row["name"]),
                            "state": state,
                            "state_text": i18n.translate(f"service.live.worker_{state}", lang),
                            "graders": str(row.get("graders_hash") or "")[:12],
                            "seen": _iso(seen),
                            "grading": by_worker.get(str(row["name"]), 0),
                            "detail": str(row.get("detail") or ""),
                        }
                    )
        known = {row["name"] for row in rows}
        for name, n in sorted(by_worker.items()):
            if name not in known:
                rows.append(
                    {
                        "name": name,
                        "state": "running",
                        "state_text": i18n.translate("service.live.worker_running", lang),
                        "graders": "",
                        "seen": None,
                        "grading": n,
                        "detail": "",
                    }
                )
        return rows

    def _stuck_state(self, lang: str, latest) -> dict[str, Any]:
        """The report's statistics over the latest results; made again only when they change."""
        key = (lang, tuple(sorted((learner, result.id) for learner, (_, result) in latest.items())))
        if key == self._stuck_key:
            return self._stuck
        entries, errors = [], []
        for learner, (sub, result) in sorted(latest.items()):
            parsed = self._parsed.get(result.id)
            if parsed is None or parsed.entry_result is None:
                said = parsed.result_json if parsed is not None else ""
                errors.append(
                    {"learner": learner, "reason": _reason_of(result.error or "", said, None, lang)}
                )
                continue
            record = Record(learner=learner, key=f"service:{sub.id}", status="graded", commit=sub.sha)
            record.pending = _pending(parsed.entry_result)
            entries.append(Entry(record, parsed.entry_result))
        cohort = Cohort(self.course, list(self.lessons), 0, entries)

        def rates(found):
            return [
                {
                    "lesson": rate.lesson,
                    "id": rate.id,
                    "todo": rate.todo or "",
                    "stuck": rate.stuck,
                    "pending": rate.pending,
                    "total": rate.total,
                }
                for rate in found
                if rate.stuck
            ][:MAX_RATES]

        self._stuck = {
            "graded": len(entries),
            "todos": rates(todo_rates(cohort)),
            "checks": rates(check_rates(cohort)),
            "no_run": [
                {
                    "learner": entry.record.learner,
                    "lesson": lesson,
                    "where": [cause.where for cause in distinct(causes)],
                    "why": [cause.text(lang) for cause in distinct(causes)],
                    "checks": checks,
                }
                for entry, lesson, causes, checks in not_running(cohort)
            ],
            "hung": [
                {"learner": entry.record.learner, "lesson": lesson, "checks": ids}
                for entry, lesson, ids in hung_checks(cohort)
            ],
            "errors": errors,
        }
        self._stuck_key = key
        return self._stuck

    def _history(self, lang: str, learner: str, subs, res, current) -> dict[str, Any]:
        mine = [sub for sub in subs if sub.learner == learner]
        ids = {sub.id for sub in mine}
        of: dict[int, list] = {}
        for row in res:
            if row.submission_id in ids:
                of.setdefault(row.submission_id, []).append(row)
        scores = _scores_of([row.id for rows in of.values() for row in rows], self.store)
        out = []
        for sub in sorted(mine, key=lambda one: (one.submitted_at, one.id), reverse=True):
            chosen = current.get(sub.id)
            out.append(
                {
                    "id": sub.id,
                    "sha": sub.sha,
                    "repository": sub.repository,
                    "submitted": _iso(sub.submitted_at),
                    "received": _iso(sub.received_at),
                    "state": sub.state,
                    "state_text": i18n.translate(f"service.live.state_{sub.state}", lang),
                    "lane": getattr(sub, "lane", None) or "push",
                    "attempts": sub.attempts,
                    "page": f"/s/{sub.page_key}",
                    "results": [
                        {
                            "status": row.status,
                            "score": scores.get(row.id, (None, None))[0],
                            "max": scores.get(row.id, (None, None))[1],
                            "graders": row.graders_hash[:12],
                            "created": _iso(row.created_at),
                            "worker": row.worker,
                            "lane": getattr(row, "lane", None) or "",
                            "reason": _reason(row.error, lang) if row.error else "",
                            "current": chosen is not None and chosen.id == row.id,
                        }
                        for row in reversed(of.get(sub.id, []))
                    ],
                }
            )
        return {"learner": learner, "submissions": out}


# ------------------------------------------------------------------------------ helpers


def _parse_result(status: str, result_json: str) -> _Parsed:
    try:
        data = json.loads(result_json)
    except ValueError:
        return _Parsed({}, None, "")
    scores = {}
    for lesson in data.get("lessons", []) if isinstance(data, dict) else []:
        try:
            scores[str(lesson["id"])] = (float(lesson["score"]), float(lesson["max_score"]))
        except (KeyError, TypeError, ValueError):
            continue
    parsed = None
    if status == "done":
        try:
            parsed = from_json_dict(data)
        except (ValueError, KeyError, TypeError):
            parsed = None
    return _Parsed(scores, parsed, result_json if parsed is None else "")


def _scores_of(result_ids: list[int], store) -> dict[int, tuple[float, float]]:
    """{result id: (score, max)} of the whole result, for one learner's history."""
    if not result_ids:
        return {}
    r = results.c
    out = {}
    with store.engine.connect() as conn:
        for row in conn.execute(select(r.id, r.result_json).where(r.id.in_(result_ids))):
            try:
                data = json.loads(row.result_json)
                out[row.id] = (float(data["score"]), float(data["max_score"]))
            except (ValueError, KeyError, TypeError):
                continue
    return out


def _pending(result) -> dict[str, dict[str, str]]:
    """The checks that stopped at work not started, as grade-all records them (pool.pending_todos
    reads the recognised catalog messages of a result read back)."""
    from autograder.cohort.pool import pending_todos

    try:
        return pending_todos(result)
    except Exception:  # noqa: BLE001 - a result that says it another way: counted as stuck
        return {}


def _reason_of(key: str, result_json: str, last_error: str | None, lang: str) -> str:
    """Why a grading failed, as fully as the record says it: the reason with its parameters
    (the store's own error JSON, or the submission's last reason when it is this one) in `lang`,
    else the error result's first message (in the course's language), else the bare reason."""
    try:
        data = json.loads(result_json or "{}")
    except ValueError:
        data = {}
    said = data.get("error") if isinstance(data, dict) else None
    if isinstance(said, dict) and said.get("key"):
        return i18n.translate(str(said["key"]), lang, **dict(said.get("params") or {}))
    if last_error:
        try:
            text = schema.text_from_json(last_error)
        except (ValueError, KeyError, TypeError):
            text = None
        if text is not None and text.key == key:
            return str(i18n.localize(text, lang))
    try:
        first = str(data["lessons"][0]["checks"][0]["message"])
    except (KeyError, IndexError, TypeError):
        first = ""
    return first or _reason(key, lang)


def _reason(key: str, lang: str) -> str:
    """An error result's reason, said in `lang` (its parameters stay in the result itself)."""
    if not key:
        return i18n.translate("service.live.reason_unknown", lang)
    text = i18n.translate(key, lang)
    return text if text != key else key
