"""The learner release ships the course's checks (autograder/graders/lessonNN/ with their
recordings) but no reference code, even edited: every Python file it ships is compared, at the
token level, with every file of solutions/ and every graders reference.py, and any run of
WINDOW tokens they share fails the test unless the stubs (exercises/) hold that run too (the
code a learner starts from is public by definition).

Tokens come from Python's own tokenize module, normalised so that renaming does not hide a copy:
comments, line breaks and indentation are dropped; every identifier becomes N except attribute
names (after a dot), builtins and the usual module names (torch, np, math, F, nn), which carry
the meaning of a line; keywords, operators, numbers and strings stay as they are (a string
normalised away made tuples of names in the engine match the reference's). With WINDOW = 30 the
engine, the graders and the stubs share nothing with the reference but what a copy would.

Also: no reference.py, official-only check (test_official_*.py) or quiz check (test_quiz.py,
which holds the key) ships, and the only quiz.yml files are the learners' blank ones.
"""

from __future__ import annotations

import builtins
import io
import keyword
import shutil
import tokenize
from pathlib import Path

import pytest
from support.project import ROOT

from autograder.course.release import build_release
from autograder.engine import recording

WINDOW = 30
_DROPPED = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENCODING,
    tokenize.ENDMARKER,
}
_KEPT_NAMES = frozenset(dir(builtins)) | {"torch", "np", "numpy", "math", "F", "nn"}


def normalised_tokens(text: str) -> list[str]:
    out: list[str] = []
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type in _DROPPED:
            continue
        renamable = (
            token.type == tokenize.NAME
            and not keyword.iskeyword(token.string)
            and token.string not in _KEPT_NAMES
            and (not out or out[-1] != ".")
        )
        out.append("N" if renamable else token.string)
    return out


def windows(text: str) -> set[tuple[str, ...]]:
    tokens = normalised_tokens(text)
    return {tuple(tokens[i : i + WINDOW]) for i in range(len(tokens) - WINDOW + 1)}


def secret_sources() -> list[Path]:
    return sorted((ROOT / "solutions").rglob("*.py")) + sorted(
        (ROOT / "autograder" / "graders").glob("*/reference.py")
    )


def shared_runs(release_dir: Path, secret: dict, public: set) -> list[str]:
    """`file: origin: the first shared run` for every release .py file sharing a run with `secret`."""
    found = {}
    for path in sorted(release_dir.rglob("*.py")):
        rel = path.relative_to(release_dir).as_posix()
        for window in windows(path.read_text(encoding="utf-8")):
            origin = secret.get(window)
            if origin is not None and window not in public:
                found.setdefault((rel, origin), " ".join(window))
    return [
        f"{rel}: shares a {WINDOW}-token run with {origin}: {run}"
        for (rel, origin), run in sorted(found.items())
    ]


@pytest.fixture(scope="module")
def release(course, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("release") / "learner-template"
    build_release(course, out)  # refuses a stale recording: test_recording says which
    return out


@pytest.fixture(scope="module")
def secret() -> dict[tuple[str, ...], str]:
    runs: dict[tuple[str, ...], str] = {}
    for path in secret_sources():
        for window in windows(path.read_text(encoding="utf-8")):
            runs.setdefault(window, path.relative_to(ROOT).as_posix())
    return runs


@pytest.fixture(scope="module")
def public() -> set[tuple[str, ...]]:
    runs: set[tuple[str, ...]] = set()
    for path in (ROOT / "exercises").rglob("*.py"):
        runs |= windows(path.read_text(encoding="utf-8"))
    return runs


def test_no_shipped_file_shares_a_run_with_reference_code(release, secret, public):
    # Not vacuous: the release ships graders, and the sources hold thousands of runs.
    assert list((release / "autograder" / "graders").glob("lesson*/harness.py"))
    assert len(secret) > 5000 and len(public) > 1000
    assert shared_runs(release, secret, public) == []


def test_no_reference_official_only_check_or_quiz_key_ships(course, release):
    shipped = [path.relative_to(release).as_posix() for path in release.rglob("*") if path.is_file()]
    assert not [rel for rel in shipped if rel.endswith("/reference.py") or rel == "reference.py"]
    assert not [rel for rel in shipped if Path(rel).name.startswith("test_official_")]
    assert not [rel for rel in shipped if Path(rel).name == "test_quiz.py"]
    # Every graders folder that ships holds its recording; only the learners' blank quiz.yml ship.
    for folder in (release / "autograder" / "graders").iterdir():
        if folder.is_dir():
            assert {path.name for path in folder.iterdir()} >= set(recording.RECORDING_FILES), folder
    quizzes = [
        rel for rel in shipped if Path(rel).name == "quiz.yml" and not rel.startswith("autograder/messages/")
    ]
    assert sorted(quizzes) == sorted(f"exercises/{lesson.folder}/quiz.yml" for lesson in course.lessons)
    keys = {(ROOT / "solutions" / lesson.folder / "quiz.yml").read_bytes() for lesson in course.lessons}
    assert not [rel for rel in shipped if (release / rel).read_bytes() in keys]
    for lesson in course.lessons:
        blank = (release / "exercises" / lesson.folder / "quiz.yml").read_bytes()
        assert blank == (ROOT / "exercises" / lesson.folder / "quiz.yml").read_bytes()
        assert blank != (ROOT / "solutions" / lesson.folder / "quiz.yml").read_bytes()


def _renamed(source: str) -> str:
    """`source` with every identifier but attributes and builtins renamed: what an edited copy
    of reference code would look like."""
    out = []
    previous = None
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        text = token.string
        if (
            token.type == tokenize.NAME
            and not keyword.iskeyword(text)
            and text not in _KEPT_NAMES
            and previous != "."
        ):
            text = f"renamed_{text}"
        out.append((token.type, text))
        if token.type not in _DROPPED:
            previous = token.string
    return tokenize.untokenize(out)


def test_a_planted_copy_is_found(release, secret, public, tmp_path):
    """An edited copy of a reference function in a shipped harness, and a solution's code in
    the engine: both found, each naming where it comes from."""
    import ast

    out = tmp_path / "release"
    shutil.copytree(release, out)
    before = set(shared_runs(out, secret, public))  # none, unless another test is failing
    reference = ROOT / "autograder" / "graders" / "lesson03" / "reference.py"
    text = reference.read_text(encoding="utf-8")
    function = max(
        (node for node in ast.parse(text).body if isinstance(node, ast.FunctionDef)),
        key=lambda node: node.end_lineno - node.lineno,
    )
    copy = _renamed(ast.get_source_segment(text, function))
    harness = next((out / "autograder" / "graders").glob("lesson*/harness.py"))
    harness.write_text(harness.read_text(encoding="utf-8") + "\n\n" + copy + "\n", encoding="utf-8")
    solution = ROOT / "solutions" / "03-atencion-causal" / "attention.py"
    engine = out / "autograder" / "engine" / "checks.py"
    engine.write_text(
        engine.read_text(encoding="utf-8") + "\n\n" + solution.read_text(encoding="utf-8"), encoding="utf-8"
    )
    found = [line for line in shared_runs(out, secret, public) if line not in before]
    harness_rel = harness.relative_to(out).as_posix()
    assert any(
        line.startswith(f"{harness_rel}: ") and "autograder/graders/lesson03/reference.py" in line
        for line in found
    ), found
    assert any(
        line.startswith("autograder/engine/checks.py: ")
        and "solutions/03-atencion-causal/attention.py" in line
        for line in found
    ), found
    assert {line.split(":")[0] for line in found} == {harness_rel, "autograder/engine/checks.py"}
