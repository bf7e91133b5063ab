"""autograder.course.stubs: regions, stubs, reverting one region, and exercises/ kept in sync.

Small inline solutions pin the exact output; a tmp course (real files) exercises
generate_lesson and sync; the last tests hold the real course: exercises/ must be what the
solutions generate, and every stub must compile and raise "TODO [<id>] pendiente".
"""

from __future__ import annotations

import importlib.util
import itertools
import re
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from autograder.core.manifest import load_course
from autograder.course.stubs import (
    Region,
    StubError,
    generate_lesson,
    make_stub,
    parse_regions,
    revert_region,
    strip_markers,
    sync,
)
from autograder.engine import references

REPO = Path(__file__).resolve().parents[2]

TITLES = {"add": "suma dos números", "first": "devuelve el primero", "twice": 'dobla "x"'}

SOLUTION = '''\
def add(a, b):
    """Suma."""
    ### BEGIN SOLUTION add
    #: suma los dos números
    #: y devuelve el resultado
    return a + b
    ### END SOLUTION


class Box:
    def first(self, xs):
        ### BEGIN SOLUTION first
        #= if not xs:
        #=     return None
        return xs[0] if xs else None
        ### END SOLUTION
'''

STUB = '''\
def add(a, b):
    """Suma."""
    # TODO [add]: suma los dos números
    # y devuelve el resultado
    raise NotImplementedError("TODO [add] pendiente: suma dos números")


class Box:
    def first(self, xs):
        # TODO [first]
        if not xs:
            return None
'''

FINISHED = '''\
def add(a, b):
    """Suma."""
    return a + b


class Box:
    def first(self, xs):
        return xs[0] if xs else None
'''


def import_file(path: Path, name: str):
    """Import a generated file as a real module (it is removed from sys.modules after)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return module


_module_names = (f"_stub_under_test_{i}" for i in itertools.count())


# --- one file ------------------------------------------------------------------------------------


def test_parse_regions():
    add, first = parse_regions(SOLUTION, "demo.py")
    assert add == Region(
        id="add",
        file="demo.py",
        start_line=3,
        end_line=7,
        indent="    ",
        hint=["suma los dos números", "y devuelve el resultado"],
        stub_lines=[],
        body=["    return a + b"],
    )
    assert (first.id, first.start_line, first.end_line, first.indent) == ("first", 12, 16, " " * 8)
    assert first.stub_lines == [" " * 8 + "if not xs:", " " * 12 + "return None"]
    assert first.hint == []


def test_make_stub():
    assert make_stub(SOLUTION, "demo.py", TITLES) == STUB


def test_strip_markers():
    assert strip_markers(SOLUTION) == FINISHED


def test_no_regions_is_unchanged():
    assert make_stub(FINISHED, "done.py", TITLES) == FINISHED
    assert strip_markers(FINISHED) == FINISHED


def test_revert_one_region_keeps_the_others_solved():
    first_reverted = revert_region(SOLUTION, "demo.py", 1, TITLES)
    assert first_reverted == FINISHED.replace(
        "        return xs[0] if xs else None\n",
        "        # TODO [first]\n        if not xs:\n            return None\n",
    )
    add_reverted = revert_region(SOLUTION, "demo.py", 0, TITLES)
    assert "### " not in add_reverted and "#:" not in add_reverted and "#=" not in add_reverted
    assert 'raise NotImplementedError("TODO [add] pendiente: suma dos números")' in add_reverted
    assert "return xs[0] if xs else None" in add_reverted


@pytest.mark.parametrize("index", [-1, 2])
def test_revert_region_out_of_range(index):
    with pytest.raises(StubError, match=r"demo\.py has 2 region\(s\); there is no region number"):
        revert_region(SOLUTION, "demo.py", index, TITLES)


def test_markers_with_odd_spacing_are_accepted():
    text = "def f():\n    ###   BEGIN    SOLUTION\tadd   \n    return 1\n    ###END   SOLUTION  \n"
    assert make_stub(text, "odd.py", TITLES) == (
        "def f():\n    # TODO [add]\n"
        '    raise NotImplementedError("TODO [add] pendiente: suma dos números")\n'
    )


def test_crlf_line_endings_are_kept():
    text = SOLUTION.replace("\n", "\r\n")
    assert make_stub(text, "demo.py", TITLES) == STUB.replace("\n", "\r\n")
    assert strip_markers(text) == FINISHED.replace("\n", "\r\n")


def test_title_with_quotes_stays_a_valid_literal(tmp_path):
    text = "def twice(x):\n    ### BEGIN SOLUTION twice\n    return 2 * x\n    ### END SOLUTION\n"
    path = tmp_path / "twice.py"
    path.write_text(make_stub(text, "twice.py", TITLES), encoding="utf-8")
    module = import_file(path, next(_module_names))
    with pytest.raises(NotImplementedError, match=re.escape('TODO [twice] pendiente: dobla "x"')):
        module.twice(3)


def test_quiz_region_in_yaml():
    text = "# respuestas\n### BEGIN SOLUTION quiz\n#= pregunta_1:\npregunta_1: c\n### END SOLUTION\n"
    assert make_stub(text, "quiz.yml", {}) == "# respuestas\n# TODO [quiz]\npregunta_1:\n"
    assert strip_markers(text) == "# respuestas\npregunta_1: c\n"


def test_stub_functions_raise_not_implemented(tmp_path):
    path = tmp_path / "stubbed.py"
    path.write_text(make_stub(SOLUTION, "demo.py", TITLES), encoding="utf-8")
    module = import_file(path, next(_module_names))
    with pytest.raises(NotImplementedError, match=re.escape("TODO [add] pendiente: suma dos números")):
        module.add(1, 2)
    assert module.Box().first([]) is None  # a `#=` stub runs the lines it was given


def test_reverted_region_alone_raises(tmp_path):
    path = tmp_path / "reverted.py"
    path.write_text(revert_region(SOLUTION, "demo.py", 0, TITLES), encoding="utf-8")
    module = import_file(path, next(_module_names))
    with pytest.raises(NotImplementedError, match=re.escape("TODO [add]")):
        module.add(1, 2)
    assert module.Box().first([7, 8]) == 7


BROKEN = {
    "nested": (
        "def f():\n    ### BEGIN SOLUTION add\n    ### BEGIN SOLUTION first\n    return 1\n"
        "    ### END SOLUTION\n    ### END SOLUTION\n",
        r"bad\.py:3: region 'first' begins inside region 'add' \(opened at line 2\); regions cannot nest",
    ),
    "end-without-begin": (
        "def f():\n    return 1\n    ### END SOLUTION\n",
        r"bad\.py:3: `### END SOLUTION` without a `### BEGIN SOLUTION` before it",
    ),
    "unterminated": (
        "x = 0\ndef f():\n    ### BEGIN SOLUTION add\n    return 1\n",
        r"bad\.py:3: region 'add' is never closed with `### END SOLUTION`",
    ),
    "begin-without-id": (
        "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION\n",
        r"bad\.py:2: `### BEGIN SOLUTION` needs a region id",
    ),
    "begin-with-two-ids": (
        "def f():\n    ### BEGIN SOLUTION add first\n    return 1\n    ### END SOLUTION\n",
        r"bad\.py:2: malformed marker '### BEGIN SOLUTION add first'",
    ),
    "begin-misspelt": (
        "def f():\n    ### BEGIN SOLUTIONS add\n    return 1\n    ### END SOLUTION\n",
        r"bad\.py:2: malformed marker",
    ),
    "begin-lowercase": (
        "def f():\n    ### begin solution add\n    return 1\n    ### END SOLUTION\n",
        r"bad\.py:2: malformed marker",
    ),
    "end-with-id": (
        "def f():\n    ### BEGIN SOLUTION add\n    return 1\n    ### END SOLUTION add\n",
        r"bad\.py:4: malformed marker '### END SOLUTION add'",
    ),
    "unknown-id": (
        "def f():\n    return 0\n\ndef g():\n    ### BEGIN SOLUTION ad\n    return 1\n    ### END SOLUTION\n",
        r"bad\.py:5: unknown region id 'ad'; "
        r"expected a todo id of the lesson \(add, first, twice\) or 'quiz'",
    ),
    "stub-not-python": (
        "def f():\n    ### BEGIN SOLUTION add\n    #= return (\n    return 1\n    ### END SOLUTION\n",
        r"bad\.py:2: the generated stub is not valid Python in the stub of region 'add'",
    ),
}


@pytest.mark.parametrize("name", list(BROKEN))
def test_malformed_regions_name_file_and_line(name):
    text, expected = BROKEN[name]
    with pytest.raises(StubError, match=expected):
        make_stub(text, "bad.py", TITLES)


def test_yaml_region_needs_stub_lines():
    text = "### BEGIN SOLUTION quiz\npregunta_1: c\n### END SOLUTION\n"
    with pytest.raises(StubError, match=r"quiz\.yml:1: region 'quiz' needs `#=` lines"):
        make_stub(text, "quiz.yml", {})


def test_parse_errors_also_stop_strip_and_revert():
    text, expected = BROKEN["unterminated"]
    with pytest.raises(StubError, match=r"bad\.py:3"):
        strip_markers(text, "bad.py")
    with pytest.raises(StubError, match=r"bad\.py:3"):
        revert_region(text, "bad.py", 0, TITLES)


# --- a lesson and a course, in tmp_path ---------------------------------------------------------

MANIFEST = """\
course: Demo
language: es
timezone: UTC
lessons:
  - id: "01"
    slug: demo
    section: {es: Sección, en: Section}
    title: {es: Demostración, en: Demo}
    minutes: 5
    xp: 10
    files: [demo.py]
    quiz: quiz.yml
    graders: lesson01
    todos:
      - {id: add, file: demo.py, title: {es: "suma dos números", en: "add two numbers"}}
      - {id: first, file: demo.py, title: {es: "devuelve el primero", en: "return the first"}}
    checks:
      - {id: add, todo: add, points: 1}
"""

QUIZ = "### BEGIN SOLUTION quiz\n#= pregunta_1:\npregunta_1: c\n### END SOLUTION\n"


@pytest.fixture
def course_root(tmp_path):
    (tmp_path / "course.yml").write_text(MANIFEST, encoding="utf-8")
    lesson = tmp_path / "solutions" / "01-demo"  # only files with regions
    (lesson / "__pycache__").mkdir(parents=True)
    (lesson / "demo.py").write_text(SOLUTION, encoding="utf-8")
    (lesson / "quiz.yml").write_text(QUIZ, encoding="utf-8")
    (lesson / "__pycache__" / "demo.cpython-311.pyc").write_bytes(b"\x00\xff")
    (lesson / "stale.pyc").write_bytes(b"\x00\xff")
    own = tmp_path / "exercises" / "01-demo"  # the lesson's other files live in exercises/ only
    (own / "data").mkdir(parents=True)
    (own / "README.md").write_text("# Lección\n\n### BEGIN no es un marcador en Markdown\n", encoding="utf-8")
    (own / "data" / "notes.txt").write_text("texto\n", encoding="utf-8")
    return tmp_path


def test_generate_lesson(course_root):
    course = load_course(course_root / "course.yml")
    files = generate_lesson(course.lesson("01"), course_root / "solutions", course_root / "exercises")
    assert files == {
        "README.md": "# Lección\n\n### BEGIN no es un marcador en Markdown\n",
        "data/notes.txt": "texto\n",
        "demo.py": STUB,
        "quiz.yml": "# TODO [quiz]\npregunta_1:\n",
    }


def test_sync_checks_writes_and_keeps_the_lessons_own_files(course_root):
    course = load_course(course_root / "course.yml")
    exercise = course_root / "exercises" / "01-demo"
    assert sync(course, check_only=True) == [
        f"exercises/01-demo/{rel} is missing" for rel in ("demo.py", "quiz.yml")
    ]
    assert not (exercise / "demo.py").exists()  # checking writes nothing

    assert len(sync(course, check_only=False)) == 2
    assert (exercise / "demo.py").read_text(encoding="utf-8") == STUB
    assert sync(course, check_only=True) == []

    (exercise / "demo.py").write_text(FINISHED, encoding="utf-8")  # a learner's work, say
    (exercise / "extra.py").write_text("x = 1\n", encoding="utf-8")
    (exercise / "__pycache__").mkdir()
    (exercise / "__pycache__" / "demo.cpython-311.pyc").write_bytes(b"\x00")
    expected_drift = ["exercises/01-demo/demo.py differs from what `autograder stubs` generates"]
    assert sync(course, check_only=True) == expected_drift
    assert sync(course, check_only=False) == expected_drift
    assert sync(course, check_only=True) == []
    assert (exercise / "demo.py").read_text(encoding="utf-8") == STUB
    # A file no solution generates is the lesson's own: never removed.
    assert (exercise / "extra.py").read_text(encoding="utf-8") == "x = 1\n"
    assert (exercise / "README.md").is_file() and (exercise / "data" / "notes.txt").is_file()
    assert (exercise / "__pycache__" / "demo.cpython-311.pyc").exists()  # caches are left alone


@pytest.mark.parametrize("name", ["README.md", "notes.py", "pistas.yml"])
def test_a_solution_file_without_regions_is_refused(course_root, name):
    (course_root / "solutions" / "01-demo" / name).write_text("# no region here\n", encoding="utf-8")
    message = _lesson_error(course_root)
    assert re.search(
        rf"solutions/01-demo/{re.escape(name)}: has no `### BEGIN SOLUTION` region; solutions/ holds "
        rf"only files with regions: move it to .*exercises/01-demo/{re.escape(name)}",
        message,
    ), message
    course = load_course(course_root / "course.yml")
    with pytest.raises(StubError):
        sync(course, check_only=False)
    assert not (course_root / "exercises" / "01-demo" / "demo.py").exists()  # refused before writing


def test_the_reference_pieces_later_lessons_use_are_made_from_the_solutions(course_root):
    # A second lesson that imports the first one's demo.py: its graders get the reference piece,
    # which the engine makes from the marked solution; `autograder stubs` writes no copy of it.
    manifest = (course_root / "course.yml").read_text(encoding="utf-8")
    second = (
        MANIFEST.split("lessons:\n", 1)[1].replace('id: "01"', 'id: "02"').replace("slug: demo", "slug: more")
    )
    (course_root / "course.yml").write_text(
        manifest + second.replace("graders: lesson01", 'graders: lesson02\n    uses: ["01"]'),
        encoding="utf-8",
    )
    shutil.copytree(course_root / "solutions" / "01-demo", course_root / "solutions" / "02-more")
    (course_root / "autograder" / "graders").mkdir(parents=True)
    course = load_course(course_root / "course.yml")
    assert course.lesson("02").uses == ("01",)
    sync(course, check_only=False)
    assert sync(course, check_only=True) == []
    assert not any((course_root / "autograder").rglob("*.py"))  # nothing written beside the graders

    solutions = references.solutions_dir(course, course_root / "autograder" / "graders")
    assert solutions == course_root / "solutions"
    pieces = references.reference_files(course, course.lesson("02"), solutions)
    assert list(pieces) == ["demo.py"]  # only the used lesson's files
    assert pieces["demo.py"].read_text(encoding="utf-8") == FINISHED
    assert references.reference_files(course, course.lesson("01"), solutions) == {}
    stubs = references.stub_folder(course, course.lesson("01"), course_root / "elsewhere", solutions)
    assert (stubs / "demo.py").read_text(encoding="utf-8") == STUB  # what exercises/ holds

    (course_root / "solutions" / "01-demo" / "demo.py").unlink()
    assert not references.reference_files(course, course.lesson("02"), solutions)["demo.py"].exists()


def test_sync_reports_exercise_folders_of_unknown_lessons(course_root):
    course = load_course(course_root / "course.yml")
    sync(course, check_only=False)
    (course_root / "exercises" / "02-old").mkdir()
    (course_root / "exercises" / "__pycache__").mkdir()
    expected = ["exercises/02-old/ is not a lesson of course.yml (remove it or add the lesson)"]
    assert sync(course, check_only=False) == expected
    assert (course_root / "exercises" / "02-old").is_dir()  # never removed


def test_sync_keeps_crlf_bytes(course_root):
    demo = course_root / "solutions" / "01-demo" / "demo.py"
    demo.write_bytes(SOLUTION.replace("\n", "\r\n").encode("utf-8"))
    course = load_course(course_root / "course.yml")
    sync(course, check_only=False)
    written = (course_root / "exercises" / "01-demo" / "demo.py").read_bytes()
    assert written == STUB.replace("\n", "\r\n").encode("utf-8")
    assert sync(course, check_only=True) == []


def _lesson_error(course_root) -> str:
    course = load_course(course_root / "course.yml")
    with pytest.raises(StubError) as info:
        generate_lesson(course.lesson("01"), course_root / "solutions", course_root / "exercises")
    return str(info.value)


def test_todo_without_region(course_root):
    demo = course_root / "solutions" / "01-demo" / "demo.py"
    demo.write_text(SOLUTION.replace("BEGIN SOLUTION first", "BEGIN SOLUTION add"), encoding="utf-8")
    assert re.search(
        r"demo\.py: todo 'first' of course\.yml has no `### BEGIN SOLUTION first` region",
        _lesson_error(course_root),
    )


def test_region_of_a_todo_of_another_file(course_root):
    (course_root / "solutions" / "01-demo" / "helper.py").write_text(
        "def f():\n    ### BEGIN SOLUTION add\n    return 1\n    ### END SOLUTION\n", encoding="utf-8"
    )
    assert re.search(
        r"helper\.py:2: region 'add' is in helper\.py, but course\.yml puts todo 'add' in demo\.py",
        _lesson_error(course_root),
    )


def test_unknown_region_id_in_a_lesson(course_root):
    (course_root / "solutions" / "01-demo" / "helper.py").write_text(
        "def f():\n    ### BEGIN SOLUTION nope\n    return 1\n    ### END SOLUTION\n", encoding="utf-8"
    )
    assert re.search(r"helper\.py:2: unknown region id 'nope'", _lesson_error(course_root))


@pytest.mark.parametrize("name", ["demo.py", "quiz.yml"])
def test_file_listed_in_manifest_is_missing(course_root, name):
    (course_root / "solutions" / "01-demo" / name).unlink()
    assert re.search(
        rf"{re.escape(name)}: not found, but course\.yml lists it for lesson 01-demo",
        _lesson_error(course_root),
    )


def test_binary_file_is_refused(course_root):
    (course_root / "solutions" / "01-demo" / "weights.bin").write_bytes(b"\x80\x81\x00")
    assert re.search(r"weights\.bin: not UTF-8 text", _lesson_error(course_root))


def test_missing_solution_folders(course_root):
    course = load_course(course_root / "course.yml")
    (course_root / "solutions" / "01-demo").rename(course_root / "solutions" / "01-other")
    with pytest.raises(StubError, match=r"01-demo: solution folder of lesson 01-demo not found"):
        sync(course, check_only=True)
    (course_root / "solutions").rename(course_root / "elsewhere")
    with pytest.raises(StubError, match=r"solutions: not found"):
        sync(course, check_only=True)


def test_exercises_cannot_be_the_solutions(course_root):
    course = load_course(course_root / "course.yml")
    with pytest.raises(StubError, match="same folder"):
        generate_lesson(course.lesson("01"), course_root / "solutions", course_root / "solutions")


# --- the real course ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def course():
    return load_course(REPO / "course.yml")


def test_exercises_match_generated_stubs(course):
    try:
        drift = sync(course, check_only=True)
    except StubError as exc:
        pytest.fail(f"the stubs cannot be generated from solutions/: {exc}")
    if drift:
        pytest.fail(
            "exercises/ has drifted from solutions/; regenerate it with `autograder stubs`:\n"
            + "\n".join(drift)
        )


def _real_solution_files(course):
    for lesson in course.lessons:
        folder = course.root / "solutions" / lesson.folder
        titles = {todo.id: todo.title["es"] for todo in lesson.todos}
        for name in lesson.files:
            path = folder / name
            if not path.is_file():
                pytest.fail(f"{path} not found (course.yml lists it)")
            yield path, path.read_text(encoding="utf-8"), titles


def test_every_real_stub_compiles(course):
    for lesson in course.lessons:
        files = generate_lesson(lesson, course.root / "solutions", course.root / "exercises")
        for rel, text in files.items():
            if rel.endswith(".py"):
                compile(text, f"exercises/{lesson.folder}/{rel}", "exec", dont_inherit=True)
    for path, text, titles in _real_solution_files(course):
        compile(strip_markers(text, str(path)), str(path), "exec", dont_inherit=True)
        for index in range(len(parse_regions(text, str(path)))):
            compile(revert_region(text, str(path), index, titles), str(path), "exec", dont_inherit=True)


def test_every_real_region_stub_raises_its_todo(course, tmp_path):
    """Each region's stub, run as the body of a function of its own, raises TODO [<id>] pendiente."""
    checked = 0
    for path, text, titles in _real_solution_files(course):
        for region in parse_regions(text, str(path)):
            if region.stub_lines:  # a `#=` stub runs the code it was given instead
                continue
            title = titles.get(region.id)  # None for a 'quiz' region
            body = textwrap.indent(textwrap.dedent("\n".join(region.stub(title))), "    ")
            module_path = tmp_path / f"region_{checked}.py"
            module_path.write_text(f"def stub():\n{body}\n", encoding="utf-8")
            module = import_file(module_path, next(_module_names))
            expected = f"TODO [{region.id}] pendiente" + (f": {title}" if title else "")
            with pytest.raises(NotImplementedError, match=re.escape(expected)):
                module.stub()
            checked += 1
    assert checked, "no region stub was run"
