"""nbgrader's side of the Jupyter edition: imported only by the generated nbgrader_config.py,
inside nbgrader's own process (so importing nbgrader here costs nothing extra).

nbgrader's ClearSolutions replaces every solution region with one fixed stub ("# YOUR CODE
HERE / raise NotImplementedError()"). `TodoStubs` replaces each region of a lesson file's cell
the way `autograder stubs` does for exercises/ instead: the region's own Spanish hint and its
`raise NotImplementedError("TODO [id] pendiente: ...")`, which the engine reports as
"TODO [id] pendiente", or its `#=` lines (the quiz's blank answers). The learner notebook's
code is then exactly the repository's exercise, piece by piece.

`generate_feedback_preprocessors` keeps the hidden test code out of the learners' feedback
(nbgrader's default shows it), leaving each check's outcome and message.
"""

from __future__ import annotations

from nbconvert.exporters.exporter import ResourcesDict
from nbformat.notebooknode import NotebookNode
from nbgrader.converters import GenerateAssignment, GenerateFeedback
from nbgrader.preprocessors import ClearHiddenTests, ClearSolutions

from ..stubs import make_stub, parse_regions
from .build import METADATA_KEY
from .sources import parse_header

__all__ = ["TodoStubs", "generate_assignment_preprocessors", "generate_feedback_preprocessors"]


class TodoStubs(ClearSolutions):
    """ClearSolutions that stubs a lesson file's regions like `autograder stubs` does."""

    def preprocess(self, nb: NotebookNode, resources: ResourcesDict):
        self._titles = dict(nb.metadata.get(METADATA_KEY, {}).get("todo_titles", {}))
        return super().preprocess(nb, resources)

    def _replace_solution_region(self, cell: NotebookNode, language: str) -> bool:
        head, _, body = cell.source.partition("\n")
        header = parse_header(head) if cell.cell_type == "code" else None
        if header is None or not parse_regions(body, header.file):
            return super()._replace_solution_region(cell, language)
        cell.source = head + "\n" + make_stub(body, header.file, self._titles)
        return True


def generate_assignment_preprocessors() -> list[type]:
    """nbgrader's own list for generate_assignment, with TodoStubs in ClearSolutions' place
    (taken from nbgrader itself, so the rest follows whatever nbgrader version runs)."""
    default = GenerateAssignment.class_traits()["preprocessors"].default()
    if ClearSolutions not in default:
        raise RuntimeError("this nbgrader's generate_assignment has no ClearSolutions step to replace")
    return [TodoStubs if step is ClearSolutions else step for step in default]


def generate_feedback_preprocessors() -> list[type]:
    """nbgrader's list for generate_feedback, then ClearHiddenTests: a learner's feedback shows
    each check's outcome and message but, unlike nbgrader's default, not the hidden code."""
    return [*GenerateFeedback.class_traits()["preprocessors"].default(), ClearHiddenTests]
