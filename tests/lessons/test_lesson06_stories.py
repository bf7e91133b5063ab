"""Lesson 06 tells one story per mistake (issue 30): the KV cache concatenated along the heads
(dimension 1) is TODO [kv-cache]'s, with one diagnosis, in every check it reaches, even where
scaled_dot_product_attention (TODO [cache-alignment]'s line) is what raises; a dimension-1
mismatch outside cached_attention (a top-k threshold of shape (B,)) is not taken for it; and
generate with dropout left on says the same thing every time it is graded with the same seed.
Real engine, real workers."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from lessons.lesson06_variants import BUGGY
from support.grading import failed
from support.project import ROOT
from support.variants import solution_files

from autograder.core.i18n import feedback_text
from autograder.core.results import Text
from autograder.learner.steps import lesson_next_step

VARIANTS = {variant.name: variant for variant in BUGGY}
CAT_DIM = "lesson06.hint_cat_dim"


def _keys(check) -> list[str]:
    return [part.key for part in check.feedback.parts if isinstance(part, Text)]


@pytest.fixture(scope="module")
def lesson06(course):
    return course.lesson("06")


def _graded(grade_files, lesson, name, seed=None):
    files = VARIANTS[name].apply(solution_files(lesson))
    return grade_files(files, lesson=lesson) if seed is None else grade_files(files, lesson=lesson, seed=seed)


def test_the_cache_concatenated_along_the_heads_is_one_todo_with_one_diagnosis(course, lesson06, grade_files):
    result = _graded(grade_files, lesson06, "cache-cat-heads-dim")
    step = lesson_next_step(course, lesson06, result)
    assert (step.kind, step.todo) == ("todo", "kv-cache")
    by_todo = {}
    for check in failed(result):
        by_todo.setdefault(check.todo, []).append(check)
    # Every kv-cache check it fails names the concatenation, once, and nothing else's TODO.
    assert {c.id for c in by_todo["kv-cache"]} >= {"cache-attention", "cache-state", "cache-one-token"}
    for check in by_todo["kv-cache"]:
        assert _keys(check).count(CAT_DIM) == 1, (check.id, feedback_text(check.feedback, "es"))
        assert check.waits_on is None and "engine.hint_shapes" not in _keys(check), check.id
        assert not {"engine.raised_in_other_todo", "engine.waits_on_other_todo"} & set(_keys(check)), check.id
    # The mask's checks wait on kv-cache, whether torch.cat or the attention raised.
    for check in by_todo["cache-alignment"]:
        assert check.waits_on == "kv-cache", (check.id, feedback_text(check.feedback, "es"))
    # The checks of no TODO that reach it (eval-mode, own-pieces) give the same diagnosis.
    for check in by_todo.get(None, []):
        assert CAT_DIM in _keys(check), (check.id, feedback_text(check.feedback, "es"))


def test_a_dimension_1_mismatch_outside_the_attention_is_not_the_cache(course, lesson06, grade_files):
    result = _graded(grade_files, lesson06, "top-k-threshold-flat")
    step = lesson_next_step(course, lesson06, result)
    assert (step.kind, step.todo) == ("todo", "top-k")
    for check in failed(result):
        assert CAT_DIM not in _keys(check) and check.waits_on is None, check.id


def test_generate_with_dropout_on_says_the_same_under_the_same_seed(lesson06, tmp_path):
    # Each grading in a process of its own, as two `autograder check` runs are: the worker's
    # global generator (what dropout draws from) once started wherever that process left it.
    folder = tmp_path / lesson06.folder
    folder.mkdir()
    for name, text in VARIANTS["generate-not-eval"].apply(solution_files(lesson06)).items():
        (folder / name).write_text(text, encoding="utf-8")
    told = []
    for _ in range(2):
        graded = subprocess.run(
            [sys.executable, "-m", "autograder", "--course", str(ROOT / "course.yml"), "grade", "06"]
            + ["--submission", str(folder), "--seed", "7", "--format", "json"],
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
        (check,) = [c for c in json.loads(graded.stdout)["lessons"][0]["checks"] if c["id"] == "eval-mode"]
        assert check["status"] == "failed"
        told.append(check["feedback"])
    assert told[0] == told[1]
