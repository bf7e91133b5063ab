"""autograder.course.release: the learner template repository, built from the real course.

What goes in and what stays out, the workflows shipped verbatim and refused when they could
hand the learner an instructor's secret or the hidden graders, the adapted pyproject, the output
folder's safety rules, a leak check of every solution line and every line of the graders files
that never ship (reference.py, test_official_*.py, test_quiz.py) against every text file of the
release (proved on planted leaks), and grading inside the release with its own engine: the
recorded lessons with the course's checks answered from their recordings, the others with their
practice tests, all in practice mode. (tests/course/test_release_has_no_reference.py compares
the release with the reference code token by token.)
(tests/github/test_workflows.py reads every workflow a built release ships for secrets;
tests/github/test_workflow_run.py runs them.)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.project import ROOT

from autograder.core.manifest import load_course
from autograder.course.release import MARKER, ReleaseError, ReleaseReport, build_release, read_marker
from autograder.course.stubs import REGION_SUFFIXES, generate_lesson, parse_regions, strip_markers
from autograder.engine import recording

CACHES = {"__pycache__", ".pytest_cache"}
TOP_LEVEL = {
    MARKER,
    ".devcontainer",
    ".github",
    ".gitignore",
    "README.md",
    "autograder",
    "course.yml",
    "exercises",
    "pyproject.toml",
}


def files_under(folder: Path, skip=frozenset({".git"})) -> list[str]:
    """Every file under folder as a sorted posix path, caches included (they must not be there)."""
    found = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if d not in skip]
        found += [(Path(dirpath) / name).relative_to(folder).as_posix() for name in filenames]
    return sorted(found)


def source_files(folder: Path) -> list[str]:
    return [rel for rel in files_under(folder, CACHES) if not rel.endswith(".pyc")]


def recorded(lesson) -> bool:
    """Whether the lesson's graders ship (they are on a recording)."""
    return (ROOT / "autograder" / "graders" / lesson.graders / recording.JSON_NAME).is_file()


def shipped_graders(lesson) -> list[str]:
    """What the release holds of a lesson's graders folder: if recorded, every file but the
    reference code, the official-only checks and the quiz check; else nothing."""
    if not recorded(lesson):
        return []
    folder = ROOT / "autograder" / "graders" / lesson.graders
    return [
        f"autograder/graders/{lesson.graders}/{rel}"
        for rel in source_files(folder)
        if recording.shipped(rel) or rel in recording.RECORDING_FILES
    ]


def shipped_stubs(lesson) -> list[str]:
    """The copy of a recorded lesson's exercise stubs its graders folder ships (stubs/)."""
    if not recorded(lesson):
        return []
    return [
        f"autograder/graders/{lesson.graders}/{recording.STUBS_FOLDER}/{name}"
        for name in lesson.files
        if name.endswith(".py")
    ]


@pytest.fixture(scope="module")
def release(course, tmp_path_factory) -> tuple[Path, ReleaseReport]:
    out = tmp_path_factory.mktemp("release") / "learner-template"
    return out, build_release(course, out)


# --- what goes in, what stays out ------------------------------------------------------------------


def test_release_holds_exactly_the_learner_files(course, release):
    out, report = release
    assert {entry.name for entry in out.iterdir()} == TOP_LEVEL
    # Codespaces runs the post-create script of the learner's fork: it ships, still executable.
    assert (out / ".devcontainer" / "post-create.sh").read_bytes() == (
        ROOT / ".devcontainer" / "post-create.sh"
    ).read_bytes()
    assert os.access(out / ".devcontainer" / "post-create.sh", os.X_OK)
    on_disk = files_under(out)
    assert list(report.files) == on_disk
    for lesson in course.lessons:
        repo_folder = ROOT / "exercises" / lesson.folder
        expected = source_files(repo_folder)
        assert expected and [rel for rel in on_disk if rel.startswith(f"exercises/{lesson.folder}/")] == [
            f"exercises/{lesson.folder}/{rel}" for rel in expected
        ]
        for rel in expected:
            assert (out / "exercises" / lesson.folder / rel).read_bytes() == (repo_folder / rel).read_bytes()
    assert {rel.split("/")[1] for rel in on_disk if rel.startswith("exercises/")} == {
        lesson.folder for lesson in course.lessons
    }
    # The engine is all there, byte for byte, but of autograder/graders/ only its two engine files
    # and the recorded lessons' shipped files, and nothing of the grading service, which runs on
    # the instructor's side.
    engine = [
        rel for rel in source_files(ROOT / "autograder") if not rel.startswith(("graders/", "service/"))
    ]
    assert (ROOT / "autograder" / "service").is_dir() and not (out / "autograder" / "service").exists()
    assert engine and [
        rel
        for rel in on_disk
        if rel.startswith("autograder/") and "/graders/" not in rel and "/service/" not in rel
    ] == [f"autograder/{rel}" for rel in engine]
    for rel in engine:
        assert (out / "autograder" / rel).read_bytes() == (ROOT / "autograder" / rel).read_bytes()
    assert [rel for rel in on_disk if rel.startswith("autograder/graders/")] == sorted(
        [
            "autograder/graders/__init__.py",
            "autograder/graders/pytest.ini",
            *(rel for lesson in course.lessons for rel in shipped_graders(lesson)),
            *(rel for lesson in course.lessons for rel in shipped_stubs(lesson)),
        ]
    )
    for lesson in course.lessons:
        folder = ROOT / "autograder" / "graders" / lesson.graders
        assert folder.is_dir() and (folder / "reference.py").is_file()
        assert not (out / "autograder" / "graders" / lesson.graders / "reference.py").exists()
        assert (out / "autograder" / "graders" / lesson.graders).exists() == recorded(lesson)
        for rel in shipped_graders(lesson):
            assert (out / rel).read_bytes() == (ROOT / rel).read_bytes()
        for rel in shipped_stubs(lesson):  # blame's untouched stubs: the exercises as generated
            name = rel.rsplit("/", 1)[-1]
            assert (out / rel).read_bytes() == (ROOT / "exercises" / lesson.folder / name).read_bytes()
    assert not any(part in CACHES or part.endswith(".pyc") for rel in on_disk for part in rel.split("/"))
    assert (out / "course.yml").read_bytes() == (ROOT / "course.yml").read_bytes()
    assert (out / ".gitignore").read_bytes() == (ROOT / ".gitignore").read_bytes()
    assert files_under(out / ".github") == ["workflows/grade-comment.yml", "workflows/grade.yml"]
    for name in ("grade.yml", "grade-comment.yml"):  # verbatim: nothing is pinned or filled in
        assert (out / ".github/workflows" / name).read_bytes() == (
            ROOT / ".github/workflows" / name
        ).read_bytes()
    for absent in ("solutions", "tests", "bench", ".ci", ".github/workflows/ci.yml"):
        assert (ROOT / absent).exists() and not (out / absent).exists()


def test_pyproject_points_pytest_at_the_exercises(release):
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    out, _ = release
    original = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    adapted = (out / "pyproject.toml").read_text(encoding="utf-8")
    expected = tomllib.loads(original)
    options = expected["tool"]["pytest"]["ini_options"]
    assert options["testpaths"] == ["tests"] and options.pop("pythonpath") == ["tests"]
    options["testpaths"] = ["exercises"]
    assert tomllib.loads(adapted) == expected
    # Only those two lines changed: everything else is the instructor's text.
    removed = [line for line in original.split("\n") if line not in adapted.split("\n")]
    added = [line for line in adapted.split("\n") if line not in original.split("\n")]
    assert removed == ['testpaths = ["tests"]', 'pythonpath = ["tests"]'] and added == [
        'testpaths = ["exercises"]'
    ]


def test_learner_readme_and_marker(course, release):
    out, _ = release
    readme = (out / "README.md").read_text(encoding="utf-8")
    assert "{{" not in readme and "}}" not in readme
    assert readme.startswith(f"# {course.name}\n")
    for lesson in course.lessons:
        row = next(line for line in readme.splitlines() if line.startswith(f"| {lesson.id} |"))
        assert lesson.title["es"] in row and f"| {lesson.xp} |" in row
        for name in lesson.files:
            assert f"`{name}`" in row
    for target in re.findall(r"\]\(((?!https?:)[^)]+)\)", readme):
        assert (out / target).is_file(), f"README links to {target}, which the release lacks"
    for needle in (
        "Actions",
        "Run workflow",
        "Corregir",
        "grades/badge.json",
        "history.jsonl",
        "nota de práctica",
        "python -m pip install -e .",
        f"python -m pytest exercises/{course.lessons[0].folder}",
        "## In English",
    ):
        assert needle in readme
    assert readme != (ROOT / "README.md").read_text(encoding="utf-8")
    assert json.loads((out / MARKER).read_text(encoding="utf-8")) == {
        "version": __import__("autograder").__version__
    }


def test_learner_readme_installs_cpu_torch_before_the_course(release):
    """On a learner's laptop `pip install -e .` would pull torch from PyPI (a multi-GB CUDA
    build on Linux): the README installs the CPU build first, at the version pyproject pins."""
    from support.install_docs import assert_cpu_torch_first

    out, _ = release
    readme = (out / "README.md").read_text(encoding="utf-8")
    assert_cpu_torch_first(readme, "the learner README")
    assert "python -m pip install torch== --" not in readme and "{{torch}}" not in readme


# --- the output folder -----------------------------------------------------------------------------


@pytest.mark.parametrize("force", [False, True])
def test_refuses_a_non_empty_folder_that_is_not_a_release(course_copy, tmp_path, force):
    course = load_course(course_copy / "course.yml")
    out = tmp_path / "mine"
    (out / "notes").mkdir(parents=True)
    (out / "notes" / "todo.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(ReleaseError, match="not empty and holds no previous release"):
        build_release(course, out, force=force)
    assert files_under(out) == ["notes/todo.txt"]


def test_force_replaces_a_previous_release_but_keeps_git(course_copy, tmp_path):
    course = load_course(course_copy / "course.yml")
    out = tmp_path / "template"
    first = build_release(course, out)
    (out / ".git").mkdir()
    (out / ".git" / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")
    (out / "stale.txt").write_text("from an older release", encoding="utf-8")
    (out / "README.md").write_text("edited", encoding="utf-8")
    with pytest.raises(ReleaseError, match="--force"):
        build_release(course, out)
    assert (out / "stale.txt").exists()
    second = build_release(course, out, force=True)
    assert (out / ".git" / "HEAD").read_text(encoding="utf-8") == "ref: refs/heads/main\n"
    assert not (out / "stale.txt").exists()
    assert files_under(out) == list(second.files) == list(first.files)
    assert json.loads((out / MARKER).read_text(encoding="utf-8")) == {
        "version": __import__("autograder").__version__
    }
    assert "{{" not in (out / "README.md").read_text(encoding="utf-8")


def test_force_replaces_a_release_made_before_the_graders_ref_went(course_copy, tmp_path):
    """Older releases, which fetched the graders, pinned a graders' commit in their marker: still a release."""
    course = load_course(course_copy / "course.yml")
    out = tmp_path / "template"
    out.mkdir()
    (out / MARKER).write_text(
        json.dumps({"graders_ref": "f" * 40, "version": "0.9.0"}) + "\n", encoding="utf-8"
    )
    (out / ".github" / "workflows").mkdir(parents=True)
    (out / ".github" / "workflows" / "grade.yml").write_text(
        "env:\n  AUTOGRADER_GRADERS_REF: main\n", encoding="utf-8"
    )
    assert read_marker(out) is not None
    with pytest.raises(ReleaseError, match="--force"):
        build_release(course, out)
    build_release(course, out, force=True)
    assert "AUTOGRADER_GRADERS" not in (out / ".github" / "workflows" / "grade.yml").read_text(
        encoding="utf-8"
    )
    assert json.loads((out / MARKER).read_text(encoding="utf-8")) == {
        "version": __import__("autograder").__version__
    }


@pytest.mark.parametrize("marker", ["", "{", "[]", '{"version": 1}', '{"other": "x"}'])
def test_a_broken_or_foreign_marker_is_not_a_release(tmp_path, marker):
    (tmp_path / MARKER).write_text(marker, encoding="utf-8")
    assert read_marker(tmp_path) is None


def test_a_folder_holding_only_git_counts_as_empty(course_copy, tmp_path):
    course = load_course(course_copy / "course.yml")
    out = tmp_path / "clone"
    (out / ".git").mkdir(parents=True)
    (out / ".git" / "config").write_text("[core]\n", encoding="utf-8")
    build_release(course, out)
    assert (out / ".git" / "config").read_text(encoding="utf-8") == "[core]\n"
    assert (out / MARKER).is_file()


@pytest.mark.parametrize("where", [".", "exercises", "solutions", "autograder/out", ".."])
def test_refuses_to_write_over_the_course_it_reads(course, where):
    with pytest.raises(ReleaseError, match="--out"):
        build_release(course, ROOT / where)


# --- clear errors on a course that lacks what the release needs ------------------------------------

GRADE_YML = """\
name: Corregir
on: [push, workflow_dispatch]
jobs:
  grade:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: echo grading
        env:
          GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}
"""


@pytest.fixture
def course_copy(tmp_path, monkeypatch):
    """A copy of the course outside any git repository, with minimal learner workflows."""
    root = tmp_path / "course"
    root.mkdir()
    for name in ("course.yml", "pyproject.toml", ".gitignore"):
        shutil.copy(ROOT / name, root / name)
    shutil.copytree(ROOT / "exercises", root / "exercises", ignore=shutil.ignore_patterns(*CACHES))
    workflows = root / ".github" / "workflows"
    workflows.mkdir(parents=True)
    (workflows / "grade.yml").write_text(GRADE_YML, encoding="utf-8")
    (workflows / "grade-comment.yml").write_text("name: Comentar\n", encoding="utf-8")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    return root


def test_the_course_copy_builds_outside_git(course_copy, tmp_path):
    """No git needed any more: nothing is pinned to a commit of the course repository."""
    build_release(load_course(course_copy / "course.yml"), tmp_path / "out")
    assert (tmp_path / "out/.github/workflows/grade.yml").read_text(encoding="utf-8") == GRADE_YML


@pytest.mark.parametrize(
    "breakage, needle",
    [
        (lambda root: (root / ".github/workflows/grade.yml").unlink(), "grade.yml: not found"),
        (
            lambda root: (root / ".github/workflows/grade-comment.yml").unlink(),
            "grade-comment.yml: not found",
        ),
        (
            lambda root: (root / "pyproject.toml").write_text(
                (root / "pyproject.toml").read_text(encoding="utf-8").replace('pythonpath = ["tests"]\n', ""),
                encoding="utf-8",
            ),
            'pythonpath = \\["tests"\\]',
        ),
        (
            lambda root: (root / "pyproject.toml").write_text(
                (root / "pyproject.toml")
                .read_text(encoding="utf-8")
                .replace('testpaths = ["tests"]', 'testpaths = ["t"]'),
                encoding="utf-8",
            ),
            "testpaths",
        ),
        (lambda root: shutil.rmtree(root / "exercises"), "autograder stubs"),
    ],
)
def test_missing_or_unexpected_inputs_are_clear_errors(course_copy, tmp_path, breakage, needle):
    breakage(course_copy)
    with pytest.raises(ReleaseError, match=needle):
        build_release(load_course(course_copy / "course.yml"), tmp_path / "out")
    assert not (tmp_path / "out").exists()


# Workflows that would hand a learner's repository an instructor's credential or the hidden
# graders (the old setup, in which the learner's workflow fetched them, and ways around a check that looks only for it).
UNSAFE_WORKFLOWS = {
    "the old graders fetch": (
        GRADE_YML.replace(
            "      - run: echo grading",
            """\
      - uses: actions/checkout@v4
        with:
          repository: ${{ vars.GRADERS_REPO }}
          token: ${{ secrets.GRADERS_PAT }}
          path: graders
      - run: echo grading""",
        ),
        "secrets.GRADERS_PAT",
    ),
    "a token in env": (
        GRADE_YML.replace("secrets.GITHUB_TOKEN", "secrets.DEPLOY_TOKEN"),
        "secrets.DEPLOY_TOKEN",
    ),
    "the graders' variable": (
        GRADE_YML.replace("echo grading", 'echo "$AUTOGRADER_GRADERS"'),
        "AUTOGRADER_GRADERS",
    ),
    "every secret at once": (GRADE_YML.replace("secrets.GITHUB_TOKEN", "toJSON(secrets)"), "secret"),
    "an index": (GRADE_YML.replace("secrets.GITHUB_TOKEN", "secrets['X']"), "secret"),
    "another repository": (
        GRADE_YML.replace(
            "      - uses: actions/checkout@v4\n",
            """\
      - uses: actions/checkout@v4
        with:
          repository: instructor/private
""",
        ),
        "repository",
    ),
    "a checkout token": (
        GRADE_YML.replace(
            "      - uses: actions/checkout@v4\n",
            """\
      - uses: actions/checkout@v4
        with:
          token: ${{ github.token }}
""",
        ),
        "token",
    ),
    "secrets passed on": (
        "on: push\njobs:\n  call:\n    uses: o/r/.github/workflows/x.yml@main\n    secrets: inherit\n",
        "passes secrets on",
    ),
}


@pytest.mark.parametrize("name", sorted(UNSAFE_WORKFLOWS))
@pytest.mark.parametrize("workflow", ["grade.yml", "grade-comment.yml"])
def test_a_workflow_that_could_leak_a_secret_or_the_graders_is_refused(course_copy, tmp_path, name, workflow):
    text, needle = UNSAFE_WORKFLOWS[name]
    (course_copy / ".github" / "workflows" / workflow).write_text(text, encoding="utf-8")
    with pytest.raises(ReleaseError, match=re.escape(needle)) as caught:
        build_release(load_course(course_copy / "course.yml"), tmp_path / "out")
    assert workflow in str(caught.value)
    assert not (tmp_path / "out").exists()


def test_exercises_that_drifted_from_the_solutions_are_refused(course_copy, tmp_path):
    shutil.copytree(ROOT / "solutions", course_copy / "solutions", ignore=shutil.ignore_patterns(*CACHES))
    lesson = load_course(course_copy / "course.yml").lessons[0]
    name = lesson.todos[0].file
    # An instructor who tried a lesson in exercises/ would otherwise ship the answer.
    (course_copy / "exercises" / lesson.folder / name).write_text(
        strip_markers((ROOT / "solutions" / lesson.folder / name).read_text(encoding="utf-8"), name),
        encoding="utf-8",
    )
    with pytest.raises(ReleaseError, match="autograder stubs"):
        build_release(load_course(course_copy / "course.yml"), tmp_path / "out")


# --- the leak check --------------------------------------------------------------------------------
#
# Secret lines, compared stripped of surrounding whitespace:
#   * every line of the body of every solution region (the code a learner writes; the `#:`
#     hints and `#=` stub lines are not body: they are the stub's public text);
#   * every line of every hidden grader source, autograder/graders/<lesson.graders>/**/*.py.
# A line is exempt only when it is also public for another reason, or carries nothing:
#   * no content: no letter or digit at all (blank, or only punctuation/brackets such as `)`,
#     `],`, `"""`), so it says nothing about the answer;
#   * a solution line that occurs in the stub the same solution file generates, or in any exercise
#     file of the repository (exercises/ is what the solutions generate, which a test keeps
#     true, so a later lesson's given code that an earlier lesson's region also holds is
#     public): learners see it anyway;
#   * a solution line that occurs in the repository's public engine code (autograder/ without
#     the grader lesson folders): generic Python such as `else:` or `return out`, which says
#     nothing about the answer (the same rule as for grader lines below, engine files only);
#   * a grader line that occurs in a public engine file (autograder/ without any grader lesson
#     folder) or a public exercise file (exercises/<lesson>/) of the course repository,
#     such as `import torch`. These public files are read from the repository, never from
#     the release, so a grader line copied into a release file is still caught.
# Known limit: a secret line pasted into the repository's own engine would count as public;
# the test reads those public files from the repository, so a leak into an exercise, a README
# or a workflow is always caught.


def _has_content(line: str) -> bool:
    return any(ch.isalnum() for ch in line)


def _stripped_lines(text: str) -> set[str]:
    return {line.strip() for line in text.splitlines()}


def public_lines() -> set[str]:
    """Stripped lines of the repository's public engine files (the recorded lessons' shipped
    graders files included) and exercise files."""
    course = load_course(ROOT / "course.yml")
    hidden = {lesson.graders for lesson in course.lessons}
    paths = [
        ROOT / "autograder" / rel
        for rel in source_files(ROOT / "autograder")
        if not (rel.startswith("graders/") and rel.split("/")[1] in hidden)
    ]
    paths += [ROOT / rel for lesson in course.lessons for rel in shipped_graders(lesson)]
    for lesson in course.lessons:
        folder = ROOT / "exercises" / lesson.folder
        paths += [folder / rel for rel in source_files(folder)]
    lines: set[str] = set()
    for path in paths:
        try:
            lines |= _stripped_lines(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            continue
    return lines


def secret_lines(course) -> dict[str, str]:
    """Every non-exempt secret line (stripped) -> where it comes from."""
    secrets: dict[str, str] = {}
    public_text = public_lines()
    for lesson in course.lessons:
        stubs = generate_lesson(lesson, ROOT / "solutions", ROOT / "exercises")
        for rel, stub in stubs.items():
            path = ROOT / "solutions" / lesson.folder / rel
            if not rel.endswith(REGION_SUFFIXES) or not path.is_file():  # the lesson's own files: no regions
                continue
            public = _stripped_lines(stub)
            for region in parse_regions(path.read_text(encoding="utf-8"), rel):
                for line in region.body:
                    line = line.strip()
                    if _has_content(line) and line not in public and line not in public_text:
                        secrets.setdefault(line, f"solutions/{lesson.folder}/{rel} (region {region.id})")
    public = public_lines()
    for lesson in course.lessons:
        folder = ROOT / "autograder" / "graders" / lesson.graders
        for path in sorted(folder.rglob("*.py")):
            if CACHES & set(path.parts) or (recorded(lesson) and recording.shipped(path.name)):
                continue  # a cache, or a file that ships (a recorded lesson's checks are public)
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                line = line.strip()
                if _has_content(line) and line not in public:
                    secrets.setdefault(line, f"{path.relative_to(ROOT).as_posix()}:{number}")
    return secrets


def find_leaks(release_dir: Path, secrets: dict[str, str]) -> list[str]:
    """`file:line: origin` for every line of a release text file that is a secret line."""
    leaks = []
    for rel in files_under(release_dir):
        try:
            text = (release_dir / rel).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # not text
        for number, line in enumerate(text.splitlines(), start=1):
            origin = secrets.get(line.strip())
            if origin is not None:
                leaks.append(f"{rel}:{number}: {line.strip()!r} from {origin}")
    return leaks


@pytest.fixture(scope="module")
def secrets(course) -> dict[str, str]:
    found = secret_lines(course)
    # Not vacuous: both kinds of secret are there to look for.
    assert sum(origin.startswith("solutions/") for origin in found.values()) >= 20
    # (reference.py, the official-only and the quiz checks of every lesson)
    assert sum(origin.startswith("autograder/graders/") for origin in found.values()) >= 100
    return found


def test_no_solution_or_grader_line_leaks_into_the_release(release, secrets):
    out, _ = release
    assert find_leaks(out, secrets) == []


def test_the_leak_check_finds_planted_leaks(course, release, secrets, tmp_path):
    out = tmp_path / "release"
    shutil.copytree(release[0], out)
    lesson = course.lessons[0]
    solution_line, solution_origin = max(
        (
            (line, origin)
            for line, origin in secrets.items()
            if origin.startswith(f"solutions/{lesson.folder}/")
        ),
        key=lambda item: len(item[0]),
    )
    grader_line, grader_origin = max(
        ((line, origin) for line, origin in secrets.items() if origin.startswith("autograder/graders/")),
        key=lambda item: len(item[0]),
    )
    stub = out / "exercises" / lesson.folder / lesson.todos[0].file
    stub.write_text(stub.read_text(encoding="utf-8") + f"\n    {solution_line}\n", encoding="utf-8")
    engine = out / "autograder" / "engine" / "grading.py"
    engine.write_text(f"{grader_line}\n" + engine.read_text(encoding="utf-8"), encoding="utf-8")
    leaks = find_leaks(out, secrets)
    assert len(leaks) == 2, leaks
    stub_rel = stub.relative_to(out).as_posix()
    assert any(leak.startswith(f"{stub_rel}:") and solution_origin in leak for leak in leaks), leaks
    assert any(
        leak.startswith("autograder/engine/grading.py:1:") and grader_origin in leak for leak in leaks
    ), leaks


# --- grading inside the release: its own engine, no hidden graders, practice mode -------------------


def grade_in(release_dir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("AUTOGRADER_GRADERS", "AUTOGRADER_COURSE", "PYTHONPATH")
    }
    env["PYTHONPATH"] = str(release_dir)  # the release's engine, not this repository's
    proc = subprocess.run(
        [sys.executable, "-m", "autograder", "grade", *args],
        cwd=release_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc


def practice_test_names(folder: Path) -> set[str]:
    names = set()
    for path in folder.glob("test_*.py"):
        names |= set(re.findall(r"^def (test_\w+)", path.read_text(encoding="utf-8"), re.MULTILINE))
    return names


def test_the_release_grades_the_stubs_in_practice_mode(course, tmp_path):
    """A recorded lesson is graded with the course's checks (answered from its recording), the
    others with their practice tests; every lesson in practice mode, none completed."""
    out = tmp_path / "release"
    build_release(course, out)
    data = json.loads(grade_in(out, "--format", "json").stdout)
    assert data["practice"] is True and data["xp"] == 0
    assert [lesson["id"] for lesson in data["lessons"]] == [lesson.id for lesson in course.lessons]
    for lesson, result in zip(course.lessons, data["lessons"]):
        assert result["mode"] == "practice" and result["xp"] == 0 and not result["completed"]
        ids = {check["id"] for check in result["checks"]}
        if recorded(lesson):
            assert [check["id"] for check in result["checks"]] == [spec.id for spec in lesson.checks]
            assert all(check["status"] in ("failed", "skipped") for check in result["checks"]), result
            assert any(check["status"] == "failed" for check in result["checks"])
        else:
            names = practice_test_names(out / "exercises" / lesson.folder)
            assert result["checks"] and {check_id.split("[")[0] for check_id in ids} <= names
            assert not ids & {spec.id for spec in lesson.checks}


def test_the_release_grades_finished_lessons_in_practice_mode(course, tmp_path):
    out = tmp_path / "release"
    build_release(course, out)
    for lesson in course.lessons:
        source, target = ROOT / "solutions" / lesson.folder, out / "exercises" / lesson.folder
        for rel in source_files(source):
            text = (source / rel).read_text(encoding="utf-8")
            (target / rel).write_text(
                strip_markers(text, rel) if rel.endswith(REGION_SUFFIXES) else text, encoding="utf-8"
            )
    data = json.loads(grade_in(out, "--format", "json").stdout)
    assert data["practice"] is True
    for lesson, result in zip(course.lessons, data["lessons"]):
        assert result["mode"] == "practice"
        assert result["checks"] and all(
            check["status"] in ("passed", "skipped") for check in result["checks"]
        )
        assert any(check["status"] == "passed" for check in result["checks"])
        assert result["completed"] and result["xp"] == lesson.xp
    assert data["xp"] == data["xp_max"] == sum(lesson.xp for lesson in course.lessons)
    text = grade_in(out).stdout
    assert "nota de práctica" in " ".join(text.split()).lower()


def test_the_release_engine_grades_with_graders_named_by_the_environment(course, tmp_path):
    """An instructor's own use (the Jupyter edition's kernels work this way): the release's
    engine run with AUTOGRADER_GRADERS naming a graders folder elsewhere on the instructor's
    machine. No learner's workflow sets it (tests/github/test_workflows.py)."""
    out = tmp_path / "release"
    build_release(course, out)
    fetched = tmp_path / "private-checkout" / "autograder" / "graders"
    shutil.copytree(ROOT / "autograder" / "graders", fetched, ignore=shutil.ignore_patterns("__pycache__"))
    lesson = course.lessons[0]
    env = {key: value for key, value in os.environ.items() if key not in ("AUTOGRADER_COURSE", "PYTHONPATH")}
    env.update(PYTHONPATH=str(out), AUTOGRADER_GRADERS=str(fetched))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "autograder",
            "grade",
            lesson.id,
            "--format",
            "json",
            "--submission",
            str(ROOT / "solutions" / lesson.folder),
        ],
        cwd=out,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["practice"] is False and data["lessons"][0]["mode"] == "hidden"
    assert {c["id"] for c in data["lessons"][0]["checks"]} == {spec.id for spec in lesson.checks}
    assert data["score"] == data["max_score"] and data["xp"] == lesson.xp


def test_no_quiz_key_ships_in_the_release(course, release):
    """Each lesson's quiz key (the dict its hidden test_quiz.py hands to quiz_test) appears in no
    file of the release, in any spacing or quoting: the engine ships, so even a docstring example
    that happens to equal a real key would give the answers away."""
    import ast

    out, _ = release
    keys = []
    for lesson in course.lessons:
        tree = ast.parse(
            (ROOT / "autograder" / "graders" / lesson.graders / "test_quiz.py").read_text(encoding="utf-8")
        )
        call = next(
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "quiz_test"
        )
        keys.append(ast.literal_eval(call.args[0]))
    assert len(keys) == len(course.lessons) and all(len(key) == 3 for key in keys)
    patterns = [
        re.compile(
            r"\{\s*"
            + r"\s*,\s*".join(rf"{n}\s*:\s*['\"]{letter}['\"]" for n, letter in key.items())
            + r"\s*,?\s*\}"
        )
        for key in keys
    ]
    leaks = [
        f"{path.relative_to(out)}: {pattern.pattern}"
        for path in out.rglob("*")
        if path.is_file()
        for pattern in patterns
        if pattern.search(path.read_text(encoding="utf-8", errors="replace"))
    ]
    assert leaks == []
