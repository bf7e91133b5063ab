"""The names callers import the three everyday renderings of a `CourseResult` by, gathered in
one place: each format lives in a module of its own.

    to_json_dict / render_json / from_json_dict   results.json (results_json.py)
    render_markdown                               GitHub's job summary and comments (markdown.py)
    render_text, use_color, make_console, ...     the terminal (terminal.py)
    points_text, isolation_note                   said alike by all of them (labels.py)

A renderer only formats; it never re-runs or re-judges a check. Every learner-facing label
comes from the catalog (autograder/messages/<lang>/render.yml).
"""

from __future__ import annotations

from autograder.render.labels import isolation_note, points_text
from autograder.render.markdown import MARKDOWN_FOLD_LINES, render_markdown
from autograder.render.results_json import from_json_dict, render_json, to_json_dict
from autograder.render.terminal import (
    make_console,
    print_feedback,
    printed,
    render_text,
    use_color,
    wants_color,
)

__all__ = [
    "MARKDOWN_FOLD_LINES",
    "from_json_dict",
    "isolation_note",
    "make_console",
    "points_text",
    "print_feedback",
    "printed",
    "render_json",
    "render_markdown",
    "render_text",
    "to_json_dict",
    "use_color",
    "wants_color",
]
