"""The Jupyter edition (`autograder notebooks`), with the real nbgrader CLI in a temporary
course directory: the learner notebooks nbgrader releases hold no solution and no hidden test,
`nbgrader autograde` gives a notebook exactly the points (and the maximum) `autograder grade`
gives its code, never calls an untouched notebook tampered, and `nbgrader generate_feedback`
writes a page a learner can read: each check named, in Spanish, no stray output, lines wrapped.

One course directory is built and released once (`released`); each test that grades works on
its own copy of it.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from lessons.lesson03_variants import BUGGY
from support.project import ROOT
from support.variants import solution_files

from autograder.course.notebooks.readme import notebook_text
from autograder.course.notebooks.sources import (
    files_from_history,
    files_from_notebook,
    fill_cells,
    header_line,
    parse_header,
    split_module,
)
from autograder.course.stubs import generate_lesson, parse_regions, revert_region, strip_markers

STUDENT_TIMEOUT = 600  # seconds for one nbgrader command: kernels, torch imports and gradings


# --- helpers -------------------------------------------------------------------------------------


def autograder(*args: str) -> subprocess.CompletedProcess:
    """The real command line, run in this process (its start would cost more than the build)."""
    from autograder.cli import main

    if args[0] != "--course":
        args = ("--course", str(ROOT / "course.yml"), *args)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def nbgrader(course_dir: Path, *args: str) -> str:
    done = subprocess.run(
        ["nbgrader", *args],
        cwd=course_dir,
        capture_output=True,
        text=True,
        timeout=STUDENT_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def build(tmp_path: Path, *lessons: str) -> Path:
    out = tmp_path / "curso"
    done = autograder("notebooks", "--out", str(out), *lessons)
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture(scope="module")
def released(tmp_path_factory) -> tuple[Path, str]:
    """Lessons 01 and 03 built and released by `nbgrader generate_assignment` (which grades each
    lesson's solution once, to find the checks that cannot run on this machine); and its log."""
    out = build(tmp_path_factory.mktemp("released"), "01", "03")
    return out, nbgrader(out, "generate_assignment", "0[13]-*")


def copy_of_course(released: tuple[Path, str], tmp_path: Path) -> Path:
    """A copy of the released course directory (gradebook included) that a test may grade in."""
    return Path(shutil.copytree(released[0], tmp_path / "curso"))


def cannot_run_here(lesson) -> set[str]:
    """The checks of `lesson` that `autograder grade` skips on this machine: gpu-parity is the
    only check whose grader skips it (without CUDA), and it is then worth 0 of 0 points."""
    import torch

    return {check.id for check in lesson.checks if check.id == "gpu-parity" and not torch.cuda.is_available()}


def notebook_path(course_dir: Path, stage: str, assignment: str, student: str | None = None) -> Path:
    folder = course_dir / stage / student / assignment if student else course_dir / stage / assignment
    return folder / f"{assignment}.ipynb"


def lesson_cells(notebook) -> list:
    """The code cells that hold a piece of a lesson file, in order."""
    return [
        cell
        for cell in notebook.cells
        if cell.cell_type == "code" and parse_header(cell.source.split("\n")[0])
    ]


def filled_in(release, files: dict[str, str]):
    """A copy of the released notebook whose lesson cells hold `files` (what a learner typed)."""
    notebook = nbformat.from_dict(json.loads(json.dumps(release)))
    fill_cells(notebook, files)
    return notebook


def as_typed(course, lesson, files: dict[str, str]) -> dict[str, str]:
    """Files as a learner has them in the notebook's cells: the released text (which says this
    notebook where the sources say README: notebook_text) with their own code."""
    return {
        name: notebook_text(
            text, course.language, readme_key="quiz_reference" if name == lesson.quiz else "readme_reference"
        )
        for name, text in files.items()
    }


def submit(course_dir: Path, assignment: str, student: str, notebook) -> None:
    folder = course_dir / "submitted" / student / assignment
    folder.mkdir(parents=True)
    nbformat.write(notebook, folder / f"{assignment}.ipynb")


def start_grading(lesson_id: str, files: dict[str, str], folder: Path) -> tuple[subprocess.Popen, Path]:
    """`autograder grade` on `files`, started now (it overlaps nbgrader's run) as the reference."""
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    output = folder.parent / f"{folder.name}.json"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "autograder",
            "grade",
            lesson_id,
            "--submission",
            str(folder),
            "--format",
            "json",
            "--output",
            str(output),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    return process, output


def reference_result(process: subprocess.Popen, output: Path) -> dict:
    """The lesson's part of `autograder grade`'s JSON."""
    _, stderr = process.communicate(timeout=STUDENT_TIMEOUT)
    assert process.returncode == 0, stderr.decode()
    return json.loads(output.read_text(encoding="utf-8"))["lessons"][0]


def reference_scores(process: subprocess.Popen, output: Path) -> dict[str, float]:
    return {check["id"]: float(check["score"]) for check in reference_result(process, output)["checks"]}


def gradebook_scores(course_dir: Path, assignment: str, student: str) -> dict[str, float]:
    """{check id: points} as nbgrader's gradebook has them after autograde (its grade cells are
    named after the checks, as in `autograder grade-all`'s gradebook)."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course_dir / 'gradebook.db'}") as gradebook:
        submitted = gradebook.find_submission_notebook(assignment, assignment, student)
        return {grade.name: float(grade.score) for grade in submitted.grades}


def gradebook_max_score(course_dir: Path, assignment: str, student: str) -> float:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course_dir / 'gradebook.db'}") as gradebook:
        return float(gradebook.find_submission(assignment, student).max_score)


def student_log(log: str, student: str) -> str:
    """The part of an `nbgrader autograde` log about one student's notebook."""
    parts = re.split(r"(?=\[AutogradeApp \| INFO\] Sanitizing )", log)
    found = [part for part in parts if f"/submitted/{student}/" in part.split("\n", 1)[0]]
    assert len(found) == 1, f"no log of {student}:\n{log}"
    return found[0]


def feedback_html(course_dir: Path, assignment: str, student: str) -> str:
    return (course_dir / "feedback" / student / assignment / f"{assignment}.html").read_text(encoding="utf-8")


def toc(html: str) -> list[str]:
    """The feedback page's table of contents: one entry per test cell, as the learner reads it."""
    contents = re.search(r'<div id="toc">(.*?)</div>', html, flags=re.S)
    assert contents, "the feedback page has no table of contents"
    return [
        re.sub(r"<[^>]+>", "", entry).strip()
        for entry in re.findall(r"<li>(.*?)</li>", contents[1], flags=re.S)
    ]


def autograded(course_dir: Path, assignment: str, student: str) -> dict:
    """The autograded notebook's cells by id."""
    notebook = nbformat.read(notebook_path(course_dir, "autograded", assignment, student), as_version=4)
    return {
        cell.metadata["nbgrader"]["grade_id"]: cell for cell in notebook.cells if "nbgrader" in cell.metadata
    }


def stderr_of(cell) -> str:
    return "".join(
        out.get("text", "")
        for out in cell.get("outputs", [])
        if out.output_type == "stream" and out.name == "stderr"
    )


# --- cells <-> files ----------------------------------------------------------------------------


@pytest.mark.parametrize("lesson_id", ["01", "02", "03"])
def test_lesson_files_survive_the_round_trip_through_cells(course, lesson_id):
    """Split into cells and put back from the kernel's history, every solution file is the same
    module, each traceback line maps to the cell line that holds it, and the last run wins."""
    lesson = course.lesson(lesson_id)
    finished = solution_files(lesson)
    history = []
    for name in lesson.files:
        pieces = split_module(finished[name], name)
        assert len(pieces) >= 2, f"{name}: a lesson file should make several cells"
        history += [
            header_line(name, part, len(pieces)) + "\n" + piece for part, piece in enumerate(pieces, 1)
        ]
    if lesson.quiz:
        history.append(header_line(lesson.quiz) + "\n" + finished[lesson.quiz])
    history.insert(1, "print('a cell of my own, not part of any file')")
    names = [*lesson.files, *([lesson.quiz] if lesson.quiz else [])]
    files = files_from_history(history, names)
    assert set(files) == set(names)
    for name in lesson.files:
        assert ast.dump(ast.parse(files[name].text)) == ast.dump(ast.parse(finished[name])), name
        assert files[name].missing == []
        pieces = split_module(finished[name], name)
        for number, text in enumerate(files[name].text.split("\n"), start=1):
            where = files[name].locate(number)
            if where is None:
                assert text == "", f"{name}:{number} belongs to no cell"
                continue
            header, line = where
            cell = header_line(name, header.part, len(pieces)) + "\n" + pieces[header.part - 1]
            assert cell.split("\n")[line - 1] == text, f"{name}:{number} maps to the wrong cell line"
    if lesson.quiz:
        assert files[lesson.quiz].text.strip() == finished[lesson.quiz].strip()

    # A piece run again later wins; a piece that never ran is named.
    name = lesson.files[0]
    parts = len(split_module(finished[name], name))
    rerun = history + [header_line(name, 2, parts) + "\nCHANGED = True"]
    assert "CHANGED = True" in files_from_history(rerun, names)[name].text
    without = [source for source in history if not source.startswith(header_line(name, 2, parts))]
    assert files_from_history(without, names)[name].missing == [header_line(name, 2, parts).lstrip("# ")]


def test_split_module_keeps_a_region_in_one_cell():
    text = (
        '"""Doc."""\nimport math\n\n### BEGIN SOLUTION demo\n#: hint\ndef f():\n    return 1\n\n\n'
        "def g():\n    return 2\n### END SOLUTION\n\n\n# About h.\n@staticmethod\ndef h():\n    pass\n"
        "\n\nif __name__ == '__main__':\n    f()\n"
    )
    regions = [(r.start_line, r.end_line) for r in parse_regions(text, "x.py")]
    pieces = split_module(text, "x.py", regions)
    assert pieces[0] == '"""Doc."""\nimport math'
    # f and g stay together in the region's cell, which starts at its marker.
    assert pieces[1].startswith("### BEGIN SOLUTION demo") and pieces[1].endswith("### END SOLUTION")
    assert pieces[2].startswith("# About h.\n@staticmethod")  # the comment above a block goes with it
    assert pieces[3] == "if __name__ == '__main__':\n    f()"
    assert len(pieces) == 4


# --- building the course directory -------------------------------------------------------------


def test_build_writes_a_course_directory_and_never_clobbers_an_earlier_one(tmp_path):
    out = build(tmp_path, "03")
    notebook = notebook_path(out, "source", "03-atencion-causal")
    assert {p.name for p in out.iterdir()} == {"nbgrader_config.py", "course.yml", "source"}
    assert (out / "course.yml").read_bytes() == (ROOT / "course.yml").read_bytes()
    original = notebook.read_bytes()

    # The same sources build the same bytes: a rebuild changes nothing.
    again = autograder("notebooks", "--out", str(out), "03")
    assert again.returncode == 0 and "0 archivos escritos" in again.stdout

    # An edited notebook and a stray file are not replaced without --force; nothing is written.
    notebook.write_text(notebook.read_text(encoding="utf-8").replace("La idea", "Mi idea"), encoding="utf-8")
    (notebook.parent / "notas.txt").write_text("mías", encoding="utf-8")
    (out / "gradebook.db").write_bytes(b"nbgrader's own")
    (out / "submitted" / "ana").mkdir(parents=True)
    refused = autograder("notebooks", "--out", str(out), "03")
    assert refused.returncode == 2
    assert "source/03-atencion-causal/03-atencion-causal.ipynb (cambiaría)" in refused.stderr
    assert "source/03-atencion-causal/notas.txt (no es de esta construcción)" in refused.stderr
    assert "Mi idea" in notebook.read_text(encoding="utf-8")

    forced = autograder("notebooks", "--out", str(out), "03", "--force")
    assert forced.returncode == 0, forced.stderr
    assert notebook.read_bytes() == original and not (notebook.parent / "notas.txt").exists()
    assert (out / "gradebook.db").read_bytes() == b"nbgrader's own" and (out / "submitted" / "ana").is_dir()

    unknown = autograder("notebooks", "--out", str(out), "99")
    assert unknown.returncode == 2 and "no hay ninguna lección `99` en el curso" in unknown.stderr


def test_a_lesson_with_incomplete_sources_writes_nothing(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copy(ROOT / "course.yml", root / "course.yml")
    for tree in ("solutions", "exercises"):
        shutil.copytree(ROOT / tree / "03-atencion-causal", root / tree / "03-atencion-causal")
    readme = root / "exercises" / "03-atencion-causal" / "README.md"
    readme.write_text(readme.read_text(encoding="utf-8").replace("## La idea", "## Idea"), encoding="utf-8")
    out = tmp_path / "curso"
    done = autograder("--course", str(root / "course.yml"), "notebooks", "--out", str(out), "03")
    assert done.returncode == 2
    assert "README.md: no tiene la sección «## La idea»" in done.stderr
    assert not out.exists()


def test_notebook_text_follows_the_language(course, tmp_path):
    from autograder.course.notebooks.build import lesson_notebook

    words = {"es": ("Cómo trabajar", "puntos", "Comprobación"), "en": ("How to work", "points", "Check")}
    for lang, expected in words.items():
        notebook = lesson_notebook(course, course.lesson("03"), lang)
        text = "\n".join(cell.source for cell in notebook.cells)
        assert all(word in text for word in expected), lang
        assert f'lang="{lang}"' in text
    english = "\n".join(cell.source for cell in lesson_notebook(course, course.lesson("03"), "en").cells)
    assert "Comprobación" not in english and "Cómo trabajar" not in english


def test_a_check_that_cannot_run_here_is_worth_nothing(course):
    """skip_checks (what generate_assignment does for a check the solution gets skipped on its
    machine): that test cell is worth 0 and says why, the total above the checks leaves it out,
    and every test cell keeps its check's id as nbgrader's grade_id."""
    from autograder.course.notebooks.build import lesson_notebook, skip_checks

    lesson = course.lesson("03")
    for lang, words in (("es", "no puntúa aquí: no CUDA."), ("en", "does not score here: no CUDA.")):
        notebook = lesson_notebook(course, lesson, lang)
        assert skip_checks(notebook, course, {"gpu-parity": "no CUDA\n", "quiz-1-unknown": "?"}) == [
            "gpu-parity"
        ]
        tests = {
            cell.metadata.nbgrader["grade_id"]: cell
            for cell in notebook.cells
            if cell.metadata.nbgrader["grade"]
        }
        assert list(tests) == [check.id for check in lesson.checks]
        assert (
            tests["gpu-parity"].metadata.nbgrader["points"] == 0
            and tests["gpu-parity"].id == "check-gpu-parity"
        )
        assert words in tests["gpu-parity"].source.split("\n")[0]
        assert "BEGIN HIDDEN TESTS" in tests["gpu-parity"].source
        total = sum(check.points for check in lesson.checks) - 5
        intro = next(cell for cell in notebook.cells if cell.id == "checks").source
        assert f"({total} " in intro and f"({total + 5} " not in intro
        nbformat.validate(notebook)


# --- nbgrader generate_assignment ---------------------------------------------------------------


def test_release_notebooks_hold_no_solution_and_no_hidden_test(course, released):
    out, log = released
    for lesson in (course.lesson("01"), course.lesson("03")):
        release = nbformat.read(notebook_path(out, "release", lesson.folder), as_version=4)
        source = nbformat.read(notebook_path(out, "source", lesson.folder), as_version=4)
        code = "\n".join(cell.source for cell in release.cells if cell.cell_type == "code")
        everything = "\n".join(cell.source for cell in release.cells)
        # No hidden test: nothing of the test cells but their comment, and no trace of the graders.
        for marker in (
            "BEGIN HIDDEN TESTS",
            "run_check",
            "autograder.course.notebooks",
            "BEGIN SOLUTION",
            "END SOLUTION",
        ):
            assert marker not in everything, (lesson.folder, marker)
        # No solution: every lesson cell is, piece by piece, exactly the repository's exercise
        # (saying this notebook where the exercise says README: notebook_text).
        exercise = generate_lesson(lesson, ROOT / "solutions", ROOT / "exercises")
        exercise = {
            name: notebook_text(
                text,
                course.language,
                readme_key="quiz_reference" if name == lesson.quiz else "readme_reference",
            )
            for name, text in exercise.items()
        }
        released = {}
        for cell in lesson_cells(release):
            header = parse_header(cell.source.split("\n")[0])
            released.setdefault(header.file, []).append(cell.source.split("\n", 1)[1])
        for name in lesson.files:
            assert released[name] == split_module(exercise[name], name), f"{lesson.folder}/{name}"
        assert released[lesson.quiz] == [exercise[lesson.quiz].strip("\n")]
        # ...and no line of any solution region that the exercise does not also have.
        for name in [*lesson.files, lesson.quiz]:
            text = (ROOT / "solutions" / lesson.folder / name).read_text(encoding="utf-8")
            for region in parse_regions(text, name):
                for line in region.body:
                    if line.strip() and line.strip() not in exercise[name]:
                        assert line.strip() not in code, (
                            f"{lesson.folder}/{name}: solution line released: {line}"
                        )
        # One test cell per course.yml check, named after it (nbgrader's grade_id is the check's
        # id; its comment names its TODO), worth its points: 0 of 0 for a check that cannot run
        # on this machine, so that the notebook's maximum is `autograder grade`'s here.
        # TODO cells editable, the rest locked.
        tests = {
            cell.metadata.nbgrader["grade_id"]: cell
            for cell in release.cells
            if cell.metadata.get("nbgrader", {}).get("grade")
        }
        assert list(tests) == [check.id for check in lesson.checks]
        skipped = cannot_run_here(lesson)
        points = [0 if c.id in skipped else c.points for c in lesson.checks]
        assert [tests[c.id].metadata.nbgrader["points"] for c in lesson.checks] == points
        for check in lesson.checks:
            comment = tests[check.id].source.split("\n")[0]
            assert comment.startswith(f"# Comprobación {check.id}"), comment
            assert (f"· TODO [{check.todo}]" in comment) == bool(check.todo), comment
        for check_id in skipped:
            assert "no puntúa aquí: no hay GPU con CUDA" in tests[check_id].source, tests[check_id].source
            assert f"la comprobación {check_id} no puede ejecutarse en esta máquina" in log
        intro = next(cell for cell in release.cells if cell.id == "checks").source
        assert f"({sum(points)} en total)" in intro
        for cell in lesson_cells(source):
            solution = cell.metadata.nbgrader["solution"]
            assert solution == bool(parse_regions(cell.source, "x.py")), cell.source[:60]
        # The lesson's data files travel with the notebook; practice tests and the README do not.
        shipped = {p.name for p in notebook_path(out, "release", lesson.folder).parent.iterdir()}
        assert f"{lesson.folder}.ipynb" in shipped and "README.md" not in shipped
        assert not any(name.startswith("test_") for name in shipped)
    assert "cuentos.txt" in {p.name for p in (out / "release" / "01-tokens-y-lotes").iterdir()}


# --- nbgrader autograde --------------------------------------------------------------------------


NOISY_TRY_OUT = """

# Mi prueba: la ejecuto aquí mismo (torch avisa por stderr cada vez).
import sys
import warnings

warnings.simplefilter("always")
print("aviso del alumno", file=sys.stderr)
CausalSelfAttention(AttentionConfig(n_embd=8, n_head=2, block_size=4))(torch.randn(1, 3, 8))
"""


def test_autograde_gives_the_points_of_autograder_grade(course, released, tmp_path):
    """One autograde of three learners (finished and noisy, half done and tampering with a test
    cell, untouched) and one generate_feedback, checked against `autograder grade`."""
    lesson = course.lesson("03")
    assignment = lesson.folder
    out = copy_of_course(released, tmp_path)
    release = nbformat.read(notebook_path(out, "release", assignment), as_version=4)

    # Finished, and noisy: a torch warning from forward() (in the kernel and in the grader's
    # worker) and the learner's own stderr output, which must not zero any test cell. (Only
    # TODO cells are the learner's: nbgrader restores the read-only ones, imports included.)
    finished = solution_files(lesson)
    noisy = dict(finished)
    noisy["attention.py"] = (
        finished["attention.py"].replace(
            "        B, T, C = x.size()\n",
            "        B, T, C = x.size()\n        torch.tensor(torch.ones(2))  # UserWarning: copy construct\n",
        )
        + NOISY_TRY_OUT
    )
    # Half done: a crash in the heads' merge, the fused path left as a TODO, a wrong answer.
    source = (ROOT / "solutions" / assignment / "attention.py").read_text(encoding="utf-8")
    fused = next(i for i, region in enumerate(parse_regions(source, "attention.py")) if region.id == "fused")
    titles = {todo.id: todo.title["es"] for todo in lesson.todos}
    merge_bug = next(variant for variant in BUGGY if variant.name == "merge-view-not-contiguous")
    half = {**finished, "quiz.yml": finished["quiz.yml"].replace("pregunta_2: a", "pregunta_2: b")}
    half["attention.py"] = strip_markers(revert_region(source, "attention.py", fused, titles))
    half.update(merge_bug.apply(half))

    noisy, half = as_typed(course, lesson, noisy), as_typed(course, lesson, half)
    references = {
        name: start_grading("03", files, tmp_path / "reference" / name)
        for name, files in (("noisy", noisy), ("half", half))
    }
    submit(out, assignment, "ruidosa", filled_in(release, noisy))
    # The half-done learner also empties a test cell it fails (which, run as it is, would pass).
    tampered = filled_in(release, half)
    merge_cell = next(cell for cell in tampered.cells if cell.metadata.nbgrader["grade_id"] == "heads-merge")
    merge_cell.source = "# heads-merge: ¡aprobada!"
    submit(out, assignment, "a-medias", tampered)
    submit(out, assignment, "sin-tocar", release)
    log = nbgrader(out, "autograde", assignment)

    expected = {name: reference_result(*references[name]) for name in references}
    expected_noisy = {check["id"]: float(check["score"]) for check in expected["noisy"]["checks"]}
    expected_half = {check["id"]: float(check["score"]) for check in expected["half"]["checks"]}
    points = {check.id: float(check.points) for check in lesson.checks}
    graded_noisy = gradebook_scores(out, assignment, "ruidosa")
    graded_half = gradebook_scores(out, assignment, "a-medias")
    # Equal check by check (a skipped check such as gpu-parity without a GPU: 0 in both).
    assert graded_noisy == expected_noisy
    assert graded_half == expected_half
    assert gradebook_scores(out, assignment, "sin-tocar") == dict.fromkeys(points, 0.0)
    skipped = {c for c, s in expected_noisy.items() if s == 0}
    assert skipped <= {"gpu-parity"}, f"the finished notebook failed {skipped}"
    assert skipped == cannot_run_here(lesson)
    assert sum(expected_noisy.values()) == sum(points.values()) - sum(points[c] for c in skipped)
    assert 0 < sum(expected_half.values()) < sum(expected_noisy.values())
    assert (
        expected_half["quiz-2"] == 0
        and expected_half["heads-merge"] == 0
        and expected_half["fused-parity"] == 0
    )
    # The notebook's maximum is `autograder grade`'s (lesson 03 without a GPU: 100, not 105).
    for student in ("ruidosa", "a-medias", "sin-tocar"):
        assert gradebook_max_score(out, assignment, student) == expected["noisy"]["max_score"], student
    assert expected["noisy"]["max_score"] == sum(points.values()) - sum(points[c] for c in skipped)

    # An untouched notebook is not called tampered: no checksum (or any other) change reported.
    assert "has changed" not in student_log(log, "sin-tocar"), student_log(log, "sin-tocar")
    # Test cells the learners left alone are not either; the one emptied is, and its hidden
    # code ran all the same (the heads-merge score above is the reference's 0).
    for student in ("ruidosa", "a-medias"):
        changed = set(re.findall(r"Attribute '\w+' for cell ([\w-]+) has changed", student_log(log, student)))
        assert changed & set(points) == ({"heads-merge"} if student == "a-medias" else set()), (
            student,
            changed,
        )

    # The warnings really were printed, in the learner's own cell, and in no test cell.
    cells = autograded(out, assignment, "ruidosa")
    printed = stderr_of(cells["code-attention-3"])
    assert "UserWarning" in printed and "aviso del alumno" in printed
    assert not any(stderr_of(cell) for cell_id, cell in cells.items() if cell_id in points)

    # A failed check shows its feedback, with the notebook cell and line of the learner's crash.
    merge = autograded(out, assignment, "a-medias")["heads-merge"]
    error = next(o for o in merge.outputs if o.output_type == "error")
    shown = "\n".join(error.traceback)
    assert "✘ heads-merge · TODO [contiguous-view]" in shown and "view" in shown
    match = re.search(r"\(celda attention\.py \[(\d+)/(\d+)\], línea (\d+)\)", shown)
    assert match, shown
    cell = autograded(out, assignment, "a-medias")[f"code-attention-{match[1]}"]
    assert "y = y.transpose(1, 2).view(B, T, C)" in cell.source.split("\n")[int(match[3]) - 1]
    # Read without running it, the submitted notebook gives back the files that were graded.
    submitted = nbformat.read(notebook_path(out, "submitted", assignment, "a-medias"), as_version=4)
    extracted = files_from_notebook(submitted, [*lesson.files, lesson.quiz])
    assert extracted["quiz.yml"].text.strip() == half["quiz.yml"].strip()
    for name in lesson.files:
        assert ast.dump(ast.parse(extracted[name].text)) == ast.dump(ast.parse(half[name])), name
    pending = "\n".join(
        next(
            o
            for o in autograded(out, assignment, "a-medias")["fused-parity"].outputs
            if o.output_type == "error"
        ).traceback
    )
    assert "TODO [fused] pendiente" in pending

    # The learners' feedback: the notebook's maximum, each test cell named after its check and
    # TODO, in Spanish (no English exception name), no stray output, nothing about a README,
    # long lines wrapped.
    nbgrader(out, "generate_feedback", assignment)
    maximum = f"{expected['noisy']['max_score']:g}"
    for student in ("ruidosa", "a-medias", "sin-tocar"):
        html = feedback_html(out, assignment, student)
        assert re.search(rf"<h4>{assignment} \(Puntos: [\d.]+ / {maximum}\)</h4>", html), student
        for absent in ("Test cell", "CheckFailed", "README", "Score:", "BEGIN HIDDEN TESTS", "run_check"):
            assert absent not in html, (student, absent)
        # No value under a test cell (nbgrader's partial credit, e.g. gpu-parity's "Out[30]: 0");
        # the noisy learner's own cell ends with an expression, whose value is theirs to see.
        assert html.count("Out[") == (1 if student == "ruidosa" else 0), student
        assert re.search(r"white-space:\s*pre-wrap", html), student
        entries = toc(html)
        assert len(entries) == len(lesson.checks), entries
        for entry, check in zip(entries, lesson.checks):
            todo = f" · TODO [{check.todo}]" if check.todo else ""
            worth = 0 if check.id in skipped else check.points
            assert re.fullmatch(rf"{re.escape(check.id + todo)} \(Puntos: [\d.]+ / {worth:g}\)", entry), entry
        assert "Comprobación <code>heads-merge · TODO [contiguous-view]</code>" in html
    half_page = feedback_html(out, assignment, "a-medias")
    assert "✘ heads-merge · TODO [contiguous-view]" in half_page
    assert "Repasa en el texto de este cuaderno qué claves ve la fila i" in half_page  # quiz-2's feedback
    untouched = feedback_html(out, assignment, "sin-tocar")
    assert f"<h4>{assignment} (Puntos: 0 / {maximum})</h4>" in untouched


def test_autograde_lesson01_with_its_corpus(course, released, tmp_path):
    """Lesson 01 reads its corpus beside its file: in the notebook's kernel through the setup
    cell's __file__, in the grading through the data files copied next to the lesson's files.
    Its finished notebook gets every point (lesson 01 has no check that can be skipped)."""
    lesson = course.lesson("01")
    out = copy_of_course(released, tmp_path)
    release = nbformat.read(notebook_path(out, "release", lesson.folder), as_version=4)
    submit(out, lesson.folder, "ana", filled_in(release, solution_files(lesson)))
    nbgrader(out, "autograde", lesson.folder)
    assert gradebook_scores(out, lesson.folder, "ana") == {
        check.id: float(check.points) for check in lesson.checks
    }
    cells = autograded(out, lesson.folder, "ana")
    assert not any(o.output_type == "error" for cell in cells.values() for o in cell.get("outputs", []))
    # The file's own demo (`if __name__ == "__main__"`, true in a kernel) read the corpus.
    demo_cell = next(cell for cell in cells.values() if 'if __name__ == "__main__":' in cell.source)
    demo = "".join(o.get("text", "") for o in demo_cell.outputs)
    assert "caracteres, vocabulario de" in demo
    # The learner's feedback shows each check's outcome, but none of the hidden code.
    nbgrader(out, "generate_feedback", lesson.folder)
    feedback = (out / "feedback" / "ana" / lesson.folder / f"{lesson.folder}.html").read_text(
        encoding="utf-8"
    )
    assert "✔ vocab · TODO [vocab]" in feedback
    assert "BEGIN HIDDEN TESTS" not in feedback and "run_check" not in feedback
    total = sum(check.points for check in lesson.checks)
    assert f"<h4>{lesson.folder} (Puntos: {total:g} / {total:g})</h4>" in feedback
