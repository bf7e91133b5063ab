"""Draw the pictures failing checks asked for (results.Figure) as PNG files.

    write_figures(result, folder, lang) -> list[Path]

Where an image can be shown, the caller names a folder: `autograder grade --figures DIR`, the
learner's `autograder check`/`watch` (.autograder/figuras/, opened from their editor) and the
GitHub workflow (inside .autograder-out/, the results artifact). Each figure becomes
`<lesson>-<check>[-n].png` there, drawn by attention_png (the viewer's look), and the check's
feedback gains one line with the file's path, so every renderer (terminal, Markdown, JSON,
Gradescope) says where the picture is without knowing about images.

A lesson's earlier pictures in the folder are removed first: a picture never outlives the
failure it showed. Drawing imports matplotlib, so it happens only when a figure is pending.

A figure is a head's attention weights unless its title is one of INFLUENCE_TITLES: the
future-leak checks draw how much output i changes with input x_j (an influence map measured on
the whole module), which is labelled as influence, not as a head's weights.
"""

from __future__ import annotations

from pathlib import Path

from autograder.core import i18n
from autograder.core.files import display_path
from autograder.core.results import CourseResult, Feedback, Figure, Text, message

# The graders' titles of influence maps (output i against input x_j), not attention weights.
INFLUENCE_TITLES = frozenset(
    {"lesson03.figure_influence", "lesson03.figure_grad", "lesson04.figure_influence"}
)


def figure_kind(figure: Figure) -> str:
    """attention_png's kind for a grader's figure: "influence" or "weights"."""
    title = figure.title
    return "influence" if isinstance(title, Text) and title.key in INFLUENCE_TITLES else "weights"


def write_figures(result: CourseResult, folder: Path, lang: str) -> list[Path]:
    written: list[Path] = []
    folder = Path(folder)
    for lesson in result.lessons:
        if folder.is_dir():
            for stale in folder.glob(f"{lesson.id}-*.png"):
                stale.unlink(missing_ok=True)
        for check in lesson.checks:
            pending, check.figures = check.figures, []
            for n, figure in enumerate(pending, start=1):
                from autograder.render.attention_png import (
                    attention_png,  # matplotlib: only when there is a picture
                )

                folder.mkdir(parents=True, exist_ok=True)
                suffix = f"-{n}" if len(pending) > 1 else ""
                path = folder / f"{lesson.id}-{check.id}{suffix}.png"
                title = i18n.localize(figure.title, lang) if figure.title is not None else None
                path.write_bytes(
                    attention_png(
                        figure.weights, leaks=figure.leaks, lang=lang, title=title, kind=figure_kind(figure)
                    )
                )
                check.feedback = check.feedback + Feedback.of(
                    message("render.figure", path=display_path(path))
                )
                written.append(path)
    return written
