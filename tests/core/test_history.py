"""autograder/core/history.py: records, XP and streak arithmetic on hand-made histories."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta, timezone

import pytest

from autograder.core.history import (
    LessonEntry,
    Record,
    badge,
    compute_progress,
    dump_line,
    parse_history,
)
from autograder.core.results import CheckResult, CourseResult, LessonResult, Status
from autograder.render.output import to_json_dict

MADRID = "Europe/Madrid"
UTC = timezone.utc
_counter = iter(range(1, 10**6))


def sha(n: int | None = None) -> str:
    return f"{next(_counter) if n is None else n:040x}"


def at(day: int, hour: int = 12, minute: int = 0, month: int = 1, year: int = 2025) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def lesson(
    id: str = "03",
    score: float = 10,
    max_score: float = 10,
    xp_max: int = 100,
    mode: str = "hidden",
    completed=None,
):
    completed = score == max_score if completed is None else completed
    return LessonEntry(id, score, max_score, completed, xp_max if completed else 0, xp_max, mode)


def rec(
    committed: datetime, *lessons: LessonEntry, commit: str | None = None, graded: datetime | None = None
) -> Record:
    lessons = lessons or (lesson(),)
    return Record(
        commit or sha(),
        committed,
        graded or committed + timedelta(minutes=5),
        sum(x.xp for x in lessons),
        sum(x.xp_max for x in lessons),
        tuple(lessons),
    )


def climbing(days: list[int], month: int = 1) -> list[Record]:
    """One record per listed day, each with a better score than the last (all progress)."""
    return [rec(at(day, month=month), lesson(score=i + 1, max_score=100)) for i, day in enumerate(days)]


# --- streaks ---------------------------------------------------------------------------------


def test_a_gap_breaks_the_streak_and_the_longest_is_kept():
    p = compute_progress(climbing([1, 2, 3, 5, 6]), MADRID, now=at(6, 20))
    assert (p.streak, p.longest_streak, p.progress_days, p.last_progress_day) == (2, 3, 5, date(2025, 1, 6))
    p = compute_progress(climbing([1, 2, 3, 4, 5, 6]), MADRID, now=at(6, 20))
    assert (p.streak, p.longest_streak) == (6, 6)


def test_the_streak_lives_until_the_end_of_the_next_day():
    records = climbing([1, 2, 3])
    assert compute_progress(records, MADRID, now=at(3, 22)).streak == 3  # today
    assert compute_progress(records, MADRID, now=at(4, 22)).streak == 3  # yesterday
    assert compute_progress(records, MADRID, now=at(5, 9)).streak == 0  # two days ago
    assert compute_progress(records, MADRID, now=at(5, 9)).longest_streak == 3
    # "Today" is in the course time zone: 23:30 UTC on the 4th is already the 5th in Madrid.
    assert compute_progress(records, MADRID, now=at(4, 23, 30)).streak == 0
    assert compute_progress(records, "UTC", now=at(4, 23, 30)).streak == 3


def test_several_runs_a_day_count_once():
    records = [rec(at(1, h), lesson(score=h, max_score=100)) for h in (9, 12, 18)]
    records.append(rec(at(2, 10), lesson(score=50, max_score=100)))
    p = compute_progress(records, MADRID, now=at(2, 20))
    assert (p.progress_days, p.streak, p.graded_commits) == (2, 2, 4)


def test_a_day_without_progress_does_not_extend_the_streak():
    records = climbing([1, 2])
    records.append(rec(at(3), lesson(score=2, max_score=100)))  # same as the best: no progress
    records.append(rec(at(4), lesson(score=1, max_score=100)))  # worse: no progress
    p = compute_progress(records, MADRID, now=at(3, 20))
    assert (p.streak, p.progress_days, p.last_progress_day) == (2, 2, date(2025, 1, 2))
    assert compute_progress(records, MADRID, now=at(4, 20)).streak == 0


def test_completing_a_lesson_for_the_first_time_is_progress_even_without_a_better_score():
    # Day 1: full score, but a skipped-then-failing check kept it incomplete (completed=False).
    first = rec(at(1), lesson(score=10, completed=False))
    second = rec(at(2), lesson(score=10, completed=True))
    p = compute_progress([first, second], MADRID, now=at(2))
    assert (p.progress_days, p.streak) == (2, 2)
    assert p.lessons[0].earned_on == date(2025, 1, 2)


def test_late_evening_utc_is_the_next_day_in_madrid():
    records = [
        rec(at(10, 12), lesson(score=1, max_score=100)),
        rec(at(10, 23, 30), lesson(score=2, max_score=100)),
    ]
    madrid = compute_progress(records, MADRID, now=at(11, 12))
    assert (madrid.progress_days, madrid.streak, madrid.last_progress_day) == (2, 2, date(2025, 1, 11))
    utc = compute_progress(records, "UTC", now=at(11, 12))
    assert (utc.progress_days, utc.streak, utc.last_progress_day) == (1, 1, date(2025, 1, 10))


def test_days_across_daylight_saving_changes():
    # Spring forward on 2025-03-30: 22:30 UTC is 23:30 CET the day before, 00:30 CEST after.
    before = rec(at(29, 22, 30, month=3), lesson(score=1, max_score=100))
    after = rec(at(30, 22, 30, month=3), lesson(score=2, max_score=100))
    p = compute_progress([before, after], MADRID, now=at(31, 12, month=3))
    assert p.last_progress_day == date(2025, 3, 31)
    assert (p.progress_days, p.streak, p.longest_streak) == (2, 1, 1)  # the 29th and the 31st
    # Fall back on 2025-10-26: 22:30 UTC on the 25th (CEST) and on the 26th (CET) are both the 26th.
    records = [
        rec(at(25, 22, 30, month=10), lesson(score=1, max_score=100)),
        rec(at(26, 22, 30, month=10), lesson(score=2, max_score=100)),
    ]
    p = compute_progress(records, MADRID, now=at(26, 22, 45, month=10))
    assert (p.progress_days, p.streak, p.last_progress_day) == (1, 1, date(2025, 10, 26))


def test_the_day_is_the_commit_date_not_the_grading_date():
    records = [
        rec(at(1), lesson(score=1, max_score=100)),
        rec(at(2), lesson(score=2, max_score=100), graded=at(9)),
    ]
    p = compute_progress(records, MADRID, now=at(3))
    assert (p.streak, p.last_progress_day) == (2, date(2025, 1, 2))


def test_records_count_in_commit_order_not_file_order():
    newer = rec(at(2), lesson(score=10), graded=at(2))
    rerun_of_older = rec(at(1), lesson(score=5), graded=at(5))  # an old commit graded last
    p = compute_progress([newer, rerun_of_older], MADRID, now=at(2))
    # In commit order both runs beat the best so far: two progress days. In file order the
    # re-run (5 < 10) would have been no progress.
    assert (p.progress_days, p.streak) == (2, 2)
    assert p.lessons[0].passing_now is True  # the latest commit passes, not the re-run
    assert p.lessons[0].earned_on == date(2025, 1, 2)


# --- XP, regressions, practice ---------------------------------------------------------------


def test_xp_once_earned_is_kept_and_a_regression_is_failing_now():
    records = [
        rec(at(1), lesson("03", 10), lesson("04", 2, xp_max=200)),
        rec(at(2), lesson("03", 4), lesson("04", 3, xp_max=200)),  # 03 breaks again
    ]
    p = compute_progress(records, MADRID, now=at(2))
    assert (p.xp, p.xp_max) == (100, 300)
    by_id = {x.id: x for x in p.lessons}
    assert by_id["03"].earned and by_id["03"].passing_now is False and by_id["03"].best_score == 10
    assert by_id["04"].earned is False and by_id["04"].passing_now is False
    assert p.regressions == ("03",)
    # The grading in progress fixes it: no regression, same XP.
    fixed = compute_progress(
        records, MADRID, now=at(3), current=rec(at(3), lesson("03", 10), lesson("04", 3, xp_max=200))
    )
    assert (fixed.xp, fixed.regressions, fixed.streak) == (100, (), 2)


def test_xp_max_comes_from_the_most_recent_record_and_never_graded_is_none():
    old = rec(at(1), lesson("03", 10))
    new = rec(at(2), lesson("03", 0), lesson("04", 0, xp_max=200))
    p = compute_progress([new, old], MADRID, now=at(2))
    assert (p.xp, p.xp_max) == (100, 300)
    assert [x.id for x in p.lessons] == ["03", "04"]
    empty = compute_progress([], MADRID, now=at(2))
    assert (empty.xp, empty.xp_max, empty.streak, empty.lessons, empty.last_progress_day) == (
        0,
        0,
        0,
        (),
        None,
    )
    only_04 = compute_progress([old], MADRID, now=at(2), current=rec(at(2), lesson("04", 0, xp_max=200)))
    by_id = {x.id: x for x in only_04.lessons}
    assert by_id["03"].passing_now is None and by_id["03"].earned and only_04.xp == 100


def test_current_counts_as_appended_but_a_recorded_commit_only_once():
    records = climbing([1, 2])
    today = rec(at(3), lesson(score=50, max_score=100))
    p = compute_progress(records, MADRID, now=at(3), current=today)
    assert (p.streak, p.graded_commits) == (3, 3)
    # The same commit graded again (e.g. a re-run) decides passing_now but is not a new record.
    again = rec(
        records[1].committed_at, lesson(score=100, max_score=100), commit=records[1].commit, graded=at(3)
    )
    p = compute_progress(records, MADRID, now=at(3), current=again)
    assert (p.graded_commits, p.progress_days, p.xp) == (2, 2, 0)
    assert p.lessons[0].passing_now is True


def test_duplicate_commits_keep_the_first_record():
    first = rec(at(1), lesson(score=10), commit=sha(7))
    second = rec(at(2), lesson(score=2), commit=sha(7))
    p = compute_progress([first, second], MADRID, now=at(2))
    assert (p.graded_commits, p.xp, p.lessons[0].passing_now) == (1, 100, True)
    records, problems = parse_history(dump_line(first) + dump_line(second))
    assert records == [first]
    assert len(problems) == 1 and problems[0].startswith("line 2: commit") and "line 1" in problems[0]


def test_practice_only_xp_is_flagged():
    practice = rec(at(1), lesson(mode="practice"))
    p = compute_progress([practice], MADRID, now=at(1))
    assert p.practice and p.lessons[0].practice and p.xp == 100
    hidden = rec(at(2), lesson(score=3, mode="hidden"))  # failing with the hidden graders...
    assert compute_progress([practice, hidden], MADRID, now=at(2)).practice
    confirmed = rec(at(3), lesson(mode="hidden"))  # ...until they confirm it
    assert not compute_progress([practice, hidden, confirmed], MADRID, now=at(3)).practice
    # A practice run of a lesson not earned does not flag anything.
    assert not compute_progress([rec(at(1), lesson(score=3, mode="practice"))], MADRID, now=at(1)).practice


def test_bad_time_zone_and_naive_now_are_errors():
    with pytest.raises(ValueError, match="time zone"):
        compute_progress([], "Mars/Olympus", now=at(1))
    with pytest.raises(ValueError, match="timezone-aware"):
        compute_progress([], MADRID, now=datetime(2025, 1, 1))


# --- badge -----------------------------------------------------------------------------------


def test_badge_colors_and_messages():
    nothing = compute_progress([rec(at(1), lesson(score=0))], MADRID, now=at(9))
    assert badge(nothing, "es", "Transformers desde cero") == {
        "schemaVersion": 1,
        "label": "Transformers desde cero",
        "message": "0/100 XP",
        "color": "lightgrey",
        "cacheSeconds": 300,
    }
    partial = compute_progress([rec(at(1), lesson("03"), lesson("04", 0, xp_max=200))], MADRID, now=at(1))
    assert (badge(partial, "es", "C")["message"], badge(partial, "es", "C")["color"]) == (
        "100/300 XP · racha 1 día",
        "yellow",
    )
    assert badge(partial, "en", "C")["message"] == "100/300 XP · 1-day streak"
    done = [rec(at(1), lesson("03", 5)), rec(at(2), lesson("03", 7)), rec(at(3), lesson("03", 10))]
    full = compute_progress(done, MADRID, now=at(4))
    assert badge(full, "es", "C")["message"] == "100/100 XP · racha 3 días"
    assert badge(full, "en", "C")["message"] == "100/100 XP · 3-day streak"
    assert badge(full, "en", "C")["color"] == "brightgreen"
    practice = compute_progress([rec(at(1), lesson(mode="practice"))], MADRID, now=at(5))
    assert badge(practice, "es", "C")["message"] == "100/100 XP (práctica)"
    assert badge(practice, "en", "C")["message"] == "100/100 XP (practice)"
    with pytest.raises(ValueError):
        badge(full, "fr", "C")


# --- records and their JSON ------------------------------------------------------------------


def course_result() -> CourseResult:
    done = LessonResult(
        "03",
        "atencion",
        {"es": "Atención", "en": "Attention"},
        50,
        [
            CheckResult("a", None, Status.PASSED, 1.5, 1.5),
            CheckResult("gpu", None, Status.SKIPPED, 0, 0),
        ],
    )
    failing = LessonResult(
        "04",
        "bloque",
        {"es": "Bloque", "en": "Block"},
        70,
        [
            CheckResult("b", None, Status.PASSED, 2, 2),
            CheckResult("c", None, Status.FAILED, 0, 4),
        ],
        mode="practice",
    )
    return CourseResult("transformers-desde-cero", "es", 1, [done, failing])


def test_a_record_from_the_results_json_round_trips():
    results = to_json_dict(course_result(), "es")
    record = Record.from_results(results, commit=sha(1), committed_at=at(1), graded_at=at(1, 13))
    assert (record.xp, record.xp_max) == (50, 120)
    assert record.lessons[1] == LessonEntry("04", 2.0, 6.0, False, 0, 70, "practice")
    line = dump_line(record)
    assert line.endswith("\n") and "\n" not in line[:-1]
    data = json.loads(line)
    assert data["v"] == 1 and data["committed_at"] == "2025-01-01T12:00:00+00:00"
    assert data["lessons"][0]["score"] == 1.5 and data["lessons"][1]["score"] == 2
    assert Record.from_json(data) == record
    assert dump_line(Record.from_json(data)) == line
    with pytest.raises(ValueError, match="timezone-aware"):
        Record.from_results(results, commit=sha(1), committed_at=datetime(2025, 1, 1), graded_at=at(1))
    with pytest.raises(ValueError, match="results"):
        Record.from_results({"xp": 0}, commit=sha(1), committed_at=at(1), graded_at=at(1))


def good() -> dict:
    return rec(at(1), lesson("03", 10), lesson("04", 2.5, xp_max=20), commit=sha(3)).to_json()


def mutated(path: list, value=None, delete: bool = False) -> dict:
    data = good()
    target = data
    for key in path[:-1]:
        target = target[key]
    if delete:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return data


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ([], "JSON object"),
        (mutated(["v"], 2), "version 2"),
        (mutated(["v"], True), "version"),
        (mutated(["commit"], delete=True), "missing field.*commit"),
        (mutated(["extra"], 1), "unknown field.*extra"),
        (mutated(["commit"], "abc123"), "hex"),
        (mutated(["commit"], "A" * 40), "hex"),
        (mutated(["committed_at"], "2025-01-01T12:00:00"), "offset"),
        (mutated(["graded_at"], "yesterday"), "ISO 8601"),
        (mutated(["graded_at"], 1735732800), "ISO 8601"),
        (mutated(["xp"], 0), "sum"),
        (mutated(["xp"], True), "sum"),
        (mutated(["lessons"], {}), "list"),
        (mutated(["lessons", 0, "score"], 11), "above max_score"),
        (mutated(["lessons", 0, "score"], -1), ">= 0"),
        (mutated(["lessons", 0, "score"], "10"), "number"),
        (mutated(["lessons", 0, "score"], 10**400), "number"),
        (mutated(["lessons", 0, "completed"], "yes"), "true or false"),
        (mutated(["lessons", 0, "xp"], 50), "does not match"),
        (mutated(["lessons", 0, "mode"], "exam"), "mode"),
        (mutated(["lessons", 0, "id"], ""), "non-empty"),
        (mutated(["lessons", 1, "id"], "03"), "twice"),
        (mutated(["lessons", 1, "max_score"], delete=True), "missing field.*max_score"),
        (mutated(["lessons", 1], ["04"]), "JSON object"),
    ],
)
def test_from_json_rejects_bad_records(data, error):
    with pytest.raises(ValueError, match=error):
        Record.from_json(data)


def test_from_json_accepts_the_good_record():
    assert Record.from_json(good()).to_json() == good()


def test_malformed_lines_are_reported_not_fatal():
    a, b = rec(at(1), commit=sha(11)), rec(at(2), commit=sha(12))
    text = "\n".join(
        [
            dump_line(a).rstrip("\n"),
            "not json at all",
            "",
            json.dumps(mutated(["v"], 9)),
            "[" * 100_000,  # deeply nested: must not blow the stack
            '{"v": 1}',
            dump_line(b).rstrip("\n"),
            "   ",
        ]
    )
    records, problems = parse_history(text)
    assert records == [a, b]
    assert [p.split(":")[0] for p in problems] == ["line 2", "line 4", "line 5", "line 6"]
    assert "version 9" in problems[1] and "missing field" in problems[3]
    records, problems = parse_history(dump_line(a).encode() + b"\xff\xfe garbage\n" + dump_line(b).encode())
    assert records == [a, b] and problems == ["line 2: not valid UTF-8"]
    assert parse_history("") == ([], [])
