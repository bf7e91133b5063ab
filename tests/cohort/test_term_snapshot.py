"""grade-all with deadlines, for real (issue 32): `--snapshot` records a learner's head and
GitHub's push times, a normal run grades and applies the late policy, a changed policy recounts
and grades the counting submission never graded, and `--at` grades the commit recorded as of a
moment and names the learner with no record before it.

The learner's repository is served by the local stand-in of GitHub (tests/support/fake_github.py:
git over smart HTTP and the repository activity API). Her second push carries a forged committer
date in 2001: the times that count are GitHub's push times and grade-all's own clock. Two
gradings of lesson 01 in all (the cheapest lesson): --at reuses the archived result.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import stat
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from support.cohort_factory import bare_remote, commit, records, stub_files
from support.fake_github import TOKEN, FakeGitHub
from support.project import ROOT
from support.variants import solution_files

from autograder.cohort.observations import LOG_FILE

ALLOW = ("--allow-scheme", "http", "--allow-host", "127.0.0.1")
PAST = "2001-02-03T04:05:06Z"  # the forged committer date of the late push
ZONE = ZoneInfo("Europe/Madrid")
pytestmark = pytest.mark.timeout(600)


def wall(moment: datetime) -> str:
    return moment.astimezone(ZONE).strftime("%Y-%m-%d %H:%M")


def course_with(root: Path, due: str, late: str) -> Path:
    """The real course.yml with lesson 01 due at `due` (course time) under the policy `late`."""
    text = (ROOT / "course.yml").read_text(encoding="utf-8")
    head = '  - id: "01"\n'
    assert text.count(head) == 1
    text = text.replace(head, f'{head}    due: "{due}"\n    late: {late}\n')
    root.mkdir(parents=True, exist_ok=True)
    (root / "course.yml").write_text(text, encoding="utf-8")
    return root / "course.yml"


def run(course_yml: Path, *args, env: dict[str, str]) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "autograder", "--course", str(course_yml), "grade-all", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=500,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def rows(path: Path) -> dict[str, dict[str, str]]:
    return {row["student_id"]: row for row in csv.DictReader(io.StringIO(path.read_text(encoding="utf-8")))}


def points_of(result: dict, lesson: str) -> float:
    found = next(item for item in result["lessons"] if item["id"] == lesson)
    return float(sum(check["score"] for check in found["checks"]))


def test_snapshot_pushes_late_policy_recount_and_at(course, tmp_path):
    lesson = course.lesson("01")
    now = datetime.fromtimestamp(math.floor(time.time()), timezone.utc)
    early, late = now - timedelta(hours=3), now - timedelta(hours=1)
    due = (now - timedelta(hours=2)).astimezone(ZONE).replace(second=0)
    due_text = due.strftime("%Y-%m-%d %H:%M")
    remotes = tmp_path / "remotes"
    (remotes / "curso").mkdir(parents=True)
    bare_remote(remotes, "curso/lola", lesson, stub_files(lesson))
    stub = subprocess.run(
        ["git", "rev-parse", "HEAD"],
        cwd=remotes / "curso/lola-work",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    solved = commit(remotes / "curso/lola-work", lesson, solution_files(lesson), "resuelto", date=PAST)
    submissions, out = tmp_path / "submissions", tmp_path / "out"

    with FakeGitHub() as fake:
        fake.git_root = remotes
        fake.add_repo("curso/lola")
        fake.add_activity("curso/lola", after=stub, timestamp=early, activity_type="branch_creation")
        fake.add_activity("curso/lola", after=solved, before=stub, timestamp=late)
        fake.add_activity("curso/lola", after="c" * 40, timestamp=late, ref="refs/heads/otra")  # not graded
        roster = tmp_path / "roster.yml"
        roster.write_text(
            "version: 1\nlearners:\n"
            f"  - {{id: lola, name: Lola López, email: lola@example.org, url: {fake.url}/git/curso/lola.git}}\n"
            f"  - {{id: mia, name: Mia Mora, email: mia@example.org, url: {fake.url}/git/curso/mia.git}}\n",
            encoding="utf-8",
        )
        env = {
            key: value for key, value in os.environ.items() if "TOKEN" not in key and key != "AUTOGRADER_LANG"
        }
        env |= {
            "GITHUB_API_URL": fake.url,
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": f"url.http://x-access-token:{TOKEN}@127.0.0.1:{fake.url.rsplit(':', 1)[1]}/.insteadOf",
            "GIT_CONFIG_VALUE_0": f"{fake.url}/",
        }
        common = (
            submissions,
            "--roster",
            roster,
            "--out",
            out,
            "--lessons",
            "01",
            "--jobs",
            1,
            "--seed",
            7,
            *ALLOW,
        )
        per_hour = course_with(tmp_path / "a", due_text, "{period: 1d, penalty: {per: hour, percent: 10}}")

        # Without a token: the snapshot says so and records the head only.
        bare = run(per_hour, *common, "--snapshot", "--lang", "en", env=env)
        assert "No token" in bare.stderr and "mia" in bare.stderr  # mia's repository does not exist
        assert not (out / "results").exists()  # a snapshot grades nothing
        lines = [json.loads(line) for line in (out / LOG_FILE).read_text(encoding="utf-8").splitlines()]
        assert [(x["learner"], x["how"], x["commit"]) for x in lines] == [("lola", "snapshot", solved)]
        # With one: GitHub's push times of the graded branch (another branch's are not hers to
        # count). Each is written once however often it is read (test_term_grades.py).
        env["AUTOGRADER_ROSTER_TOKEN"] = TOKEN
        run(per_hour, *common, "--snapshot", env=env)
        lines = [json.loads(line) for line in (out / LOG_FILE).read_text(encoding="utf-8").splitlines()]
        pushes = sorted((x["commit"], x["seen"]) for x in lines if x["how"] == "push")
        stamp = "%Y-%m-%dT%H:%M:%SZ"
        assert pushes == sorted([(stub, early.strftime(stamp)), (solved, late.strftime(stamp))])
        assert {(x["how"], x["commit"]) for x in lines if x["how"] == "snapshot"} == {("snapshot", solved)}

        # The late push counts where late is accepted: 50 min after due + grace, one started hour,
        # -10 %. Its time is GitHub's push, not the commit's 2001 nor this run's clock.
        run(per_hour, *common, env=env)
        result = json.loads((out / "results" / "lola.json").read_text(encoding="utf-8"))
        full = points_of(result, "01")
        graded = rows(out / "grades.csv")["lola"]
        assert float(graded["raw_score"]) == full and float(graded["late_submission_penalty"]) == round(
            full * 0.1, 2
        )
        assert float(graded["score"]) == round(full * 0.9, 2)
        assert graded["timestamp"] == late.replace(tzinfo=None).isoformat(sep=" ")
        assert graded["duedate"] == due.astimezone(timezone.utc).replace(tzinfo=None).isoformat(sep=" ")
        wide = rows(out / "cohort.csv")["lola"]
        assert wide[f"{lesson.folder}:status"] == "late" and float(wide[lesson.folder]) == round(
            full * 0.9, 2
        )
        assert "mia" in rows(out / "grades.csv")  # an error result, 0
        canvas = list(csv.reader(io.StringIO((out / "canvas.csv").read_text(encoding="utf-8-sig"))))
        lola = next(row for row in canvas if row[2] == "lola")  # SIS User ID: the roster's id
        assert float(lola[5]) == round(full * 0.9, 2)  # the LMS gets the term grade too

        # Nothing late accepted now: the stub pushed before the due date counts. It was never
        # graded: it is graded from its own commit, and lola's folder stays at her latest.
        refused = course_with(tmp_path / "b", due_text, "{accepted: false}")
        again = run(refused, *common, "--lang", "en", env=env)
        assert "never been graded" in again.stderr
        stub_result = next((out / "attempts" / "lola").glob(f"commit-{stub}.*.json"))
        stub_points = points_of(json.loads(stub_result.read_text(encoding="utf-8")), "01")
        assert stub_points < full
        graded = rows(out / "grades.csv")["lola"]
        assert (float(graded["score"]), float(graded["late_submission_penalty"])) == (stub_points, 0.0)
        assert graded["timestamp"] == early.replace(tzinfo=None).isoformat(sep=" ")
        assert records(out)["lola"]["commit"] == solved
        term = json.loads((out / "term.json").read_text(encoding="utf-8"))
        assert term["lola"]["01"]["what"] == f"commit:{stub}" and term["lola"]["01"]["status"] == "on_time"
        # Names, grades and code: DIR and what grade-all writes in it are the owner's only.
        assert stat.S_IMODE(out.stat().st_mode) == 0o700
        for name in ("grades.csv", "cohort.csv", "canvas.csv", "moodle.csv", "term.json", "gradebook.db"):
            assert stat.S_IMODE((out / name).stat().st_mode) == 0o600, name
        assert stat.S_IMODE((out / "results" / "lola.json").stat().st_mode) == 0o600

        # --at half an hour after her first push: the stub was her head then; mia had nothing.
        at = run(refused, *common, "--at", wall(early + timedelta(minutes=30)), "--lang", "en", env=env)
        assert "1 learner(s) with nothing recorded before" in at.stderr and "mia" in at.stderr
        assert "Done: 0 graded" in at.stdout  # the stub's result was archived: not graded again
        assert records(out)["lola"]["commit"] == stub
        assert records(out)["mia"]["error"] == "no_record"
        assert float(rows(out / "grades.csv")["lola"]["score"]) == stub_points
