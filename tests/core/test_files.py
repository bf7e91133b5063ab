"""core/files.py: which files of a folder count, on real temporary folders. Stubs, the learner
release, the notebooks and the learner's digest all list folders through `walk_files`, so what
it leaves out here is what none of them generates, releases, hashes or grades."""

from __future__ import annotations

from pathlib import Path

import pytest

from autograder.core.files import is_cache, walk_files


def _make(root: Path, *names: str) -> Path:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(name, encoding="utf-8")
    return root


def test_files_come_back_as_sorted_posix_paths_relative_to_the_folder(tmp_path):
    # Created out of order, with a folder whose name sorts between files of its parent: the
    # result is one sorted list of strings, not os.walk's folder-by-folder order.
    _make(tmp_path, "z.py", "b/y.py", "a.py", "b/a/x.py", "c.txt")
    assert walk_files(tmp_path) == ["a.py", "b/a/x.py", "b/y.py", "c.txt", "z.py"]


def test_caches_are_never_listed(tmp_path):
    _make(
        tmp_path,
        "model.py",
        "__pycache__/model.cpython-311.pyc",
        ".pytest_cache/v/cache/lastfailed",
        "sub/__pycache__/x.pyc",
        "sub/keep.py",
        "stray.pyc",
        "deep/.pytest_cache/README.md",
    )
    assert walk_files(tmp_path) == ["model.py", "sub/keep.py"]


def test_is_cache_agrees_with_the_walker():
    assert is_cache(Path("__pycache__/m.cpython-311.pyc"))
    assert is_cache(Path("sub/.pytest_cache/README.md"))
    assert is_cache(Path("stray.pyc"))
    assert not is_cache(Path("sub/model.py"))
    assert not is_cache(Path("pycache_notes.md"))


def test_hidden_entries_are_listed_unless_asked_otherwise(tmp_path):
    _make(
        tmp_path, ".env", ".ipynb_checkpoints/nb-checkpoint.ipynb", "nb.ipynb", "sub/.hidden", "sub/seen.txt"
    )
    assert walk_files(tmp_path) == [
        ".env",
        ".ipynb_checkpoints/nb-checkpoint.ipynb",
        "nb.ipynb",
        "sub/.hidden",
        "sub/seen.txt",
    ]
    assert walk_files(tmp_path, hidden=False) == ["nb.ipynb", "sub/seen.txt"]


def test_skip_dirs_and_skip_suffixes_leave_out_more(tmp_path):
    _make(
        tmp_path,
        "keep.py",
        "notes.tmp",
        "old.pyo",
        ".mypy_cache/x.json",
        "pkg.egg-info/PKG-INFO",
        "sub/.mypy_cache/y.json",
        "sub/keep.txt",
    )
    found = walk_files(tmp_path, skip_dirs={".mypy_cache"}, skip_suffixes=(".tmp", ".pyo", ".egg-info"))
    # A suffix leaves out folders as well as files (pkg.egg-info/), a skipped name at any depth.
    assert found == ["keep.py", "sub/keep.txt"]
    # The caches stay out whatever the caller adds.
    _make(tmp_path, "__pycache__/keep.cpython-311.pyc")
    assert "__pycache__/keep.cpython-311.pyc" not in walk_files(tmp_path, skip_dirs={"other"})


def test_a_missing_folder_holds_no_files(tmp_path):
    assert walk_files(tmp_path / "absent") == []


def test_without_on_link_a_file_link_is_listed_and_a_folder_link_not_entered(tmp_path):
    outside = _make(tmp_path / "outside", "secret.txt")
    folder = _make(tmp_path / "folder", "own.py")
    (folder / "linked.txt").symlink_to(outside / "secret.txt")
    (folder / "linked_dir").symlink_to(outside, target_is_directory=True)
    assert walk_files(folder) == ["linked.txt", "own.py"]


def test_on_link_hears_of_every_link_and_none_is_listed(tmp_path):
    outside = _make(tmp_path / "outside", "secret.txt")
    folder = _make(tmp_path / "folder", "own.py", "sub/deeper.py")
    (folder / "sub" / "linked.txt").symlink_to(outside / "secret.txt")
    (folder / "linked_dir").symlink_to(outside, target_is_directory=True)
    (folder / "dangling").symlink_to(tmp_path / "nowhere")
    # Links inside what is skipped anyway (caches, hidden entries when asked) are not reported.
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "cached.pyc").symlink_to(outside / "secret.txt")
    (folder / ".hidden_link").symlink_to(outside / "secret.txt")
    seen: list[Path] = []
    assert walk_files(folder, hidden=False, on_link=seen.append) == ["own.py", "sub/deeper.py"]
    assert sorted(p.relative_to(folder).as_posix() for p in seen) == [
        "dangling",
        "linked_dir",
        "sub/linked.txt",
    ]


def test_on_link_may_refuse_by_raising(tmp_path):
    folder = _make(tmp_path / "folder", "own.py")
    (folder / "linked.py").symlink_to(folder / "own.py")

    def refuse(path: Path) -> None:
        raise ValueError(f"{path.name}: a symbolic link")

    with pytest.raises(ValueError, match="linked.py: a symbolic link"):
        walk_files(folder, on_link=refuse)
