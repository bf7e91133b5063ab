"""Which submission counts for grade-all's term grade (issue 32): the observation log's times, the
results archived per submission, course.yml's deadlines and late policies and the roster's
extensions, into grades.csv and cohort.csv, against grades computed by hand.

No grading here: the log and the archived results are written directly, in the formats grade-all
writes them (observations.py's lines, store.save_attempt's results). The commits are names only;
a commit's dates are never read (tests/cohort/test_term_snapshot.py proves that with git).

The course: lessons 01, 02, 04, 05 (100 points each) due 2026-12-20 23:59 Europe/Madrid (22:59
UTC), grace 10 minutes, each with one late policy; lesson 06 has no due date.

    01  1 day late, -10 % per started hour          04  5 days late, -30 % per started day, floor 50 %
    02  3 days late, -20 % per started day          05  nothing late accepted
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import json
import shutil
import subprocess
from datetime import datetime, timedelta, timezone

import pytest
from support import term_results

from autograder.cohort.grade_all import count_term, github_repository, materialise, parse_at, shard_of
from autograder.cohort.gradebook import cohort_csv, grades_csv
from autograder.cohort.merge import merge
from autograder.cohort.observations import ObservationLog, Sighting
from autograder.cohort.report import load
from autograder.cohort.store import BatchError, Record, Store
from autograder.core import roster as roster_schema
from autograder.core.manifest import REFUSED, LatePolicy, Term

DUE = datetime(2026, 12, 20, 22, 59, tzinfo=timezone.utc)  # "2026-12-20 23:59" in Madrid
H, D = timedelta(hours=1), timedelta(days=1)
LESSONS = ("01", "02", "04", "05", "06")
FINGERPRINT = "f" * 64
POLICIES = {
    "01": LatePolicy(True, D, "hour", 10.0, 0.0),
    "02": LatePolicy(True, 3 * D, "day", 20.0, 0.0),
    "04": LatePolicy(True, 5 * D, "day", 30.0, 50.0),
    "05": REFUSED,
}


def sha(name: str) -> str:
    return (name.encode().hex() * 40)[:40]


# learner -> [(commit name, seen, fraction of every check's points earned)]
PUSHES = {
    "ana": [("a1", DUE - H, 0.5), ("a2", DUE + 3 * H, 1.0)],
    "bea": [("b1", DUE + D, 1.0)],  # extension: 2 extra days on every lesson
    "ceci": [("c1", DUE - 2 * D, 0.5), ("c2", DUE + 3 * D + 5 * H, 1.0)],
    "dani": [("d1", DUE + 30 * timedelta(minutes=1), 1.0)],
    "eloy": [("e1", DUE + 5 * timedelta(minutes=1), 0.8)],  # inside the grace: on time
}


def term_course(course, dues: dict[str, datetime] | None = None, counting: str = "latest"):
    dues = dues or {lid: DUE for lid in POLICIES}
    lessons = [
        dataclasses.replace(lesson, due=dues.get(lesson.id), late=POLICIES.get(lesson.id))
        for lesson in course.lessons
    ]
    return dataclasses.replace(
        course, lessons=lessons, term=Term(counting=counting, grace=timedelta(minutes=10), late=REFUSED)
    )


def result_json(course, fraction: float) -> str:
    return term_results.result_json(course, LESSONS, fraction)


ROSTER = """\
version: 1
learners:
  - {id: ana, name: Ana Alba, email: ana@example.org, url: https://github.com/curso/ana.git}
  - {id: bea, name: Bea Bravo, email: bea@example.org, url: https://github.com/curso/bea.git}
  - {id: ceci, name: Ceci Cano, email: ceci@example.org, url: https://github.com/curso/ceci.git}
  - {id: dani, name: Dani Diez, email: dani@example.org, url: https://github.com/curso/dani.git}
  - {id: eloy, name: Eloy Esteban, email: eloy@example.org, url: https://github.com/curso/eloy.git}
extensions:
  - {learner: bea, lesson: all, extra: 2d}
"""


@pytest.fixture(scope="module")
def cohort_dir(tmp_path_factory, course):
    """DIR as grade-all leaves it: the log, every submission's archived result, and each
    learner's latest result and record."""
    out = tmp_path_factory.mktemp("term") / "out"
    store, log = Store(out), ObservationLog(out)
    log.load()
    for learner, pushes in PUSHES.items():
        for name, seen, fraction in pushes:
            data = result_json(course, fraction)
            if learner == "ana" and name == "a1":
                pass  # archived below, after the test of a never-graded counting submission
            else:
                store.save_attempt(learner, f"commit:{sha(name)}", FINGERPRINT, data)
            log.record([Sighting(learner, "push", sha(name), None, seen)])
        store.save(
            Record(
                learner,
                "k",
                "graded",
                commit=sha(name),
                timestamp=int(seen.timestamp()),
                observed=f"commit:{sha(name)}",
            ),
            data,
        )
    roster = out.parent / "roster.yml"
    roster.write_text(ROSTER, encoding="utf-8")
    return out, roster_schema.load(roster)


def csv_rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def term_of(course, cohort_dir, **kwargs):
    out, roster = cohort_dir
    log = ObservationLog(out)
    assert log.load() == []
    return count_term(
        course,
        [course.lesson(lid) for lid in LESSONS],
        sorted(PUSHES),
        Store(out),
        FINGERPRINT,
        log,
        roster,
        **kwargs,
    )


def outputs(course, cohort_dir, term):
    out, _ = cohort_dir
    run = {"lessons": list(LESSONS), "learners": sorted(PUSHES), "seed": 1}
    cohort = load(course, run, Store(out))
    by_lesson = {(row["student_id"], row["assignment"]): row for row in csv_rows(grades_csv(cohort, term))}
    wide = {row["student_id"]: row for row in csv_rows(cohort_csv(cohort, term))}
    return by_lesson, wide


def scores(course, by_lesson) -> dict[str, dict[str, float]]:
    return {
        learner: {lid: float(by_lesson[(learner, course.lesson(lid).folder)]["score"]) for lid in LESSONS}
        for learner in PUSHES
    }


def test_a_counting_submission_never_graded_is_asked_for(course, cohort_dir):
    """ana's a1 is the only submission that can count for lesson 05 (nothing late accepted):
    it has no archived result, so it comes back to be graded, and counts nothing meanwhile."""
    out, _ = cohort_dir
    Store(out).attempt_path("ana", f"commit:{sha('a1')}", FINGERPRINT).unlink(missing_ok=True)
    term = term_of(term_course(course), cohort_dir)
    assert [s.what for s in term.ungraded["ana"]] == [f"commit:{sha('a1')}"]
    cell = term.cells["ana"]["05"]
    assert (cell.status, cell.grade, cell.what) == ("ungraded", None, f"commit:{sha('a1')}")
    # Graded now (grade-all archives it), and counted again: nothing left to grade.
    Store(out).save_attempt("ana", f"commit:{sha('a1')}", FINGERPRINT, result_json(course, 0.5))
    again = term_of(term_course(course), cohort_dir)
    assert again.ungraded == {} and again.cells["ana"]["05"].grade == 50.0


def test_the_term_grades_equal_hand_computed_ones(course, cohort_dir):
    test_a_counting_submission_never_graded_is_asked_for(course, cohort_dir)  # a1 archived
    tc = term_course(course)
    by_lesson, wide = outputs(tc, cohort_dir, term_of(tc, cohort_dir))
    assert scores(tc, by_lesson) == {
        # a2 at +3 h counts where late is accepted: 3 started hours (70 %), 1 started day
        # (80 %), 1 day (70 %, floor 50 not reached); 05 refuses it: a1, on time, 50.
        "ana": {"01": 70.0, "02": 80.0, "04": 70.0, "05": 50.0, "06": 100.0},
        # +1 day, with 2 extra days: on time everywhere.
        "bea": {"01": 100.0, "02": 100.0, "04": 100.0, "05": 100.0, "06": 100.0},
        # c2 at +3 d 5 h: past 01's and 02's late periods (c1 counts, 50); in 04's, 4 started
        # days = 120 % off, held at the 50 % floor; 05: c1. 06 (no due date): the latest.
        "ceci": {"01": 50.0, "02": 50.0, "04": 50.0, "05": 50.0, "06": 100.0},
        # +30 min: one started hour, one started day; 05 accepts nothing late: no grade.
        "dani": {"01": 90.0, "02": 80.0, "04": 70.0, "05": 0.0, "06": 100.0},
        # +5 min: inside the 10-minute grace.
        "eloy": {"01": 80.0, "02": 80.0, "04": 80.0, "05": 80.0, "06": 80.0},
    }
    row = by_lesson[("ana", tc.lesson("01").folder)]
    assert (row["raw_score"], row["late_submission_penalty"], row["duedate"]) == (
        "100.0",
        "30.0",
        "2026-12-20 22:59:00",
    )
    assert row["timestamp"] == "2026-12-21 01:59:00" and row["xp"] == "50"  # XP never penalised
    assert by_lesson[("bea", tc.lesson("01").folder)]["duedate"] == "2026-12-22 22:59:00"
    folder = tc.lesson("04").folder
    assert (wide["ceci"][f"{folder}:late_hours"], wide["ceci"][f"{folder}:penalty"]) == ("77.0", "50.0")
    assert wide["ceci"][f"{folder}:status"] == "late" and wide["bea"][f"{folder}:status"] == "on_time"
    assert wide["dani"][f"{tc.lesson('05').folder}:status"] == "none"
    assert float(wide["ana"]["score"]) == 70 + 80 + 70 + 50 + 100
    assert f"{tc.lesson('06').folder}:status" not in wide["ana"]  # no due date: no late columns


def test_best_counts_the_highest_penalised_grade(course, cohort_dir):
    test_a_counting_submission_never_graded_is_asked_for(course, cohort_dir)
    tc = term_course(course, counting="best")
    got = scores(tc, outputs(tc, cohort_dir, term_of(tc, cohort_dir))[0])
    assert got["ana"] == {"01": 70.0, "02": 80.0, "04": 70.0, "05": 50.0, "06": 100.0}  # a2 still best
    assert got["ceci"]["04"] == 50.0  # c1 50 on time against c2 100 held at the floor: a tie keeps c1
    term = term_of(tc, cohort_dir)
    assert term.cells["ceci"]["04"].what == f"commit:{sha('c1')}"


def test_moving_a_deadline_earlier_than_the_last_push_recomputes(course, cohort_dir):
    """01 due 2 hours earlier (before ana's a1): a1 and a2 are both late; the latest counts,
    5 started hours late: 50. 05 due a day later: a2 (+3 h) is on time there now."""
    test_a_counting_submission_never_graded_is_asked_for(course, cohort_dir)
    dues = {"01": DUE - 2 * H, "02": DUE, "04": DUE, "05": DUE + D}
    tc = term_course(course, dues)
    got = scores(tc, outputs(tc, cohort_dir, term_of(tc, cohort_dir))[0])
    assert got["ana"] == {"01": 50.0, "02": 80.0, "04": 70.0, "05": 100.0, "06": 100.0}
    # eloy, 2 h 5 min after the new due: hours count from due + grace (term/policy.py), so 1 h 55
    # min, 2 started hours: 80 % of 80.
    assert got["eloy"]["01"] == 64.0
    assert got["dani"]["05"] == 100.0
    # bea's extension withdrawn: her push a day after the due date is late (01: 24 h - grace,
    # 24 started hours, nothing left; 02: one started day, -20 %; 05: not accepted).
    out, _ = cohort_dir
    plain = out.parent / "roster-sin-prorroga.yml"
    plain.write_text(ROSTER.split("extensions:")[0], encoding="utf-8")
    log = ObservationLog(out)
    log.load()
    lessons = [course.lesson(lid) for lid in LESSONS]
    term = count_term(
        term_course(course), lessons, ["bea"], Store(out), FINGERPRINT, log, roster_schema.load(plain)
    )
    assert {lid: term.cells["bea"][lid].grade for lid in LESSONS} == {
        "01": 0.0,
        "02": 80.0,
        "04": 70.0,
        "05": None,
        "06": 100.0,
    }


def test_at_a_moment_only_what_was_recorded_by_then_counts(course, cohort_dir):
    """--at: a2 (+3 h) was not recorded at +1 h: a1 is ana's latest for every lesson."""
    test_a_counting_submission_never_graded_is_asked_for(course, cohort_dir)
    tc = term_course(course)
    term = term_of(tc, cohort_dir, at=DUE + H)
    assert {lid: term.cells["ana"][lid].grade for lid in LESSONS} == dict.fromkeys(LESSONS, 50.0)
    assert term.cells["bea"]["01"].status == "none"  # nothing of bea's recorded by then


# ------------------------------------------------------------------ the log's new sightings


def test_snapshots_and_pushes_say_what_the_head_was_when(tmp_path):
    """A force push back to an older commit: the fetch log keeps a1's first time only, but the
    snapshot and GitHub's push record say a1 was the head again afterwards."""
    log = ObservationLog(tmp_path)
    log.load()
    a1, a2 = sha("a1"), sha("a2")
    log.observe("ana", "fetch", commit=a1, content=None, seen=DUE - 2 * H)
    log.observe("ana", "fetch", commit=a2, content=None, seen=DUE - H)
    log.observe("ana", "fetch", commit=a1, content=None, seen=DUE)  # known: nothing written
    assert log.head_at("ana", DUE + H).commit == a2
    pushes = [Sighting("ana", "push", a1, None, DUE + 30 * timedelta(minutes=1))]
    assert log.record(pushes) == 1 and log.record(pushes) == 0  # a push is written once
    assert log.record([Sighting("ana", "snapshot", a1, None, DUE + 2 * H)] * 2) == 1
    assert log.record([Sighting("ana", "snapshot", a1, None, DUE + 3 * H)]) == 1  # each snapshot
    fresh = ObservationLog(tmp_path)
    assert fresh.load() == []
    assert fresh.head_at("ana", DUE + H).how == "push" and fresh.head_at("ana", DUE + H).commit == a1
    assert fresh.head_at("ana", DUE - 3 * H) is None and fresh.head_at("bea", DUE + H) is None
    # a1's submission time stays its first sighting, whatever saw it again.
    assert [(s.commit, s.seen) for s in fresh.submissions("ana")] == [(a1, DUE - 2 * H), (a2, DUE - H)]
    assert [s.commit for s in fresh.submissions("ana", until=DUE - 90 * timedelta(minutes=1))] == [a1]
    # An earlier push time than the fetch's is the commit's time: GitHub recorded it first.
    fresh.record([Sighting("ana", "push", a2, None, DUE - 3 * H)])
    assert fresh.first_seen("ana", f"commit:{a2}").seen == DUE - 3 * H


def test_lines_of_the_new_kinds_are_read_back_and_checked(tmp_path):
    line = Sighting("ana", "snapshot", sha("a1"), None, DUE).line()
    (tmp_path / "observations.jsonl").write_text(
        line + line.replace('"commit": "' + sha("a1") + '"', '"commit": null'), encoding="utf-8"
    )
    log = ObservationLog(tmp_path)
    problems = log.load()
    assert [(p.line, p.detail) for p in problems] == [(2, "a snapshot with no commit")]
    assert log.head_at("ana", DUE).commit == sha("a1")


def test_which_repositories_the_activity_api_is_asked_about():
    assert (
        github_repository("https://github.com/curso/tdc-ana.git", "https://api.github.com") == "curso/tdc-ana"
    )
    assert github_repository("git@github.com:curso/tdc-ana.git", "https://api.github.com") == "curso/tdc-ana"
    assert github_repository("https://gitlab.com/curso/ana.git", "https://api.github.com") is None
    assert github_repository("https://git.uni.es/curso/ana", "https://git.uni.es/api/v3") == "curso/ana"


def test_at_is_a_wall_clock_time_of_the_course(course):
    assert parse_at("2026-12-20 23:59", course) == DUE
    assert parse_at("2026-07-01 12:00", course) == datetime(2026, 7, 1, 10, 0, tzinfo=timezone.utc)  # summer
    with pytest.raises(BatchError) as bad:
        parse_at("20/12/2026", course)
    assert bad.value.text.key == "term_cohort.bad_at"


def test_a_commit_is_checked_out_on_its_own_without_links_or_filters(tmp_path):
    """materialise: an older commit's files, read from the object store (a smudge filter the
    clone's own configuration names never runs), its symlinks left out; the clone untouched."""
    clone = tmp_path / "clone"
    (clone / "exercises" / "01").mkdir(parents=True)
    git = ["git", "-c", "user.name=A", "-c", "user.email=a@example.org"]
    subprocess.run([*git, "init", "-q", str(clone)], check=True)
    (clone / "exercises" / "01" / "tokens.py").write_text("VIEJO = 1\n", encoding="utf-8")
    (clone / "exercises" / "01" / "enlace.py").symlink_to("/etc/passwd")
    (clone / ".gitattributes").write_text("*.py filter=trampa\n", encoding="utf-8")
    subprocess.run([*git, "add", "-A"], cwd=clone, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "1"], cwd=clone, check=True)
    old = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True
    ).stdout.strip()
    (clone / "exercises" / "01" / "tokens.py").write_text("NUEVO = 2\n", encoding="utf-8")
    subprocess.run([*git, "commit", "-q", "-am", "2"], cwd=clone, check=True)
    planted = tmp_path / "smudge-ran"
    subprocess.run(["git", "config", "filter.trampa.smudge", f"touch {planted}; cat"], cwd=clone, check=True)
    into = tmp_path / "into"
    assert materialise(clone, old, into) is None
    assert (into / "exercises" / "01" / "tokens.py").read_text(encoding="utf-8") == "VIEJO = 1\n"
    assert not (into / "exercises" / "01" / "enlace.py").exists() and not planted.exists()
    assert (clone / "exercises" / "01" / "tokens.py").read_text(encoding="utf-8") == "NUEVO = 2\n"
    assert "not in" in materialise(clone, "0" * 40, tmp_path / "none")  # no remote to ask


def test_merged_shards_give_the_term_grades_of_one_run(course, cohort_dir, tmp_path):
    """grade-all --merge of two shards (each with its own log and archive): the merged grades.csv
    holds the same term grades as one folder counted whole, extensions included with --roster
    (what a roster without them changes: test_moving_a_deadline_earlier_than_the_last_push...)."""
    test_a_counting_submission_never_graded_is_asked_for(course, cohort_dir)
    out, roster = cohort_dir
    tc = term_course(course)
    whole = scores(tc, outputs(tc, cohort_dir, term_of(tc, cohort_dir))[0])
    shards = [tmp_path / "shard-1", tmp_path / "shard-2"]
    parts = {learner: shard_of(learner, 2) for learner in PUSHES}
    assert set(parts.values()) == {1, 2}  # a real split of these five
    for index, folder in enumerate(shards, 1):
        mine = sorted(learner for learner, part in parts.items() if part == index)
        store = Store(folder)
        store.write_run(
            {
                "course": tc.name,
                "language": "es",
                "seed": 1,
                "lessons": list(LESSONS),
                "fingerprint": FINGERPRINT,
                "shard": f"{index}/2",
                "learners": mine,
            }
        )
        log = ObservationLog(folder)
        log.load()
        for learner in mine:
            for sub in ("results", "records"):
                (folder / sub).mkdir(parents=True, exist_ok=True)
                shutil.copyfile(out / sub / f"{learner}.json", folder / sub / f"{learner}.json")
            shutil.copytree(out / "attempts" / learner, folder / "attempts" / learner)
            log.record(
                [Sighting(learner, "push", sha(name), None, seen) for name, seen, _ in PUSHES[learner]]
            )
    merged = tmp_path / "merged"
    args = argparse.Namespace(
        merge=shards, out=merged, roster=out.parent / "roster.yml", submissions=None, shard=None
    )
    assert merge(tc, args, "es") == 0
    grades = {
        (row["student_id"], row["assignment"]): row for row in csv_rows((merged / "grades.csv").read_text())
    }
    assert scores(tc, grades) == whole
    assert json.loads((merged / "term.json").read_text())["bea"]["01"]["status"] == "on_time"  # extended
