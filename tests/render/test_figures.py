"""Pictures in the feedback: a failing mask check of lesson 03 asks for its attention matrix to
be drawn (results.Figure); `grade --figures DIR`, the learner's `check` (.autograder/figuras/)
and the GitHub workflow draw it as a PNG with the viewer's look and name the file in the
feedback. Real grading of real buggy variants; the PNGs are read back and looked at."""

from __future__ import annotations

import json

import numpy as np
import pytest
from lessons.lesson03_variants import BUGGY
from support.grading import write_submission
from support.learner_course import make_course, run_cli
from support.project import ROOT, SEED
from support.variants import solution_files

from autograder.core import i18n
from autograder.core.manifest import load_course
from autograder.core.results import Block, Figure, message
from autograder.engine.checks import CheckFailure, fail
from autograder.engine.grading import grade
from autograder.render.attention_png import LEAK_COLOR, attention_figure
from autograder.render.figures import INFLUENCE_TITLES, figure_kind, write_figures
from autograder.render.output import render_text


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
    target = np.array([int(LEAK_COLOR[i : i + 2], 16) for i in (1, 3, 5)])
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
    proc = run_cli(
        ROOT,
        "grade",
        "03",
        "--submission",
        folder,
        "--seed",
        SEED,
        "--format",
        "json",
        "--output",
        out,
        "--figures",
        figures,
    )
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
    from lessons.lesson04_variants import BUGGY as BUGGY04

    lesson = course.lesson("04")
    solved = solution_files(lesson)
    files = {**solved, **next(v for v in BUGGY04 if v.name == "norm-over-time").apply(solved)}
    result = grade(course, [lesson], write_submission(tmp_path / "entrega", files), seed=SEED)
    leak = next(c for c in result.lessons[0].checks if c.id == "future-leak")
    assert leak.status.value == "failed" and len(leak.figures) == 1
    assert figure_kind(leak.figures[0]) == "influence"  # the whole model's, not a head's weights
    written = write_figures(result, tmp_path / "figuras", "es")
    assert tmp_path / "figuras" / "04-future-leak.png" in written
    assert red_pixels(tmp_path / "figuras" / "04-future-leak.png") > 100


# --- what a picture says, and that it fits -------------------------------------------------------


def texts_of(fig) -> list:
    from matplotlib.text import Text

    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


def leaking(T: int, heads: int = 1) -> np.ndarray:
    w = np.tril(np.ones((T, T))) + 0.3 * np.triu(np.ones((T, T)), k=1)
    return np.broadcast_to(w / w.sum(-1, keepdims=True), (heads, T, T)).copy()


@pytest.mark.parametrize("lang", ["es", "en"])
@pytest.mark.parametrize(
    ("kind", "heads", "T", "title"),
    [
        ("influence", 1, 7, message("lesson03.figure_influence")),  # a long label is cut on both sides
        ("influence", 1, 7, message("lesson04.figure_influence")),
        ("influence", 1, 7, message("lesson03.figure_grad")),
        ("weights", 3, 7, message("lesson03.figure_weights")),
        ("weights", 1, 3, message("lesson03.figure_weights")),
        (
            "weights",
            2,
            40,
            "«" + "una frase muy larga que alguien escribió en el visor " * 4 + "» · explícita",
        ),
    ],
    ids=[
        "l03-influence",
        "l04-influence",
        "l03-grad",
        "weights-3-heads",
        "weights-1-head",
        "viewer-long-title",
    ],
)
def test_every_text_of_a_figure_fits_its_canvas(kind, heads, T, title, lang):
    """Titles and legends are wrapped to the figure: measured with matplotlib's own renderer,
    every text's extent lies inside the canvas, and none overlaps another."""
    fig = attention_figure(leaking(T, heads), lang=lang, title=i18n.localize(title, lang), kind=kind)
    fig.canvas.draw()  # the constrained layout, as savefig does it
    renderer = fig.canvas.get_renderer()
    canvas = fig.bbox
    boxes = {}
    for text in texts_of(fig):
        box = text.get_window_extent(renderer)
        assert canvas.x0 - 0.5 <= box.x0 and box.x1 <= canvas.x1 + 0.5, (text.get_text(), box, canvas)
        assert canvas.y0 - 0.5 <= box.y0 and box.y1 <= canvas.y1 + 0.5, (text.get_text(), box, canvas)
        boxes[text.get_text()] = box
    title_box = next(
        box
        for text, box in boxes.items()
        if text.replace("\n", " ").startswith(i18n.localize(title, lang)[:12])
    )
    legend = next(box for text, box in boxes.items() if text.startswith(("Blanco", "White")))
    # The legend and the title overlap no label.
    for text, box in boxes.items():
        if box is not legend and box is not title_box:
            assert not box.overlaps(legend) and not box.overlaps(title_box), text


@pytest.mark.parametrize("lang", ["es", "en"])
def test_an_influence_map_is_labelled_as_influence_not_as_a_head(lang):
    words = {
        "es": ("influencia de x_j en la salida i", "influencia", "cabeza", "peso"),
        "en": ("influence of x_j on output i", "influence", "head", "weight"),
    }[lang]
    influence = [t.get_text() for t in texts_of(attention_figure(leaking(5), lang=lang, kind="influence"))]
    assert words[0] in influence
    assert any(text.startswith(words[1] + " ") for text in influence)  # the colour bar
    assert not any(words[2] in text or text == words[3] for text in influence)
    heads = [t.get_text() for t in texts_of(attention_figure(leaking(5, 2), lang=lang))]
    assert f"{words[2]} 1" in heads and words[3] in heads  # a head's weights keep their labels


def test_the_graders_influence_maps_are_drawn_as_influence():
    """Every picture a grader asks for is either a head's weights or one of the influence maps
    figures.py knows: a new influence figure cannot silently be labelled "cabeza 0"."""
    import re

    keys = set()
    for path in (ROOT / "autograder" / "graders").rglob("*.py"):
        # A Figure(title=...) of its own, or grader_helpers.scaled_heatmap(figure_title=...).
        keys |= set(
            re.findall(
                r"(?:Figure\([^)]*?title|figure_title)=message\(\"([\w.]+)\"\)",
                path.read_text(encoding="utf-8"),
            )
        )
    assert keys >= INFLUENCE_TITLES
    assert all(key in INFLUENCE_TITLES or key.endswith(".figure_weights") for key in keys), keys
    assert figure_kind(Figure(np.eye(2), title=message("lesson03.figure_influence"))) == "influence"
    assert figure_kind(Figure(np.eye(2), title=message("lesson03.figure_weights"))) == "weights"
    assert figure_kind(Figure(np.eye(2))) == "weights"
