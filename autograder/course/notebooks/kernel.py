"""What a notebook's hidden test cells run, inside the notebook's kernel (during `nbgrader
autograde` or `nbgrader validate`, or in the instructor's Jupyter).

That kernel has already run the learner's cells, so nothing here judges anything. The first
test cell of a notebook gathers the lesson's files from the cells the kernel ran
(`sources.files_from_history`), writes them to a fresh folder and runs `autograder grade` on
it in a new process: `python -I` (no learner-made `autograder` folder or PYTHONPATH can
shadow the package), with its output to a file and its stderr captured. That process is the
trusted one: it runs the hidden graders, which run the learner's code in the sandboxed worker,
exactly as for the repository edition. Every later test cell finds its check in that result,
which is kept while the files stay the same: one grading per notebook.

A test cell's outcome is nbgrader's: it prints its ✔ line (full points), raises `CheckFailed`
with the check's feedback (0 points; shown as that feedback alone, with no exception name), or,
for a check skipped here (gpu-parity without a GPU), prints why and returns 0, nbgrader's
partial credit. Where `nbgrader generate_assignment` ran, such a check is already worth 0 of 0
(hooks.ChecksSkippedHere), so the notebook's maximum is `autograder grade`'s; the 0 only
matters where the assignment was generated on a machine that could run it.
nbgrader zeroes a test cell that writes anything to stderr (nbgrader.utils.determine_grade
treats a stderr stream like an error), so a test cell never does: warnings are silenced while
it works and the grading process's stderr is captured, never inherited.

What this cannot promise: a learner's own cells run in the same kernel before the test cells
and could tamper with this module there, as with any nbgrader test cell. They cannot reach the
hidden graders, which never enter the kernel or the learner's notebook. Where a grade must
not depend on the kernel at all, `sources.files_from_notebook` reads the same files from the
submitted notebook without running it, for `autograder grade --submission`.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

from autograder.core import i18n
from autograder.core.manifest import Lesson, find_course_file, load_course
from autograder.course.notebooks.sources import NotebookFile, files_from_history

__all__ = ["CheckFailed", "grade_files", "grading_budget", "run_check"]

# Seconds for the grading process beyond its checks' own timeouts: its start, torch's import,
# the workers' start. The nbgrader config gives each cell more than the whole budget.
STARTUP_ALLOWANCE = 120
# Where the built course directory keeps each assignment's source (nbgrader's default).
SOURCE_FOLDER = "source"
_STDERR_TAIL = 1500
# Environment variables of the kernel that must not reach the grading process.
_KERNEL_ONLY = ("PYTHON", "MPLBACKEND", "JPY_", "PYDEVD", "IPY")

_results: dict[str, dict] = {}  # a cache key -> the lesson's results (the JSON contract)
_FRAME = re.compile(r"^(?P<lead>\s*)(?P<file>[\w.\-]+\.py):(?P<line>\d+)\b")
# A grader's feedback may send the learner to another lesson's command ("`autograder grade 03`")
# or to the README ("Repasa en el README", "the README", "su README"), which a notebook has not.
_GRADE_COMMAND = re.compile(r"`?autograder grade (?P<lesson>\d+)`?")
_README = re.compile(r"\b(?:el |the )?README(?:\.md)?\b")


class CheckFailed(AssertionError):
    """A check that did not pass. IPython (and so nbgrader's feedback) shows only its feedback,
    which starts with the check's ✘ line: no traceback, and no English exception name."""

    def _render_traceback_(self) -> list[str]:
        return str(self).split("\n")


def grading_budget(lesson: Lesson) -> int:
    """Seconds the grading process may take for `lesson`."""
    return int(sum(check.timeout for check in lesson.checks)) + STARTUP_ALLOWANCE


def run_check(lesson_id: str, check_id: str, lang: str | None = None) -> float | None:
    """The body of one hidden test cell: grade the lesson if needed, then report `check_id`."""
    # Quiet from start to end, prints included: even a learner's thread that writes to stderr
    # while this cell runs must not cost it its points.
    with _quiet():
        course_file = find_course_file()  # $AUTOGRADER_COURSE, set by the nbgrader config
        course = load_course(course_file)
        lesson = course.lesson(lesson_id)
        lang = lang or course.language
        names = list(lesson.handed_in)
        files = _lesson_files(names, lang)
        result = _graded(course_file, course.root, lesson, files, lang)
        checks = {check["id"]: check for check in result["checks"]}
        if check_id not in checks:
            raise CheckFailed(
                i18n.translate("notebooks.check_unknown", lang, lesson=lesson.id, check=check_id)
            )
        check = checks[check_id]
        notebooks = {other.id: f"{other.folder}.ipynb" for other in course.lessons}
        text = for_notebooks(_describe(check, result, files, names, lang), notebooks, lang)
        if check["status"] == "passed" or check["informational"]:
            print(text)
            return None
        if check["status"] == "skipped":
            print(text)
            return 0  # nbgrader's partial credit: no points, as `autograder grade` gives none
        raise CheckFailed(text)


@contextlib.contextmanager
def _quiet():
    """No warning and no stderr from this test cell (see the module docstring)."""
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        yield


def _lesson_files(names: list[str], lang: str) -> dict[str, NotebookFile]:
    try:
        from IPython import get_ipython
    except ImportError:
        get_ipython = None
    shell = get_ipython() if get_ipython is not None else None
    if shell is None:
        raise CheckFailed(i18n.translate("notebooks.no_kernel", lang))
    return files_from_history(list(shell.history_manager.input_hist_raw), names)


def _graded(course_file: Path, root: Path, lesson: Lesson, files: dict[str, NotebookFile], lang: str) -> dict:
    digest = hashlib.sha256(f"{course_file}\0{lesson.id}\0{lang}".encode())
    for name in sorted(files):
        digest.update(f"\0{name}\0{files[name].text}".encode())
    key = digest.hexdigest()
    if key not in _results:
        _results[key] = grade_files(course_file, root, lesson, files, lang)
    return _results[key]


def grade_files(
    course_file: Path, root: Path, lesson: Lesson, files: dict[str, NotebookFile], lang: str
) -> dict:
    """Run `autograder grade` on the files in a new process; the lesson's part of its JSON.
    Raises CheckFailed if that process fails or runs out of time."""
    budget = grading_budget(lesson)
    with tempfile.TemporaryDirectory(prefix="autograder-notebook-") as tmp:
        folder = Path(tmp) / lesson.folder
        folder.mkdir()
        # The lesson's data files (cuentos.txt...), from the instructor's copy of the assignment.
        source = root / SOURCE_FOLDER / lesson.folder
        if source.is_dir():
            for path in source.iterdir():
                if path.is_file() and path.suffix != ".ipynb" and not path.name.startswith("."):
                    shutil.copyfile(path, folder / path.name)
        for name, file in files.items():
            (folder / name).write_text(file.text, encoding="utf-8")
        output = Path(tmp) / "results.json"
        command = [
            sys.executable,
            "-I",
            "-m",
            "autograder",
            "--course",
            str(course_file),
            "grade",
            lesson.id,
            "--submission",
            str(folder),
            "--format",
            "json",
            "--output",
            str(output),
            "--lang",
            lang,
        ]
        try:
            done = subprocess.run(
                command,
                cwd=tmp,
                env=_grading_environment(),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=budget,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise CheckFailed(i18n.translate("notebooks.grading_timeout", lang, seconds=budget)) from None
        if done.returncode != 0 or not output.is_file():
            detail = (done.stderr or done.stdout).decode("utf-8", errors="replace")[-_STDERR_TAIL:]
            raise CheckFailed(
                i18n.translate("notebooks.grading_failed", lang, code=done.returncode, detail=detail.strip())
            )
        data = json.loads(output.read_text(encoding="utf-8"))
    lesson_result = data["lessons"][0]
    lesson_result["seed"] = data["seed"]
    return lesson_result


def _grading_environment() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if not name.startswith(_KERNEL_ONLY)}


# --- what the cell shows ------------------------------------------------------------------------


def _describe(check: dict, result: dict, files: dict[str, NotebookFile], names: list[str], lang: str) -> str:
    """ "✘ scaling · TODO [scaling]  0/6  fallida" and, unless it passed, its feedback."""
    symbol = {"passed": "✔", "failed": "✘", "error": "!", "skipped": "–"}[check["status"]]
    label = check["id"] + (
        " · " + i18n.translate("render.todo", lang, todo=check["todo"]) if check["todo"] else ""
    )
    if check["informational"]:
        label += " · " + i18n.translate("render.informational", lang)
    line = f"{symbol} {label}  {_number(check['score'])}/{_number(check['max_score'])}"
    if check["status"] == "passed":
        return line
    out = [line + "  " + i18n.translate(f"render.status.{check['status']}", lang)]
    # Pieces of a file that never ran (a deleted cell, a changed first line): say so first,
    # since the file that was graded lacks them.
    missing = [label for file in files.values() for label in file.missing]
    missing += [name for name in names if name not in files]
    if missing:
        out.append(i18n.translate("notebooks.missing_cells", lang, cells=", ".join(missing)))
    for part in check.get("feedback") or [{"kind": "text", "text": check["message"]}]:
        if part["kind"] == "text":
            out.append(part["text"])
        else:
            out.append(_locate_frames(part["text"], files, lang).rstrip("\n"))
    out.append(i18n.translate("render.seed", lang, seed=result["seed"]))
    return "\n".join(chunk for chunk in out if chunk)


def for_notebooks(text: str, notebooks: dict[str, str], lang: str) -> str:
    """Feedback as a notebook learner can follow it: the lesson's notebook (`03-atencion-causal.ipynb`)
    where the repository edition names its command (`autograder grade 03`), and this notebook's
    text where it names the README ("Repasa en el README" -> "Repasa en el texto de este
    cuaderno"; another lesson's README, "su README", is that lesson's notebook)."""

    def notebook(match: re.Match) -> str:
        name = notebooks.get(match["lesson"])
        return f"`{name}`" if name else match[0]

    text = _GRADE_COMMAND.sub(notebook, text)
    text = text.replace(
        i18n.translate("notebooks.other_readme", lang), i18n.translate("notebooks.other_notebook", lang)
    )
    return _README.sub(lambda _: i18n.translate("notebooks.readme_reference", lang), text)


def _locate_frames(block: str, files: dict[str, NotebookFile], lang: str) -> str:
    """A traceback's "attention.py:87 en forward" lines, with the cell and line they are in."""
    lines = []
    for row in block.split("\n"):
        match = _FRAME.match(row)
        file = files.get(match["file"]) if match else None
        where = file.locate(int(match["line"])) if file else None
        if where is not None:
            header, line = where
            row += "  " + i18n.translate("notebooks.cell_line", lang, cell=header.label, line=line)
        lines.append(row)
    return "\n".join(lines)


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.2f}"
