"""A misnamed layer is told by its name: the graders load their weights with
load_state_dict(strict=False), and the weights a module cannot take come back as torch's
*unexpected* keys (autograder.engine.checks.keys_not_taken). Before, the graders looked for them in the
*missing* keys, which hold the module's own names, so the hint never fired."""

from __future__ import annotations

import re

import pytest
from support.grading import failed
from support.variants import solution_files

from autograder.core.i18n import feedback_text
from autograder.engine.checks import keys_not_taken

# lesson, file, the course's layer name, the learner's name, the hint the message must give
MISNAMED = [
    ("03", "attention.py", "qkv", "c_attn", "qkv.weight"),
    ("04", "model.py", "c_fc", "fc", "c_fc.weight"),
]


@pytest.mark.parametrize("lesson_id, file, name, wrong, key", MISNAMED, ids=[m[0] for m in MISNAMED])
def test_a_misnamed_layer_is_told_which_name_the_course_expects(
    course, grade_files, lesson_id, file, name, wrong, key
):
    lesson = course.lesson(lesson_id)
    source = solution_files(lesson)[file]
    renamed = re.sub(rf"\bself\.{name}\b", f"self.{wrong}", source)
    assert renamed != source
    result = grade_files({file: renamed}, lesson=lesson)
    texts = [feedback_text(c.feedback, "es") for c in failed(result)]
    assert texts, "a misnamed layer must not pass"
    told = [t for t in texts if "faltan estas claves" in t]
    assert told and all(key in t for t in told), texts


def test_keys_not_taken_reads_unexpected_keys_and_survives_odd_returns():
    weights = {"qkv.weight": 0, "qkv.bias": 0, "proj.weight": 0}
    loaded = (["c_attn.weight", "c_attn.bias"], ["qkv.weight", "qkv.bias"])
    assert keys_not_taken(loaded, weights) == ["qkv.weight", "qkv.bias"]
    assert keys_not_taken(([], []), weights) == []
    for odd in (None, 3, "x", ([],), ([], None), ([], [1, None]), {"a": 1}):
        assert keys_not_taken(odd, weights) == []
