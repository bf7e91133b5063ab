"""nbgrader's side of the Jupyter edition: imported only by the generated nbgrader_config.py,
inside nbgrader's own process (so importing nbgrader here costs nothing extra).

generate_assignment (`generate_assignment_preprocessors`):
    ChecksSkippedHere  first: grades the lesson's solution (the source notebook's own cells) once
                       on this machine; a check it gets skipped (gpu-parity without CUDA) is made
                       worth 0 of 0 (build.skip_checks), so the notebook's maximum is what
                       `autograder grade` gives here (lesson 03 without a GPU: 100, not 105).
    TodoStubs          in ClearSolutions' place: nbgrader's ClearSolutions replaces every
                       solution region with one fixed stub ("# YOUR CODE HERE / raise
                       NotImplementedError()"); this one stubs each region of a lesson file's
                       cell the way `autograder stubs` does for exercises/: the region's own
                       Spanish hint and its `raise NotImplementedError("TODO [id] pendiente:
                       ...")`, or its `#=` lines (the quiz's blank answers). The learner
                       notebook's code is then exactly the repository's exercise, piece by piece.

autograde (`autograde_sanitize_preprocessors`):
    RestoreHiddenTests in OverwriteCells' place: nbgrader keeps a test cell's checksum from
                       before its hidden tests are cleared, so every untouched released test cell
                       would be reported as changed ("Attribute 'checksum' ... has changed!",
                       nbgrader's sign of tampering; jupyter/nbgrader#1961). A cell that is
                       exactly what was released gets its hidden code back silently; any other
                       change is still reported and undone by nbgrader.

generate_feedback (`generate_feedback_preprocessors`, `FeedbackExporter`):
    ClearHiddenTests   the hidden code stays out of the learners' feedback (nbgrader's default
                       shows it), leaving each check's outcome and message;
    LearnerFeedback    each test cell named after its check and TODO, the page's words in the
                       notebook's language, no partial-credit value shown as an output ("Out[30]:
                       0"), long lines wrapped; FeedbackExporter renders it with feedback.html.j2,
                       nbgrader's feedback template with those words and names.
"""

from __future__ import annotations

import copy
from pathlib import Path

from nbconvert.exporters import HTMLExporter
from nbconvert.exporters.exporter import ResourcesDict
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor, Preprocessor
from nbformat.notebooknode import NotebookNode
from nbgrader import utils
from nbgrader.api import MissingEntry
from nbgrader.converters import Autograde, GenerateAssignment, GenerateFeedback
from nbgrader.preprocessors import ClearHiddenTests, ClearSolutions, OverwriteCells

from autograder.core import i18n
from autograder.course.notebooks.build import METADATA_KEY
from autograder.course.notebooks.sources import NotebookFile, files_from_notebook, parse_header
from autograder.course.stubs import make_stub, parse_regions, strip_markers

__all__ = [
    "ChecksSkippedHere",
    "FeedbackExporter",
    "LearnerFeedback",
    "RestoreHiddenTests",
    "TodoStubs",
    "autograde_sanitize_preprocessors",
    "generate_assignment_preprocessors",
    "generate_feedback_preprocessors",
]

FEEDBACK_TEMPLATE = Path(__file__).with_name("feedback.html.j2")
FEEDBACK_TEXTS = "notebooks.feedback."  # the catalog's words of the feedback page
# Output and code lines wrap in the feedback page instead of running past its edge.
WRAP_CSS = """
div.output_area pre, div.input_area pre, div.output_subarea pre, .highlight pre {
    white-space: pre-wrap;
    overflow-wrap: anywhere;
}
"""


# --- generate_assignment -------------------------------------------------------------------------


class ChecksSkippedHere(Preprocessor):
    """A check the lesson's solution gets skipped on this machine is worth 0 of 0 here."""

    enabled = True

    def preprocess(self, nb: NotebookNode, resources: ResourcesDict):
        from autograder.core.manifest import find_course_file, load_course
        from autograder.course.notebooks.build import skip_checks
        from autograder.course.notebooks.kernel import CheckFailed, grade_files

        meta = nb.metadata.get(METADATA_KEY, {})
        if "lesson" not in meta:
            return nb, resources
        course_file = find_course_file()  # $AUTOGRADER_COURSE, set by nbgrader_config.py
        course = load_course(course_file)
        lesson = course.lesson(meta["lesson"])
        names = list(lesson.handed_in)
        files = {
            name: NotebookFile(name, strip_markers(file.text, name))
            for name, file in files_from_notebook(nb, names).items()
        }
        lang = meta.get("lang", course.language)
        try:
            result = grade_files(course_file, course.root, lesson, files, lang)
        except CheckFailed as exc:
            said = i18n.translate(
                "notebooks.log.solution_not_graded", lang, lesson=lesson.id, detail=str(exc)
            )
            self.log.warning(said)
            return nb, resources
        skipped = {
            check["id"]: check["message"] for check in result["checks"] if check["status"] == "skipped"
        }
        for check_id in skip_checks(nb, course, skipped):
            self.log.info(
                i18n.translate("notebooks.log.check_skipped", lang, check=check_id, reason=skipped[check_id])
            )
        return nb, resources


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
    """ChecksSkippedHere, then nbgrader's own list for generate_assignment with TodoStubs in
    ClearSolutions' place (taken from nbgrader itself, so the rest follows its version)."""
    default = GenerateAssignment.class_traits()["preprocessors"].default()
    if ClearSolutions not in default:
        raise RuntimeError("this nbgrader's generate_assignment has no ClearSolutions step to replace")
    return [ChecksSkippedHere, *(TodoStubs if step is ClearSolutions else step for step in default)]


# --- autograde -----------------------------------------------------------------------------------


class RestoreHiddenTests(OverwriteCells):
    """OverwriteCells that knows a released test cell is its source without the hidden tests."""

    def preprocess(self, nb: NotebookNode, resources: ResourcesDict):
        self._release = ClearHiddenTests(parent=self)  # generate_assignment's step, same delimiters
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell: NotebookNode, resources: ResourcesDict, cell_index: int):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id is not None and cell.cell_type == "code":
            try:
                source_cell = self.gradebook.find_source_cell(grade_id, self.notebook_id, self.assignment_id)
            except MissingEntry:
                source_cell = None  # nbgrader's own step says so
            if source_cell is not None and source_cell.locked:
                released = copy.deepcopy(cell)
                released.source = source_cell.source
                # Exactly what was released: the hidden code goes back before nbgrader compares.
                if self._release._remove_hidden_test_region(released) and released.source == cell.source:
                    cell.source = source_cell.source
        return super().preprocess_cell(cell, resources, cell_index)


def autograde_sanitize_preprocessors() -> list[type]:
    """nbgrader's list for sanitizing a submission before autograde, with RestoreHiddenTests
    in OverwriteCells' place."""
    default = Autograde.class_traits()["sanitize_preprocessors"].default()
    if OverwriteCells not in default:
        raise RuntimeError("this nbgrader's autograde has no OverwriteCells step to replace")
    return [RestoreHiddenTests if step is OverwriteCells else step for step in default]


# --- generate_feedback ---------------------------------------------------------------------------


class LearnerFeedback(Preprocessor):
    """What feedback.html.j2 shows: each test cell's name, the page's words, wrapped lines."""

    enabled = True

    def preprocess(self, nb: NotebookNode, resources: ResourcesDict):
        from autograder.core.manifest import ManifestError, find_course_file, load_course

        course = load_course(find_course_file())
        lang = nb.metadata.get(METADATA_KEY, {}).get("lang")
        lang = lang if lang in i18n.LANGUAGES else course.language
        try:
            checks = {check.id: check for check in course.lesson(resources["nbgrader"]["assignment"]).checks}
        except (ManifestError, KeyError):
            checks = {}
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            if not utils.is_grade(cell) or utils.is_solution(cell):
                continue
            check = checks.get(meta.get("grade_id"))
            if check is not None:
                cell.metadata[METADATA_KEY] = {"label": _label(check, lang)}
            # A test cell's value is nbgrader's partial credit, already in its score.
            cell.outputs = [out for out in cell.get("outputs", []) if out.output_type != "execute_result"]
        catalog = i18n.catalog(lang)
        resources[METADATA_KEY] = {
            "texts": {
                key.removeprefix(FEEDBACK_TEXTS): text
                for key, text in catalog.items()
                if key.startswith(FEEDBACK_TEXTS)
            }
        }
        resources.setdefault("inlining", {}).setdefault("css", []).append(WRAP_CSS)
        return nb, resources


def _label(check, lang: str) -> str:
    """ "heads-merge · TODO [contiguous-view]", as the test cell's own output names it."""
    label = check.id
    if check.todo:
        label += " · " + i18n.translate("render.todo", lang, todo=check.todo)
    if check.informational:
        label += " · " + i18n.translate("render.informational", lang)
    return label


def generate_feedback_preprocessors() -> list[type]:
    """nbgrader's list for generate_feedback, then ClearHiddenTests and LearnerFeedback."""
    default = GenerateFeedback.class_traits()["preprocessors"].default()
    if CSSHTMLHeaderPreprocessor not in default:
        raise RuntimeError(
            "this nbgrader's generate_feedback has no CSSHTMLHeaderPreprocessor to add the page's style to"
        )
    return [*default, ClearHiddenTests, LearnerFeedback]


class FeedbackExporter(HTMLExporter):
    """nbgrader's feedback exporter with feedback.html.j2, which extends nbgrader's own template.

    Chosen only for generate_feedback (`c.GenerateFeedback.exporter_class`), never through
    HTMLExporter's configuration, which nbgrader's formgrader shares for its own pages."""

    def __init__(self, **kwargs):
        from jinja2 import FileSystemLoader

        super().__init__(**kwargs)
        self.template_name = "feedback"  # nbgrader's, whose index.html.j2 ours extends
        # Tried before the template paths; the folder holds no index.html.j2 to shadow nbgrader's.
        self.extra_loaders = [FileSystemLoader(str(FEEDBACK_TEMPLATE.parent)), *self.extra_loaders]
        self.template_file = FEEDBACK_TEMPLATE.name
