"""Deadlines: course.yml's term fields (core/manifest.py), the roster's extensions
(core/roster.py) and each learner's due dates (term/deadlines.py). Every malformed date,
duration or policy names the file, the line and the field; due dates are wall-clock times in the
course's zone, DST included (Europe/Madrid: clocks go forward on 2027-03-28 at 02:00, back on
2026-10-25 at 03:00). Small hand-written files; no grading."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from autograder.core import i18n, roster
from autograder.core.manifest import (
    NO_TERM,
    REFUSED,
    SCHEMA_PATH,
    LatePolicy,
    ManifestError,
    Term,
    load_course,
)
from autograder.core.roster import RosterError
from autograder.term.deadlines import Due, check_extensions, due_dates

# Lesson 01 at line 6, its late policy/due written at LESSON01 (line 16); lesson 02 follows.
COURSE = """\
course: Curso de prueba
language: es
timezone: Europe/Madrid
TERM
lessons:
  - id: "01"
    slug: uno
    section: {es: A, en: A}
    title: {es: Uno, en: One}
    minutes: 10
    xp: 10
    files: [a.py]
    graders: lesson01
    todos: []
    checks: []
LESSON01
  - id: "02"
    slug: dos
    section: {es: A, en: A}
    title: {es: Dos, en: Two}
    minutes: 10
    xp: 10
    files: [b.py]
    graders: lesson02
    todos: []
    checks: []
LESSON02
  - id: "03"
    slug: tres
    section: {es: A, en: A}
    title: {es: Tres, en: Three}
    minutes: 10
    xp: 10
    files: [c.py]
    graders: lesson03
    todos: []
    checks: []
"""
TERM_LINE, LESSON01_LINE = 4, 16


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def write_course(tmp_path: Path, term: str = "", lesson01: str = "", lesson02: str = "") -> Path:
    path = tmp_path / "course.yml"
    text = COURSE.replace("TERM", term).replace("LESSON01", lesson01).replace("LESSON02", lesson02)
    path.write_text(text, encoding="utf-8")
    return path


def course_of(tmp_path: Path, **parts: str):
    return load_course(write_course(tmp_path, **parts))


def manifest_error(tmp_path: Path, **parts: str) -> tuple[Path, str]:
    path = write_course(tmp_path, **parts)
    with pytest.raises(ManifestError) as info:
        load_course(path)
    return path, str(info.value)


# --- course.yml: the model --------------------------------------------------------------------


def test_no_term_and_no_due_is_todays_behaviour(tmp_path):
    course = course_of(tmp_path)
    assert course.term == NO_TERM
    assert all(lesson.due is None and lesson.late is None for lesson in course.lessons)
    assert due_dates(course, None, "ana") == {}


def test_the_default_term_is_the_schemas():
    term = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))["$defs"]["term"]["properties"]
    assert NO_TERM == Term(
        counting=term["counting"]["default"],
        grace=timedelta(minutes=int(term["grace"]["default"].removesuffix("m"))),
        late=REFUSED,
    )
    assert term["late"]["default"] == {"accepted": False} and not REFUSED.accepted


def test_term_and_lesson_policies_are_parsed(tmp_path):
    course = course_of(
        tmp_path,
        term="term:\n  counting: best\n  grace: 5m\n  late: {period: 3d, penalty: {per: day, percent: 10}, floor: 50}",
        lesson01='    due: "2026-12-20 23:59"\n    late: {accepted: false}',
        lesson02='    due: "2027-01-10 23:59:30"',
    )
    assert course.term == Term(
        "best", timedelta(minutes=5), LatePolicy(True, timedelta(days=3), "day", 10.0, 50.0)
    )
    first, second, third = course.lessons
    assert first.due == utc(2026, 12, 20, 22, 59)  # CET is UTC+1 in December
    assert course.late_policy(first) == REFUSED
    assert second.due == utc(2027, 1, 10, 22, 59, 30)
    assert course.late_policy(second) == course.term.late
    assert third.due is None
    dates = due_dates(course, None, "ana")
    assert set(dates) == {"01", "02"}
    assert dates["01"] == Due("01", first.due, first.due, REFUSED, False)
    assert dates["02"].late_until == utc(2027, 1, 13, 22, 59, 30)


def test_a_due_date_without_a_term_block_takes_the_defaults(tmp_path):
    course = course_of(tmp_path, lesson01='    due: "2026-12-20 23:59"')
    assert course.term == NO_TERM
    assert due_dates(course, None, "ana")["01"].policy == REFUSED


@pytest.mark.parametrize(
    "wall, instant",
    [
        # Spring forward, 2027-03-28: 02:00 CET becomes 03:00 CEST.
        ("2027-03-28 01:59", utc(2027, 3, 28, 0, 59)),
        ("2027-03-28 03:00", utc(2027, 3, 28, 1, 0)),
        ("2027-03-28 23:59", utc(2027, 3, 28, 21, 59)),
        # Fall back, 2026-10-25: 03:00 CEST becomes 02:00 CET; 02:00-02:59 happens twice and is
        # its first occurrence (summer time, the earlier instant).
        ("2026-10-25 01:59", utc(2026, 10, 24, 23, 59)),
        ("2026-10-25 02:30", utc(2026, 10, 25, 0, 30)),
        ("2026-10-25 03:00", utc(2026, 10, 25, 2, 0)),
        ("2026-10-25 23:59", utc(2026, 10, 25, 22, 59)),
        ("2026-10-25T23:59:59", utc(2026, 10, 25, 22, 59, 59)),
    ],
)
def test_due_dates_are_wall_clock_times_in_the_course_zone_dst_included(tmp_path, wall, instant):
    assert course_of(tmp_path, lesson01=f'    due: "{wall}"').lessons[0].due == instant


def test_a_time_the_clocks_skip_is_an_error_naming_the_line(tmp_path):
    path, text = manifest_error(tmp_path, lesson01='    due: "2027-03-28 02:30"')
    assert text.startswith(f"{path}:{LESSON01_LINE}: lessons[0].due: "), text
    assert "«2027-03-28 02:30» no existe en Europe/Madrid" in text
    assert "«2027-03-28 03:30» es el mismo instante" in text


# --- course.yml: malformed term fields ----------------------------------------------------------

BAD_COURSE = [
    # (term, lesson01, line, field, expected words)
    (
        "",
        '    due: "20/12/2026 23:59"',
        LESSON01_LINE,
        "lessons[0].due",
        "«20/12/2026 23:59» no vale aquí: una fecha",
    ),
    (
        "",
        '    due: "2026-12-20"',
        LESSON01_LINE,
        "lessons[0].due",
        "una fecha sola no dice qué extremo del día",
    ),
    (
        "",
        "    due: 2026-12-20 23:59:00",
        LESSON01_LINE,
        "lessons[0].due",
        "«2026-12-20 23:59:00» no vale aquí",
    ),
    (
        "",
        '    due: "2027-02-29 23:59"',
        LESSON01_LINE,
        "lessons[0].due",
        "no es una fecha y hora del calendario",
    ),
    (
        "",
        '    due: "2026-12-20 24:00"',
        LESSON01_LINE,
        "lessons[0].due",
        "no es una fecha y hora del calendario",
    ),
    (
        "term:\n  grace: 10 min",
        "",
        TERM_LINE + 1,
        "term.grace",
        "«10 min» no vale aquí: un número entero y una unidad",
    ),
    ("term:\n  grace: 1.5h", "", TERM_LINE + 1, "term.grace", "«1.5h» no vale aquí"),
    ("term:\n  counting: first", "", TERM_LINE + 1, "term.counting", "latest (cuenta la última"),
    ("term:\n  grace: 5m\n  gracia: 5m", "", TERM_LINE + 2, "term.gracia", "el campo «gracia» no existe"),
    (
        "term:\n  late:\n    period: 3d\n    penalty: {per: week, percent: 10}",
        "",
        TERM_LINE + 3,
        "term.late.penalty.per",
        "«week» no vale aquí: hour o day",
    ),
    (
        "term:\n  late: {period: 3d, penalty: {per: day, percent: 120}}",
        "",
        TERM_LINE + 1,
        "term.late.penalty.percent",
        "«120» no vale aquí: un número de 0 a 100",
    ),
    (
        "term:\n  late: {period: 3d, penalty: {per: day}}",
        "",
        TERM_LINE + 1,
        "term.late.penalty",
        "falta el campo «percent»",
    ),
    (
        "term:\n  late: {period: 3d, penalty: {per: day, percent: 10}, floor: -5}",
        "",
        TERM_LINE + 1,
        "term.late.floor",
        "«-5» no vale aquí: un número de 0 a 100",
    ),
    (
        "",
        "    late: {accepted: true}",
        LESSON01_LINE,
        "lessons[0].late.accepted",
        "«true» no vale aquí: solo false",
    ),
    (
        "",
        "    late: {accepted: false, period: 3d}",
        LESSON01_LINE,
        "lessons[0].late",
        "o bien {accepted: false}",
    ),
    ("", "    late: {period: 3d}", LESSON01_LINE, "lessons[0].late", "o bien {accepted: false}"),
    (
        "",
        "    late: {period: 0d, penalty: {per: day, percent: 10}}",
        LESSON01_LINE,
        "lessons[0].late.period",
        "un periodo de 0 no acepta nada tarde",
    ),
]


@pytest.mark.parametrize(
    "term, lesson01, line, field, expected", BAD_COURSE, ids=[str(i) for i in range(len(BAD_COURSE))]
)
def test_each_bad_term_field_names_the_file_the_line_and_the_field(
    tmp_path, term, lesson01, line, field, expected
):
    path, text = manifest_error(tmp_path, term=term, lesson01=lesson01)
    assert text.startswith(f"{path}:{line}: {field}: "), text
    assert expected in text, text


def test_term_messages_follow_autograder_lang(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOGRADER_LANG", "en")
    path, text = manifest_error(tmp_path, lesson01='    due: "2027-03-28 02:30"')
    assert text.startswith(f"{path}:{LESSON01_LINE}: lessons[0].due: ")
    assert '"2027-03-28 02:30" does not exist in Europe/Madrid' in text


def test_other_manifest_problems_keep_their_form(tmp_path):
    # A term problem reported beside an older one: each in its own form, on its own line.
    path, text = manifest_error(tmp_path, lesson01='    due: "2027-02-30 23:59"\n    uses: ["02"]')
    lines = text.splitlines()
    assert len(lines) == 2
    assert any(
        line.startswith(f"{path}: lessons[0].uses[0]: '02' is not the id of an earlier") for line in lines
    )
    assert any(line.startswith(f"{path}:{LESSON01_LINE}: lessons[0].due: ") for line in lines)


# --- the roster's extensions --------------------------------------------------------------------

ROSTER = """\
version: 1
learners:
  - id: ana
  - id: bea
  - id: carla
extensions:
EXTENSIONS"""
EXTENSIONS_LINE = 7


def write_roster(tmp_path: Path, extensions: str) -> Path:
    path = tmp_path / "roster.yml"
    path.write_text(ROSTER.replace("EXTENSIONS", extensions), encoding="utf-8")
    return path


def roster_error(path: Path) -> str:
    with pytest.raises(RosterError) as info:
        roster.load(path)
    return i18n.localize(info.value.text, "es")


def test_extensions_are_read_with_their_lines(tmp_path):
    loaded = roster.load(
        write_roster(
            tmp_path,
            '  - {learner: ana, lesson: "01", due: "2026-12-27 23:59"}\n  - {learner: bea, lesson: all, extra: 36h}\n',
        )
    )
    first, second = loaded.extensions
    assert (first.learner, first.lesson, first.due, first.extra, first.line) == (
        "ana",
        "01",
        "2026-12-27 23:59",
        None,
        EXTENSIONS_LINE,
    )
    assert (second.learner, second.lesson, second.due, second.extra) == (
        "bea",
        "all",
        None,
        timedelta(hours=36),
    )
    assert loaded.extensions_of("bea") == (second,)
    # The canonical document keeps them: a roster written back (roster_update's dump) reads the same.
    again = roster.parse(yaml.safe_dump(loaded.document(), sort_keys=False), loaded.path)
    assert again.shape() == loaded.shape()
    assert loaded.document()["extensions"][1] == {"learner": "bea", "lesson": "all", "extra": "36h"}


def test_a_roster_without_extensions_and_a_csv_roster_have_none(tmp_path):
    path = tmp_path / "roster.yml"
    path.write_text("version: 1\nlearners:\n  - id: ana\n", encoding="utf-8")
    assert roster.load(path).extensions == ()
    assert "extensions" not in roster.load(path).document()
    csv_path = tmp_path / "roster.csv"
    csv_path.write_text("id,name\nana,Ana\n", encoding="utf-8")
    assert roster.load(csv_path).extensions == ()
    csv_path.write_text("id,extensions\nana,x\n", encoding="utf-8")
    assert "el campo «extensions» no existe" in roster_error(csv_path)


BAD_EXTENSIONS = [
    ('  - {learner: ana, lesson: "01"}\n', 0, "exactamente uno de los dos"),
    (
        '  - {learner: ana, lesson: "01", due: "2026-12-27 23:59", extra: 2d}\n',
        0,
        "exactamente uno de los dos",
    ),
    (
        '  - {learner: ana, lesson: "01", extra: 2d}\n  - {learner: anna, lesson: "01", extra: 2d}\n',
        1,
        "«anna», que no está en learners",
    ),
    (
        '  - {learner: ana, lesson: "01", extra: 2d}\n  - {learner: ana, lesson: "01", extra: 3d}\n',
        1,
        "ya tiene una prórroga de la lección 01 en la línea 7",
    ),
    (
        '  - {learner: ana, lesson: "01", extra: 2 days}\n',
        0,
        "el campo extra no admite «2 days»: un número entero y una unidad",
    ),
    (
        '  - {learner: ana, lesson: "01", due: "27/12/2026"}\n',
        0,
        "el campo due no admite «27/12/2026»: una fecha y hora entre comillas",
    ),
    (
        '  - {learner: ana, lesson: "01", due: "2026-12-32 23:59"}\n',
        0,
        "due: «2026-12-32 23:59» no es una fecha y hora del calendario",
    ),
    ("  - {learner: ana, lesson: 1, extra: 2d}\n", 0, "el campo lesson no admite «1»: el id de dos cifras"),
    ('  - {learner: ana, lesson: all, due: "2026-12-27 23:59"}\n', 0, "lesson: all lleva extra"),
    ('  - {learner: ana, lesson: "01", extra: 2d, reason: gripe}\n', 0, "el campo «reason» no existe"),
    ("  - {learner: ana, extra: 2d}\n", 0, "falta el campo obligatorio «lesson»"),
    ("  learner: ana\n", 0, "el campo extensions no admite"),
]


@pytest.mark.parametrize(
    "extensions, index, expected", BAD_EXTENSIONS, ids=[str(i) for i in range(len(BAD_EXTENSIONS))]
)
def test_each_bad_extension_names_the_file_the_line_and_the_field(tmp_path, extensions, index, expected):
    path = write_roster(tmp_path, extensions)
    text = roster_error(path)
    assert text.startswith(f"{path}:{EXTENSIONS_LINE + index}: "), text
    assert expected in text, text


# --- due dates with extensions -------------------------------------------------------------------

TERM = "term:\n  late: {period: 3d, penalty: {per: day, percent: 10}, floor: 50}"
DUE01 = '    due: "2026-12-20 23:59"'  # 22:59 UTC
DUE02 = '    due: "2027-01-10 23:59"'


def test_an_extension_moves_the_due_date_and_the_late_period(tmp_path):
    course = course_of(tmp_path, term=TERM, lesson01=DUE01, lesson02=DUE02)
    loaded = roster.load(
        write_roster(
            tmp_path,
            '  - {learner: ana, lesson: "01", due: "2026-12-27 23:59"}\n'
            "  - {learner: bea, lesson: all, extra: 2d}\n"
            '  - {learner: bea, lesson: "02", extra: 12h}\n',
        )
    )
    ana = due_dates(course, loaded, "ana")
    assert ana["01"].due == utc(2026, 12, 27, 22, 59) and ana["01"].extended
    assert ana["01"].late_until == utc(2026, 12, 30, 22, 59)
    assert ana["02"].due == utc(2027, 1, 10, 22, 59) and not ana["02"].extended
    bea = due_dates(course, loaded, "bea")
    assert bea["01"].due == utc(2026, 12, 22, 22, 59) and bea["01"].late_until == utc(2026, 12, 25, 22, 59)
    # the lesson's own extension replaces `all` for it
    assert bea["02"].due == utc(2027, 1, 11, 10, 59) and bea["02"].late_until == utc(2027, 1, 14, 10, 59)
    assert "03" not in bea  # `all` reaches only the lessons that have a due date
    carla = due_dates(course, loaded, "carla")
    assert carla["01"] == Due(
        "01", utc(2026, 12, 20, 22, 59), utc(2026, 12, 23, 22, 59), course.term.late, False
    )


def test_an_extension_across_a_dst_change_is_elapsed_time(tmp_path):
    # 2026-10-24 12:00 CEST + 1d = 2026-10-25 11:00 CET: 24 hours, not the same wall-clock time.
    course = course_of(tmp_path, lesson01='    due: "2026-10-24 12:00"')
    loaded = roster.load(write_roster(tmp_path, '  - {learner: ana, lesson: "01", extra: 1d}\n'))
    assert due_dates(course, loaded, "ana")["01"].due == utc(2026, 10, 25, 10, 0)


@pytest.mark.parametrize(
    "extensions, index, expected",
    [
        (
            '  - {learner: ana, lesson: "01", extra: 2d}\n  - {learner: bea, lesson: "07", extra: 2d}\n',
            1,
            "la lección «07» no está en course.yml (lecciones: 01, 02, 03)",
        ),
        ('  - {learner: carla, lesson: "03", extra: 2d}\n', 0, "la lección 03 no tiene fecha límite"),
        (
            '  - {learner: carla, lesson: "03", due: "2026-12-27 23:59"}\n',
            0,
            "la lección 03 no tiene fecha límite",
        ),
        (
            '  - {learner: carla, lesson: "01", due: "2027-03-28 02:15"}\n',
            0,
            "due: «2027-03-28 02:15» no existe en Europe/Madrid",
        ),
    ],
)
def test_an_extension_course_yml_cannot_take_is_caught_for_every_learner(
    tmp_path, extensions, index, expected
):
    course = course_of(tmp_path, term=TERM, lesson01=DUE01, lesson02=DUE02)
    path = write_roster(tmp_path, extensions)
    loaded = roster.load(path)
    for call in (lambda: check_extensions(course, loaded), lambda: due_dates(course, loaded, "ana")):
        with pytest.raises(RosterError) as info:
            call()  # ana's own dates too: a typo anywhere stops the run before any grade
        text = i18n.localize(info.value.text, "es")
        assert text.startswith(f"{path}:{EXTENSIONS_LINE + index}: "), text
        assert expected in text, text
