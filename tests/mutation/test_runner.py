"""The mutation bench's judging, store and report (bench/mutation/runner.py, store.py,
report.py), and one real run: two mutants of lesson 01's `vocab` graded through grade-all's
pool (one grading process, ~10 s of CPU in all), then the same run again, which grades nothing."""

from __future__ import annotations

import json
import sys

import pytest
from support.project import ROOT

from autograder.core.manifest import load_course
from bench.mutation import report
from bench.mutation.mutants import Mutant, generate
from bench.mutation.runner import Settings, judge, run
from bench.mutation.store import ORACLE_UNAVAILABLE, Store

MUTANT = Mutant("01:vocab:number:1", "01", "vocab", "data.py", "number", 3, "1", "2", "text")


def _result(completed: bool, *checks: tuple[str, str | None, str, str | None]) -> dict:
    """grade-all's result JSON for lesson 01, checks as (id, todo, status, waits_on)."""
    return {
        "lessons": [
            {
                "id": "01",
                "completed": completed,
                "score": 90,
                "max_score": 100,
                "checks": [
                    {"id": ident, "todo": todo, "status": status, "waits_on": waits, "message": "m"}
                    for ident, todo, status, waits in checks
                ],
            }
        ]
    }


@pytest.mark.parametrize(
    "checks, blame_ok",
    [
        ([("vocab", "vocab", "failed", None)], True),
        ([("vocab", "vocab", "failed", None), ("quiz-1", None, "failed", None)], True),
        ([("vocab", "vocab", "failed", None), ("encode", "encode-decode", "error", "vocab")], True),
        ([("vocab", "vocab", "failed", None), ("encode", "encode-decode", "failed", None)], False),
        ([("encode", "encode-decode", "failed", "vocab")], False),  # waits on it, but nothing names it
        ([("quiz-1", None, "failed", None)], False),
    ],
)
def test_a_kill_is_blamed_right_only_when_its_todo_fails_and_no_other_todo_is_charged(checks, blame_ok):
    verdict = judge(MUTANT, _result(False, ("split-order", "split", "passed", None), *checks))
    assert verdict["status"] == "killed" and verdict["blame_ok"] is blame_ok
    assert [c["check"] for c in verdict["failed"]] == [c[0] for c in checks]


def test_a_completed_lesson_is_a_survivor_and_an_unfinished_grading_a_kill_without_blame():
    survived = judge(MUTANT, _result(True, ("vocab", "vocab", "passed", None)))
    assert survived["status"] == "survived" and survived["blame_ok"] is None
    timeout = judge(MUTANT, None, "timeout")
    assert timeout["status"] == "timeout" and timeout["blame_ok"] is None


def test_the_store_keeps_the_last_line_of_an_id_and_skips_a_cut_line(tmp_path):
    store = Store(tmp_path / "run")
    store.append({"id": "a", "status": "survived", "oracle": None})
    store.append({"id": "a", "status": "survived", "oracle": {"error": ORACLE_UNAVAILABLE}})
    store.append({"id": "b", "status": "survived", "oracle": {"equivalent": True, "error": None}})
    with store.results.open("a", encoding="utf-8") as out:
        out.write('{"id": "c", "stat')  # a line cut by a kill
    found = store.load()
    assert sorted(found) == ["a", "b"] and store.skipped_lines == 1
    assert store.needs_oracle(found["a"]) and not store.needs_oracle(found["b"])
    assert (tmp_path / "run" / ".gitignore").read_text() == "*\n"


def test_the_scores_leave_equivalent_mutants_out_and_blame_counts_judged_kills():
    rows = [
        {"status": "killed", "blame_ok": True},
        {"status": "killed", "blame_ok": False},
        {"status": "timeout", "blame_ok": None},
        {"status": "survived", "oracle": {"equivalent": True, "probes": 9, "error": None}},
        {"status": "survived", "oracle": {"equivalent": False, "difference": "y differs", "error": None}},
        {"status": "survived", "oracle": None},
    ]
    s = report.summarise(rows)
    assert (s["killed"], s["equivalent"], s["gaps"], s["unjudged"], s["unfinished"]) == (3, 1, 1, 1, 1)
    assert s["score"] == pytest.approx(3 / 5) and s["blame"] == pytest.approx(1 / 2)


def test_two_mutants_graded_through_the_pool_then_resumed(tmp_path, monkeypatch, capsys):
    course = load_course(ROOT / "course.yml")
    made = generate(course, "01", "vocab")
    kill = next(m for m in made if m.operator == "call-swap" and m.after == "list(set(text))")
    same = next(m for m in made if m.operator == "stmt-dup" and m.before.startswith("self.vocab_size ="))
    # The oracle is not run here (two fresh interpreters): it is made unavailable, which the
    # survivor's line says, and a rerun sends the survivor to it again.
    monkeypatch.setitem(sys.modules, "bench.mutation.oracle", None)
    store = Store(tmp_path / "run")
    settings = Settings(jobs=1, learner_timeout=120)

    counts = run(course, [kill, same], store, settings)
    assert counts == {"graded": 2, "skipped": 0, "oracle": 1}
    lines = store.load()
    killed, survived = lines[kill.id], lines[same.id]
    assert killed["status"] == "killed" and killed["blame_ok"] is True, killed
    assert {c["todo"] for c in killed["failed"]} == {"vocab"}
    # running the statement twice changes nothing: the graders must give it full marks
    assert survived["status"] == "survived" and survived["score"] == survived["max_score"], survived
    assert survived["oracle"]["error"] == ORACLE_UNAVAILABLE

    # the same run again: nothing is graded (no pool starts), the survivor goes to the oracle again
    assert run(course, [kill, same], store, settings) == {"graded": 0, "skipped": 2, "oracle": 1}
    assert len(store.results.read_text(encoding="utf-8").splitlines()) == 4
    log = [json.loads(line) for line in store.runs.read_text(encoding="utf-8").splitlines()]
    assert [(entry["lesson"], entry["mutants"]) for entry in log] == [("01", 2)]

    text = report.render(store.load(), title="t", run_log=store.run_log())
    assert "01:vocab:" in text and "Survivors (1)" in text and "not judged (oracle unavailable)" in text
