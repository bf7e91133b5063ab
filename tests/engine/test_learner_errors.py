"""A learner's file that does not load, said in one line (autograder/engine/learner_errors.py):
real errors raised by real learner files in a real worker, read as the engine reads them."""

from __future__ import annotations

import pytest

from autograder.core import i18n
from autograder.core.results import CheckResult, CourseResult, Feedback, LessonResult, RaisedIn, Status, Text
from autograder.engine import blame, learner_errors
from autograder.render.results_json import from_json_dict, to_json_dict
from autograder.sandbox.client import Sandbox, StudentError

FILES = {
    # line 3 opens a parenthesis that is never closed
    "unclosed.py": "import math\n\nx = max(1,\n    2\n",
    "indented.py": "def f():\n    return 1\n  y = 2\n",
    "bad_import.py": "import math\nfrom os import no_such_name\n",
    "no_module.py": "\n\nimport no_such_module_anywhere\n",
    "uses_unclosed.py": "import math\nimport unclosed\n",
    "top_level.py": "def helper():\n    return undefined_name\n\n\nVALUE = helper()\n",
    "crashes.py": "def forward(x):\n    return x / 0\n",
    "pending.py": 'raise NotImplementedError("TODO [vocab] pendiente: el vocabulario")\n',
}
PATHS = {name: f"exercises/09-prueba/{name}" for name in FILES}


@pytest.fixture(scope="module")
def box(tmp_path_factory):
    folder = tmp_path_factory.mktemp("learner")
    for name, text in FILES.items():
        (folder / name).write_text(text, encoding="utf-8")
    with Sandbox(folder) as sandbox:
        yield sandbox


def import_error(box: Sandbox, module: str) -> StudentError:
    with pytest.raises(StudentError) as caught:
        box.module(module)
    return caught.value


def one_line(part: Text, lang: str = "es") -> str:
    return i18n.render_parts(Feedback.of(part), lang)[0][1]


def test_a_syntax_error_is_one_line_with_the_learners_path_and_line(box):
    err = import_error(box, "unclosed")
    part = learner_errors.load_error(err, PATHS)
    assert part == Text(
        "errors.syntax",
        {
            "path": "exercises/09-prueba/unclosed.py",
            "line": 3,
            "type": "SyntaxError",
            "detail": "'(' was never closed",
        },
    )
    assert one_line(part) == "Error de sintaxis en exercises/09-prueba/unclosed.py:3: '(' was never closed"
    assert one_line(part, "en") == "Syntax error in exercises/09-prueba/unclosed.py:3: '(' was never closed"
    # Not a TODO's: blame claims nothing, so no TODO is sent to fix it.
    assert blame.raised_in(err, list(FILES), ["vocab"], None) is None


def test_an_indentation_error_is_a_syntax_error(box):
    part = learner_errors.load_error(import_error(box, "indented"), PATHS)
    assert part.key == "errors.syntax"
    assert part.params["line"] == 3 and part.params["type"] == "IndentationError"
    assert "(indented.py, line 3)" not in part.params["detail"]


def test_an_import_error_names_the_import_line_and_no_library_path(box):
    part = learner_errors.load_error(import_error(box, "bad_import"), PATHS)
    assert part.key == "errors.import"
    assert part.params["path"] == "exercises/09-prueba/bad_import.py" and part.params["line"] == 2
    assert part.params["detail"] == "cannot import name 'no_such_name' from 'os'"
    text = one_line(part)
    assert text == (
        "Error de importación en exercises/09-prueba/bad_import.py:2: "
        "ImportError: cannot import name 'no_such_name' from 'os'"
    )
    assert "/" not in text.split(": ", 1)[1].replace("exercises/09-prueba/bad_import.py", "")


def test_a_missing_module_is_an_import_error(box):
    part = learner_errors.load_error(import_error(box, "no_module"), PATHS)
    assert (part.key, part.params["line"], part.params["type"]) == ("errors.import", 3, "ModuleNotFoundError")
    assert part.params["detail"] == "No module named 'no_such_module_anywhere'"


def test_a_file_imported_by_another_is_named_where_the_error_is(box):
    part = learner_errors.load_error(import_error(box, "uses_unclosed"), PATHS)
    assert (part.key, part.params["path"], part.params["line"]) == (
        "errors.syntax",
        "exercises/09-prueba/unclosed.py",
        3,
    )


def test_an_exception_at_a_files_top_level_is_a_load_error_at_the_line_that_raised(box):
    err = import_error(box, "top_level")
    part = learner_errors.load_error(err, PATHS)
    assert (part.key, part.params["line"], part.params["type"]) == ("errors.load", 2, "NameError")
    assert one_line(part) == (
        "Error al cargar exercises/09-prueba/top_level.py:2: NameError: name 'undefined_name' is not defined"
    )


def test_a_crash_once_loaded_and_a_pending_todo_are_not_load_errors(box):
    with pytest.raises(StudentError) as caught:
        box.call(box.getattr(box.module("crashes"), "forward"), 1.0)
    assert not learner_errors.while_loading(caught.value)
    assert learner_errors.load_error(caught.value, PATHS) is None
    pending = import_error(box, "pending")
    assert learner_errors.load_error(pending, PATHS) is None
    assert blame.raised_in(pending, list(FILES), ["vocab"], None) == RaisedIn("vocab", "", 0)


def test_a_file_that_is_not_the_learners_is_not_named(box):
    # A reference piece beside the learner's files (not in `paths`) is never said to be theirs.
    err = import_error(box, "unclosed")
    assert learner_errors.load_error(err, {"crashes.py": "exercises/09-prueba/crashes.py"}) is None


@pytest.mark.parametrize(
    ("message", "detail"),
    [
        ("'(' was never closed (attention.py, line 90)", "'(' was never closed"),
        (
            "cannot import name 'X' from 'torch.nn' (/usr/lib/python3.11/site-packages/torch/nn/__init__.py)",
            "cannot import name 'X' from 'torch.nn'",
        ),
        (
            "cannot import name 'X' from partially initialized module 'attention' (most likely due to a "
            "circular import) (/tmp/autograder-x1/submission/attention.py)",
            "cannot import name 'X' from partially initialized module 'attention' (most likely due to a "
            "circular import)",
        ),
        (
            "[Errno 2] No such file or directory: '/tmp/autograder-x1/submission/data.txt'",
            "[Errno 2] No such file or directory: 'data.txt'",
        ),
        ("bad\nvalue   here", "bad value here"),
    ],
)
def test_the_detail_is_pythons_message_on_one_line_without_paths(message, detail):
    assert learner_errors.clean_detail(message, "/tmp/autograder-x1/submission") == detail


def _result(checks: list[CheckResult]) -> CourseResult:
    lesson = LessonResult("09", "prueba", {"es": "Prueba", "en": "Test"}, 10, checks)
    return CourseResult(course="Curso", language="es", seed=1, lessons=[lesson])


@pytest.mark.parametrize("lang", i18n.LANGUAGES)
def test_a_checks_load_error_is_read_back_from_a_results_json(lang):
    part = Text(
        "errors.import",
        {
            "path": "exercises/09-prueba/a.py",
            "line": 7,
            "type": "ImportError",
            "detail": "cannot import name 'x' from 'y'",
        },
    )
    checks = [
        CheckResult("one", "vocab", Status.FAILED, 0.0, 2.0, Feedback.of(part)),
        CheckResult(
            "two", "vocab", Status.FAILED, 0.0, 2.0, Feedback.of(Text("engine.timeout", {"seconds": 1}))
        ),
    ]
    fresh = learner_errors.of(checks[0])
    assert (fresh.kind, fresh.path, fresh.line, fresh.where()) == (
        "import",
        "exercises/09-prueba/a.py",
        7,
        "exercises/09-prueba/a.py:7",
    )
    assert learner_errors.of(checks[1]) is None
    back = from_json_dict(to_json_dict(_result(checks), lang)).lessons[0].checks
    again = learner_errors.of(back[0])
    assert (again.kind, again.path, again.line) == ("import", "exercises/09-prueba/a.py", 7)
    assert one_line(again.part, lang) == one_line(part, lang)
    assert learner_errors.of(back[1]) is None


def test_pytests_short_traceback_is_read_frame_by_frame():
    from autograder.engine.practice_errors import frames_of

    trace = (
        "test_practica.py:124: in test_forma\n"
        "    y = m(torch.randn(B, t, C))\n"
        "        ^^^^^^^^^^^^^^^^^^^^^^^\n"
        "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py:1778: in _wrapped_call_impl\n"
        "    return self._call_impl(*args, **kwargs)\n"
        "attention.py:85: in forward\n"
        "    y = y.transpose(1, 2).view(B, T, C)  # (B, T, C)\n"
        "        ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        "E   RuntimeError: view size is not compatible\n"
    )
    assert [(f["filename"], f["lineno"], f["name"], f["line"]) for f in frames_of(trace)] == [
        ("test_practica.py", 124, "test_forma", "y = m(torch.randn(B, t, C))"),
        (
            "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py",
            1778,
            "_wrapped_call_impl",
            "return self._call_impl(*args, **kwargs)",
        ),
        ("attention.py", 85, "forward", "y = y.transpose(1, 2).view(B, T, C)  # (B, T, C)"),
    ]
