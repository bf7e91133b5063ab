"""Blame by cause through the real engine (real worker processes): a crash in given code or in a
later TODO, caused by a value an earlier TODO made, costs only that TODO; every other failed
check says it waits on it, and the message names the value, the line that made it and its dtype
or shape (autograder/engine/provenance.py, autograder/sandbox/worker/provenance.py)."""

from __future__ import annotations

import pytest
from support.grading import failed
from support.project import ROOT
from support.variants import solution_files

from autograder.core.i18n import feedback_text
from autograder.core.manifest import load_course

COURSE = load_course(ROOT / "course.yml")

# (lesson, file, find, replace, the TODO at fault, the line it made, what the message must say)
CASES = [
    pytest.param(
        "03",
        "attention.py",
        "att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))",
        "att = (q @ k.transpose(-2, -1)).double() * (1.0 / math.sqrt(hs))",
        "scaling",
        ("`att`", "float64", "float32", "`y = att @ v`"),
        id="03-scores-in-float64",
    ),
    pytest.param(
        "04",
        "model.py",
        "        x = x + a  # (B, T, C)",
        "        x = torch.cat([x, a], dim=-1)",
        "residual",
        ("`x`", "`x = torch.cat([x, a], dim=-1)`", "`m = self.mlp(self.ln_2(x))`"),
        id="04-residual-concatenated",
    ),
]


@pytest.mark.parametrize("lesson_id, name, find, replace, todo, said", CASES)
def test_a_crash_caused_by_an_earlier_todos_value_costs_only_that_todo(
    grade_files, lesson_id, name, find, replace, todo, said
):
    lesson = COURSE.lesson(lesson_id)
    files = solution_files(lesson)
    assert files[name].count(find) == 1
    text = files[name].replace(find, replace)
    made = next(n for n, row in enumerate(text.splitlines(), start=1) if replace.strip() in row)

    result = grade_files({name: text}, lesson=lesson)

    broken = failed(result)
    assert any(c.todo == todo for c in broken), [c.id for c in broken]
    others = [c for c in broken if c.todo not in (todo, None) and c.waits_on != todo]
    assert not others, [(c.id, c.todo, c.waits_on) for c in others]
    traced = [c for c in broken if c.raised_in is not None]
    assert len(traced) >= 3, [c.id for c in broken]  # the TODO's own checks and others that ran it
    for check in broken:
        if check.raised_in is None:
            continue  # a grader that judged the crash itself
        assert (check.raised_in.todo, check.raised_in.file, check.raised_in.line) == (todo, name, made)
        text_es = feedback_text(check.feedback, "es")
        assert f"{name}:{made}" in text_es and f"TODO [{todo}]" in text_es, text_es
        for words in said:
            assert words in text_es, (words, text_es)
        if check.todo not in (todo, None):
            assert f"Esta comprobación (TODO [{check.todo}])" in text_es, text_es
