"""The learner release: the template repository that learners fork (or GitHub Classroom copies).

    autograder release --out DIR [--graders-ref REF] [--force]

A developer tool for the instructor. The release holds what a learner needs and nothing
that would give the course away:

  exercises/NN-slug/     every lesson of course.yml, as `autograder stubs` generates it
  course.yml             verbatim
  autograder/            the engine, without any hidden graders: of autograder/graders/ only
                         __init__.py and pytest.ini (no lesson folders); no caches
  pyproject.toml         the instructor's, with pytest pointed at exercises/ instead of tests/
  .github/workflows/     grade.yml (its AUTOGRADER_GRADERS_REF pinned to the graders' commit)
                         and grade-comment.yml
  .gitignore             the course repository's
  .devcontainer/         the Codespaces / Dev Containers setup (CPU torch, the course, the
                         attention viewer's port), so "Open in Codespaces" works in a fork
  README.md              generated from autograder/course/templates/learner-README.md
  .autograder-release    a marker (JSON: graders_ref, version) so that a later
                         `release --force` knows DIR is a previous release

Everything else (solutions/, tests/, bench/, .ci/, the project's CI workflow, the instructor
README) stays out. Every check runs before DIR is touched, so an error leaves it as it was.
A non-empty DIR is only replaced with --force and only if it holds the marker; its `.git/`
is always kept, so the release can be committed on top of the previous one.

Messages are in English (instructor tooling); every user error is a `ReleaseError`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from autograder import __version__
from autograder.core.files import walk_files
from autograder.core.manifest import Course, _shown
from autograder.course.stubs import StubError, sync

__all__ = ["MARKER", "ReleaseError", "ReleaseReport", "build_release", "read_marker", "render_readme"]

MARKER = ".autograder-release"
ENGINE_DIR = Path(__file__).resolve().parents[1]
TEMPLATE = Path(__file__).resolve().parent / "templates" / "learner-README.md"
WORKFLOWS = (".github/workflows/grade.yml", ".github/workflows/grade-comment.yml")
DEVCONTAINER = ".devcontainer"
GRADE_WORKFLOW = WORKFLOWS[0]
# The one top-level env entry of grade.yml that names the graders' commit.
_REF_LINE = re.compile(r"^(?P<key>  AUTOGRADER_GRADERS_REF: )(?P<value>.*?)(?P<comment>[ \t]+#.*)?$", re.MULTILINE)
# Branch, tag or commit: what actions/checkout accepts as `ref`, without anything YAML would mangle.
_REF_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")
_FULL_SHA = re.compile(r"^[0-9a-f]{40}$")
# Of autograder/graders/ only these engine files ship; every lesson folder is hidden.
GRADERS_PUBLIC = ("__init__.py", "pytest.ini")
# Beyond the caches core.files always leaves out: linters' caches, packaging metadata.
_SKIP_DIRS = frozenset({".mypy_cache", ".ruff_cache"})
_SKIP_SUFFIXES = (".pyo", ".egg-info")
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_]+)\s*\}\}")


class ReleaseError(Exception):
    """The release cannot be built as asked (a missing file, a bad ref, an unsafe DIR)."""


@dataclass(frozen=True)
class ReleaseReport:
    out: Path
    files: tuple[str, ...]  # written, relative posix paths, sorted (the marker included)
    graders_ref: str
    # Things worth knowing that do not stop the release (e.g. uncommitted grader changes).
    warnings: tuple[str, ...] = ()


def build_release(course: Course, out: Path, *, graders_ref: str | None = None,
                  force: bool = False) -> ReleaseReport:
    """Write the learner release of `course` into `out` (see the module docstring)."""
    root = course.root.resolve()
    out = Path(out).expanduser()
    warnings: list[str] = []
    ref = _resolve_ref(root, graders_ref, warnings)
    _check_out_location(root, out)

    files: dict[str, bytes] = {}
    files.update(_exercises(course, root))
    files["course.yml"] = _read_bytes(root / "course.yml")
    files.update(_engine())
    files["pyproject.toml"] = _learner_pyproject(root / "pyproject.toml").encode("utf-8")
    for rel in WORKFLOWS:
        path = root / rel
        if not path.is_file():
            raise ReleaseError(
                f"{_shown(path)}: not found; the release needs both learner workflows "
                f"({', '.join(WORKFLOWS)})"
            )
        files[rel] = _read_bytes(path)
    files[GRADE_WORKFLOW] = _pin_ref(files[GRADE_WORKFLOW].decode("utf-8"), ref,
                                     _shown(root / GRADE_WORKFLOW)).encode("utf-8")
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
    marker = {"graders_ref": ref, "version": __version__}
    files[MARKER] = (json.dumps(marker, indent=2) + "\n").encode("utf-8")

    _prepare_out(out, force)
    for rel, data in sorted(files.items()):
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        if rel in executable:  # the post-create script must stay runnable
            path.chmod(0o755)
    return ReleaseReport(out, tuple(sorted(files)), ref, tuple(warnings))


def read_marker(folder: Path) -> dict | None:
    """The marker of a previous release in `folder`, or None if it holds none (or a broken one)."""
    try:
        data = json.loads((Path(folder) / MARKER).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("graders_ref"), str) else None


# --- the graders' ref ----------------------------------------------------------------------------


def _resolve_ref(root: Path, given: str | None, warnings: list[str]) -> str:
    if given is not None:
        ref = given.strip()
        if not _REF_OK.fullmatch(ref) or ".." in ref or ref.endswith((".lock", "/", ".")):
            raise ReleaseError(
                f"--graders-ref {given!r}: not a usable git ref; give a commit SHA (preferred), "
                "a tag or a branch name"
            )
        if not _FULL_SHA.fullmatch(ref):
            warnings.append(
                f"graders ref {ref!r} is not a full commit SHA: learners' grading will follow "
                "whatever it points to when they push, not a pinned version of the graders"
            )
        return ref
    try:
        head = _git(root, "rev-parse", "--verify", "HEAD")
    except ReleaseError as exc:
        raise ReleaseError(
            f"cannot pin the hidden graders: {exc}; pass --graders-ref with the commit of the "
            "instructor repository whose autograder/graders/ the learners must be graded with"
        ) from None
    if not _FULL_SHA.fullmatch(head):
        raise ReleaseError(f"`git rev-parse HEAD` in {root} gave {head!r}, not a commit SHA; "
                           "pass --graders-ref")
    try:
        dirty = _git(root, "status", "--porcelain", "--", "autograder/graders", "course.yml")
    except ReleaseError:
        dirty = ""
    if dirty:
        warnings.append(
            "autograder/graders/ or course.yml has uncommitted changes; the pinned commit "
            f"{head[:12]} does not contain them (commit and push, then release again)"
        )
    return head


def _git(root: Path, *args: str) -> str:
    try:
        proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              timeout=60, check=False)
    except FileNotFoundError:
        raise ReleaseError("git is not installed") from None
    except (OSError, subprocess.SubprocessError) as exc:
        raise ReleaseError(f"git could not run ({exc})") from None
    if proc.returncode != 0:
        detail = (proc.stderr.strip().splitlines() or ["failed"])[-1]
        raise ReleaseError(f"`git {' '.join(args)}` in {root}: {detail}")
    return proc.stdout.strip()


def _pin_ref(text: str, ref: str, shown: str) -> str:
    """grade.yml with its one `  AUTOGRADER_GRADERS_REF: ...` line set to `ref` (comment kept)."""
    matches = list(_REF_LINE.finditer(text))
    if len(matches) != 1:
        raise ReleaseError(
            f"{shown}: expected exactly one top-level env line `  AUTOGRADER_GRADERS_REF: <ref>` "
            f"(two-space indent) to pin the graders' commit; found {len(matches)}"
        )
    match = matches[0]
    line = f'{match["key"]}"{ref}"{match["comment"] or ""}'
    pinned = text[: match.start()] + line + text[match.end():]
    try:
        data = yaml.safe_load(pinned)
        value = data.get("env", {}).get("AUTOGRADER_GRADERS_REF") if isinstance(data, dict) else None
    except (yaml.YAMLError, AttributeError):
        value = None
    if value != ref:
        raise ReleaseError(
            f"{shown}: after pinning, the workflow's top-level env.AUTOGRADER_GRADERS_REF reads "
            f"{value!r}, not {ref!r}; is the line inside the top-level `env:` block?"
        )
    return pinned


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
            raise ReleaseError(f"{_shown(folder)}: not found; run `autograder stubs` to generate it")
        for rel in _walk(folder):
            files[f"exercises/{lesson.folder}/{rel}"] = _read_bytes(folder / rel)
    return files


def _engine() -> dict[str, bytes]:
    files = {}
    for rel in _walk(ENGINE_DIR):
        parts = rel.split("/")
        if parts[0] == "graders" and (len(parts) != 2 or parts[1] not in GRADERS_PUBLIC):
            continue  # hidden graders: every lesson folder, anything but the engine's two files
        files[f"autograder/{rel}"] = _read_bytes(ENGINE_DIR / rel)
    for name in GRADERS_PUBLIC:
        if f"autograder/graders/{name}" not in files:
            raise ReleaseError(f"{_shown(ENGINE_DIR / 'graders' / name)}: not found; the engine needs it")
    return files


def _learner_pyproject(path: Path) -> str:
    """pyproject.toml with pytest's testpaths = ["exercises"] and no pythonpath = ["tests"]."""
    shown = _shown(path)
    text = _read_bytes(path).decode("utf-8")
    lines = text.split("\n")
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "[tool.pytest.ini_options]")
    except StopIteration:
        raise ReleaseError(f"{shown}: no [tool.pytest.ini_options] section to adapt for learners") from None
    end = next((i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
    expected = {"testpaths": re.compile(r'^testpaths\s*=\s*\[\s*"tests"\s*\]\s*$'),
                "pythonpath": re.compile(r'^pythonpath\s*=\s*\[\s*"tests"\s*\]\s*$')}
    found = {key: [i for i in range(start + 1, end) if pattern.match(lines[i])] for key, pattern in expected.items()}
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
        raise ReleaseError(f"{shown}: adapting the pytest settings for learners did not give "
                           'testpaths = ["exercises"] without pythonpath')


# --- the learner README ----------------------------------------------------------------------------


def render_readme(course: Course, release_files: set[str]) -> str:
    """The learner README: the template with {{course}}, {{lessons_table}}, {{first_lesson}} and
    {{torch}} (the requirement pyproject.toml pins, for the CPU-build install) filled."""
    try:
        template = TEMPLATE.read_text(encoding="utf-8")
    except OSError as exc:
        raise ReleaseError(f"{_shown(TEMPLATE)}: cannot be read ({exc.strerror or exc})") from None
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
                f"{_shown(TEMPLATE)}: unknown placeholder {{{{{name}}}}}; known: "
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
        raise ReleaseError(f"--out {out}: is the course repository or a folder above it; "
                           "choose a folder of its own (e.g. ../learner-template)")
    for source in (ENGINE_DIR, root / "exercises", root / "solutions", root / ".github"):
        source = source.resolve()
        if target == source or source in target.parents or target in source.parents:
            raise ReleaseError(
                f"--out {out}: overlaps {_shown(source)}, which the release is built from; "
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
    raise ReleaseError(f"{_shown(path)}: a symbolic link; the release only copies plain files")


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ReleaseError(f"{_shown(path)}: not found; the release needs it") from None
    except OSError as exc:
        raise ReleaseError(f"{_shown(path)}: cannot be read ({exc.strerror or exc})") from None
