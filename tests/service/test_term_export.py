"""`autograder serve --export` with deadlines (issue 32): each learner's counting submission per
lesson by the service's submission time (`submitted_at`, the one definition), late ones with the
penalty, an extension, a counting submission the service never graded (superseded) named and
counted 0, and a deadline moved earlier than the last graded push; the exported grades equal
hand-computed ones.

The service's tables are filled directly (its schema's rows), no grading and no server: the
export reads nothing else. Lesson 01: due 2026-12-20 23:59 Madrid (22:59 UTC), 3 days late at
-20 % per started day (counted from due + the 10-minute grace); lesson 02: nothing late accepted.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

from sqlalchemy import insert
from support import term_results
from support.project import ROOT

from autograder.cohort.outputs import Say
from autograder.core import roster as roster_schema
from autograder.core.manifest import REFUSED, LatePolicy, Term
from autograder.service.export import export
from autograder.service.schema import make_engine, results, submissions
from autograder.service.serve import deadline_boundaries, worker_config
from autograder.service.store import Store

DUE = datetime(2026, 12, 20, 22, 59, tzinfo=timezone.utc)
H = timedelta(hours=1)
LESSONS = ("01", "02")
ROSTER = """\
version: 1
learners:
  - {id: ana, name: Ana Alba, email: ana@example.org, url: https://github.com/curso/ana.git}
  - {id: bea, name: Bea Bravo, email: bea@example.org, url: https://github.com/curso/bea.git}
  - {id: ceci, name: Ceci Cano, email: ceci@example.org, url: https://github.com/curso/ceci.git}
extensions:
  - {learner: bea, lesson: "01", due: "2026-12-21 23:59"}
"""
# learner, submitted_at, state, fraction of the points earned (None: no result)
PUSHES = [
    ("ana", DUE - H, "done", 0.5),
    ("ana", DUE + 2 * H, "done", 1.0),
    ("bea", DUE + 3 * H, "done", 1.0),
    ("ceci", DUE - 2 * H, "superseded", None),  # a newer push came before it was graded
    ("ceci", DUE + H, "done", 1.0),
]


def term_course(course, due_01: datetime = DUE):
    policies = {"01": LatePolicy(True, timedelta(days=3), "day", 20.0, 0.0), "02": REFUSED}
    dues = {"01": due_01, "02": DUE}
    lessons = [
        dataclasses.replace(lesson, due=dues.get(lesson.id), late=policies.get(lesson.id))
        for lesson in course.lessons
    ]
    return dataclasses.replace(course, lessons=lessons, term=Term("latest", timedelta(minutes=10), REFUSED))


def result_json(course, fraction: float) -> str:
    return term_results.result_json(course, LESSONS, fraction)


def service_data(tmp_path, course) -> str:
    url = f"sqlite:///{tmp_path / 'service.db'}"
    Store(url).create()
    engine = make_engine(url)
    with engine.begin() as conn:
        for number, (learner, at, state, fraction) in enumerate(PUSHES, 1):
            sid = conn.execute(
                insert(submissions).values(
                    page_key=f"page{number}",
                    learner=learner,
                    repository_id=100 + len(learner),
                    repository=f"curso/{learner}",
                    sha=f"{number:040x}",
                    ref="refs/heads/main",
                    event_name="push",
                    run_id=number,
                    token_id=f"jti{number}",
                    submitted_at=at,
                    time_source="run",
                    received_at=at + timedelta(seconds=5),
                    state=state,
                )
            ).inserted_primary_key[0]
            if fraction is not None:
                conn.execute(
                    insert(results).values(
                        submission_id=sid,
                        status=state,
                        result_json=result_json(course, fraction),
                        graders_hash="g" * 64,
                        seed=1,
                        created_at=at + H,
                    )
                )
    engine.dispose()
    return url


def exported(tmp_path, course, url, name: str, capsys) -> tuple[dict, str]:
    roster_file = tmp_path / "roster.yml"
    roster_file.write_text(ROSTER, encoding="utf-8")
    config = SimpleNamespace(database=url, lessons=list(LESSONS))
    out = tmp_path / name
    assert export(config, course, roster_schema.load(roster_file), out, Say("en")) == 0
    text = (out / "grades.csv").read_text(encoding="utf-8")
    grades = {(row["student_id"], row["assignment"]): row for row in csv.DictReader(io.StringIO(text))}
    return grades, capsys.readouterr().err


def scores(course, grades) -> dict[str, dict[str, float]]:
    return {
        learner: {lid: float(grades[(learner, course.lesson(lid).folder)]["score"]) for lid in LESSONS}
        for learner in ("ana", "bea", "ceci")
    }


def test_the_export_counts_each_lessons_submission_by_submission_time(course, tmp_path, capsys):
    tc = term_course(course)
    url = service_data(tmp_path, tc)
    grades, said = exported(tmp_path, tc, url, "notas", capsys)
    assert scores(tc, grades) == {
        # 01: the +2 h push, 1 started day late: -20 %. 02 accepts nothing late: the -1 h push, 50.
        "ana": {"01": 80.0, "02": 50.0},
        # 01 extended by a day: +3 h is on time. 02: nothing before the due date.
        "bea": {"01": 100.0, "02": 0.0},
        # 02: the push at -2 h counts, and the service never graded it (superseded): named, 0.
        "ceci": {"01": 80.0, "02": 0.0},
    }
    row = grades[("ana", tc.lesson("01").folder)]
    assert (row["raw_score"], row["late_submission_penalty"]) == ("100.0", "20.0")
    assert row["timestamp"] == "2026-12-21 00:59:00" and row["xp"] == "50"
    assert grades[("bea", tc.lesson("01").folder)]["duedate"] == "2026-12-21 22:59:00"
    assert "ceci" in said and "service:4" in said and "ana" not in said
    # The LMS files carry the same grades; no grade is "no grade" there, never a graded 0.
    moodle = list(
        csv.reader(io.StringIO((tmp_path / "notas" / "moodle.csv").read_text(encoding="utf-8-sig")))
    )
    by_mail = {row[0]: row[1:3] for row in moodle[1:]}
    assert by_mail["ana@example.org"] == ["80", "50"] and by_mail["bea@example.org"] == ["100", "-"]
    assert by_mail["ceci@example.org"] == ["80", "-"]
    term = json.loads((tmp_path / "notas" / "term.json").read_text(encoding="utf-8"))
    assert term["ceci"]["02"]["status"] == "ungraded" and term["ana"]["02"]["what"] == "service:1"

    # 01 due two hours earlier, before ana's first push: her +2 h push is 4 h late (still one
    # started day), and 02 due then too refuses both of hers.
    moved = term_course(course, due_01=DUE - 2 * H)
    moved = dataclasses.replace(
        moved,
        lessons=[
            dataclasses.replace(lesson, due=DUE - 2 * H) if lesson.id == "02" else lesson
            for lesson in moved.lessons
        ],
    )
    grades, _ = exported(tmp_path, moved, url, "notas", capsys)
    assert scores(moved, grades)["ana"] == {"01": 80.0, "02": 0.0}


def queued(url: str, learner: str, at: datetime, number: int) -> int:
    engine = make_engine(url)
    with engine.begin() as conn:
        sid = conn.execute(
            insert(submissions).values(
                page_key=f"q{number}",
                learner=learner,
                repository_id=7,
                repository=f"curso/{learner}",
                sha=f"{number:040x}",
                ref="refs/heads/main",
                event_name="push",
                run_id=number,
                token_id=f"q{number}",
                submitted_at=at,
                time_source="run",
                received_at=at,
                state="queued",
                fetched_at=at,  # the service's fetcher stored its files: claimable
            )
        ).inserted_primary_key[0]
    engine.dispose()
    return sid


def test_the_workers_grade_the_last_push_before_each_deadline(course, tmp_path):
    """serve's workers get the deadlines as boundaries (due + grace, the late period's end +
    grace, extensions included): ana's last on-time push is graded although a late one came
    before the workers got to it; without them it was superseded and the term grade had nothing
    to count."""
    tc = term_course(course)
    roster_file = tmp_path / "roster.yml"
    roster_file.write_text(ROSTER, encoding="utf-8")
    roster = roster_schema.load(roster_file)
    g, d = timedelta(minutes=10), timedelta(days=1)
    # 01: due and 3 days later; bea's 01 extended a day: both moved; 02 (nothing late): due only.
    assert deadline_boundaries(tc, roster) == (DUE + g, DUE + d + g, DUE + 3 * d + g, DUE + 4 * d + g)
    assert deadline_boundaries(course, roster) == ()  # no deadlines: nothing kept back

    for bounds, graded in ((deadline_boundaries(tc, roster), 2), ((), 1)):
        url = f"sqlite:///{tmp_path / f'q{graded}.db'}"
        Store(url).create()
        on_time = queued(url, "ana", DUE - H, 1)
        late = queued(url, "ana", DUE + H, 2)
        store = Store(url)
        claimed = [store.claim("w", 30, boundaries=bounds) for _ in range(3)]
        assert [c.id for c in claimed if c is not None] == [on_time, late][2 - graded :]
        assert (store.get(on_time).state == "superseded") is (graded == 1)
        store.close()

    # worker_config hands them to the workers, from the course.yml and roster the command serves.
    text = (ROOT / "course.yml").read_text(encoding="utf-8")
    head = '  - id: "01"\n'
    (tmp_path / "course.yml").write_text(
        text.replace(head, head + '    due: "2026-12-20 23:59"\n    late: {accepted: false}\n'),
        encoding="utf-8",
    )
    config = SimpleNamespace(
        course_file=tmp_path / "course.yml",
        roster_file=roster_file,
        database=f"sqlite:///{tmp_path / 'w.db'}",
        queue_url=None,
        data_dir=tmp_path,
        workers=1,
        lease_s=30.0,
        clone_url=None,
        allowed=None,
        api_url=None,
        lessons=None,
    )
    assert worker_config(config).boundaries == (DUE + g, DUE + d + g)  # bea's extension moves 01 a day
