"""autograder.core.manifest: the real course.yml, malformed copies of it, finding it, lesson lookup.

Malformed manifests are real files in tmp_path, each a copy of the real course.yml with one
thing broken; every error must name the file and the field.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

from autograder.core.manifest import (
    ENV_VAR,
    SCHEMA_PATH,
    CheckSpec,
    Course,
    ManifestError,
    find_course_file,
    load_course,
)

REPO = Path(__file__).resolve().parents[2]
REAL = REPO / "course.yml"


def real_data() -> dict:
    return yaml.safe_load(REAL.read_text(encoding="utf-8"))


# The malformed copies below break lesson 03 (the flagship, whose ids they name) wherever it
# sits in the list, and a duplicate of it is appended after the last lesson.
L03 = next(i for i, lesson in enumerate(real_data()["lessons"]) if lesson["id"] == "03")
LAST = len(real_data()["lessons"])


def write_manifest(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "course.yml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


# --- the real manifest -------------------------------------------------------------------------


def test_real_course_loads():
    course = load_course(REAL)
    assert isinstance(course, Course)
    assert course.language in ("es", "en")
    assert course.root == REPO
    lesson = course.lesson("03")
    assert lesson.folder == "03-atencion-causal"
    assert lesson.files == ("attention_numpy.py", "attention.py")
    assert lesson.todo("mask").file == "attention.py"
    assert lesson.check("gpu-parity") == CheckSpec("gpu-parity", None, 5, 60)
    assert lesson.check("np-mask").timeout == 10  # the schema's default
    todo_ids = {todo.id for todo in lesson.todos}
    assert all(check.todo is None or check.todo in todo_ids for check in lesson.checks)


def test_real_course_is_immutable():
    course = load_course(REAL)
    with pytest.raises(dataclasses.FrozenInstanceError):
        course.lessons[0].xp = 1000  # type: ignore[misc]


def test_schema_is_valid_and_documents_every_field():
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    undocumented = []

    def walk(node, where):
        if isinstance(node, dict):
            if node.get("additionalProperties") is not None:
                assert node["additionalProperties"] is False, where
            for name, sub in node.get("properties", {}).items():
                if "description" not in sub:
                    undocumented.append(f"{where}.{name}")
            for key, sub in node.items():
                walk(sub, f"{where}.{key}")
        elif isinstance(node, list):
            for i, sub in enumerate(node):
                walk(sub, f"{where}[{i}]")

    walk(schema, "schema")
    assert not undocumented
    # every object in the schema is closed
    objects = [d for d in schema["$defs"].values() if d.get("type") == "object"] + [schema]
    assert all(obj.get("additionalProperties") is False for obj in objects)


# --- malformed manifests ------------------------------------------------------------------------


def _set(path: list, value):
    def change(data):
        node = data
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return change


def _delete(path: list):
    def change(data):
        node = data
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]

    return change


def _duplicate_check_id(data):
    checks = data["lessons"][L03]["checks"]
    checks[1]["id"] = checks[0]["id"]


def _duplicate_todo_id(data):
    todos = data["lessons"][L03]["todos"]
    todos[1]["id"] = todos[0]["id"]


def _duplicate_lesson(data):
    data["lessons"].append(copy.deepcopy(data["lessons"][L03]))


MALFORMED = {
    "points-not-a-number": (
        _set(["lessons", L03, "checks", 3, "points"], "x"),
        rf"lessons\[{L03}\]\.checks\[3\]\.points: 'x' is not of type 'number'",
    ),
    "lesson-id-unquoted": (
        _set(["lessons", L03, "id"], 3),
        rf"""lessons\[{L03}\]\.id: 3 is not of type 'string'; write it quoted, with two digits: id: "03\"""",
    ),
    "lesson-id-three-digits": (
        _set(["lessons", L03, "id"], "003"),
        rf"lessons\[{L03}\]\.id: '003' is not valid here: Two digits",
    ),
    "unknown-field": (
        _set(["lessons", L03, "colour"], "red"),
        rf"lessons\[{L03}\]: Additional properties are not allowed \('colour' was unexpected\); "
        r"allowed fields: id, slug",
    ),
    "unknown-top-level-field": (_set(["author"], "yo"), r"course\.yml: Additional properties .*'author'"),
    "missing-title-en": (
        _delete(["lessons", L03, "title", "en"]),
        rf"lessons\[{L03}\]\.title: 'en' is a required property",
    ),
    "check-todo-unknown": (
        _set(["lessons", L03, "checks", 0, "todo"], "nope"),
        rf"lessons\[{L03}\]\.checks\[0\]\.todo: 'nope' is not a todo of this lesson; use null or one of np-mask,",
    ),
    "duplicate-check-id": (
        _duplicate_check_id,
        rf"lessons\[{L03}\]\.checks\[1\]\.id: 'np-mask' is already the id of lessons\[{L03}\]\.checks\[0\]",
    ),
    "duplicate-todo-id": (
        _duplicate_todo_id,
        rf"lessons\[{L03}\]\.todos\[1\]\.id: 'np-mask' is already the id of lessons\[{L03}\]\.todos\[0\]",
    ),
    "duplicate-lesson": (
        _duplicate_lesson,
        rf"lessons\[{LAST}\]\.id: '03' is already the id of lessons\[{L03}\]",
    ),
    "todo-file-not-in-files": (
        _set(["lessons", L03, "todos", 0, "file"], "other.py"),
        rf"lessons\[{L03}\]\.todos\[0\]\.file: 'other\.py' is not one of lessons\[{L03}\]\.files",
    ),
    "todo-id-quiz-reserved": (
        _set(["lessons", L03, "todos", 0, "id"], "quiz"),
        rf"lessons\[{L03}\]\.todos\[0\]\.id: 'quiz' is reserved",
    ),
    "bad-timezone": (
        _set(["timezone"], "Europe/Madird"),
        r"course\.yml: timezone: 'Europe/Madird' is not a known IANA time zone",
    ),
    "bad-language": (_set(["language"], "fr"), r"language: 'fr' is not one of \['es', 'en'\]"),
    "slug-not-kebab": (
        _set(["lessons", L03, "slug"], "Atencion_Causal"),
        rf"lessons\[{L03}\]\.slug: 'Atencion_Causal' is not valid here: .*kebab-case",
    ),
    "file-with-slash": (
        _set(["lessons", L03, "files", 0], "sub/a.py"),
        rf"lessons\[{L03}\]\.files\[0\]: 'sub/a\.py' is not valid here: A \.py file name without directories",
    ),
    "file-not-python": (
        _set(["lessons", L03, "files", 0], "a.txt"),
        rf"lessons\[{L03}\]\.files\[0\]: 'a\.txt' is not valid here",
    ),
    "graders-not-identifier": (
        _set(["lessons", L03, "graders"], "lesson-03"),
        rf"lessons\[{L03}\]\.graders: 'lesson-03' is not valid here: .*Python identifier",
    ),
    "timeout-zero": (
        _set(["lessons", L03, "checks", 2, "timeout"], 0),
        rf"lessons\[{L03}\]\.checks\[2\]\.timeout: 0 is less than or equal to the minimum of 0",
    ),
    "negative-points": (
        _set(["lessons", L03, "checks", 2, "points"], -1),
        rf"lessons\[{L03}\]\.checks\[2\]\.points: -1 is less than the minimum of 0",
    ),
    "minutes-zero": (
        _set(["lessons", L03, "minutes"], 0),
        rf"lessons\[{L03}\]\.minutes: 0 is less than or equal to the minimum of 0",
    ),
    "no-lessons": (_set(["lessons"], []), r"lessons: \[\] should be non-empty"),
    "missing-checks": (
        _delete(["lessons", L03, "checks"]),
        rf"lessons\[{L03}\]: 'checks' is a required property",
    ),
    "uses-a-later-lesson": (
        _set(["lessons", L03, "uses"], ["01", "04"]),
        rf"lessons\[{L03}\]\.uses\[1\]: '04' is not the id of an earlier lesson",
    ),
    "uses-itself": (
        _set(["lessons", L03, "uses"], ["03"]),
        rf"lessons\[{L03}\]\.uses\[0\]: '03' is not the id of an earlier lesson",
    ),
    "uses-not-an-id": (
        _set(["lessons", L03, "uses"], ["tres"]),
        rf"lessons\[{L03}\]\.uses\[0\]: 'tres' does not match",
    ),
    "informational-with-points": (
        _set(["lessons", L03, "checks", 0, "informational"], True),
        rf"lessons\[{L03}\]\.checks\[0\]\.points: an informational check never counts: its points must be 0",
    ),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_manifest_names_file_and_field(tmp_path, name):
    change, expected = MALFORMED[name]
    data = real_data()
    change(data)
    path = write_manifest(tmp_path, data)
    with pytest.raises(ManifestError) as info:
        load_course(path)
    message = str(info.value)
    assert message.startswith(f"{path}: "), message
    assert re.search(expected, message), message


def test_every_problem_is_reported_at_once(tmp_path):
    data = real_data()
    data["lessons"][L03]["checks"][3]["points"] = "x"
    data["lessons"][L03]["title"].pop("en")
    message = str(pytest.raises(ManifestError, load_course, write_manifest(tmp_path, data)).value)
    assert f"lessons[{L03}].checks[3].points" in message
    assert f"lessons[{L03}].title: 'en' is a required property" in message
    assert len(message.splitlines()) == 2


def test_yaml_syntax_error_names_line(tmp_path):
    lines = REAL.read_text(encoding="utf-8").splitlines()
    number = next(i for i, line in enumerate(lines, start=1) if line.strip() == "minutes: 25")
    lines[number - 1] = lines[number - 1].replace("minutes: 25", "minutes: 25: 30")
    path = tmp_path / "course.yml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    message = str(pytest.raises(ManifestError, load_course, path).value)
    assert message.startswith(f"{path}:{number}:"), message
    assert f"line {number}" in message


def test_unquoted_lesson_id_in_yaml_text(tmp_path):
    # `id: 03` is an integer in YAML: the message must say to quote it.
    path = tmp_path / "course.yml"
    path.write_text(REAL.read_text(encoding="utf-8").replace('id: "03"', "id: 03"), encoding="utf-8")
    message = str(pytest.raises(ManifestError, load_course, path).value)
    assert (
        f"lessons[{L03}].id: 3 is not of type 'string'; write it quoted, with two digits: id: \"03\""
        in message
    )


def test_missing_file(tmp_path):
    path = tmp_path / "nowhere" / "course.yml"
    message = str(pytest.raises(ManifestError, load_course, path).value)
    assert message.startswith(str(path)) and "not found" in message


def test_missing_file_from_environment_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "course.yml"))
    message = str(pytest.raises(ManifestError, load_course).value)
    assert "not found" in message and ENV_VAR in message


def test_empty_file(tmp_path):
    path = tmp_path / "course.yml"
    path.write_text("# nothing yet\n", encoding="utf-8")
    assert "empty" in str(pytest.raises(ManifestError, load_course, path).value)


def test_top_level_not_a_mapping(tmp_path):
    path = tmp_path / "course.yml"
    path.write_text("- just\n- a list\n", encoding="utf-8")
    message = str(pytest.raises(ManifestError, load_course, path).value)
    assert message.startswith(f"{path}: ") and "is not of type 'object'" in message


# --- finding course.yml ------------------------------------------------------------------------


def test_find_uses_environment_variable(tmp_path, monkeypatch):
    path = write_manifest(tmp_path, real_data())
    monkeypatch.setenv(ENV_VAR, str(path))
    assert find_course_file() == path
    assert load_course().root == tmp_path.resolve()


def test_find_searches_current_directory_and_parents(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    path = write_manifest(tmp_path, real_data())
    nested = tmp_path / "exercises" / "03-atencion-causal"
    nested.mkdir(parents=True)
    monkeypatch.chdir(nested)
    assert find_course_file().resolve() == path.resolve()


def test_find_falls_back_to_repository_root(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    if any((folder / "course.yml").is_file() for folder in (tmp_path, *tmp_path.parents)):
        pytest.skip("a course.yml above the temporary directory")
    monkeypatch.chdir(tmp_path)
    assert find_course_file() == REAL


# --- lesson lookup -----------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["03", "3", 3, "atencion-causal", "03-atencion-causal"])
def test_lesson_lookup(key):
    assert load_course(REAL).lesson(key).id == "03"


@pytest.mark.parametrize("key", ["99", "atencion", "04-atencion-causal", ""])
def test_unknown_lesson_lists_the_valid_ones(key):
    message = str(pytest.raises(ManifestError, load_course(REAL).lesson, key).value)
    assert repr(key) in message
    assert "03 / atencion-causal / 03-atencion-causal" in message


def test_unknown_todo_and_check_list_the_valid_ones():
    lesson = load_course(REAL).lesson("03")
    assert "np-mask" in str(pytest.raises(ManifestError, lesson.todo, "nope").value)
    assert "gpu-parity" in str(pytest.raises(ManifestError, lesson.check, "nope").value)
