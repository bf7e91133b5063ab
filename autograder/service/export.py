"""`autograder serve --export DIR`: the gradebook and the CSVs, made on demand from the store.

The service's tables are the record; these are copies in the formats instructors already use,
the same files `grade-all` writes (autograder/cohort/store.py's layout, then cohort/outputs.publish:
gradebook.db, grades.csv, cohort.csv, report.md, report.png). Each learner's entry is their
latest graded submission: the newest by submission time (github_lookup's one definition) whose
result is recorded, "done" (graded) or "error" (could not be graded: the record says why). Their
record's timestamp is that submission time, its commit the graded sha.

With deadlines (course.yml's term block, the roster's extensions; autograder/term/), the
gradebook and the CSVs hold the term grade instead (cohort/term_grades.py, as `grade-all`
writes it): per lesson, the counting submission by submission time (`submitted_at`, the one
definition) under term.counting, late ones with the penalty; DIR/term.json lists them. Every
push is graded by the service, but the counting one may have no result (superseded by a newer
push before it was graded, or still queued): it is named, and that lesson counts 0 until it is
graded and the export is run again. Moving a deadline or an extension and exporting again
recomputes everything.

A learner of the roster with nothing graded yet is left out and named; submissions still queued
or grading are counted. DIR is the export's own: a grade-all output folder is refused (its
results would be mixed with the service's), and results of learners no longer exported are
removed from DIR. The report's "seed" is 0: every service result has its own seed, recorded in
the result itself.

Regraded submissions (`autograder regrade`: the graders changed mid-term) keep every result,
one per graders' hash; the files above hold the current one (that of the submission's graders,
else the newest: Store.current_result). DIR/regraded.csv puts the previous score beside it for
each exported submission that has more than one (learner, submission, commit, previous graders
and score, current graders and score), so the instructor sees what the change did; it is absent
when nothing was regraded. The gradebook's and LMS files' columns stay grade-all's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from autograder.cohort.outputs import Say, publish, report_failed_outputs
from autograder.cohort.store import RECORDS, RESULTS, Record, private_folder, write_json
from autograder.cohort.store import Store as Folder
from autograder.cohort.term_grades import (
    TERM_FILE,
    Submitted,
    TermGrades,
    has_deadlines,
    parse_result,
    term_grades,
)
from autograder.core.manifest import Course
from autograder.core.roster import Roster, RosterError
from autograder.service.store import Result, Store, Submission

MARK = "autograder-serve"  # run.json's "producer" of an export folder
REGRADED = "regraded.csv"
REGRADED_COLUMNS = (
    "student_id",
    "submission",
    "commit",
    "previous_graders",
    "previous_score",
    "graders",
    "score",
)
# The reasons a service error result gives, as grade-all's record kinds (cohort/store.Record.error).
_KINDS = {"service.worker.fetch_failed": "fetch", "service.worker.crashed": "crashed"}


def latest_results(store: Store) -> dict[str, tuple[Submission, Result]]:
    """{learner: (their newest submission with a result, that result)}."""
    latest: dict[str, tuple[Submission, Result]] = {}
    ordered = sorted(store.submissions(), key=lambda s: (s.submitted_at, s.id))
    for submission in ordered:
        if submission.state in ("done", "error"):
            result = store.result(submission.id)
            if result is not None:
                latest[submission.learner] = (submission, result)
    return latest


def export(config, course: Course, roster: Roster, out: Path, say: Say) -> int:
    out = Path(out)
    try:  # an extension course.yml cannot take stops the export before anything is written
        from autograder.term.deadlines import check_extensions

        check_extensions(course, roster)
    except RosterError as exc:
        print(say.text(exc.text.key, **exc.text.params), file=sys.stderr)
        return 2
    previous = Folder(out).read_run()
    if previous is not None and previous.get("producer") != MARK:
        say.line("service.serve.export_not_ours", out=str(out))
        return 2
    store = Store(config.database)
    try:
        store.create()  # an empty data folder exports an empty cohort, not a traceback
        latest = latest_results(store)
        every = store.submissions()
        waiting = sum(1 for s in every if s.state in ("queued", "grading"))
        results_of = {
            s.id: result
            for s in every
            if s.state in ("done", "error") and (result := store.result(s.id)) is not None
        }
        history = {submission.id: store.results_of(submission.id) for submission, _ in latest.values()}
    finally:
        store.close()
    folder = Folder(out)
    private_folder(folder.root)
    folder.remove_leftovers()
    people = {learner.id: learner for learner in roster.learners}
    hashes = set()
    graded_lessons: set[str] = set()
    for learner, (submission, result) in sorted(latest.items()):
        folder.save(_record(learner, people.get(learner), submission, result), result.result_json)
        hashes.add(result.graders_hash)
        try:
            graded_lessons.update(str(lesson["id"]) for lesson in json.loads(result.result_json)["lessons"])
        except (ValueError, KeyError, TypeError):
            pass
    _remove_stale(folder, set(latest))
    lessons = [lesson.id for lesson in course.lessons if lesson.id in graded_lessons] or [
        course.lesson(key).id for key in (config.lessons or [lesson.id for lesson in course.lessons])
    ]
    run = {
        "producer": MARK,
        "course": course.name,
        "language": course.language,
        "seed": 0,
        "lessons": lessons,
        "fingerprint": next(iter(hashes)) if len(hashes) == 1 else "",
        "graders": sorted(hashes),
        "shard": None,
        "learners": sorted(latest),
    }
    folder.write_run(run)
    missing = [learner.id for learner in roster.learners if learner.id not in latest]
    if missing:
        say.line("service.serve.export_missing", n=len(missing), ids=", ".join(missing))
    if waiting:
        say.line("service.serve.export_waiting", n=waiting)
    term = None
    chosen = [course.lesson(key) for key in lessons]
    if has_deadlines(course, chosen):
        term = term_export(course, chosen, roster, sorted(latest), every, results_of, say)
        write_json(folder.root / TERM_FILE, term.as_json())
    write_regraded(folder.root / REGRADED, latest, history)
    failures = publish(course, folder, run, say.lang, term=term)
    say.out("service.serve.export_done", n=len(latest), out=str(out))
    return report_failed_outputs(say, folder, failures)


def term_export(
    course: Course,
    lessons: list,
    roster: Roster,
    learners: list[str],
    submissions: list[Submission],
    results_of: dict[int, Result],
    say: Say,
) -> TermGrades:
    """The term grades of `learners` from the service's record: every submission, by its
    submitted_at, with its result where it has one; the counting ones without a result named."""
    from autograder.term.deadlines import due_dates

    mine: dict[str, list[Submitted]] = {}
    for submission in submissions:
        # Every push counts as a submission, graded or not (superseded, queued): a counting
        # one without a result is named below.
        mine.setdefault(submission.learner, []).append(
            Submitted(f"service:{submission.id}", submission.sha, submission.submitted_at)
        )

    def result_of(learner: str, sub: Submitted):
        result = results_of.get(int(sub.what.partition(":")[2]))
        return parse_result(result.result_json) if result is not None else None

    grades = term_grades(
        course,
        lessons,
        learners,
        lambda learner: mine.get(learner, []),
        result_of,
        lambda learner: due_dates(course, roster, learner),
    )
    for learner, subs in sorted(grades.ungraded.items()):
        for sub in subs:
            say.line("term_cohort.export_ungraded", id=learner, what=sub.what, commit=sub.commit or "")
    return grades


def write_regraded(
    path: Path, latest: dict[str, tuple[Submission, Result]], history: dict[int, list[Result]]
) -> None:
    """DIR/regraded.csv: each exported submission with several results, the previous score
    beside the current one (see the module docstring); no file when there is none."""
    import csv
    import io

    rows = []
    for learner, (submission, current) in sorted(latest.items()):
        previous = [r for r in history.get(submission.id, []) if r.graders_hash != current.graders_hash]
        if previous:
            before = previous[-1]
            rows.append(
                [learner, submission.id, submission.sha, before.graders_hash, _score(before)]
                + [current.graders_hash, _score(current)]
            )
    if not rows:
        path.unlink(missing_ok=True)
        return
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(REGRADED_COLUMNS)
    writer.writerows(rows)
    path.write_text(buffer.getvalue(), encoding="utf-8")
    path.chmod(0o600)


def _score(result: Result) -> str:
    """The result's score ("" for an error result)."""
    if result.status != "done":
        return ""
    try:
        return f"{float(json.loads(result.result_json)['score']):g}"
    except (ValueError, KeyError, TypeError):
        return ""


def _record(learner: str, person, submission: Submission, result: Result) -> Record:
    first, last = person.names if person is not None else ("", "")
    record = Record(
        learner=learner,
        key=f"service:{submission.id}",
        status="graded" if result.status == "done" else "error",
        first_name=first,
        last_name=last,
        email=(person.email or "") if person is not None else "",
        commit=submission.sha,
        timestamp=int(submission.submitted_at.timestamp()),
        observed=f"commit:{submission.sha}",
    )
    if result.status != "done":
        record.error = _KINDS.get(result.error or "", "internal")
        record.detail = _first_message(result.result_json)
    return record


def _first_message(result_json: str) -> str:
    try:
        return str(json.loads(result_json)["lessons"][0]["checks"][0]["message"])
    except (ValueError, KeyError, IndexError, TypeError):
        return ""


def _remove_stale(folder: Folder, kept: set[str]) -> None:
    for sub in (RESULTS, RECORDS):
        for path in (folder.root / sub).glob("*.json") if (folder.root / sub).is_dir() else ():
            if path.stem not in kept:
                path.unlink(missing_ok=True)
