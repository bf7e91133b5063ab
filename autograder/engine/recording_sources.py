"""What a recording is made from and what of a graders folder ships (engine/recording.py): the
file names that never ship (the reference code, the official-only checks, the quiz key), the
digest of the graders that ship (a replay refuses a recording made for other graders) and the
digest of everything a recording is made from (a stale one is made again).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = [
    "FORMAT",
    "JSON_NAME",
    "NPZ_NAME",
    "OFFICIAL_PREFIX",
    "QUIZ",
    "REFERENCE",
    "STUBS_FOLDER",
    "graders_digest",
    "graders_files",
    "normalised",
    "shipped",
    "sources_digest",
]

# 2: a 0-d array or tensor is kept 0-d (format 1 stored it as 1-d): every older recording is stale.
FORMAT = 2
JSON_NAME = "recording.json"
NPZ_NAME = "recording.npz"
# Graders files that never ship (and so never take part in the `graders` digest): the reference
# code, the official-only checks, the quiz check (its key is in it).
REFERENCE = "reference.py"
OFFICIAL_PREFIX = "test_official_"
QUIZ = "test_quiz.py"
_CACHES = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"})
# The release's copy of the lesson's untouched stubs (exercises/ as generated, public), for
# engine/blame.py where no solutions are: not graders code, so in no digest.
STUBS_FOLDER = "stubs"


def shipped(name: str) -> bool:
    """Whether a graders file (by its path relative to the lesson's graders folder) ships in the
    learner release: everything but the reference code, the official-only checks, the quiz
    check (its key) and the recording itself (which ships, but is not graders code)."""
    base = name.rsplit("/", 1)[-1]
    return not (
        base == REFERENCE or base.startswith(OFFICIAL_PREFIX) or base == QUIZ or base in (JSON_NAME, NPZ_NAME)
    )


def graders_files(folder: Path) -> list[Path]:
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(
        path
        for path in folder.rglob("*")
        if path.is_file()
        and not _CACHES & set(path.relative_to(folder).parts)
        and path.relative_to(folder).parts[0] != STUBS_FOLDER
        and not path.name.endswith((".pyc", ".pyo"))
    )


def normalised(path: Path) -> bytes:
    # A Windows checkout may turn line ends into CRLF: the digest must not change with it.
    return path.read_bytes().replace(b"\r\n", b"\n")


def graders_digest(folder: Path) -> str:
    """The digest of the graders files that ship (see `shipped`), line ends normalised."""
    folder = Path(folder)
    digest = hashlib.sha256(f"graders-format-{FORMAT}\0".encode())
    for path in graders_files(folder):
        rel = path.relative_to(folder).as_posix()
        if shipped(rel):
            digest.update(f"{rel}\0".encode() + normalised(path) + b"\0")
    return digest.hexdigest()


def sources_digest(folder: Path, solution_files: list[Path], checks: list[str]) -> str:
    """The digest of everything a recording is made from: the recording format, every graders
    file (reference.py and the official-only checks included), the solution files of the lesson
    and of the lessons it uses (`solution_files`; a missing one counts as missing), and the
    lesson's check ids (a check's inputs derive from its id)."""
    folder = Path(folder)
    digest = hashlib.sha256(f"sources-format-{FORMAT}\0".encode())
    for path in graders_files(folder):
        rel = path.relative_to(folder).as_posix()
        if path.name not in (JSON_NAME, NPZ_NAME):
            digest.update(f"graders/{rel}\0".encode() + normalised(path) + b"\0")
    for path in solution_files:
        path = Path(path)
        shown = f"solutions/{path.parent.name}/{path.name}\0".encode()
        digest.update(shown + (normalised(path) if path.is_file() else b"<missing>") + b"\0")
    digest.update(("checks\0" + "\0".join(checks)).encode())
    return digest.hexdigest()
