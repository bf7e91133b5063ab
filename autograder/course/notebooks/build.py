"""Building the nbgrader course directory of the Jupyter edition from the course's own sources.

Nothing here is a second copy kept by hand: each lesson's notebook is made from
solutions/NN-slug/ (its files, with their `### BEGIN SOLUTION <todo>` regions, which are
nbgrader's own markers) and exercises/NN-slug/ (its README.md, every section but the ones about
the repository's files and commands; its practice tests and data files: solutions/ holds only
the marked files), and its test cells from course.yml's checks and points.

    DIR/nbgrader_config.py                    course id, timeouts, the stubs' preprocessor
    DIR/course.yml                            the manifest the notebooks were built from
    DIR/source/NN-slug/NN-slug.ipynb          one assignment per lesson (nbgrader's source)
    DIR/source/NN-slug/<data files>           e.g. lesson 01's corpus, released with it

A lesson's notebook, top to bottom: the README's title, goals and idea (read-only markdown;
of the sections about the repository, only their `###` subsections about the lesson, such as
lesson 03's conventions); how to work in the notebook and the lesson's TODOs (course.yml); per
lesson file, its pieces as code cells (`sources.split_module`): solution cells where a piece
holds a region, read-only cells otherwise; the practice tests (`%%writefile test_practica.py`)
and the visible cell that runs them on the learner's cells (practice.py); the quiz questions
and a `%%writefile quiz.yml` answer cell; then one autograder test cell per check, worth the
check's points, whose only code is hidden. nbgrader knows each test cell by the check's id (its
grade_id, as in `autograder grade-all`'s gradebook); a check that cannot run where the
assignment is generated is made worth 0 there (`skip_checks`, called by hooks.py).

A notebook learner has no README, no repository and no `autograder` command: the text taken
from the sources says "este cuaderno" where they say README (`readme.notebook_text`), and
paragraphs that send the learner to the repository's files or commands are left out.

Here: the course directory, its nbgrader_config.py, and each lesson's notebook put together.
Its pieces come from readme.py (what the notebook takes from the README), cells.py (nbgrader's
cells: a file as code cells, the checks' test cells) and practice_cells.py (the practice tests
and the cell that runs them).
"""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from autograder.core import i18n
from autograder.core.files import walk_files
from autograder.core.manifest import Course, Lesson
from autograder.core.results import Text, message
from autograder.course.notebooks.cells import (
    CHECKS_CELL,
    catalog_text,
    cell_slug,
    check_cell,
    check_cells,
    checks_text,
    code_cell,
    file_cells,
    markdown_cell,
)
from autograder.course.notebooks.kernel import grading_budget
from autograder.course.notebooks.practice_cells import practice_cells, practice_tests
from autograder.course.notebooks.readme import (
    IDEA_SECTION,
    QUIZ_SECTION,
    README,
    REPOSITORY_SECTIONS,
    lesson_text,
    notebook_text,
    quiz_markdown,
    readme_sections,
    subsections,
    with_demo_cells,
)
from autograder.course.stubs import generate_lesson, lesson_files

__all__ = [
    "BuildReport",
    "NotebookBuildError",
    "build_course_dir",
    "course_files",
    "lesson_notebook",
    "skip_checks",
]

SOURCE_FOLDER = "source"
CONFIG_FILE = "nbgrader_config.py"
# The notebook metadata entry where the builder leaves what hooks.py needs: the lesson, the
# notebook's language, the TODOs' titles (for hooks.TodoStubs).
METADATA_KEY = "autograder"
COURSE_COPY = "course.yml"
# Seconds each cell may run beyond the longest lesson's grading (the kernel's own start).
CELL_TIMEOUT_MARGIN = 60


class NotebookBuildError(Exception):
    """The notebooks cannot be built (a lesson's sources are incomplete) or written: a catalog
    message (notebooks.build.<key>) naming the file and what to do, and `lines` (catalog
    messages too) listed one per line in its {listing}."""

    def __init__(self, key: str, lines: tuple[Text, ...] = (), **params) -> None:
        super().__init__(key)
        self.key, self.lines, self.params = key, tuple(lines), params

    def text(self, lang: str) -> str:
        params = dict(self.params)
        if self.lines:
            params["listing"] = "\n".join(i18n.localize(line, lang) for line in self.lines)
        return i18n.translate(f"notebooks.build.{self.key}", lang, **params)


@dataclass
class BuildReport:
    out: Path
    assignments: list[str]
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


# --- the course directory -------------------------------------------------------------------


def build_course_dir(
    course: Course, lessons: list[Lesson], out: Path, *, course_file: Path, lang: str, force: bool = False
) -> BuildReport:
    """Write the course directory for `lessons` into `out`.

    Everything is built in memory first, so a lesson with incomplete sources writes nothing.
    Files of a previous build that would change, and stale files in a rebuilt assignment's
    source folder, are replaced only with `force`; the rest of `out` (nbgrader's gradebook,
    submitted/, autograded/, release/, feedback/) is never touched.
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise NotebookBuildError("not_a_folder", out=str(out))
    planned = course_files(course, lessons, course_file=course_file, lang=lang)
    blocked = [rel for rel in planned if (out / rel).exists() and not (out / rel).is_file()]
    if blocked:
        raise NotebookBuildError("not_files", out=str(out), paths=", ".join(blocked))
    changed = [
        rel for rel, data in planned.items() if (out / rel).is_file() and (out / rel).read_bytes() != data
    ]
    stale = []
    for lesson in lessons:
        folder = out / SOURCE_FOLDER / lesson.folder
        stale += [rel for rel in _walk(folder, f"{SOURCE_FOLDER}/{lesson.folder}") if rel not in planned]
    if (changed or stale) and not force:
        listing = [message("notebooks.build.would_change", path=rel) for rel in changed]
        listing += [message("notebooks.build.not_this_build", path=rel) for rel in stale]
        raise NotebookBuildError("earlier_build", tuple(listing), out=str(out))
    report = BuildReport(out, [lesson.folder for lesson in lessons])
    for rel, data in planned.items():
        path = out / rel
        if path.is_file() and path.read_bytes() == data:
            report.unchanged.append(rel)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
        report.written.append(rel)
    for rel in stale:
        (out / rel).unlink()
        report.removed.append(rel)
    return report


def course_files(course: Course, lessons: list[Lesson], *, course_file: Path, lang: str) -> dict[str, bytes]:
    """Every file of the course directory: its path under DIR (posix) -> its bytes."""
    files = {
        CONFIG_FILE: nbgrader_config(course).encode("utf-8"),
        COURSE_COPY: Path(course_file).read_bytes(),
    }
    for lesson in lessons:
        base = f"{SOURCE_FOLDER}/{lesson.folder}"
        notebook = lesson_notebook(course, lesson, lang)
        files[f"{base}/{lesson.folder}.ipynb"] = nbformat.writes(notebook).encode("utf-8") + b"\n"
        for name, data in data_files(course, lesson).items():
            files[f"{base}/{name}"] = data
    return files


def course_id(course: Course) -> str:
    """nbgrader's course id: the course name in lower case, words joined by hyphens."""
    import unicodedata

    ascii_name = unicodedata.normalize("NFKD", course.name).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", ascii_name.lower()).strip("-") or "course"


def nbgrader_config(course: Course) -> str:
    # The same for any selection of lessons, so building more lessons later never changes it.
    timeout = max(grading_budget(lesson) for lesson in course.lessons) + CELL_TIMEOUT_MARGIN
    return _CONFIG_TEMPLATE.format(
        course=course.name,
        course_id=course_id(course),
        timeout=timeout,
        source=SOURCE_FOLDER,
        course_copy=COURSE_COPY,
    )


_CONFIG_TEMPLATE = '''\
"""nbgrader configuration of the Jupyter edition of "{course}".

Written by `autograder notebooks`; rebuild it (with --force) rather than edit it. Run nbgrader
from this folder:

    nbgrader generate_assignment 03-atencion-causal     # {source}/ -> release/ (no solutions, no hidden tests)
    nbgrader autograde 03-atencion-causal               # submitted/<student>/03-atencion-causal/
    nbgrader generate_feedback 03-atencion-causal       # feedback/: results and messages, no hidden code
    nbgrader validate {source}/03-atencion-causal/03-atencion-causal.ipynb   # the solution passes

The test cells grade through the hidden graders of the installed `autograder` package (or of
$AUTOGRADER_GRADERS, which the kernels inherit from this process).
"""

import os

from autograder.course.notebooks.hooks import (
    FeedbackExporter,
    autograde_sanitize_preprocessors,
    generate_assignment_preprocessors,
    generate_feedback_preprocessors,
)

c = get_config()  # noqa: F821 (nbgrader provides it)

c.CourseDirectory.course_id = "{course_id}"

# The test cells grade against the course.yml these notebooks were built from (their points
# come from it), never one found from the notebook's folder, which a learner's submission
# could hold. Set here, in nbgrader's process, so that every kernel inherits it.
os.environ["AUTOGRADER_COURSE"] = os.path.join(os.path.dirname(os.path.abspath(__file__)), "{course_copy}")

# The first test cell of a notebook grades the whole lesson (about as long as `autograder
# grade`, torch's import included); nbgrader's default of 30 s per cell is far too short.
c.Execute.timeout = {timeout}

# Learner notebooks keep each TODO's own hint and "TODO [id] pendiente" stub, as exercises/;
# a check that cannot run on this machine (gpu-parity without CUDA) is worth 0 of 0 here.
c.GenerateAssignment.preprocessors = generate_assignment_preprocessors()
# An untouched test cell gets its hidden code back without being reported as changed.
c.Autograde.sanitize_preprocessors = autograde_sanitize_preprocessors()
# Feedback shows each check's result and message, never its hidden code, in the notebook's
# language, each test cell named after its check and TODO.
c.GenerateFeedback.preprocessors = generate_feedback_preprocessors()
c.GenerateFeedback.exporter_class = FeedbackExporter
'''


def data_files(course: Course, lesson: Lesson) -> dict[str, bytes]:
    """The lesson folder's other files (e.g. a corpus and its licence), released with the
    notebook: everything but the lesson's files, its quiz, its README and practice tests (the
    notebook holds those in its own cells)."""
    skip = {*lesson.handed_in, README}
    out = {}
    for name, path in lesson_files(course.root, lesson.folder).items():
        if name in skip or (name.startswith("test_") and name.endswith(".py")):
            continue
        out[name] = path.read_bytes()
    return out


def _walk(folder: Path, prefix: str) -> list[str]:
    """Files under `folder` as sorted `prefix/relative/path`, without caches, hidden entries
    (.ipynb_checkpoints) or a write this build left half done (.tmp)."""
    return [
        f"{prefix}/{rel}" if prefix else rel
        for rel in walk_files(folder, skip_suffixes=(".tmp",), hidden=False)
    ]


# --- one lesson's notebook --------------------------------------------------------------------


def lesson_notebook(course: Course, lesson: Lesson, lang: str) -> nbformat.NotebookNode:
    """The source notebook of `lesson` (with solutions and hidden tests), for nbgrader."""
    source = course.root / "solutions" / lesson.folder
    # The same validation as `autograder stubs`: files present, every region a todo of its file.
    generate_lesson(lesson, course.root / "solutions", course.root / "exercises")
    readme = course.root / "exercises" / lesson.folder / README  # the lesson's own files live there only
    if not readme.is_file():
        raise NotebookBuildError("no_readme", readme=str(readme))
    title, sections = readme_sections(readme.read_text(encoding="utf-8"))
    headings = [heading for heading, _ in sections]
    if IDEA_SECTION not in headings:
        raise NotebookBuildError("no_idea_section", readme=str(readme), section=IDEA_SECTION)
    if lesson.quiz and QUIZ_SECTION not in headings:
        raise NotebookBuildError(
            "no_quiz_section",
            readme=str(readme),
            section=QUIZ_SECTION,
            lesson=lesson.folder,
            quiz=lesson.quiz,
        )

    t = functools.partial(catalog_text, lang)
    cells = [markdown_cell("text-title", title)]
    for index, (heading, body) in enumerate(sections, start=1):
        if heading == QUIZ_SECTION:
            continue
        if heading in REPOSITORY_SECTIONS:
            # Only its subsections about the lesson itself (lesson 03's conventions), as sections.
            for part, sub in enumerate(subsections(body), start=1):
                cells.append(markdown_cell(f"text-{index}-{part}", lesson_text(sub[1:], course.language)))
        else:
            text = with_demo_cells(notebook_text(body, course.language), lesson, course.language)
            cells.append(markdown_cell(f"text-{index}", text))
    texts = {name: (source / name).read_text(encoding="utf-8") for name in lesson.files}
    code_cells = {
        name: file_cells(name, notebook_text(texts[name], course.language)) for name in lesson.files
    }
    example = code_cells[lesson.files[0]][0].source.partition("\n")[0]
    cells.append(markdown_cell("howto", _howto(course, lesson, example, t, lang)))
    if any("__file__" in text for text in texts.values()):
        # A notebook has no file of its own; the lesson's code may look for its data beside it.
        setup = "\n".join(
            [
                t("setup_comment"),
                "from pathlib import Path",
                f"__file__ = str(Path.cwd() / {json.dumps(lesson.files[0])})",
            ]
        )
        cells.append(code_cell("setup", setup, locked=True))
    for name in lesson.files:
        cells.append(markdown_cell(f"file-{cell_slug(name)}", t("file_heading", file=name)))
        cells += code_cells[name]
    cells += practice_cells(course, lesson, t, lang)

    if lesson.quiz:
        quiz_body = dict(sections)[QUIZ_SECTION]
        cells.append(markdown_cell("quiz-questions", quiz_markdown(quiz_body, lesson.quiz, t)))
        quiz = (source / lesson.quiz).read_text(encoding="utf-8")
        cells += file_cells(lesson.quiz, notebook_text(quiz, course.language, readme_key="quiz_reference"))

    cells += check_cells(lesson, t, lang)

    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata = {
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
        # Read by hooks.py: the lesson and the notebook's language, and for TodoStubs the
        # messages of the stubs' NotImplementedError, in Spanish as in exercises/ (the engine
        # recognises "TODO [id] pendiente" in any language).
        METADATA_KEY: {
            "lesson": lesson.id,
            "lang": lang,
            "todo_titles": {todo.id: todo.title["es"] for todo in lesson.todos},
        },
    }
    # nbgrader needs each grade_id once; a test cell's is its check's id (`check_cell`).
    grade_ids = [cell.metadata["nbgrader"]["grade_id"] for cell in cells]
    clashes = sorted({grade_id for grade_id in grade_ids if grade_ids.count(grade_id) > 1})
    if clashes:
        raise NotebookBuildError("grade_id_clash", lesson=lesson.folder, ids=", ".join(clashes))
    nbformat.validate(notebook)
    return notebook


def skip_checks(notebook: nbformat.NotebookNode, course: Course, skipped: dict[str, str]) -> list[str]:
    """Make the checks `skipped` ({check id: why}) worth 0 points in a lesson's notebook, in
    place: their test cells say why in their comment, and the total above them leaves them out.
    For checks that cannot run where the assignment is generated (gpu-parity without CUDA), so
    that the notebook's maximum is `autograder grade`'s there. Returns the checks changed."""
    meta = notebook.metadata.get(METADATA_KEY, {})
    lesson = course.lesson(meta["lesson"])
    lang = meta.get("lang", course.language)
    t = functools.partial(catalog_text, lang)
    changed = []
    for index, cell in enumerate(notebook.cells):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        check = next((c for c in lesson.checks if c.id == grade_id and c.points), None)
        if cell.cell_type == "code" and check is not None and check.id in skipped:
            notebook.cells[index] = check_cell(lesson, check, t, lang, skipped=skipped[check.id])
            changed.append(check.id)
    total = sum(
        cell.metadata["nbgrader"]["points"]
        for cell in notebook.cells
        if cell.metadata.get("nbgrader", {}).get("grade")
    )
    for index, cell in enumerate(notebook.cells):
        if cell.id == CHECKS_CELL:
            notebook.cells[index] = markdown_cell(CHECKS_CELL, checks_text(total, t))
    return changed


def _howto(course: Course, lesson: Lesson, example: str, t, lang: str) -> str:
    files = ", ".join(f"`{name}`" for name in lesson.files)
    howto = t("howto", files=files, example=example)
    if practice_tests(course, lesson):
        howto += "\n\n" + t("howto_practice")
    howto += "\n\n" + t("howto_todos")
    parts = [t("howto_title"), howto, t("todo_table_head"), "|---|---|---|"]
    rows = [f"| `{todo.id}` | `{todo.file}` | {i18n.localize(todo.title, lang)} |" for todo in lesson.todos]
    text = "\n\n".join(parts[:2]) + "\n\n" + "\n".join(parts[2:] + rows)
    for used in (course.lesson(u) for u in lesson.uses):
        files = ", ".join(f"`{name}`" for name in used.files)
        text += "\n\n" + t("uses_note", lesson=used.id, files=files, folder=used.folder)
    return text
