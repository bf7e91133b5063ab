"""`autograder grade-all --merge DIR [DIR ...] --out DIR`: the shards of one run made one.

It checks that the folders are the N shards of the same run (same course, language, seed,
lessons, graders and engine) and that no learner is in two of them, copies every learner's result
and record, appends to the merged folder's observation log what the shards saw and it did not
(the earliest time of each sighting wins), stamps the merged records from it, and publishes the
gradebook, the CSVs and the report as a run does. With deadlines it also copies each learner's
archived results (attempts/) and works out the term grade from the merged log, as the shards did
(at the shards' --at moment, if any); --roster (the run's roster) applies its extensions.
"""

from __future__ import annotations

import argparse
import shutil
from datetime import timezone
from pathlib import Path

from autograder.cohort.observations import Sighting
from autograder.cohort.outputs import Say, load_log, publish, report_failed_outputs
from autograder.cohort.store import ATTEMPTS, BatchError, Store, private_folder, write_json
from autograder.cohort.term_grades import TERM_FILE, core_roster, count_term, has_deadlines
from autograder.core.history import parse_time
from autograder.core.manifest import Course
from autograder.core.roster import RosterError
from autograder.term.deadlines import check_extensions

_SAME_RUN = ("course", "language", "seed", "lessons", "fingerprint")


def merge(course: Course, args: argparse.Namespace, lang: str) -> int:
    """Merge the run folders of --merge into --out; exit status as grade-all's."""
    if args.submissions is not None or args.shard is not None:
        raise BatchError("term_cohort.merge_alone")
    runs = []
    for folder in args.merge:
        run = Store(folder).read_run()
        if run is None:
            raise BatchError("batch.merge_not_a_run", folder=str(folder))
        runs.append((folder, run))
    first_folder, first = runs[0]
    for folder, run in runs[1:]:
        for name in _SAME_RUN:
            if run.get(name) != first.get(name):
                raise BatchError("batch.merge_mismatch", field=name, a=str(first_folder), b=str(folder))
    shards = [run.get("shard") for _, run in runs]
    if any(shards):
        counts = {str(shard).partition("/")[2] for shard in shards}
        count = int(next(iter(counts))) if len(counts) == 1 and None not in shards else 0
        expected = [f"{i}/{count}" for i in range(1, count + 1)]
        if sorted(map(str, shards)) != sorted(expected):
            missing = [shard for shard in expected if shard not in shards]
            raise BatchError(
                "batch.merge_shards", shards=", ".join(map(str, shards)), missing=", ".join(missing) or "-"
            )
    owner: dict[str, Path] = {}
    for folder, run in runs:
        for learner in run["learners"]:
            if learner in owner:
                raise BatchError("batch.merge_duplicate", id=learner, a=str(owner[learner]), b=str(folder))
            owner[learner] = folder
    say = Say(lang)
    seen = [
        sighting
        for folder, _ in runs
        if Path(folder).resolve() != Path(args.out).resolve()
        for sighting in load_log(Path(folder), say).sightings()
    ]
    out = Store(args.out)
    private_folder(out.root)
    for learner, folder in owner.items():
        source = Store(folder)
        if source.read_record(learner) is None or source.read_result(learner) is None:
            raise BatchError("batch.no_result", folder=str(folder), id=learner)
        for path, target in (
            (source.result_path(learner), out.result_path(learner)),
            (source.record_path(learner), out.record_path(learner)),
        ):
            if path.resolve() != target.resolve():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
        archive = source.root / ATTEMPTS / learner  # with deadlines: every submission's result
        if archive.is_dir() and archive.resolve() != (out.root / ATTEMPTS / learner).resolve():
            shutil.copytree(archive, out.root / ATTEMPTS / learner, dirs_exist_ok=True)
    _merge_log(out, seen, sorted(owner), say)
    merged = {
        **{name: first[name] for name in _SAME_RUN},
        "shard": None,
        "learners": sorted(owner),
        "merged_from": [str(folder) for folder, _ in runs],
        "at": first.get("at"),
    }
    out.write_run(merged)
    term = _term(course, args, out, merged, first.get("at"), say)
    failures = publish(course, out, merged, first["language"], term=term)
    say.out("batch.merged", shards=len(runs), learners=len(owner), out=str(args.out))
    return report_failed_outputs(say, out, failures)


def _merge_log(out: Store, seen: list[Sighting], learners: list[str], say: Say) -> None:
    """Append to the merged folder's observation log what the shards saw and it did not (or saw
    only later), then stamp each merged record with the earliest sighting of what it graded."""
    log = load_log(out.root, say)
    try:
        log.add(seen)
    except OSError as exc:
        raise BatchError("batch.observations_unwritable", file=str(log.path), detail=str(exc)) from None
    for learner in learners:
        record = out.read_record(learner)
        sighting = log.first_seen(learner, record.observed) if record and record.observed else None
        if sighting is not None and record.timestamp != sighting.timestamp:
            record.timestamp = sighting.timestamp
            out.save_record(record)


def _term(course: Course, args: argparse.Namespace, out: Store, run: dict, at: str | None, say: Say):
    """With deadlines, the merged cohort's term grade, from the merged log and the shards'
    archived results, as each shard counted it (--at's moment too); written to term.json. The
    roster's extensions apply only with --roster (said otherwise). Nothing is graded here: a
    counting submission no shard graded is named, and counts nothing."""
    lessons = [course.lesson(key) for key in run["lessons"]]
    if not has_deadlines(course, lessons):
        return None
    roster = core_roster(args)
    if roster is None:
        say.line("term_cohort.merge_no_roster")
    try:
        check_extensions(course, roster)
    except RosterError as exc:
        raise BatchError(exc.text.key, **exc.text.params) from None
    log = load_log(out.root, say)
    moment = None if at is None else parse_time(at, "at").astimezone(timezone.utc)
    term = count_term(course, lessons, run["learners"], out, run["fingerprint"], log, roster, moment)
    for learner, subs in sorted(term.ungraded.items()):
        for sub in subs:
            say.line("term_cohort.still_ungraded", id=learner, what=sub.what)
    write_json(out.root / TERM_FILE, term.as_json())
    return term
