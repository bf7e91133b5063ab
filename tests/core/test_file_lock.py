"""autograder/core/file_lock.py between real processes: what `check` and `watch` need to append
to the same local history at the same time."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from support.project import ROOT

from autograder.core.file_lock import LockTimeout, exclusive, lock_path

# A child process: python -c HOLDER <target> <held-flag> <release-flag>
# takes the lock, says so with a file, and keeps it until the release file appears.
HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from autograder.core.file_lock import exclusive
    target, held, release = map(Path, sys.argv[1:4])
    with exclusive(target):
        held.write_text("held")
        while not release.exists():
            time.sleep(0.01)
""")

# python -c APPENDER <target> <tag> <go-flag>: waits for the go file, then appends 200 lines,
# each in three separate unbuffered writes under the lock (without it, another process's
# writes could land between them).
APPENDER = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from autograder.core.file_lock import exclusive
    target, tag, go = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    while not go.exists():
        time.sleep(0.005)
    for i in range(200):
        with exclusive(target):
            with open(target, "ab", buffering=0) as fh:
                fh.write(f"{tag} {i:03d} ".encode())
                time.sleep(0)  # a chance for the other process to run between the writes
                fh.write(b"x" * 64)
                fh.write(b"\\n")
""")


def _python(code: str, *args: Path | str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", code, *map(str, args)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(path: Path, proc: subprocess.Popen) -> None:
    """Until `path` exists (the child got the lock); the child failing instead fails the test."""
    deadline = time.monotonic() + 60
    while not path.exists():
        if proc.poll() is not None:
            pytest.fail(f"the lock holder exited early: {proc.communicate()}")
        assert time.monotonic() < deadline, "the lock holder never took the lock"
        time.sleep(0.01)


def test_two_processes_appending_under_the_lock_write_400_intact_lines(tmp_path):
    target, go = tmp_path / "history.jsonl", tmp_path / "go"
    procs = [_python(APPENDER, target, tag, go) for tag in ("A", "B")]
    go.write_text("")
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    lines = target.read_bytes().split(b"\n")
    assert lines[-1] == b""  # the file ends with a newline, nothing after it
    lines = lines[:-1]
    assert len(lines) == 400
    pattern = re.compile(rb"([AB]) (\d{3}) x{64}")
    seen: dict[bytes, list[int]] = {b"A": [], b"B": []}
    for line in lines:
        match = pattern.fullmatch(line)
        assert match, line  # never a line with another's piece inside it
        seen[match.group(1)].append(int(match.group(2)))
    assert seen == {b"A": list(range(200)), b"B": list(range(200))}
    assert lock_path(target).is_file()  # the side file, not the history, carries the lock


def test_a_held_lock_makes_another_process_wait_and_then_time_out(tmp_path):
    target = tmp_path / "history.jsonl"
    target.write_bytes(b"old\n")
    held, release = tmp_path / "held", tmp_path / "release"
    holder = _python(HOLDER, target, held, release)
    try:
        _wait_for(held, holder)
        with pytest.raises(LockTimeout) as caught:
            with exclusive(target, timeout=0.3):
                pytest.fail("took a lock another process holds")
        assert caught.value.path == lock_path(target)
        assert str(lock_path(target)) in str(caught.value) and "check or watch" in str(caught.value)
        assert isinstance(caught.value, TimeoutError)
        release.write_text("")
        assert holder.wait(timeout=60) == 0
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    # Released by its holder: free again, and the guarded file was never touched.
    with exclusive(target, timeout=0):
        pass
    assert target.read_bytes() == b"old\n"


@pytest.mark.skipif(os.name == "nt", reason="SIGKILL is POSIX; TerminateProcess releases it the same way")
def test_a_killed_holder_releases_the_lock(tmp_path):
    """A `check` that crashes or is killed while recording never blocks `watch`."""
    target, held = tmp_path / "history.jsonl", tmp_path / "held"
    holder = _python(HOLDER, target, held, tmp_path / "never")
    try:
        _wait_for(held, holder)
        with pytest.raises(LockTimeout):
            with exclusive(target, timeout=0):
                pass
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=60)
    with exclusive(target, timeout=30):
        pass


def test_released_after_an_exception_and_usable_again(tmp_path):
    target = tmp_path / "history.jsonl"
    with pytest.raises(ValueError):
        with exclusive(target, timeout=0):
            raise ValueError("the append failed")
    # The same process can take it again at once: the failed block let it go.
    with exclusive(target, timeout=0) as side:
        assert side == tmp_path / "history.jsonl.lock"
    assert not target.exists()  # locking never creates the guarded file


def test_a_lock_that_cannot_be_created_raises_oserror(tmp_path):
    # LockTimeout is an OSError too (TimeoutError): the callers' `except OSError` covers both.
    assert issubclass(LockTimeout, OSError)
    with pytest.raises(FileNotFoundError):
        with exclusive(tmp_path / "missing-folder" / "history.jsonl", timeout=0):
            pass
