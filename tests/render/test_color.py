"""When the learner's commands print colour (autograder/render/output.py use_color): a real
terminal only, never with NO_COLOR or TERM=dumb, never into a file or a pipe, and never into a
Windows console that would show the ANSI codes as text. Real terminals (a pty) here."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest
from rich.console import Console
from support.project import ROOT

from autograder.render.output import use_color, wants_color

pty = pytest.importorskip("pty")  # POSIX; the Windows leg of CI has no pseudo-terminals


@pytest.fixture
def terminal(monkeypatch):
    """A pseudo-terminal's stream, in an environment that asks for nothing in particular."""
    for name in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    leader, follower = pty.openpty()
    stream = os.fdopen(follower, "w", encoding="utf-8")
    yield stream
    stream.close()
    os.close(leader)


def test_a_terminal_gets_colour(terminal):
    assert use_color(terminal)


def test_no_color_and_a_dumb_terminal_get_none(terminal, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_color(terminal)
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("TERM", "dumb")
    assert not use_color(terminal)


def test_files_and_pipes_get_none(terminal, tmp_path):
    with open(tmp_path / "out.txt", "w", encoding="utf-8") as fh:
        assert not use_color(fh)
    assert not use_color(io.StringIO())
    # A real command with its output piped (what `autograder check | less` or an IDE does).
    code = "import sys; from autograder.render.output import use_color; print(use_color(sys.stdout))"
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, check=True
    )
    assert out.stdout.strip() == "False"


def test_a_windows_console_without_ansi_gets_plain_text(terminal):
    """rich's legacy_windows is a console that does not interpret ANSI codes (cmd.exe in the
    old console host): the colour we render as ANSI text would show there as litter."""
    assert wants_color(Console(file=terminal, legacy_windows=False))
    assert not wants_color(Console(file=terminal, legacy_windows=True))
