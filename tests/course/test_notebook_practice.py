"""The Jupyter edition while a learner works: the visible practice cell (`comprobar()`) runs the
lesson's practice tests on the learner's own cells, for real, in a Jupyter kernel; and every
text of a notebook refers only to what the notebook has (no README, no repository command).
"""

from __future__ import annotations

import re

import pytest
from support.project import ROOT
from support.variants import solution_files

from autograder.course.notebooks.build import lesson_notebook
from autograder.course.notebooks.practice_cells import PRACTICE_TEXTS
from autograder.course.notebooks.sources import fill_cells, parse_header

KERNEL_TIMEOUT = 300  # seconds for one cell: the practice tests' own process imports torch


def practice_notebook(course, lesson_id: str):
    """A lesson's notebook as a learner runs it while working: its setup, lesson and practice
    cells (the hidden test cells and the quiz need the instructor's side)."""
    notebook = lesson_notebook(course, course.lesson(lesson_id), "es")
    notebook.cells = [
        cell
        for cell in notebook.cells
        if cell.cell_type == "code"
        and not cell.metadata["nbgrader"]["grade"]
        and not cell.id.startswith("code-quiz")
    ]
    return notebook


def output_text(cell) -> str:
    return "".join(out.get("text", "") for out in cell.outputs if out.output_type == "stream")


def test_practice_cell_runs_the_practice_tests_on_the_learners_cells(course, tmp_path, monkeypatch):
    """In one kernel, as a learner goes: the untouched stub (every TODO pending, nothing passes),
    then a finished file with one bug (that test fails with its own message and the next step
    names its TODO, the rest pass), then the fix (every test passes). The files comprobar()
    saves beside the notebook are the cells last run."""
    from nbclient import NotebookClient

    monkeypatch.delenv("AUTOGRADER_COURSE", raising=False)  # a learner's Jupyter, not nbgrader's
    lesson = course.lesson("03")
    notebook = practice_notebook(course, "03")
    ids = [cell.id for cell in notebook.cells]
    assert ids[-3:] == ["practice-test_practica", "practice-runner", "practice-run"]
    assert notebook.cells[-1].source.endswith("\ncomprobar()")
    exercise = {
        name: (ROOT / "exercises" / lesson.folder / name).read_text(encoding="utf-8") for name in lesson.files
    }
    finished = solution_files(lesson)
    unstable = finished["attention_numpy.py"].replace("e = np.exp(z)", "e = np.exp(x)")
    assert unstable != finished["attention_numpy.py"], "the softmax bug no longer applies to the solution"

    def lesson_cells():
        return [
            (index, cell)
            for index, cell in enumerate(notebook.cells)
            if parse_header(cell.source.split("\n")[0]) and cell.id.startswith("code-")
        ]

    client = NotebookClient(
        notebook,
        timeout=KERNEL_TIMEOUT,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    runs = []
    with client.setup_kernel():
        fill_cells(notebook, exercise)  # the released stub, run top to bottom
        for index, cell in enumerate(notebook.cells):
            client.execute_cell(cell, index)
        runs.append(output_text(notebook.cells[-1]))
        for files in ({**finished, "attention_numpy.py": unstable}, finished):
            fill_cells(notebook, files)  # the learner edits the cells and runs them again
            for index, cell in lesson_cells():
                client.execute_cell(cell, index)
            client.execute_cell(notebook.cells[-1], len(notebook.cells) - 1)
            runs.append(output_text(notebook.cells[-1]))
    stub, buggy, done = runs

    lines = stub.strip().split("\n")
    assert lines[0] == "Pruebas de práctica de la lección 03:"
    tests = [line for line in lines if line.startswith(("✔", "✘"))]
    assert len(tests) >= 10 and all(line.startswith("✘") for line in tests), stub
    for todo in ("np-mask", "np-softmax", "np-attention", "np-edges", "mask"):
        assert f"· TODO [{todo}]: TODO [{todo}] pendiente" in stub, todo
    assert "· TODO [head-reshape]: espera al TODO [mask], aún pendiente" in stub
    assert lines[-1].startswith(f"Pasan 0 de {len(tests)} pruebas.")
    assert lines[-1].endswith("Siguiente: TODO [np-mask].")

    failed = [line for line in buggy.split("\n") if line.startswith("✘")]
    assert len(failed) == 1
    assert failed[0].startswith("✘ test_np_softmax_filas_suman_uno_y_estable · TODO [np-softmax]: ")
    assert "softmax devuelve inf o NaN con entradas de 1e3" in buggy
    assert f"Pasan {len(tests) - 1} de {len(tests)} pruebas. Siguiente: TODO [np-softmax]." in buggy

    assert "✘" not in done and done.count("✔ test_") == len(tests)
    assert done.strip().endswith(
        f"Pasan las {len(tests)} pruebas de práctica. La nota la ponen las "
        "comprobaciones ocultas del final, que miran más cosas."
    )
    for name in lesson.files:  # saved beside the notebook: the cells last run, the finished files
        saved = (tmp_path / name).read_text(encoding="utf-8")
        assert saved.split() == finished[name].split(), name


def test_practice_cell_during_grading_and_before_the_cells_ran(course, tmp_path, monkeypatch, capsys):
    """The cell that defines comprobar(), run as plain Python: under nbgrader (the course's
    config sets $AUTOGRADER_COURSE) it runs nothing; in a kernel whose lesson cells never ran
    it asks for them; an unknown TODO is named with the lesson's own."""
    notebook = practice_notebook(course, "03")
    runner = next(cell for cell in notebook.cells if cell.id == "practice-runner")
    namespace = {}
    exec(compile(runner.source, "practice-runner", "exec"), namespace)  # noqa: S102 (our own cell)
    assert {name for name in namespace if not name.startswith("__")} == {"PracticeTests", "comprobar"}
    comprobar = namespace["comprobar"]
    monkeypatch.chdir(tmp_path)

    monkeypatch.setenv("AUTOGRADER_COURSE", str(ROOT / "course.yml"))
    comprobar()
    assert "Durante la corrección las pruebas de práctica no se ejecutan" in capsys.readouterr().out

    monkeypatch.delenv("AUTOGRADER_COURSE")
    comprobar("nope")
    assert "Esta lección no tiene el TODO [nope]. Sus TODO: np-mask, np-softmax" in capsys.readouterr().out
    comprobar("mask")  # outside a kernel: no cell of the lesson has run
    assert "Ejecuta antes las celdas de attention_numpy.py, attention.py" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("lang", ["es", "en"])
def test_notebook_texts_refer_only_to_what_the_notebook_has(course, lang):
    """No README, no "they do nothing while you work", no repository command in any lesson's
    notebook; the practice section says how to check while working; the quiz cell points at
    the questions, which are right above it, every one."""
    from autograder.core import i18n

    for lesson in course.lessons:
        notebook = lesson_notebook(course, lesson, lang)
        cells = {cell.id: cell for cell in notebook.cells}
        for cell in notebook.cells:
            assert "README" not in cell.source, (lesson.id, cell.id)
            assert "no hacen nada" not in cell.source and "do nothing" not in cell.source, (
                lesson.id,
                cell.id,
            )
            if cell.cell_type == "markdown":
                for command in ("`autograder ", "`pytest ", "`python ", "exercises/", "autograder watch"):
                    assert command not in cell.source, (lesson.id, cell.id, command)
        assert "comprobar()" in cells["howto"].source and "comprobar()" in cells["checks"].source
        assert cells["practice-run"].source.endswith("comprobar()")
        assert cells["practice-test_practica"].source.startswith("%%writefile test_practica.py\n")
        if not lesson.quiz:
            continue
        order = [cell.id for cell in notebook.cells]
        answer = cells["code-quiz-1"]
        questions = notebook.cells[order.index("code-quiz-1") - 1]
        assert questions.id == "quiz-questions"
        keys = re.findall(r"^#= (pregunta_(\d+)):", answer.source, flags=re.M)
        quiz_checks = [check for check in lesson.checks if check.id.startswith("quiz-")]
        assert len(keys) == len(quiz_checks) >= 1, lesson.id
        for key, number in keys:
            assert f"**Pregunta {number}.**" in questions.source, (lesson.id, number)
            assert f"`{key}:`" in questions.source, (lesson.id, key)
        # The answer cell's own comment sends the learner to the cell above (the sources' language).
        assert i18n.translate("notebooks.quiz_reference", course.language) in answer.source.split("\n")[2]


def test_practice_texts_exist_in_both_catalogs():
    from autograder.core import i18n

    keys = {lang: {k for k in i18n.catalog(lang) if k.startswith(PRACTICE_TEXTS)} for lang in ("es", "en")}
    assert keys["es"] == keys["en"] and len(keys["es"]) >= 15
    source = (ROOT / "autograder" / "course" / "notebooks" / "practice.py").read_text(encoding="utf-8")
    used = set(re.findall(r'self\.texts\["(\w+)"\]', source)) | set(
        re.findall(r'"(no_pytest|crashed)"', source)
    )
    assert {PRACTICE_TEXTS + key for key in used} <= keys["es"]


def test_lesson_text_leaves_out_the_repository_but_keeps_the_lesson(course):
    """Lesson 03's conventions live in its README's "Cómo comprobar" section: the notebook keeps
    them (the code's docstring sends the learner there) but not the paragraphs about commands."""
    notebook = lesson_notebook(course, course.lesson("03"), "es")
    text = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "markdown")
    assert "## Convenciones que comprueba el corrector" in text and "**La máscara marca lo visible.**" in text
    assert "Cómo comprobar" not in text and "autograder watch" not in text
    docstring = next(cell for cell in notebook.cells if cell.id == "code-attention-1").source
    assert "ver el texto de este cuaderno" in docstring


def test_practice_cell_says_which_earlier_lesson_it_needs(course, tmp_path, monkeypatch, capsys):
    """Lesson 06 imports the learner's lessons 03 and 04 from their notebooks' folders: without
    them the practice tests cannot load, and comprobar() says which notebook saves them. The
    files it saves are the ones the hidden test cells would grade (sources.files_from_history)."""
    import IPython

    from autograder.course.notebooks.sources import files_from_history

    monkeypatch.delenv("AUTOGRADER_COURSE", raising=False)
    lesson = course.lesson("06")
    notebook = lesson_notebook(course, lesson, "es")
    fill_cells(notebook, solution_files(lesson))
    history = [
        cell.source for cell in notebook.cells if cell.cell_type == "code" and cell.id.startswith("code-")
    ]
    history.append(history[1] + "\n# run again after an edit: the last run wins")
    shell = type("Shell", (), {"history_manager": type("History", (), {"input_hist_raw": history})})()
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)
    folder = tmp_path / lesson.folder
    folder.mkdir()
    monkeypatch.chdir(folder)
    namespace = {}
    for cell_id in ("practice-test_practica", "practice-runner"):
        source = next(cell for cell in notebook.cells if cell.id == cell_id).source
        if source.startswith("%%writefile "):  # what IPython's cell magic does
            head, _, body = source.partition("\n")
            (folder / head.split()[1]).write_text(body + "\n", encoding="utf-8")
        else:
            exec(compile(source, cell_id, "exec"), namespace)  # noqa: S102 (our own cell)
    namespace["comprobar"]()
    out = capsys.readouterr().out
    assert out.startswith(
        "Las pruebas de práctica no pudieron cargar tus archivos: ModuleNotFoundError: "
        "No module named 'model'\n"
    ), out
    assert "de la lección 04: ejecuta `comprobar()` en su cuaderno (`../04-bloque-transformer/`)" in out
    expected = files_from_history(history, list(lesson.files))
    for name in lesson.files:
        assert (folder / name).read_text(encoding="utf-8") == expected[name].text
    assert "the last run wins" in (folder / lesson.files[0]).read_text(encoding="utf-8")


def test_hidden_check_feedback_names_notebooks_not_commands(course):
    """The graders' feedback sends a learner to another lesson with `autograder grade 03`, and
    to the README ("Repasa en el README ..."); in a notebook it names that lesson's notebook and
    this notebook's text instead (what the hidden test cells print)."""
    import string

    from autograder.core import i18n
    from autograder.course.notebooks.kernel import for_notebooks

    notebooks = {lesson.id: f"{lesson.folder}.ipynb" for lesson in course.lessons}
    found = {"command": 0, "readme": 0}
    for lang in ("es", "en"):
        for key, template in i18n.catalog(lang).items():
            if not key.startswith("lesson"):
                continue
            fields = {name: "03" for _, name, _, _ in string.Formatter().parse(template) if name}
            text = for_notebooks(template.format(**fields), notebooks, lang)
            if "autograder grade" in template:
                assert "autograder" not in text and "`03-atencion-causal.ipynb`" in text, (key, text)
                found["command"] += 1
            if "README" in template:
                assert "README" not in text, (key, text)
                assert "cuaderno" in text if lang == "es" else "notebook" in text, (key, text)
                found["readme"] += 1
    assert found["command"] >= 2 and found["readme"] >= 30, found
    unknown = "Corrígela con `autograder grade 99`."
    assert for_notebooks(unknown, notebooks, "es") == unknown
    wrong = i18n.translate("lesson03.quiz_wrong_2", "es", given="b")
    assert for_notebooks(wrong, notebooks, "es").endswith(
        "Repasa en el texto de este cuaderno qué claves ve la fila i de la máscara causal."
    )
    own = for_notebooks(i18n.translate("lesson06.own_cached_differs", "es"), notebooks, "es")
    assert own.endswith("que deben ser como en su cuaderno."), own
    own = for_notebooks(i18n.translate("lesson06.own_cached_differs", "en"), notebooks, "en")
    assert own.endswith("which must be as its notebook says."), own


@pytest.mark.parametrize("lang", ["es", "en"])
def test_every_text_of_the_notebooks_is_in_both_catalogs(lang):
    """The keys the notebooks' code and feedback template use exist in both catalogs."""
    from autograder.core import i18n

    other = "en" if lang == "es" else "es"
    mine = {key for key in i18n.catalog(lang) if key.startswith("notebooks.")}
    assert mine == {key for key in i18n.catalog(other) if key.startswith("notebooks.")}
    package = ROOT / "autograder" / "course" / "notebooks"
    code = "\n".join(path.read_text(encoding="utf-8") for path in package.glob("*.py"))
    used = {f"notebooks.{key}" for key in re.findall(r'(?<![\w.])t\(\s*"([\w.]+)"', code)}
    used |= {
        key for key in re.findall(r'"(notebooks\.[\w.]*\w)"', code)
    }  # not prefixes ("notebooks.practice.")
    template = (package / "feedback.html.j2").read_text(encoding="utf-8")
    used |= {f"notebooks.feedback.{key}" for key in re.findall(r"texts\.(\w+)", template)}
    assert used and used <= mine, sorted(used - mine)
