"""Practice grading from recorded reference values (autograder/engine/recording.py,
autograder/course/record.py): a lesson recorded in an instructor's copy of the graders, then
graded, as the learner release grades it, with a copy that holds no reference.py, no
official-only check and no quiz check. Real grading runs with real workers throughout; the
lesson is recorded once per module (lesson 01: the quickest to grade).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from support.project import ROOT, SEED

from autograder.core.i18n import feedback_text
from autograder.core.results import Status
from autograder.course import record
from autograder.engine import grading, recording

LESSON = "01"
# A check of lesson 01 whose test file gets a second test here: one reference call on an input
# that differs at every run, so the replay can never answer it (NotRecorded).
PROBED = "decode"
PROBE = '''"""A probe of the recording tests: a reference call the recording cannot answer."""

import uuid

import pytest

from autograder.engine import recording

ref = recording.reference_of(__package__)


@pytest.mark.check("decode")
def test_probe_unrecorded_input(submission):
    assert ref.vocabulary(uuid.uuid4().hex) is not None
'''

# An official-only part of the same check: its file never ships, so recording never grades it
# and no value of it ships either.
OFFICIAL_MARK = "official-only-probe-text"
OFFICIAL_PROBE = f'''"""An official-only probe: a reference call on a text no shipped check uses."""

import pytest

from autograder.engine import recording

ref = recording.reference_of(__package__)


@pytest.mark.check("decode")
def test_official_probe(submission):
    assert ref.vocabulary("{OFFICIAL_MARK}") is not None
'''


def _copy_graders(target: Path, lessons: tuple[str, ...], *, shipped_only: bool = False) -> Path:
    """A graders root (own package name, so nothing is shared with the engine's) holding the
    engine's two files and the named lesson folders: all their files, or only what ships."""
    source = ROOT / "autograder" / "graders"
    target.mkdir(parents=True)
    for name in ("__init__.py", "pytest.ini"):
        shutil.copy2(source / name, target / name)
    for folder in lessons:
        for path in sorted((source / folder).rglob("*")):
            rel = path.relative_to(source / folder).as_posix()
            if "__pycache__" in rel or not path.is_file() or rel.startswith(recording.RECORDING_FILES):
                continue
            if shipped_only and not recording.shipped(rel):
                continue
            (target / folder / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target / folder / rel)
    return target


def _release_copy(instructor: Path, target: Path, folder: str) -> Path:
    """What `autograder release` ships of `folder`: its shipped files and its recording."""
    target.mkdir(parents=True)
    for name in ("__init__.py", "pytest.ini"):
        shutil.copy2(instructor / name, target / name)
    (target / folder).mkdir()
    for path in sorted((instructor / folder).iterdir()):
        if path.is_file() and (recording.shipped(path.name) or path.name in recording.RECORDING_FILES):
            shutil.copy2(path, target / folder / path.name)
    return target


@pytest.fixture(scope="module")
def lesson(course):
    return course.lesson(LESSON)


@pytest.fixture(scope="module")
def made(course, lesson, tmp_path_factory):
    """(instructor graders with the probe and the recording, the release's graders, what
    recording said)."""
    base = tmp_path_factory.mktemp("recording")
    instructor = _copy_graders(base / "instructor_graders", (lesson.graders,))
    (instructor / lesson.graders / "test_aa_probe.py").write_text(PROBE, encoding="utf-8")
    (instructor / lesson.graders / "test_official_zz_probe.py").write_text(OFFICIAL_PROBE, encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AUTOGRADER_GRADERS", str(instructor))
        done = record.record_lesson(course, lesson)
        assert done.state == "recorded", done.line
        assert record.status(course, lesson) == record.CURRENT
    released = _release_copy(instructor, base / "release_graders", lesson.graders)
    return instructor, released, done


def _grade(course, lesson, submission: Path, graders: Path | None):
    with pytest.MonkeyPatch.context() as patch:
        if graders is None:
            patch.delenv("AUTOGRADER_GRADERS", raising=False)
        else:
            patch.setenv("AUTOGRADER_GRADERS", str(graders))
        return grading.grade(course, [lesson], submission, seed=SEED).lessons[0]


@pytest.fixture(scope="module")
def solution_replayed(course, lesson, made):
    return _grade(course, lesson, ROOT / "solutions" / lesson.folder, made[1])


@pytest.fixture(scope="module")
def stubs_official(course, lesson):
    return _grade(course, lesson, ROOT / "exercises" / lesson.folder, None)


@pytest.fixture(scope="module")
def stubs_replayed(course, lesson, made):
    return _grade(course, lesson, ROOT / "exercises" / lesson.folder, made[1])


def _official_only(check) -> bool:
    return check.status is Status.SKIPPED and any(
        getattr(part, "key", "").startswith("engine.official_only") for part in check.feedback.parts
    )


# --- what is recorded --------------------------------------------------------------------------------


def test_the_recording_holds_values_only(lesson, made):
    instructor, released, done = made
    folder = released / lesson.graders
    assert sorted(path.name for path in folder.iterdir()) == sorted(
        [
            *(
                p.name
                for p in (instructor / lesson.graders).iterdir()
                if p.is_file() and recording.shipped(p.name)
            ),
            *recording.RECORDING_FILES,
        ]
    )
    assert not (folder / "reference.py").exists() and not (folder / "test_quiz.py").exists()
    assert not list(folder.glob("test_official_*.py"))
    data = json.loads((folder / recording.JSON_NAME).read_text(encoding="utf-8"))
    assert data["format"] == recording.FORMAT and data["seed"] == recording.PRACTICE_SEED
    assert data["lesson"] == LESSON and done.calls == len(data["calls"]) > 10
    with np.load(folder / recording.NPZ_NAME, allow_pickle=False) as npz:
        assert all(name[0] == "v" and name[1:].isdigit() for name in npz.files)
    # No line of the reference code is in it, nor a function's source.
    text = (folder / recording.JSON_NAME).read_text(encoding="utf-8")
    reference = (ROOT / "autograder" / "graders" / lesson.graders / "reference.py").read_text(
        encoding="utf-8"
    )
    lines = [line.strip() for line in reference.splitlines() if len(line.strip()) >= 25]
    assert lines and not [line for line in lines if line in text]
    assert "def " not in text and "return " not in text
    # What the official-only probe would have asked is not there; the shipped probe's call is.
    assert OFFICIAL_MARK not in text
    assert any(call["f"] == "vocabulary" for call in data["calls"]), data["calls"][:3]
    assert (folder / recording.JSON_NAME).stat().st_size + (
        folder / recording.NPZ_NAME
    ).stat().st_size < 2**20


# --- replay: the official checks, answered from the recording ----------------------------------------


def test_the_solution_passes_in_practice(lesson, solution_replayed):
    result = solution_replayed
    assert result.mode == "practice"
    assert [c.id for c in result.checks] == [spec.id for spec in lesson.checks]
    only = [c.id for c in result.checks if _official_only(c)]
    # The probed check and the quiz (whose file, holding the key, does not ship).
    assert only == [PROBED] + [c.id for c in result.checks if c.id.startswith("quiz-")]
    assert all(c.status is Status.PASSED for c in result.checks if c.id not in only), [
        (c.id, c.status, feedback_text(c.feedback, "en")) for c in result.checks
    ]
    assert all(c.score == c.max_score == 0 for c in result.checks if c.id in only)
    assert result.completed and result.xp == lesson.xp


def test_official_only_is_said_once_per_lesson(solution_replayed):
    skipped = [c for c in solution_replayed.checks if _official_only(c)]
    first, *others = skipped
    assert [part.key for part in first.feedback.parts] == ["engine.official_only"]
    assert others and all(
        [part.key for part in c.feedback.parts] == ["engine.official_only_again"] for c in others
    )
    assert "solo en la nota oficial" in feedback_text(first.feedback, "es")
    assert "only in the official grade" in feedback_text(first.feedback, "en")


def test_the_stubs_fail_with_the_same_todos_as_official(stubs_official, stubs_replayed):
    assert stubs_official.mode == "hidden" and stubs_replayed.mode == "practice"
    official = {c.id: c for c in stubs_official.checks}
    compared = 0
    for check in stubs_replayed.checks:
        if _official_only(check):
            assert check.id.startswith("quiz-"), check.id  # the probe's skip gives way to the failure
            continue
        other = official[check.id]
        assert (check.status, check.waits_on) == (other.status, other.waits_on), check.id
        assert check.status is Status.FAILED and check.pending is not None, check.id
        assert check.pending == other.pending, check.id
        assert feedback_text(check.feedback, "es") == feedback_text(other.feedback, "es"), check.id
        compared += 1
    assert compared == len([c for c in stubs_official.checks if not c.id.startswith("quiz-")])
    assert not stubs_replayed.completed


# --- a recording that cannot be used ----------------------------------------------------------------


def _broken_copy(made, lesson, tmp_path) -> Path:
    target = tmp_path / "broken_graders"
    shutil.copytree(made[1], target)
    return target


def _refused(course, lesson, graders: Path, *needles: str) -> None:
    result = _grade(course, lesson, ROOT / "solutions" / lesson.folder, graders)
    assert result.checks and all(c.status is Status.ERROR and c.score == 0 for c in result.checks)
    for check in result.checks:
        assert [part.key for part in check.feedback.parts] == ["engine.recording_invalid"]
        text = feedback_text(check.feedback, "es")
        assert f"lección {lesson.id}" in text and "no es culpa de tu código" in text.lower()
        for needle in needles:
            assert needle in text, text


def test_an_edited_value_is_refused(course, lesson, made, tmp_path):
    graders = _broken_copy(made, lesson, tmp_path)
    path = graders / lesson.graders / recording.JSON_NAME
    data = json.loads(path.read_text(encoding="utf-8"))
    call = next(c for c in data["calls"] if c["f"] == "vocabulary")
    call["r"] = {"t": "list", "v": ["a", "b"]}  # a forged answer
    path.write_text(json.dumps(data), encoding="utf-8")
    _refused(course, lesson, graders, recording.JSON_NAME, "changed after it was made")


def test_an_edited_array_file_is_refused(course, lesson, made, tmp_path):
    graders = _broken_copy(made, lesson, tmp_path)
    path = graders / lesson.graders / recording.NPZ_NAME
    with np.load(path, allow_pickle=False) as npz:
        arrays = {name: npz[name] for name in npz.files}
    arrays["v0"] = np.zeros_like(arrays["v0"]) if arrays else np.zeros(1)
    np.savez(path, **arrays)
    _refused(course, lesson, graders, "changed after it was made")


def test_a_recording_made_for_other_graders_is_refused(course, lesson, made, tmp_path):
    graders = _broken_copy(made, lesson, tmp_path)
    harness = graders / lesson.graders / "harness.py"
    harness.write_text(harness.read_text(encoding="utf-8") + "\nEXTRA = 1\n", encoding="utf-8")
    _refused(course, lesson, graders, "made for other graders")


def test_line_ends_do_not_change_the_graders_digest(lesson, made, tmp_path):
    """A Windows checkout may turn line ends into CRLF: the recording still fits."""
    graders = _broken_copy(made, lesson, tmp_path)
    folder = graders / lesson.graders
    before = recording.graders_digest(folder)
    for path in folder.glob("*.py"):
        path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    assert recording.graders_digest(folder) == before
    recording.load(folder)


def _without_calls(folder: Path) -> None:
    path = folder / recording.JSON_NAME
    data = json.loads(path.read_text(encoding="utf-8"))
    del data["calls"]
    path.write_text(json.dumps(data), encoding="utf-8")


def _pickled_npz(folder: Path) -> None:
    # An object array is stored as a pickle: never loaded.
    np.savez(folder / recording.NPZ_NAME, v0=np.array([{"a": 1}], dtype=object))


@pytest.mark.parametrize(
    "breakage, needle",
    [
        (
            lambda f: (f / recording.JSON_NAME).write_text("{not json", encoding="utf-8"),
            "not a readable recording",
        ),
        (
            lambda f: (f / recording.JSON_NAME).write_text("[1, 2]", encoding="utf-8"),
            "a JSON object is expected",
        ),
        (lambda f: (f / recording.JSON_NAME).write_text('{"format": 99}', encoding="utf-8"), "format 99"),
        (lambda f: (f / recording.NPZ_NAME).write_bytes(b"PK\x03\x04 truncated"), "not a readable recording"),
        (lambda f: (f / recording.NPZ_NAME).unlink(), "missing"),
        (_pickled_npz, "not a readable recording"),
        (_without_calls, "incomplete recording (no 'calls')"),
    ],
    ids=["bad-json", "not-an-object", "other-format", "bad-npz", "no-npz", "pickle", "no-calls"],
)
def test_a_malformed_recording_is_a_clear_message(lesson, made, tmp_path, breakage, needle):
    graders = _broken_copy(made, lesson, tmp_path)
    folder = graders / lesson.graders
    breakage(folder)
    with pytest.raises(recording.RecordingError) as caught:
        recording.load(folder)
    assert needle in str(caught.value) and str(folder) in str(caught.value)


def test_a_malformed_recording_never_crashes_grading(course, lesson, made, tmp_path):
    graders = _broken_copy(made, lesson, tmp_path)
    (graders / lesson.graders / recording.NPZ_NAME).write_bytes(b"\x00" * 64)
    _refused(course, lesson, graders, recording.NPZ_NAME, "not a readable recording")


# --- the recording machinery on tensors and generators ------------------------------------------------

REFERENCE = """
import math
import numpy as np
import torch

SCALES = ("sqrt", "none")
TABLE = {"a": 1.5, "b": [1, 2]}


def weights(n, generator):
    return {"w": torch.randn(n, n, generator=generator), "b": torch.randn(n, generator=generator)}


def affine(x, sd, *, scale="sqrt"):
    y = x @ sd["w"].T + sd["b"]
    return y / (math.sqrt(x.shape[-1]) if scale == "sqrt" else 1.0), float(y.abs().max())


def total(x):
    return x.sum(), np.asarray(x.numpy().sum())


def module():
    return torch.nn.Linear(2, 2)
"""


@pytest.fixture
def tiny_graders(tmp_path, monkeypatch):
    """A graders package of its own with a reference module, importable by name."""
    package = f"recprobe_{os.getpid()}_{tmp_path.name}".replace("-", "_")
    folder = tmp_path / package
    folder.mkdir()
    (folder / "__init__.py").write_text("", encoding="utf-8")
    (folder / "reference.py").write_text(REFERENCE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield folder, package
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
        sys.modules.pop(name)


def test_tensors_and_generators_are_replayed(tiny_graders):
    folder, package = tiny_graders
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(1))
    with recording.recording_into(folder) as recorder, recording.session(folder, package) as active:
        assert active.mode == "record" and recording.eager()
        ref = recording.reference_of(package)
        assert ref.SCALES == ("sqrt", "none") and ref.TABLE["b"] == [1, 2]
        sd = ref.weights(4, gen)
        after_weights = gen.get_state()
        expected, top = ref.affine(x, sd)
        unscaled = ref.affine(x, sd, scale="none")
        summed, summed_np = ref.total(x)
        assert isinstance(ref.module(), torch.nn.Module)  # the real one while recording
        recorder.save(folder, lesson="99", graders=recording.graders_digest(folder), sources="test")
    assert "module" in recorder.unrecordable and len(recorder.calls) == 4
    (folder / "reference.py").unlink()
    assert recording.lesson_mode(folder) == "replay"

    with recording.session(folder, package) as active:
        assert recording.mode() == "replay" and not recording.eager()
        ref = recording.reference_of(package)
        assert ref.SCALES == ("sqrt", "none") and ref.TABLE == {"a": 1.5, "b": [1, 2]}
        again = torch.Generator().manual_seed(7)
        replayed = ref.weights(4, again)
        assert set(replayed) == {"w", "b"} and all(torch.equal(replayed[k], sd[k]) for k in sd)
        assert torch.equal(again.get_state(), after_weights)  # left as the real call left it
        y, m = ref.affine(x, replayed)
        assert torch.equal(y, expected) and y.dtype == torch.float32 and m == top
        assert torch.equal(ref.affine(x, replayed, scale="none")[0], unscaled[0])
        tensor_sum, array_sum = ref.total(x)  # 0-d values stay 0-d
        assert tensor_sum.shape == () and torch.equal(tensor_sum, summed)
        assert isinstance(array_sum, np.ndarray) and array_sum.shape == () and array_sum == summed_np
        # Another platform's last bits still match; a learner's wrong value does not.
        y2, _ = ref.affine(x * (1 + 3e-6), replayed)
        assert torch.equal(y2, expected)
        for miss in (
            lambda: ref.affine(x + 0.01, replayed),
            lambda: ref.affine(x[:2], replayed),
            lambda: ref.affine(x.double(), replayed),
            lambda: ref.affine(x, replayed, scale="other"),
            lambda: ref.weights(4, torch.Generator().manual_seed(8)),
            lambda: ref.weights(5, torch.Generator().manual_seed(7)),
            lambda: ref.module(),
            lambda: ref.NOT_THERE,
        ):
            with pytest.raises(recording.NotRecorded):
                miss()
    assert recording.mode() == "official"


def test_every_committed_recording_is_current(course):
    """A grader, reference or solution changed without `autograder record`: caught here (and
    `autograder release` regenerates it). Cheap: digests only, no grading."""
    stale, size = [], 0
    for item in course.lessons:
        folder = ROOT / "autograder" / "graders" / item.graders
        size += sum(path.stat().st_size for path in folder.glob("recording.*"))
        state = record.status(course, item, folder)
        recorded = (folder / recording.JSON_NAME).exists() or (folder / recording.NPZ_NAME).exists()
        if state in (record.STALE, record.MISSING) or (recorded and state != record.CURRENT):
            stale.append(
                f"lesson {item.id}: {state}; run `autograder record --lesson {item.id}` and commit it"
            )
    assert stale == []
    assert size < 8 * 2**20  # the whole course's recordings stay a few MB (3.7 MiB in December 2026)


def test_record_skips_a_lesson_whose_graders_import_the_reference(course, tmp_path):
    folder = course.lesson("02").graders
    graders = _copy_graders(tmp_path / "unconverted_graders", (folder,))
    harness = graders / folder / "harness.py"
    harness.write_text("from . import reference as ref  # noqa\n" + harness.read_text(encoding="utf-8"))
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["AUTOGRADER_GRADERS"] = str(graders)
    proc = subprocess.run(
        [sys.executable, "-m", "autograder", "record", "--lesson", "02"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "lesson 02: skipped, its graders still import reference.py directly" in proc.stdout
    assert "recording.reference_of(__package__)" in proc.stdout
    assert not (graders / folder / recording.JSON_NAME).exists()


def test_the_recording_is_never_read_as_a_pickle(lesson, made):
    """np.load(allow_pickle=False): the npz holds plain arrays, no object array anywhere."""
    with zipfile.ZipFile(made[1] / lesson.graders / recording.NPZ_NAME) as archive:
        for name in archive.namelist():
            header = archive.read(name)[:200]
            assert b"'descr': '|O'" not in header and b"'descr': '<O'" not in header


def test_release_regenerates_a_missing_recording_first(tmp_path):
    """`autograder release` in an instructor's checkout (here a copy, engine included) records a
    lesson whose recording is missing before shipping it, and says so."""
    checkout = tmp_path / "checkout"
    skip = shutil.ignore_patterns("__pycache__", ".pytest_cache", "*.pyc")
    for name in ("course.yml", "pyproject.toml", ".gitignore"):
        checkout.mkdir(exist_ok=True)
        shutil.copy2(ROOT / name, checkout / name)
    for name in ("autograder", "exercises", "solutions", ".github", ".devcontainer"):
        shutil.copytree(ROOT / name, checkout / name, ignore=skip)
    graders = checkout / "autograder" / "graders" / "lesson01"
    for name in recording.RECORDING_FILES:
        (graders / name).unlink()
    env = {key: value for key, value in os.environ.items() if not key.startswith("AUTOGRADER_")}
    env["PYTHONPATH"] = str(checkout)  # the copy's engine, whose graders are the copy's
    out = tmp_path / "learner-template"
    proc = subprocess.run(
        [sys.executable, "-m", "autograder", "release", "--out", str(out)],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "lesson 01: recorded" in proc.stdout
    for name in recording.RECORDING_FILES:
        assert (out / "autograder" / "graders" / "lesson01" / name).read_bytes() == (
            graders / name
        ).read_bytes()
    assert not (out / "autograder" / "graders" / "lesson01" / "reference.py").exists()


def test_graders_whose_recording_is_gone_fall_back_to_the_practice_tests(course, lesson, made, tmp_path):
    """Shipped graders without their recording (deleted by hand) cannot run: the lesson is
    graded with its practice tests, as a lesson that ships no graders is."""
    graders = _broken_copy(made, lesson, tmp_path)
    for name in recording.RECORDING_FILES:
        (graders / lesson.graders / name).unlink()
    assert recording.lesson_mode(graders / lesson.graders) == "none"
    result = _grade(course, lesson, ROOT / "exercises" / lesson.folder, graders)
    assert result.mode == "practice" and result.checks
    assert not {c.id for c in result.checks} & {spec.id for spec in lesson.checks}
    assert all(c.status is Status.FAILED for c in result.checks)


def test_a_replayed_grading_names_the_practice_seed_it_used(course, lesson, made):
    # Practice grades with the recording's fixed inputs whatever seed was asked for: the result
    # (and the "Semilla de esta corrección" line made from it) names the seed that repeats it.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AUTOGRADER_GRADERS", str(made[1]))
        replayed = grading.grade(course, [lesson], ROOT / "exercises" / lesson.folder, seed=SEED)
    assert SEED != recording.PRACTICE_SEED and replayed.seed == recording.PRACTICE_SEED
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AUTOGRADER_GRADERS", str(made[0]))
        official = grading.grade(course, [lesson], ROOT / "exercises" / lesson.folder, seed=SEED)
    assert official.seed == SEED


def test_a_replayed_lesson_counts_the_courses_points_not_practice_tests(course, lesson, solution_replayed):
    # Answered from a recording, the checks keep course.yml's points: the total reads "puntos",
    # in the result and after a round trip through results.json (practice tests, one point each,
    # read "pruebas de práctica": tests/engine/test_practice.py).
    from autograder.core.results import CourseResult
    from autograder.render.labels import points_text
    from autograder.render.results_json import from_json_dict, to_json_dict

    result = CourseResult(course.name, "es", recording.PRACTICE_SEED, [solution_replayed])
    assert solution_replayed.mode == "practice" and solution_replayed.scale == "points"
    data = to_json_dict(result, "es")
    assert data["practice"] is True and data["lessons"][0]["scale"] == "points"
    again = from_json_dict(data)
    for shown in (result, again):
        assert "puntos" in points_text(shown, "es") and "pruebas" not in points_text(shown, "es")
