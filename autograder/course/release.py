"""The learner release: the template repository from which each learner's repository is made.

    autograder release --out DIR [--force]

A developer tool for the instructor. The release holds what a learner needs and nothing
that would give the course away:

  exercises/NN-slug/     every lesson of course.yml, as `autograder stubs` generates it
  course.yml             verbatim
  autograder/            the engine; of autograder/graders/, __init__.py, pytest.ini and each
                         recorded lesson's checks (harness.py, test_*.py) with its recording
                         (recording.json + recording.npz: reference values for the practice
                         inputs), but never its reference.py, its official-only checks
                         (test_official_*.py) or its quiz check (test_quiz.py: the key is in it),
                         and a copy of its exercises/ stubs (stubs/: what blame compares a
                         learner's file with, the learner's own exercises/ being what is graded).
                         A lesson whose graders are not on recordings yet ships no graders
                         folder (it grades with its practice tests); no caches
  pyproject.toml         the instructor's, with pytest pointed at exercises/ instead of tests/
  .github/workflows/     grade.yml and grade-comment.yml, verbatim
  .gitignore             the course repository's
  .devcontainer/         the Codespaces / Dev Containers setup (CPU torch, the course, the
                         attention viewer's port), so "Open in Codespaces" works in a fork
  README.md              generated from autograder/course/templates/learner-README.md
  .autograder-release    a marker (JSON: version) so that a later `release --force` knows DIR
                         is a previous release (an older marker that also names a graders_ref
                         is recognised too)

Everything else (solutions/, tests/, bench/, .ci/, the project's CI workflow, the instructor
README) stays out. A learner's repository grades in practice mode only: the course's checks
answered from the recordings (engine/recording.py), or a lesson's practice tests where it has
no recording. No reference code, no quiz key, no instructor credential and no way to fetch any
of them ever reaches it, because the learner owns that repository, its workflows and the engine
they install. A recording that is stale (its graders, reference or solutions changed since) is
regenerated first when the command asks for it (`rerecord`), else refused. So every workflow the
release ships is checked before anything is written: it may name no secret but GITHUB_TOKEN,
check out no other repository, and never mention the hidden graders' variables
(AUTOGRADER_GRADERS...). The official grade is made on the instructor's side (`grade-all`).

Every check runs before DIR is touched, so an error leaves it as it was. A non-empty DIR is
only replaced with --force and only if it holds the marker; its `.git/` is always kept, so the
release can be committed on top of the previous one.

Messages are in English (instructor tooling); every user error is a `ReleaseError`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import yaml

from autograder import __version__
from autograder.core.files import display_path, walk_files
from autograder.core.manifest import Course
from autograder.course import record
from autograder.course.stubs import StubError, sync
from autograder.engine import recording

__all__ = [
    "MARKER",
    "ReleaseError",
    "ReleaseReport",
    "build_release",
    "check_learner_workflow",
    "read_marker",
    "render_readme",
]

MARKER = ".autograder-release"
ENGINE_DIR = Path(__file__).resolve().parents[1]
TEMPLATE = Path(__file__).resolve().parent / "templates" / "learner-README.md"
WORKFLOWS = (".github/workflows/grade.yml", ".github/workflows/grade-comment.yml")
DEVCONTAINER = ".devcontainer"
# The one secret a learner's workflow may name: the run's own token, scoped to its repository.
ALLOWED_SECRETS = frozenset({"GITHUB_TOKEN"})
_SECRET_USE = re.compile(r"\bsecrets\.([A-Za-z_][A-Za-z0-9_-]*)|\bsecrets\s*\[")
_EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}", re.DOTALL)
_SECRETS_WORD = re.compile(r"\bsecrets\b(?!\.GITHUB_TOKEN\b)")
# The instructor's hidden-graders variables (the repository, its ref, the token, the folder).
_GRADERS_VARIABLE = re.compile(r"AUTOGRADER_GRADERS", re.IGNORECASE)
# Of autograder/graders/ only these engine files ship; every lesson folder is hidden.
GRADERS_PUBLIC = ("__init__.py", "pytest.ini")
# Beyond the caches core.files always leaves out: linters' caches, packaging metadata.
_SKIP_DIRS = frozenset({".mypy_cache", ".ruff_cache"})
_SKIP_SUFFIXES = (".pyo", ".egg-info")
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_]+)\s*\}\}")


class ReleaseError(Exception):
    """The release cannot be built as asked (a missing file, an unsafe workflow, an unsafe DIR)."""


@dataclass(frozen=True)
class ReleaseReport:
    out: Path
    files: tuple[str, ...]  # written, relative posix paths, sorted (the marker included)


def build_release(course: Course, out: Path, *, force: bool = False, rerecord=None) -> ReleaseReport:
    """Write the learner release of `course` into `out` (see the module docstring). `rerecord`:
    called as rerecord(course, lesson) for each lesson whose recording is stale or missing,
    returning course/record.py's LessonRecord (the command passes `record.record_lesson`);
    without it such a lesson is an error that names the command to run."""
    root = course.root.resolve()
    out = Path(out).expanduser()
    _check_out_location(root, out)

    files: dict[str, bytes] = {}
    files.update(_exercises(course, root))
    files["course.yml"] = _read_bytes(root / "course.yml")
    recorded = _recorded_lessons(course, rerecord)
    files.update(_engine(recorded))
    files.update(_graders_stubs(course, recorded, files))
    files["pyproject.toml"] = _learner_pyproject(root / "pyproject.toml").encode("utf-8")
    for rel in WORKFLOWS:
        path = root / rel
        if not path.is_file():
            raise ReleaseError(
                f"{display_path(path)}: not found; the release needs both learner workflows "
                f"({', '.join(WORKFLOWS)})"
            )
        files[rel] = _read_bytes(path)
        check_learner_workflow(files[rel], display_path(path))
    files[".gitignore"] = _read_bytes(root / ".gitignore")
    executable = set()
    devcontainer = root / DEVCONTAINER
    if devcontainer.is_dir():
        for name in _walk(devcontainer):
            path = devcontainer / name
            rel = f"{DEVCONTAINER}/{name}"
            files[rel] = _read_bytes(path)
            if os.access(path, os.X_OK):
                executable.add(rel)
    files["README.md"] = render_readme(course, set(files)).encode("utf-8")
    marker = {"version": __version__}
    files[MARKER] = (json.dumps(marker, indent=2) + "\n").encode("utf-8")

    _prepare_out(out, force)
    for rel, data in sorted(files.items()):
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        if rel in executable:  # the post-create script must stay runnable
            path.chmod(0o755)
    return ReleaseReport(out, tuple(sorted(files)))


def read_marker(folder: Path) -> dict | None:
    """The marker of a previous release in `folder`, or None if it holds none (or a broken one)."""
    try:
        data = json.loads((Path(folder) / MARKER).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    # Releases before issue 26 wrote {"graders_ref", "version"}; both kinds are a release.
    return data if isinstance(data.get("version"), str) or isinstance(data.get("graders_ref"), str) else None


# --- the learner's workflows ------------------------------------------------------------------


def check_learner_workflow(data: bytes, shown: str) -> None:
    """Refuse a workflow that could hand a learner's repository an instructor's credential or
    hidden graders: a secret other than GITHUB_TOKEN (`secrets.X` or `secrets[...]` anywhere,
    and inside a `${{ }}` expression any use of `secrets` but `secrets.GITHUB_TOKEN`, so
    `toJSON(secrets)` too), a job that passes secrets on (`secrets:`, e.g. `secrets: inherit`),
    a mention of the hidden graders' variables (AUTOGRADER_GRADERS...), or an actions/checkout
    step of another repository or with a credential of its own."""
    try:
        text = data.decode("utf-8")
        spec = yaml.safe_load(text)
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ReleaseError(f"{shown}: not a readable workflow ({exc})") from None

    def refuse_secret(number: int, name: str) -> None:
        raise ReleaseError(
            f"{shown}:{number}: uses the secret {name}; a learner's repository must receive no "
            "instructor secret (the learner controls its workflows and can read every secret they "
            "get). Only GITHUB_TOKEN is allowed; the official grade comes from `grade-all`"
        )

    for number, line in enumerate(text.splitlines(), start=1):
        for match in _SECRET_USE.finditer(line):
            if match.group(1) not in ALLOWED_SECRETS:
                refuse_secret(number, match.group(0))
        if _GRADERS_VARIABLE.search(line):
            raise ReleaseError(
                f"{shown}:{number}: mentions the hidden graders' variables (AUTOGRADER_GRADERS...); "
                "a learner's repository grades with its practice tests only and never fetches the "
                "hidden graders. Remove that line"
            )
    for match in _EXPRESSION.finditer(text):
        if _SECRETS_WORD.search(match.group(1)):
            refuse_secret(text.count("\n", 0, match.start()) + 1, f"context in {match.group(0)!r}")
    jobs = spec.get("jobs") if isinstance(spec, dict) else None
    for job_name, job in (jobs if isinstance(jobs, dict) else {}).items():
        if not isinstance(job, dict):
            continue
        if "secrets" in job:
            raise ReleaseError(
                f"{shown}: job {job_name!r} passes secrets on (`secrets:`); a learner's "
                "workflow passes no secret to another workflow"
            )
        for index, step in enumerate(job.get("steps") or [], start=1):
            if not isinstance(step, dict) or not str(step.get("uses", "")).startswith("actions/checkout"):
                continue
            given = sorted(set(step.get("with") or {}) & {"repository", "token", "ssh-key"})
            if given:
                raise ReleaseError(
                    f"{shown}: job {job_name!r}, step {index} checks out with {', '.join(given)}; a "
                    "learner's workflow checks out its own repository only, with the run's own token"
                )


# --- what goes in ----------------------------------------------------------------------------------


def _exercises(course: Course, root: Path) -> dict[str, bytes]:
    if (root / "solutions").is_dir():
        # The stubs must be exactly what the solutions generate: an exercise file edited by
        # hand (or filled in while trying a lesson) would ship code the learners should write.
        try:
            drift = sync(course, check_only=True)
        except StubError as exc:
            raise ReleaseError(f"the exercises cannot be generated from the solutions: {exc}") from None
        if drift:
            raise ReleaseError(
                "exercises/ differs from what the solutions generate; run `autograder stubs` "
                "and check the result first:\n  " + "\n  ".join(drift)
            )
    files = {}
    for lesson in course.lessons:
        folder = root / "exercises" / lesson.folder
        if not folder.is_dir():
            raise ReleaseError(f"{display_path(folder)}: not found; run `autograder stubs` to generate it")
        for rel in _walk(folder):
            files[f"exercises/{lesson.folder}/{rel}"] = _read_bytes(folder / rel)
    return files


def _recorded_lessons(course: Course, rerecord) -> set[str]:
    """The graders folders that ship: those of the lessons on a current recording (a stale or
    missing one regenerated first with `rerecord`, else refused)."""
    shipping = set()
    for lesson in course.lessons:
        folder = ENGINE_DIR / "graders" / lesson.graders
        state = record.status(course, lesson, folder)
        if state in (record.STALE, record.MISSING):
            if rerecord is None:
                why = (
                    "has no recording yet"
                    if state == record.MISSING
                    else "holds a stale recording (the graders, the reference or the solutions changed since)"
                )
                raise ReleaseError(
                    f"{display_path(folder)}: {why}; run `autograder record --lesson {lesson.id}` "
                    "(or `autograder release`, which regenerates it) and commit the result"
                )
            done = rerecord(course, lesson)
            state = record.status(course, lesson, folder)
            if state != record.CURRENT:
                raise ReleaseError(f"{display_path(folder)}: could not be recorded: {done.line}")
        if state == record.CURRENT:
            shipping.add(lesson.graders)
        elif state == record.NO_REFERENCE and (folder / recording.JSON_NAME).is_file():
            shipping.add(lesson.graders)  # a release built from a release: its recordings as they are
    return shipping


def _engine(recorded: set[str] = frozenset()) -> dict[str, bytes]:
    files = {}
    for rel in _walk(ENGINE_DIR):
        parts = rel.split("/")
        if parts[0] == "graders" and len(parts) > 2 and parts[1] in recorded:
            if not (recording.shipped("/".join(parts[2:])) or parts[-1] in recording.RECORDING_FILES):
                continue  # reference code, official-only checks, the quiz key: never shipped
        elif parts[0] == "graders" and (len(parts) != 2 or parts[1] not in GRADERS_PUBLIC):
            continue  # a lesson not on a recording: its graders stay hidden
        if parts[0] == "service":
            continue  # the grading service runs on the instructor's side; a learner never needs it
        files[f"autograder/{rel}"] = _read_bytes(ENGINE_DIR / rel)
    for name in GRADERS_PUBLIC:
        if f"autograder/graders/{name}" not in files:
            raise ReleaseError(
                f"{display_path(ENGINE_DIR / 'graders' / name)}: not found; the engine needs it"
            )
    return files


def _graders_stubs(course: Course, recorded: set[str], files: dict[str, bytes]) -> dict[str, bytes]:
    """Each shipped graders folder's stubs/: the lesson's Python files exactly as its exercises/
    ship them (engine/references.py's shipped_stubs reads them)."""
    return {
        f"autograder/graders/{lesson.graders}/{recording.STUBS_FOLDER}/{name}": files[
            f"exercises/{lesson.folder}/{name}"
        ]
        for lesson in course.lessons
        if lesson.graders in recorded
        for name in lesson.files
        if name.endswith(".py") and f"exercises/{lesson.folder}/{name}" in files
    }


def _learner_pyproject(path: Path) -> str:
    """pyproject.toml with pytest's testpaths = ["exercises"] and no pythonpath = ["tests"]."""
    shown = display_path(path)
    text = _read_bytes(path).decode("utf-8")
    lines = text.split("\n")
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "[tool.pytest.ini_options]")
    except StopIteration:
        raise ReleaseError(f"{shown}: no [tool.pytest.ini_options] section to adapt for learners") from None
    end = next((i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
    expected = {
        "testpaths": re.compile(r'^testpaths\s*=\s*\[\s*"tests"\s*\]\s*$'),
        "pythonpath": re.compile(r'^pythonpath\s*=\s*\[\s*"tests"\s*\]\s*$'),
    }
    found = {
        key: [i for i in range(start + 1, end) if pattern.match(lines[i])]
        for key, pattern in expected.items()
    }
    for key, where in found.items():
        if len(where) != 1:
            raise ReleaseError(
                f'{shown}: expected one line `{key} = ["tests"]` in [tool.pytest.ini_options] '
                f"(the instructor's settings, which the release adapts for learners); found {len(where)}"
            )
    lines[found["testpaths"][0]] = 'testpaths = ["exercises"]'
    del lines[found["pythonpath"][0]]
    adapted = "\n".join(lines)
    _verify_pyproject(adapted, shown)
    return adapted


def _verify_pyproject(text: str, shown: str) -> None:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the line edits above were already exact
        return
    try:
        options = tomllib.loads(text)["tool"]["pytest"]["ini_options"]
    except (tomllib.TOMLDecodeError, KeyError, TypeError) as exc:
        raise ReleaseError(f"{shown}: the adapted file is not valid ({exc})") from None
    if options.get("testpaths") != ["exercises"] or "pythonpath" in options:
        raise ReleaseError(
            f"{shown}: adapting the pytest settings for learners did not give "
            'testpaths = ["exercises"] without pythonpath'
        )


# --- the learner README ----------------------------------------------------------------------------


def render_readme(course: Course, release_files: set[str]) -> str:
    """The learner README: the template with {{course}}, {{lessons_table}}, {{first_lesson}} and
    {{torch}} (the requirement pyproject.toml pins, for the CPU-build install) filled."""
    try:
        template = TEMPLATE.read_text(encoding="utf-8")
    except OSError as exc:
        raise ReleaseError(f"{display_path(TEMPLATE)}: cannot be read ({exc.strerror or exc})") from None
    values = {
        "course": course.name,
        "lessons_table": _lessons_table(course, release_files),
        "first_lesson": course.lessons[0].folder,
        "torch": _torch_requirement(course),
    }

    def fill(match: re.Match) -> str:
        name = match.group(1)
        if name not in values:
            raise ReleaseError(
                f"{display_path(TEMPLATE)}: unknown placeholder {{{{{name}}}}}; known: "
                + ", ".join(f"{{{{{key}}}}}" for key in values)
            )
        return values[name]

    return _PLACEHOLDER.sub(fill, template)


def _torch_requirement(course: Course) -> str:
    """pyproject.toml's "torch==X.Y.Z" (the CPU build is installed first at that version, so that
    installing the course finds torch satisfied); plain "torch" when nothing pins it."""
    try:
        text = (course.root / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return "torch"
    found = re.search(r'"(torch\s*==\s*[^";]+)"', text)
    return found.group(1).replace(" ", "") if found else "torch"


def _lessons_table(course: Course, release_files: set[str]) -> str:
    rows = ["| # | Sección | Lección | Archivos | Minutos | XP |", "|---|---|---|---|---|---|"]
    for lesson in course.lessons:
        title = _cell(lesson.title.get("es") or next(iter(lesson.title.values())))
        readme = f"exercises/{lesson.folder}/README.md"
        if readme in release_files:
            title = f"[{title}]({readme})"
        section = _cell(lesson.section.get("es") or next(iter(lesson.section.values())))
        names = ", ".join(f"`{name}`" for name in lesson.files)
        rows.append(f"| {lesson.id} | {section} | {title} | {names} | {lesson.minutes} | {lesson.xp} |")
    return "\n".join(rows)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


# --- the output folder -----------------------------------------------------------------------------


def _check_out_location(root: Path, out: Path) -> None:
    """Never write over the course itself or into a folder the release is read from."""
    target = out.resolve()
    if target == root or target in root.parents:
        raise ReleaseError(
            f"--out {out}: is the course repository or a folder above it; "
            "choose a folder of its own (e.g. ../learner-template)"
        )
    for source in (ENGINE_DIR, root / "exercises", root / "solutions", root / ".github"):
        source = source.resolve()
        if target == source or source in target.parents or target in source.parents:
            raise ReleaseError(
                f"--out {out}: overlaps {display_path(source)}, which the release is built from; "
                "choose a folder outside it (e.g. ../learner-template)"
            )


def _prepare_out(out: Path, force: bool) -> None:
    if out.exists() and not out.is_dir():
        raise ReleaseError(f"--out {out}: exists and is not a folder")
    if not out.exists():
        out.mkdir(parents=True)
        return
    # A folder holding only .git (an empty clone of the template repository) is empty.
    entries = [entry for entry in out.iterdir() if entry.name != ".git"]
    if not entries:
        return
    if read_marker(out) is None:
        raise ReleaseError(
            f"--out {out}: the folder is not empty and holds no previous release (no {MARKER}); "
            "refusing to touch it. Choose an empty or new folder"
            + ("; --force only replaces a previous release" if force else "")
        )
    if not force:
        raise ReleaseError(
            f"--out {out}: holds a previous release; pass --force to replace it (its .git/ is kept)"
        )
    for entry in entries:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


# --- small helpers ---------------------------------------------------------------------------------


def _walk(folder: Path) -> list[str]:
    """Files under folder as sorted posix paths, without caches or build leftovers; links are
    refused (to a file or a folder), so nothing outside the course can slip into a release."""
    return walk_files(folder, skip_dirs=_SKIP_DIRS, skip_suffixes=_SKIP_SUFFIXES, on_link=_refuse_link)


def _refuse_link(path: Path) -> None:
    raise ReleaseError(f"{display_path(path)}: a symbolic link; the release only copies plain files")


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ReleaseError(f"{display_path(path)}: not found; the release needs it") from None
    except OSError as exc:
        raise ReleaseError(f"{display_path(path)}: cannot be read ({exc.strerror or exc})") from None
