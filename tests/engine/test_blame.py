"""Which TODO raised (autograder/engine/blame.py), and what a check says when the learner's code
raised in another TODO's code: it names that TODO and waits on it (CheckResult.waits_on).

The unit tests use the course's real stubs and solutions; the end-to-end tests grade real
submissions with the real engine."""

from __future__ import annotations

import pytest
from support.project import ROOT
from support.variants import solution_files

from autograder.core.i18n import feedback_text
from autograder.core.manifest import load_course
from autograder.core.results import Status
from autograder.engine.blame import stub_blocks, todo_at
from autograder.render.output import from_json_dict, to_json_dict

COURSE = load_course(ROOT / "course.yml")


def _line_of(text: str, needle: str) -> int:
    rows = [n for n, row in enumerate(text.splitlines(), start=1) if needle in row]
    assert len(rows) == 1, (needle, rows)
    return rows[0]


def _stub(lesson, name):
    return (ROOT / "exercises" / lesson.folder / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("lesson", COURSE.lessons, ids=lambda lesson: lesson.id)
def test_every_todo_of_a_finished_file_is_found_and_given_code_claims_nothing(lesson):
    """On the marker-stripped solution (a learner's finished file without any TODO comment):
    every TODO owns at least one line, and every line of given code owns none."""
    todos = {t.id for t in lesson.todos}
    for name, text in solution_files(lesson).items():
        if not name.endswith(".py"):
            continue
        stub = _stub(lesson, name)
        given = stub_blocks(stub).given
        found = set()
        for number, row in enumerate(text.splitlines(), start=1):
            todo = todo_at(text, number, stub, todos)
            if row.strip() in given:
                assert todo is None, (name, number, row)
            elif todo is not None:
                found.add(todo)
        expected = {t.id for t in lesson.todos if t.file == name}
        assert found == expected, (name, found, expected)


def test_the_lines_of_each_attention_todo_are_its_own():
    lesson = COURSE.lesson("03")
    text, stub = solution_files(lesson)["attention.py"], _stub(lesson, "attention.py")
    todos = {t.id for t in lesson.todos}
    cases = {
        "q, k, v = qkv.split(C, dim=2)": "head-reshape",
        "att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))": "scaling",
        'att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))': "mask",
        "y = y.transpose(1, 2).contiguous().view(B, T, C)": "contiguous-view",
        "att = F.softmax(att, dim=-1)": None,  # given code
        "y = att @ v": None,  # given code
    }
    for needle, todo in cases.items():
        assert todo_at(text, _line_of(text, needle), stub, todos) == todo, needle


def test_a_learner_who_kept_the_todo_comments_is_read_by_them():
    """The usual learner file: the stub's hint comments kept, the raise replaced by code, and
    a helper line of their own inside the TODO."""
    lesson = COURSE.lesson("03")
    stub = _stub(lesson, "attention.py")
    todos = {t.id for t in lesson.todos}
    text = stub.replace(
        '        raise NotImplementedError("TODO [head-reshape] pendiente: separa q, k, v en cabezas")\n',
        "        q, k, v = qkv.split(C, dim=2)\n        nh = self.n_head\n        q = q.view(B, T, nh, hs)\n",
    )
    assert todo_at(text, _line_of(text, "q = q.view(B, T, nh, hs)"), stub, todos) == "head-reshape"
    assert todo_at(text, _line_of(text, "nh = self.n_head"), stub, todos) == "head-reshape"
    # Without the stub (no copy of it anywhere), the kept comment still tells.
    assert todo_at(text, _line_of(text, "q = q.view(B, T, nh, hs)"), None, todos) == "head-reshape"
    # Given code right after a TODO is nobody's, even below a kept TODO comment.
    assert todo_at(text, _line_of(text, "qkv = self.qkv(x)"), stub, todos) is None


def test_adjacent_todos_replaced_together_are_told_apart():
    """Lesson 04's Block: pre-norm and residual blocks interleave with no given code between."""
    lesson = COURSE.lesson("04")
    text, stub = solution_files(lesson)["model.py"], _stub(lesson, "model.py")
    todos = {t.id for t in lesson.todos}
    assert todo_at(text, _line_of(text, "a = self.attn(self.ln_1(x))"), stub, todos) == "pre-norm"
    assert todo_at(text, _line_of(text, "x = x + a"), stub, todos) == "residual"


def test_lines_outside_the_file_or_unknown_todos_claim_nothing():
    lesson = COURSE.lesson("03")
    text, stub = solution_files(lesson)["attention.py"], _stub(lesson, "attention.py")
    assert todo_at(text, 0, stub, {"mask"}) is None
    assert todo_at(text, 10_000, stub, {"mask"}) is None
    line = _line_of(text, "q, k, v = qkv.split(C, dim=2)")
    assert todo_at(text, line, stub, {"mask"}) is None  # head-reshape is not a TODO of this set


# ------------------------------------------------------------------ end to end


def _crashing_head_reshape():
    lesson = COURSE.lesson("03")
    files = solution_files(lesson)
    # The classic slip: .view on the transposed tensor's dims in the wrong order fails at runtime.
    files["attention.py"] = files["attention.py"].replace(
        "q = q.view(B, T, self.n_head, hs).transpose(1, 2)", "q = q.view(B, self.n_head, T, hs * 2)", 1
    )
    return lesson, files


def test_a_crash_in_head_reshape_makes_the_other_checks_wait_on_it(grade_files):
    lesson, files = _crashing_head_reshape()
    result = grade_files(files, lesson=lesson)
    failed = [c for c in result.checks if c.status is Status.FAILED]
    assert any(c.todo == "head-reshape" for c in failed)
    others = [c for c in failed if c.todo not in ("head-reshape", None)]
    assert others, "a crash in the forward pass must fail the checks of the TODOs after it"
    for check in others:
        assert check.raised_in is not None and check.raised_in.todo == "head-reshape", check.id
        assert check.raised_in.file == "attention.py" and check.raised_in.line > 0
        assert check.waits_on == "head-reshape", check.id
        text = feedback_text(check.feedback, "es")
        assert "TODO [head-reshape]" in text and f"attention.py:{check.raised_in.line}" in text, text
    own = [c for c in failed if c.todo == "head-reshape"]
    assert all(c.waits_on is None for c in own)
    # The JSON results keep it, and read back the same.
    data = to_json_dict(_course_result(result), "es")
    checks = {c["id"]: c for c in data["lessons"][0]["checks"]}
    assert checks[others[0].id]["waits_on"] == "head-reshape"
    assert checks[others[0].id]["raised_in"]["todo"] == "head-reshape"
    back = {c.id: c for c in from_json_dict(data).lessons[0].checks}
    assert back[others[0].id].waits_on == "head-reshape"
    assert back[others[0].id].raised_in == others[0].raised_in


def test_a_pending_todo_is_what_the_checks_after_it_wait_on(grade_files):
    lesson = COURSE.lesson("03")
    files = {
        "attention.py": _stub(lesson, "attention.py"),
        "attention_numpy.py": solution_files(lesson)["attention_numpy.py"],
    }
    result = grade_files(files, lesson=lesson)
    waiting = {c.id: c.waits_on for c in result.checks if c.waits_on is not None}
    assert waiting, "the checks after a pending TODO must say which one they wait on"
    assert set(waiting.values()) <= {t.id for t in lesson.todos}
    assert all(result.checks[[c.id for c in result.checks].index(i)].todo != w for i, w in waiting.items())


def _course_result(lesson_result):
    from autograder.core.results import CourseResult

    return CourseResult(course=COURSE.name, language="es", seed=1, lessons=[lesson_result])
