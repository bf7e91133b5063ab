"""Pictures in the feedback: a failing mask check of lesson 03 asks for its attention matrix to
be drawn (results.Figure); `grade --figures DIR`, the learner's `check` (.autograder/figuras/)
and the GitHub workflow draw it as a PNG with the viewer's look and name the file in the
feedback. Real grading of real buggy variants; the PNGs are read back and looked at."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import ROOT, SEED, solution_files, write_submission
from learner_course import make_course, run_cli
from lesson03_variants import BUGGY

from autograder.attention_png import LEAK_COLOR
from autograder.checks import CheckFailure, fail
from autograder.engine import grade
from autograder.figures import write_figures
from autograder.manifest import load_course
from autograder.render import render_text
from autograder.results import Block, Figure, message


@pytest.fixture(scope="module")
def course():
    return load_course(ROOT / "course.yml")


def variant_files(course, name: str) -> dict[str, str]:
    solved = solution_files(course.lesson("03"))
    return {**solved, **next(v for v in BUGGY if v.name == name).apply(solved)}


def red_pixels(path) -> int:
    """Pixels of the leak outline's colour: a leak drawn is a leak shown."""
    from matplotlib.image import imread

    rgb = (imread(path)[..., :3] * 255).round().astype(int)
    target = np.array([int(LEAK_COLOR[i:i + 2], 16) for i in (1, 3, 5)])
    return int((np.abs(rgb - target).sum(axis=-1) < 30).sum())


def figure_lines(check: dict) -> list[str]:
    return [p["text"] for p in check["feedback"] if p["text"].startswith("La misma matriz como imagen: ")]


def test_fail_keeps_figures_out_of_the_text():
    weights = np.tril(np.ones((3, 3))) / 3
    with pytest.raises(CheckFailure) as caught:
        fail(message("lesson03.future_weights", count=1), Figure(weights), Block("x", "heatmap"))
    assert [type(p) for p in caught.value.feedback.parts] == [type(message("k")), Block]
    assert len(caught.value.figures) == 1 and caught.value.figures[0].weights is weights


def test_a_leaking_mask_is_drawn_and_the_feedback_names_the_picture(course, tmp_path):
    """mask-fill-zero (masked scores set to 0, not -inf) lets every query see the future."""
    folder = write_submission(tmp_path / "entrega", variant_files(course, "mask-fill-zero"))
    figures = tmp_path / "figuras"
    figures.mkdir()
    (figures / "03-old-check.png").write_bytes(b"stale")  # an earlier failure, fixed since
    (figures / "04-own-pieces.png").write_bytes(b"another lesson's")
    out = tmp_path / "r.json"
    proc = run_cli(ROOT, "grade", "03", "--submission", folder, "--seed", SEED, "--format", "json",
                   "--output", out, "--figures", figures)
    assert proc.returncode == 0, proc.stderr
    checks = {c["id"]: c for c in json.loads(out.read_text(encoding="utf-8"))["lessons"][0]["checks"]}

    drawn = sorted(p.name for p in figures.glob("03-*.png"))
    assert {"03-weights-causal.png", "03-future-leak.png"} <= set(drawn)
    assert (figures / "04-own-pieces.png").read_bytes() == b"another lesson's"  # only lesson 03's go
    for name in drawn:
        check = checks[name.removeprefix("03-").removesuffix(".png")]
        assert check["status"] == "failed"
        assert figure_lines(check) == [f"La misma matriz como imagen: {figures / name}"]
        assert check["message"].endswith(f"La misma matriz como imagen: {figures / name}")
        assert (figures / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert red_pixels(figures / name) > 100, f"{name}: the leaks are not outlined"
    # A passing check never asks for a picture.
    assert all(not figure_lines(c) for c in checks.values() if c["status"] == "passed")


def test_a_causal_module_gets_no_picture_and_no_folder_means_no_picture(course, tmp_path):
    lesson = course.lesson("03")
    solved = write_submission(tmp_path / "bien", solution_files(lesson))
    result = grade(course, [lesson], solved, seed=SEED)
    assert write_figures(result, tmp_path / "figuras", "es") == []
    assert not (tmp_path / "figuras").exists()

    leaking = write_submission(tmp_path / "fuga", variant_files(course, "np-attention-no-mask"))
    result = grade(course, [lesson], leaking, seed=SEED)
    pending = {c.id: len(c.figures) for c in result.lessons[0].checks if c.figures}
    assert pending == {"np-attention-causal": 1}
    text = render_text(result, "es", color=False)  # nobody asked for pictures: no line about one
    assert "imagen" not in text and "np-attention-causal" in text
    written = write_figures(result, tmp_path / "figuras", "en")
    assert [p.name for p in written] == ["03-np-attention-causal.png"]
    assert red_pixels(written[0]) > 20
    assert "The same matrix as a picture" in render_text(result, "en", color=False)
    assert all(not c.figures for c in result.lessons[0].checks)  # drawn once, not twice


def test_learner_check_draws_into_its_local_folder(tmp_path):
    root = make_course(tmp_path / "course", {"03": "solved"})
    course = load_course(root / "course.yml")
    lesson = course.lesson("03")
    for name, text in variant_files(course, "np-attention-no-mask").items():
        (root / "exercises" / lesson.folder / name).write_text(text, encoding="utf-8")
    proc = run_cli(root, "check", "03")
    assert proc.returncode == 0, proc.stderr
    assert "La misma matriz como imagen: .autograder/figuras/03-np-attention-causal.png" in proc.stdout
    assert (root / ".autograder" / "figuras" / "03-np-attention-causal.png").is_file()
    assert (root / ".autograder" / ".gitignore").is_file()  # never committed by `git add .`

    # Fixed: the next check removes the picture of a failure that no longer exists.
    for name, text in solution_files(lesson).items():
        (root / "exercises" / lesson.folder / name).write_text(text, encoding="utf-8")
    proc = run_cli(root, "check", "03")
    assert proc.returncode == 0, proc.stderr
    assert "imagen" not in proc.stdout
    assert list((root / ".autograder" / "figuras").glob("*.png")) == []


def test_lesson04_whole_model_leak_is_drawn(course, tmp_path):
    """LayerNorm over the time axis: every position sees the whole sequence through the norm."""
    from lesson04_variants import BUGGY as BUGGY04

    lesson = course.lesson("04")
    solved = solution_files(lesson)
    files = {**solved, **next(v for v in BUGGY04 if v.name == "norm-over-time").apply(solved)}
    result = grade(course, [lesson], write_submission(tmp_path / "entrega", files), seed=SEED)
    leak = next(c for c in result.lessons[0].checks if c.id == "future-leak")
    assert leak.status.value == "failed" and len(leak.figures) == 1
    written = write_figures(result, tmp_path / "figuras", "es")
    assert tmp_path / "figuras" / "04-future-leak.png" in written
    assert red_pixels(tmp_path / "figuras" / "04-future-leak.png") > 100
