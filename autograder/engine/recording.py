"""Recorded reference values: the official checks graded without the reference code.

A lesson's graders (autograder/graders/lessonNN/) compute what they expect with the lesson's
`reference.py`. That file never leaves the instructor's side, so the learner release answers
every call a grader makes into it from a RECORDING made in the instructor's checkout, for
fixed practice inputs (one seed, PRACTICE_SEED):

    ref = recording.reference_of(__package__)   # in harness.py and every test_*.py

- official mode (the default, and whenever the graders folder holds reference.py): `ref` IS the
  real reference module; nothing here runs during official grading.
- record mode (`autograder record`): `ref` calls the real module and writes down every call
  (its arguments and result, and the state a random generator argument was left in) and every
  plain-data constant the graders read. `eager()` is true, so the harnesses also compute every
  "what a known mistake gives" value on their own inputs, for the replay to answer diagnoses.
- replay mode (a graders folder without reference.py but with a recording): `ref` answers
  from the recording, or raises NotRecorded, which the engine reports as "judged only in the
  official grade" (never passed, never failed).

The recording is `recording.json` (structure, constants, digests) and `recording.npz` (every
array, under neutral keys v0, v1, ...; read with allow_pickle=False: nothing in it can run).
It holds values only, never code. It carries three digests: `graders` (the graders files that
ship: a replay refuses a recording made for other graders), `content` (the recording itself:
an edited file is refused) and `sources` (everything it was made from, reference code and
solutions included: the instructor's checkout and `autograder release` regenerate a stale one).

Matching a call in replay: the same function, the same argument structure, equal non-array
arguments, and array arguments of the same shape and dtype that are allclose (rtol 1e-4,
atol 1e-6, NaN equal to NaN): loose enough for another platform's maths library to land on
the recorded inputs (only Linux could be checked here), tight enough that a learner's wrong
value is a miss. A torch or NumPy generator argument matches by its exact state, and is left
in the state the real call left it in.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import io
import json
import math
import sys
import threading
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator

import numpy as np

from autograder.engine import recording_values as values
from autograder.engine.recording_sources import (
    FORMAT,
    JSON_NAME,
    NPZ_NAME,
    OFFICIAL_PREFIX,
    QUIZ,
    REFERENCE,
    STUBS_FOLDER,
    graders_digest,
    graders_files,
    shipped,
    sources_digest,
)
from autograder.engine.recording_values import RecordingError

__all__ = [
    "FORMAT",
    "JSON_NAME",
    "NPZ_NAME",
    "OFFICIAL_PREFIX",
    "PRACTICE_SEED",
    "QUIZ",
    "RECORDING_FILES",
    "REFERENCE",
    "STUBS_FOLDER",
    "NotRecorded",
    "Recorder",
    "Recording",
    "RecordingError",
    "converted",
    "eager",
    "for_diagnosis",
    "graders_digest",
    "lesson_mode",
    "load",
    "mode",
    "recording_into",
    "reference_of",
    "session",
    "shipped",
    "sources_digest",
]

RECORDING_FILES = (JSON_NAME, NPZ_NAME)
# The practice inputs: every replay grades with this seed (it is also stored in the recording).
PRACTICE_SEED = 20_261_207
RTOL, ATOL = 1e-4, 1e-6


class NotRecorded(Exception):
    """Replay only: the recording cannot answer this reference call (an input the recording never
    saw, typically the learner's own values, or a result that is not plain data)."""


# --------------------------------------------------------------------------- the active session


@dataclass
class _Session:
    mode: str  # "record" | "replay"
    folder: Path
    recorder: "Recorder | None" = None
    replay: "Recording | None" = None


_session: _Session | None = None
_pending: dict[Path, "Recorder"] = {}  # graders folders `autograder record` is recording
_loaded_as: dict[str, str] = {}  # graders package -> the mode its modules were imported under
_lock = threading.Lock()


def mode() -> str:
    """The mode, "official", "record" or "replay": how the graders now running get their reference values."""
    return _session.mode if _session is not None else "official"


def eager() -> bool:
    """True only while recording: a harness computes every diagnosis candidate on its own inputs
    even when the check passes, so that the replay can answer the diagnoses of a failing learner."""
    return mode() == "record"


def for_diagnosis(call, *args, **kwargs):
    """A reference call that only names a mistake: its result, or None where a recording cannot
    answer it (practice grading, on values the learner's own code made), so the check still
    fails, with a plainer message, instead of being left to the official grade."""
    try:
        return call(*args, **kwargs)
    except NotRecorded:
        return None


def reference_of(package: str):
    """What a graders module calls `ref`: the real `<package>.reference` module in official mode
    (unchanged, no overhead), a recording wrapper around it in record mode, the recording's
    answers in replay mode. Graders modules are imported again when the mode changes (see
    `session`), so the object chosen here always fits the run."""
    current = _session
    if current is None or current.mode == "official":
        return importlib.import_module(f"{package}.reference")
    if current.mode == "record":
        return _RecordingReference(importlib.import_module(f"{package}.reference"))
    return _ReplayReference()


def converted(folder: Path) -> bool:
    """Whether a lesson's graders reach their reference only through `reference_of` (no graders
    file that ships imports reference.py itself), so that a recording can stand in for it. The
    files that never ship (the official-only and quiz checks) may import it as they like."""
    import ast

    for path in graders_files(folder):
        if not shipped(path.relative_to(folder).as_posix()) or not path.name.endswith(".py"):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except SyntaxError:
            return False
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level >= 1:
                if node.module == "reference" or (
                    node.module is None and any(alias.name == "reference" for alias in node.names)
                ):
                    return False
    return True


def lesson_mode(folder: Path) -> str:
    """How the graders in `folder` are graded: "record" while `recording_into(folder)` is active;
    "official" when reference.py is there; "replay" when a recording is instead (the learner
    release); "none" when there is no graders folder, or only graders asking for a reference
    that is not there (engine/practice.py then grades with the lesson's practice tests); else
    "official" (graders that need no reference module)."""
    folder = Path(folder)
    if _key(folder) in _pending:
        return "record"
    if not folder.is_dir():
        return "none"
    if (folder / REFERENCE).is_file():
        return "official"
    if (folder / JSON_NAME).is_file() or (folder / NPZ_NAME).is_file():
        return "replay"
    # Graders that ask for a reference they cannot have (its recording deleted): as if absent.
    return "none" if _asks_for_reference(folder) else "official"


def _asks_for_reference(folder: Path) -> bool:
    return any(
        "reference_of(" in path.read_text(encoding="utf-8", errors="replace")
        for path in sorted(Path(folder).glob("*.py"))
    )


@contextlib.contextmanager
def recording_into(folder: Path) -> Iterator["Recorder"]:
    """While active, grading the lesson whose graders are in `folder` records (see Recorder)."""
    recorder = Recorder()
    with _lock:
        _pending[_key(folder)] = recorder
    try:
        yield recorder
    finally:
        with _lock:
            _pending.pop(_key(folder), None)


@contextlib.contextmanager
def session(folder: Path, package: str | None = None) -> Iterator[_Session | None]:
    """The grading of one lesson (engine/grading.py): sets the mode of `folder`'s graders for
    the run, imports them afresh when they were imported under another mode, yields the session
    (None in official mode). A replay loads and verifies the recording first: RecordingError."""
    global _session
    folder = Path(folder)
    chosen = lesson_mode(folder)
    if chosen == "record":
        current = _Session("record", folder, recorder=_pending[_key(folder)])
    elif chosen == "replay":
        current = _Session("replay", folder, replay=load(folder))
    else:
        current = None
    package = package or _package_of(folder)
    _fresh_import(package, folder, current.mode if current else "official")
    previous, _session = _session, current
    try:
        yield current
    finally:
        _session = previous


def _key(folder: Path) -> Path:
    return Path(folder).resolve()


def _package_of(folder: Path) -> str:
    """The dotted name pytest gives the graders package in `folder` (the folders above it that
    are packages, as pytest's importlib mode resolves them)."""
    folder = Path(folder).resolve()
    names = [folder.name]
    parent = folder.parent
    while (parent / "__init__.py").is_file():
        names.insert(0, parent.name)
        parent = parent.parent
    return ".".join(names)


def _fresh_import(package: str, folder: Path, wanted: str) -> None:
    """Drop the graders modules of `package` from sys.modules when they were imported under
    another mode or from another folder (pytest reuses a module it finds there), so that each
    one's `ref = reference_of(__package__)` is evaluated for this run."""
    with _lock:
        loaded = [name for name in sys.modules if name == package or name.startswith(package + ".")]
        # A module imported outside a grading session (a test's own import) is an official one.
        stale = _loaded_as.get(package, "official") != wanted or any(
            not _under(getattr(sys.modules[name], "__file__", None), folder) for name in loaded
        )
        if stale:
            for name in loaded:
                sys.modules.pop(name, None)
        _loaded_as[package] = wanted


def _under(path: str | None, folder: Path) -> bool:
    if path is None:
        return True  # a namespace package: nothing of a folder to tell
    try:
        return Path(path).resolve().is_relative_to(Path(folder).resolve())
    except OSError:
        return False


# --------------------------------------------------------------------------- record


class Recorder:
    """Collects the calls and constants of one lesson's record runs (solutions and stubs)."""

    def __init__(self) -> None:
        self.calls: list[dict] = []
        self.constants: dict[str, Any] = {}
        self.arrays: list[np.ndarray] = []
        self._array_index: dict[tuple, int] = {}
        self._seen: dict[str, int] = {}  # exact call key -> index in calls
        self.unrecordable: dict[str, str] = {}  # function or constant -> why (for the record command)
        self.conflicts: set[str] = set()  # functions that gave two results for the same arguments

    def _store(self, array: np.ndarray) -> int:
        key = (array.dtype.str, array.shape, hashlib.sha256(array.tobytes()).hexdigest())
        if key not in self._array_index:
            self._array_index[key] = len(self.arrays)
            self.arrays.append(array)
        return self._array_index[key]

    def _renumber(self, tree: Any, arrays: list[np.ndarray]) -> Any:
        if isinstance(tree, dict):
            out = {k: self._renumber(v, arrays) for k, v in tree.items()}
            if "i" in tree and tree.get("t") in ("np", "torch"):
                out["i"] = self._store(arrays[tree["i"]])
            return out
        if isinstance(tree, list):
            return [self._renumber(item, arrays) for item in tree]
        return tree

    def constant(self, name: str, value: Any) -> None:
        if name in self.constants:
            return
        try:
            encoder = values.Encoder()
            tree = encoder.encode(value)
        except values.Unrecordable as exc:
            self.unrecordable.setdefault(name, str(exc))
            return
        self.constants[name] = self._renumber(tree, encoder.arrays)

    def before(self, name: str, args: tuple, kwargs: dict):
        """The arguments as data, before the call (a generator's state changes during it); None
        when they are not recordable."""
        try:
            encoder = values.Encoder()
            tree = encoder.encode([list(args), dict(kwargs)])
        except values.Unrecordable as exc:
            self.unrecordable.setdefault(name, f"argument: {exc}")
            return None
        return tree, encoder

    def after(self, name: str, prepared, result: Any) -> None:
        tree, encoder = prepared
        try:
            out = values.Encoder()
            result_tree = out.encode(result)
        except values.Unrecordable as exc:
            self.unrecordable.setdefault(name, f"result: {exc}")
            return
        if out.generators:
            self.unrecordable.setdefault(name, "result: a generator")
            return
        args = self._renumber(tree, encoder.arrays)
        exact = json.dumps([name, args], sort_keys=True)
        result_tree = self._renumber(result_tree, out.arrays)
        posts = []
        for gen in encoder.generators:
            state = values.generator_state(gen)
            posts.append(
                {"t": "tstate", "i": self._store(state)}
                if isinstance(state, np.ndarray)
                else {"t": "npstate", "v": state}
            )
        if exact in self._seen:
            known = self.calls[self._seen[exact]]
            if known["r"] != result_tree or known["g"] != posts:
                self.conflicts.add(name)
            return
        self._seen[exact] = len(self.calls)
        self.calls.append({"f": name, "a": args, "r": result_tree, "g": posts})

    def save(self, folder: Path, *, lesson: str, graders: str, sources: str) -> tuple[Path, Path]:
        """Write recording.json and recording.npz into `folder` (the lesson's graders)."""
        arrays = {f"v{index}": array for index, array in enumerate(self.arrays)}
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **arrays)
        body = {"constants": self.constants, "calls": self.calls}
        data = {
            "format": FORMAT,
            "lesson": lesson,
            "seed": PRACTICE_SEED,
            "graders": graders,
            "sources": sources,
            "content": _content_digest(body, arrays),
            **body,
        }
        folder = Path(folder)
        json_path, npz_path = folder / JSON_NAME, folder / NPZ_NAME
        npz_path.write_bytes(buffer.getvalue())
        json_path.write_text(json.dumps(data, separators=(",", ":"), sort_keys=True) + "\n", encoding="utf-8")
        return json_path, npz_path


def _content_digest(body: dict, arrays: dict[str, np.ndarray]) -> str:
    digest = hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode())
    for name in sorted(arrays, key=lambda key: int(key[1:])):
        array = arrays[name]
        digest.update(f"{name}\0{array.dtype.str}\0{array.shape}\0".encode())
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


class _RecordingReference:
    """The real reference module, with every call and constant the graders take written down."""

    def __init__(self, module) -> None:
        self._module = module

    def __getattr__(self, name: str):
        value = getattr(self._module, name)
        current = _session
        if current is None or current.mode != "record" or name.startswith("__"):
            return value
        recorder = current.recorder
        if isinstance(value, (type, ModuleType)):
            recorder.unrecordable.setdefault(name, "a class or module: its results cannot be recorded")
            return value
        if not callable(value):
            recorder.constant(name, value)
            return value

        def recorded(*args, **kwargs):
            prepared = recorder.before(name, args, kwargs)
            result = value(*args, **kwargs)
            if prepared is not None:
                recorder.after(name, prepared, result)
            return result

        recorded.__name__ = name
        return recorded


# --------------------------------------------------------------------------- replay


@dataclass
class Recording:
    """A loaded, verified recording: what a replay answers from."""

    lesson: str
    seed: int
    graders: str
    sources: str
    constants: dict[str, Any]
    arrays: list[np.ndarray]
    # function -> signature of its arguments -> [(argument arrays, result tree, post-states)]
    calls: dict[str, dict[str, list[tuple[list[np.ndarray], Any, list]]]] = field(default_factory=dict)

    def constant(self, name: str) -> Any:
        if name not in self.constants:
            raise NotRecorded(name)
        return values.decode(self.constants[name], self.arrays)

    def answer(self, name: str, args: tuple, kwargs: dict) -> Any:
        try:
            encoder = values.Encoder()
            tree = encoder.encode([list(args), dict(kwargs)])
        except values.Unrecordable:
            raise NotRecorded(name) from None
        candidates = self.calls.get(name, {}).get(values.signature(tree), [])
        best, best_error = None, math.inf
        for recorded_arrays, result, posts in candidates:
            error = _match(encoder.arrays, recorded_arrays)
            if error < best_error:
                best, best_error = (result, posts), error
                if error == 0.0:
                    break
        if best is None:
            raise NotRecorded(name)
        result, posts = best
        for gen, post in zip(encoder.generators, posts):
            values.set_generator_state(gen, self.arrays[post["i"]] if post["t"] == "tstate" else post["v"])
        return values.decode(result, self.arrays)


def _match(given: list[np.ndarray], recorded: list[np.ndarray]) -> float:
    """The largest deviation between the given and the recorded argument arrays, scaled by the
    tolerance (inf when any is outside rtol/atol, or of another shape or dtype)."""
    worst = 0.0
    for a, b in zip(given, recorded):
        if a.shape != b.shape or a.dtype != b.dtype:
            return math.inf
        if a.dtype.kind in "fc":
            if not np.allclose(a, b, rtol=RTOL, atol=ATOL, equal_nan=True):
                return math.inf
            with np.errstate(invalid="ignore"):
                diff = np.abs(a.astype(np.complex128 if a.dtype.kind == "c" else np.float64) - b)
            finite = diff[np.isfinite(diff)]
            worst = max(worst, float(finite.max()) if finite.size else 0.0)
        elif not np.array_equal(a, b):
            return math.inf
    return worst


class _ReplayReference:
    """The reference module as the recording remembers it."""

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        current = _session
        if current is None or current.replay is None:
            raise NotRecorded(name)
        replay = current.replay
        if name in replay.constants:
            return replay.constant(name)
        if name not in replay.calls:
            raise NotRecorded(name)

        def answered(*args, **kwargs):
            return replay.answer(name, args, kwargs)

        answered.__name__ = name
        return answered


def load(folder: Path) -> Recording:
    """The recording in the graders folder `folder`, verified: readable, of this format, unedited
    (its content digest), made for these graders (their digest). RecordingError says what is
    wrong and with which file."""
    folder = Path(folder)
    json_path, npz_path = folder / JSON_NAME, folder / NPZ_NAME
    try:
        data = json.loads(json_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RecordingError(
            f"{json_path}: missing (the recording comes in two files, {JSON_NAME} and {NPZ_NAME})"
        ) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise RecordingError(f"{json_path}: not a readable recording ({exc})") from None
    if not isinstance(data, dict):
        raise RecordingError(f"{json_path}: not a recording (a JSON object is expected)")
    if data.get("format") != FORMAT:
        raise RecordingError(
            f"{json_path}: recording format {data.get('format')!r}, this engine reads format {FORMAT}"
        )
    try:
        with np.load(npz_path, allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
    except FileNotFoundError:
        raise RecordingError(
            f"{npz_path}: missing (the recording comes in two files, {JSON_NAME} and {NPZ_NAME})"
        ) from None
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise RecordingError(f"{npz_path}: not a readable recording ({exc})") from None
    try:
        body = {"constants": data["constants"], "calls": data["calls"]}
        content, seed = data["content"], data["seed"]
        graders, sources = data["graders"], data["sources"]
    except KeyError as exc:
        raise RecordingError(f"{json_path}: incomplete recording (no {exc.args[0]!r})") from None
    if not all(name.startswith("v") and name[1:].isdigit() for name in arrays):
        raise RecordingError(f"{npz_path}: unexpected array names")
    if content != _content_digest(body, arrays):
        raise RecordingError(
            f"{json_path} / {npz_path}: the recording was changed after it was made (its content digest "
            "does not match); restore both files from the course release"
        )
    expected = graders_digest(folder)
    if graders != expected:
        raise RecordingError(
            f"{json_path}: made for other graders than the ones in {folder} (graders digest "
            f"{str(graders)[:12]}, these are {expected[:12]}); restore the graders and the recording "
            "from the same course release"
        )
    listed = [arrays.get(f"v{index}") for index in range(len(arrays))]
    if any(array is None for array in listed):
        raise RecordingError(f"{npz_path}: arrays missing")
    recording = Recording(str(data.get("lesson", "")), int(seed), graders, sources, body["constants"], listed)
    try:
        for call in body["calls"]:
            args = call["a"]
            recorded_arrays = [listed[index] for index in _array_indices(args)]
            by_signature = recording.calls.setdefault(str(call["f"]), {})
            by_signature.setdefault(values.signature(args), []).append(
                (recorded_arrays, call["r"], list(call["g"]))
            )
            for index in _array_indices(call["r"]) + [p["i"] for p in call["g"] if p.get("t") == "tstate"]:
                listed[index]  # noqa: B018 - every index the call names exists
    except (KeyError, TypeError, IndexError, AttributeError) as exc:
        raise RecordingError(f"{json_path}: malformed call ({type(exc).__name__}: {exc})") from None
    return recording


def _array_indices(tree: Any) -> list[int]:
    found: list[int] = []

    def walk(node):
        if isinstance(node, dict):
            if node.get("t") in ("np", "torch"):
                found.append(node["i"])
            for key, value in node.items():
                if key != "i":
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(tree)
    return found
