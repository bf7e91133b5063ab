"""When `grade-all` first saw each submission (autograder/cohort/observations.py): the time that
stamps a learner's grade is grade-all's own, never a date the learner can set.

First the log on its own (appends, damaged lines, the earliest of two logs); then real
`grade-all` runs: roster repositories served over HTTP from local bare remotes whose commits
carry forged dates, folders without git whose file times are changed, a clone with uncommitted
changes, and two shards merged. Each run grades lesson 01 stubs (a few seconds).

Times are checked against the test's own clock around each run: a sighting must fall between
the moment the run started and the moment it ended (no assumption about how long a run takes).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import subprocess
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from support.cohort_factory import GIT, bare_remote, commit, grade_all, push, records, served, stub_files
from support.grading import write_submission
from support.project import SEED

from autograder.cohort.grade_all import shard_of
from autograder.cohort.observations import LOG_FILE, ObservationLog, Sighting, format_time

ALLOW = ("--allow-scheme", "http", "--allow-host", "127.0.0.1")
PAST, FUTURE = "2001-02-03T04:05:06Z", "2099-12-31T23:59:59Z"  # forged commit dates
PAST_EPOCH, FUTURE_EPOCH = 981173106, 4102444799
SHA_A, SHA_B = "a" * 40, "b" * 40
pytestmark = pytest.mark.timeout(1200)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(timezone.utc)


# ------------------------------------------------------------------ the log on its own


def test_a_sighting_is_written_once_and_keeps_its_first_time(tmp_path):
    log = ObservationLog(tmp_path)
    assert log.load() == [] and not log.path.exists()
    first = log.observe("ana", "fetch", commit=SHA_A, content=None, seen=at("2026-12-01T10:00:00.250Z"))
    assert first.seen == at("2026-12-01T10:00:00Z")  # whole seconds, as written
    written = log.path.read_bytes()
    again = log.observe("ana", "fetch", commit=SHA_A, content=None, seen=at("2026-12-02T10:00:00Z"))
    assert again == first and log.path.read_bytes() == written
    log.observe("ana", "fetch", commit=SHA_B, content=None, seen=at("2026-12-03T10:00:00Z"))
    log.observe("bea", "folder", commit=SHA_A, content="c" * 64, seen=at("2026-12-03T11:00:00Z"))
    lines = log.path.read_text(encoding="utf-8").splitlines()
    assert log.path.read_bytes().startswith(written) and len(lines) == 3
    assert json.loads(lines[0]) == {
        "learner": "ana",
        "how": "fetch",
        "commit": SHA_A,
        "content": None,
        "seen": "2026-12-01T10:00:00Z",
    }
    # The same commit in another learner's repository is that learner's own sighting; a
    # folder counts by its files, whatever commit it holds.
    assert json.loads(lines[2])["content"] == "c" * 64
    fresh = ObservationLog(tmp_path)
    assert fresh.load() == []
    assert fresh.first_seen("ana", f"commit:{SHA_A}").seen == at("2026-12-01T10:00:00Z")
    assert fresh.first_seen("bea", f"commit:{SHA_A}") is None
    assert fresh.first_seen("bea", "content:" + "c" * 64).commit == SHA_A


def test_lines_that_are_not_sightings_are_reported_by_number_and_skipped(tmp_path):
    good = Sighting("ana", "fetch", SHA_A, None, at("2026-12-01T10:00:00Z")).line()
    bad = [
        "esto no es json",
        json.dumps(
            {
                "learner": "=HYPERLINK(1)",
                "how": "fetch",
                "commit": SHA_A,
                "content": None,
                "seen": "2026-12-01T10:00:00Z",
            }
        ),
        json.dumps(
            {
                "learner": "bea",
                "how": "fetch",
                "commit": SHA_A,
                "content": None,
                "seen": "2026-12-01 10:00:00",
            }
        ),  # no time zone
        json.dumps({"learner": "bea", "how": "folder", "commit": None, "seen": "2026-12-01T10:00:00Z"}),
        json.dumps(
            {
                "learner": "bea",
                "how": "fetch",
                "commit": "HEAD",
                "content": None,
                "seen": "2026-12-01T10:00:00Z",
            }
        ),
        json.dumps(["bea"]),
    ]
    later = Sighting("bea", "fetch", SHA_B, None, at("2026-12-02T10:00:00Z")).line()
    log = ObservationLog(tmp_path)
    log.path.write_bytes(good.encode() + ("\n".join(bad) + "\n").encode() + b"\xff\xfe\n" + later.encode())
    problems = log.load()
    assert [(p.line, p.cut) for p in problems] == [(n, False) for n in range(2, 9)], problems
    details = [p.detail for p in problems]
    assert "learner '=HYPERLINK(1)' is not a learner id" in details[1]
    assert "no time zone" in details[2] and "missing content" in details[3]
    assert (
        "not a git object id" in details[4]
        and "not a JSON object" in details[5]
        and details[6] == "not UTF-8"
    )
    assert all(p.path == log.path for p in problems)
    # Nothing else is lost: both good lines count.
    assert [s.learner for s in log.sightings()] == ["ana", "bea"]


def test_a_line_cut_short_is_reported_and_never_glued_to(tmp_path):
    log = ObservationLog(tmp_path)
    log.observe("ana", "fetch", commit=SHA_A, content=None, seen=at("2026-12-01T10:00:00Z"))
    cut = '{"learner": "bea", "how": "fetch", "commit": "bbbb'
    with open(log.path, "a", encoding="utf-8") as fh:
        fh.write(cut)  # a run killed in the middle of its write
    problems = ObservationLog(tmp_path).load()
    assert [(p.line, p.cut) for p in problems] == [(2, True)]
    log = ObservationLog(tmp_path)
    log.load()
    log.observe("bea", "fetch", commit=SHA_B, content=None, seen=at("2026-12-01T11:00:00Z"))
    lines = log.path.read_text(encoding="utf-8").split("\n")
    assert lines[1] == cut and json.loads(lines[2])["learner"] == "bea"  # kept as it was, not glued
    again = ObservationLog(tmp_path)
    assert [(p.line, p.cut) for p in again.load()] == [(2, False)]  # now a whole line, still not a sighting
    assert [s.learner for s in again.sightings()] == ["ana", "bea"]


def test_adding_another_logs_sightings_keeps_the_earliest(tmp_path):
    log = ObservationLog(tmp_path)
    log.observe("ana", "fetch", commit=SHA_A, content=None, seen=at("2026-12-05T10:00:00Z"))
    before = log.path.read_bytes()
    earlier = Sighting("ana", "fetch", SHA_A, None, at("2026-12-01T10:00:00Z"))
    later = Sighting("ana", "fetch", SHA_A, None, at("2026-12-09T10:00:00Z"))
    other = Sighting("bea", "folder", None, "d" * 64, at("2026-12-02T10:00:00Z"))
    assert log.add([later, other, earlier, other]) == 2
    assert log.path.read_bytes().startswith(before)  # appended, never rewritten
    reread = ObservationLog(tmp_path)
    reread.load()
    assert reread.first_seen("ana", f"commit:{SHA_A}").seen == earlier.seen
    assert reread.sightings() == [earlier, other]
    assert log.add([later, other]) == 0


# ------------------------------------------------------------------ real runs


def clock_floor() -> int:
    return math.floor(time.time())


def clock_ceil() -> int:
    return math.ceil(time.time())


def timed(*args, check: bool = True) -> tuple[subprocess.CompletedProcess, int, int]:
    """`grade-all ARGS`, and this test's clock (whole seconds) before and after it."""
    start = clock_floor()
    proc = grade_all(*args, check=check)
    return proc, start, clock_ceil()


def after(stamp: int) -> None:
    """Wait until the clock has passed `stamp`'s second: what is seen from now on is later."""
    while time.time() < stamp + 1:
        time.sleep(0.05)


def log_lines(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / LOG_FILE).read_text(encoding="utf-8").splitlines()]


def read_csv(path: Path) -> dict[str, dict[str, str]]:
    return {row["student_id"]: row for row in csv.DictReader(io.StringIO(path.read_text(encoding="utf-8")))}


def shown(stamp: int) -> str:
    """A Unix time as grades.csv, cohort.csv and nbgrader write it: naive UTC."""
    return str(datetime.fromtimestamp(stamp, timezone.utc).replace(tzinfo=None))


def assert_stamped(out: Path, lesson, expected: dict[str, int]) -> None:
    """Every output carries the same time for each learner: record, both CSVs, the gradebook."""
    from nbgrader.api import Gradebook

    got = records(out)
    assert {learner: got[learner]["timestamp"] for learner in expected} == expected
    grades, wide = read_csv(out / "grades.csv"), read_csv(out / "cohort.csv")
    with Gradebook(f"sqlite:///{out / 'gradebook.db'}") as gb:
        for learner, stamp in expected.items():
            assert grades[learner]["timestamp"] == wide[learner]["timestamp"] == shown(stamp), learner
            assert str(gb.find_submission(lesson.folder, learner).timestamp) == shown(stamp), learner


def git_out(folder: Path, *args: str) -> str:
    return subprocess.run(
        [*GIT, *args], cwd=folder, check=True, capture_output=True, text=True
    ).stdout.strip()


def test_a_forged_commit_date_counts_for_nothing_the_fetch_time_does(course, tmp_path):
    lesson = course.lesson("01")
    stub = stub_files(lesson)
    remotes, submissions, out = tmp_path / "remotes", tmp_path / "submissions", tmp_path / "out"
    remotes.mkdir()
    bare_remote(remotes, "pasado", lesson, stub, date=PAST)
    bare_remote(remotes, "futuro", lesson, stub, date=FUTURE)
    roster = tmp_path / "roster.csv"
    with served(remotes) as base:
        roster.write_text(
            f"id,name,email,url\npasado,Pa Sado,p@example.org,{base}/pasado.git\n"
            f"futuro,Fu Turo,f@example.org,{base}/futuro.git\n",
            encoding="utf-8",
        )
        args = (submissions, "--roster", roster, "--out", out, "--lessons", "01", "--jobs", 2, *ALLOW)

        _, start, end = timed(*args, "--seed", SEED)
        first = records(out)
        # The forged dates did arrive in the clones grade-all fetched...
        assert git_out(submissions / "pasado", "log", "-1", "--format=%ct") == str(PAST_EPOCH)
        assert git_out(submissions / "futuro", "log", "-1", "--format=%ct") == str(FUTURE_EPOCH)
        # ...and the time of each learner is when grade-all fetched it.
        stamps = {learner: first[learner]["timestamp"] for learner in ("pasado", "futuro")}
        assert all(start <= stamp <= end for stamp in stamps.values()), (start, stamps, end)
        assert_stamped(out, lesson, stamps)
        lines = log_lines(out)
        assert sorted((line["learner"], line["how"], line["commit"], line["content"]) for line in lines) == [
            ("futuro", "fetch", first["futuro"]["commit"], None),
            ("pasado", "fetch", first["pasado"]["commit"], None),
        ]
        assert {line["learner"]: line["seen"] for line in lines} == {
            learner: format_time(datetime.fromtimestamp(stamp, timezone.utc))
            for learner, stamp in stamps.items()
        }
        assert first["pasado"]["observed"] == f"commit:{first['pasado']['commit']}"

        # Nothing new: the same times, the log untouched. (Whether a learner is graded again
        # is the grading fingerprint's business, tests/cohort/test_batch.py's: it changes nothing here.)
        logged = (out / LOG_FILE).read_bytes()
        timed(*args)
        assert (out / LOG_FILE).read_bytes() == logged
        assert_stamped(out, lesson, stamps)

        # A new push, dated in the past again: a new line, a later time; the old line stays.
        after(max(stamps.values()))
        old_commit = first["pasado"]["commit"]
        new_commit = commit(
            remotes / "pasado-work", lesson, {**stub, "notas.txt": "segunda\n"}, "segunda", date=PAST
        )
        _, start, end = timed(*args)
        got = records(out)
        assert got["pasado"]["commit"] == new_commit and start <= got["pasado"]["timestamp"] <= end
        assert got["pasado"]["timestamp"] > stamps["pasado"]
        new_lines = (out / LOG_FILE).read_bytes()
        assert new_lines.startswith(logged)
        added = [json.loads(line) for line in new_lines[len(logged) :].decode("utf-8").splitlines()]
        assert [(line["learner"], line["commit"]) for line in added] == [("pasado", new_commit)]
        assert_stamped(out, lesson, {"pasado": got["pasado"]["timestamp"], "futuro": stamps["futuro"]})

        # Back to the older commit (a forced push): it keeps the time it was first seen.
        push(remotes / "pasado-work", f"{old_commit}:main")
        timed(*args)
        assert records(out)["pasado"]["commit"] == old_commit
        assert (out / LOG_FILE).read_bytes() == new_lines
        assert_stamped(out, lesson, stamps)


def test_a_folder_keeps_the_time_it_was_first_seen_whatever_its_file_times(course, tmp_path):
    """ana hands in a folder without git; beto a clone that grade-all did not fetch, whose
    commit is dated in the past. Their file times are changed; then beto changes a file
    without committing (his HEAD, and its old sighting, are no guide to his files)."""
    lesson = course.lesson("01")
    stub = stub_files(lesson)
    submissions, out = tmp_path / "submissions", tmp_path / "out"
    write_submission(submissions / "ana" / lesson.folder, stub)
    beto = submissions / "beto"
    subprocess.run([*GIT, "init", "-q", str(beto)], check=True)
    head = commit(beto, lesson, stub, "mi entrega", date=PAST, push_it=False)
    args = (submissions, "--out", out, "--lessons", "01", "--jobs", 2)

    _, start, end = timed(*args, "--seed", SEED)
    first = records(out)
    stamps = {learner: first[learner]["timestamp"] for learner in ("ana", "beto")}
    assert all(start <= stamp <= end for stamp in stamps.values()), (start, stamps, end)
    lines = {line["learner"]: line for line in log_lines(out)}
    assert (lines["ana"]["how"], lines["ana"]["commit"]) == ("folder", None)
    assert (lines["beto"]["how"], lines["beto"]["commit"]) == ("folder", head)
    for learner in ("ana", "beto"):
        assert first[learner]["observed"] == "content:" + lines[learner]["content"]
    assert_stamped(out, lesson, stamps)

    # File times in the past and in the future; a run killed while writing a line.
    for number, path in enumerate(sorted(p for p in submissions.rglob("*") if ".git" not in p.parts)):
        stamp = PAST_EPOCH if number % 2 else FUTURE_EPOCH
        os.utime(path, (stamp, stamp))
    with open(out / LOG_FILE, "a", encoding="utf-8") as fh:
        fh.write('{"learner": "ana", "how": "fold')
    logged = (out / LOG_FILE).read_bytes()
    second, _, _ = timed(*args)
    assert f"{out / LOG_FILE}:3: la última línea está cortada" in second.stderr, second.stderr
    assert (out / LOG_FILE).read_bytes() == logged
    assert_stamped(out, lesson, stamps)

    # beto edits his files without committing: new files, a new sighting, though HEAD is the same.
    after(max(stamps.values()))
    (beto / "exercises" / lesson.folder / "notas.txt").write_text("cambiado después\n", encoding="utf-8")
    third, start, end = timed(*args)
    assert f"{out / LOG_FILE}:3: la última línea está cortada" in third.stderr, third.stderr  # until now
    text = (out / LOG_FILE).read_bytes()
    assert text.startswith(logged + b"\n")  # the cut line ended, never glued to
    added = json.loads(text[len(logged) + 1 :].decode("utf-8"))
    assert (added["learner"], added["how"], added["commit"]) == ("beto", "folder", head)
    assert added["content"] != lines["beto"]["content"]
    beto_now = records(out)["beto"]["timestamp"]
    assert start <= beto_now <= end and beto_now > stamps["beto"]
    assert_stamped(out, lesson, {"ana": stamps["ana"], "beto": beto_now})


def test_shards_keep_their_own_logs_and_the_merge_keeps_both(course, tmp_path):
    lesson = course.lesson("01")
    stub = stub_files(lesson)
    submissions = tmp_path / "submissions"
    candidates = ["ana", "beto", "carla", "dario", "eva", "fede"]
    one = next(learner for learner in candidates if shard_of(learner, 2) == 1)
    two = next(learner for learner in candidates if shard_of(learner, 2) == 2)
    for learner in (one, two):
        write_submission(submissions / learner / lesson.folder, stub)
    shards = [tmp_path / "shard-1", tmp_path / "shard-2"]
    for index, folder in enumerate(shards, 1):
        grade_all(submissions, "--out", folder, "--shard", f"{index}/2", "--lessons", "01", "--seed", SEED)
    logs = [log_lines(folder) for folder in shards]
    assert [[line["learner"] for line in log] for log in logs] == [[one], [two]]

    # The merged folder saw `one`'s files earlier (a run into it before the shards); the second
    # shard's log ends in a line cut short.
    merged = tmp_path / "merged"
    merged.mkdir()
    earlier = datetime.fromisoformat(logs[0][0]["seen"]) - timedelta(days=3)
    seeded = {**logs[0][0], "seen": format_time(earlier)}
    (merged / LOG_FILE).write_text(json.dumps(seeded) + "\n", encoding="utf-8")
    with open(shards[1] / LOG_FILE, "a", encoding="utf-8") as fh:
        fh.write('{"learner": "')
    shard_bytes = [(folder / LOG_FILE).read_bytes() for folder in shards]

    proc = grade_all("--merge", *shards, "--out", merged)
    assert f"{shards[1] / LOG_FILE}:2: la última línea está cortada" in proc.stderr, proc.stderr
    assert [(folder / LOG_FILE).read_bytes() for folder in shards] == shard_bytes  # read, never written
    combined = log_lines(merged)
    assert combined[0] == seeded  # the merged folder's own line first, untouched
    for line in (*logs[0], *logs[1]):
        same = [c for c in combined if (c["learner"], c["content"]) == (line["learner"], line["content"])]
        assert same and min(at(c["seen"]) for c in same) <= at(line["seen"]), line
    assert logs[1][0] in combined  # the second shard's sighting, as it was
    assert logs[0][0] not in combined  # the first shard's is later than what the folder knew
    stamp_one = int(earlier.timestamp())
    stamp_two = int(at(logs[1][0]["seen"]).timestamp())
    assert records(shards[0])[one]["timestamp"] == int(at(logs[0][0]["seen"]).timestamp())
    assert_stamped(merged, lesson, {one: stamp_one, two: stamp_two})
