"""Pieces of hostile learner code that several test files plant into submissions, and the text
made of escape sequences and Markdown that every output must show inert."""

from support.variants import solution_files

# Clipboard (OSC 52), window title (OSC 0), clear screen, colour, a carriage return that
# overwrites the line, a C1 CSI, a bidi override: each must arrive visible and inert.
ESCAPES = "\x1b]52;c;SGVsbG8=\x07\x1b]0;titulo\x07\x1b[2J\x1b[31mrojo\x1b[0m\rencima\x9b2J\u202e"
MARKDOWN = (
    "## ✔ XP 300/300\n[click](http://x) **bold** _em_ <img src=x> `code` ~~s~~ $x$ ![i](http://y) @profe\n"
    "| a | b |\n|---|---|\n- item\n1. uno\n> [!NOTE]\n[ref]: http://z\n==="
)
HOSTILE = MARKDOWN + "\n" + ESCAPES


# Once per sandbox, whatever worker runs it: the flag lives in the worker's home ($TMPDIR),
# which outlives each worker (the submission's own folder is read-only to a root grader's worker).
FIRST_CALL = """
import os as _os, tempfile as _tempfile


def _first_call(name):
    flag = _os.path.join(_tempfile.gettempdir(), name)
    if _os.path.exists(flag):
        return False
    open(flag, "w").close()
    return True
"""


HOSTILE_FORWARD = "        raise RuntimeError(" + repr(HOSTILE) + ")\n"


def hostile_attention(lesson) -> dict[str, str]:
    files = solution_files(lesson)
    head = "    def forward(self, x):\n"
    assert files["attention.py"].count(head) == 1
    files["attention.py"] = files["attention.py"].replace(head, head + HOSTILE_FORWARD)
    return files
