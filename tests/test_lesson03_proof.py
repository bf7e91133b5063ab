"""The graders of lesson 03 proven against the reference solution, the stubs, and every
TODO region reverted alone (DESIGN.md, "Prove the graders")."""

from __future__ import annotations

import pytest

from autograder.i18n import feedback_text
from autograder.results import Status
from autograder.stubs import parse_regions, revert_region, strip_markers

from conftest import ROOT, failed, grade_folder, solution_files, write_submission


def test_solution_gets_full_marks(course, lesson03):
    result = grade_folder(course, lesson03, ROOT / "solutions" / lesson03.folder)
    problems = {c.id: feedback_text(c.feedback, "es") for c in failed(result)}
    assert problems == {}
    assert result.completed and result.xp == lesson03.xp == 50
    assert result.score == result.max_score > 0
    skipped = [c for c in result.checks if c.status is Status.SKIPPED]
    # Only the GPU check may be skipped, and only on a machine without CUDA.
    import torch

    assert [c.id for c in skipped] == ([] if torch.cuda.is_available() else ["gpu-parity"])
    assert all(c.max_score == 0 for c in skipped)


def test_untouched_stub_scores_zero_and_names_what_it_waits_for(course, lesson03):
    result = grade_folder(course, lesson03, ROOT / "exercises" / lesson03.folder)
    assert result.score == 0 and result.xp == 0 and not result.completed
    for check in result.checks:
        if check.status is Status.SKIPPED:
            continue
        text = feedback_text(check.feedback, "es")
        assert check.status is Status.FAILED, (check.id, text)
        assert "Traceback" not in text
        if check.id.startswith("quiz-"):
            assert "sin responder" in text
        else:
            # A pending TODO is reported by name, never as a traceback.
            assert "pendiente" in text and "TODO [" in text, (check.id, text)
            if check.todo:
                assert f"TODO [{check.todo}]" in text, (check.id, text)


def _regions(lesson):
    folder = ROOT / "solutions" / lesson.folder
    for name in [*lesson.files, lesson.quiz]:
        text = (folder / name).read_text(encoding="utf-8")
        for index, region in enumerate(parse_regions(text, name)):
            yield pytest.param(name, index, region.id, id=f"{name}:{region.id}:{region.start_line}")


def _lesson03():
    from autograder.manifest import load_course

    return load_course(ROOT / "course.yml").lesson("03")


@pytest.mark.parametrize("name, index, region_id", list(_regions(_lesson03())))
def test_each_region_reverted_alone_is_caught(course, lesson03, tmp_path, name, index, region_id):
    titles = {todo.id: todo.title["es"] for todo in lesson03.todos}
    files = solution_files(lesson03)
    original = (ROOT / "solutions" / lesson03.folder / name).read_text(encoding="utf-8")
    files[name] = strip_markers(revert_region(original, name, index, titles), name)
    result = grade_folder(course, lesson03, write_submission(tmp_path / "sub", files))
    assert not result.completed
    caught = [c for c in failed(result) if c.todo == region_id or (region_id == "quiz" and c.id.startswith("quiz-"))]
    assert caught, f"reverting {name} region {region_id} was not caught by a check of that TODO"
