"""core/regions.py, the one grammar of TODO regions: what each writer produces and that every
reader recognises it (the stub's tag and NotImplementedError whatever the message's words; the
markers inside other text). The whole-lesson behaviour (exercises/ from solutions/) is
tests/course/test_stubs.py's."""

from __future__ import annotations

import subprocess
import sys

import pytest

from autograder.core import regions
from autograder.core.regions import (
    RegionError,
    begin_id,
    has_regions,
    is_end,
    make_stub,
    parse_regions,
    pending_message,
    pending_todo,
    revert_region,
    strip_markers,
    tag,
    tagged,
)

TITLES = {"scale": "escala las puntuaciones", "mask": "aplica la máscara"}

SOLUTION = """\
def attend(q, k):
    ### BEGIN SOLUTION scale
    #: divide por la raíz de la dimensión
    scores = q @ k / 8
    ### END SOLUTION
    ### BEGIN SOLUTION mask
    #= scores = scores
    scores = scores.masked_fill(True, 0)
    ### END SOLUTION
    return scores
"""


def test_tag_and_tagged_are_each_others_inverse():
    assert tag("head-reshape") == "TODO [head-reshape]"
    assert tagged(f"        # {tag('head-reshape')}: separa q, k, v") == "head-reshape"
    assert tagged("x = 1  # TODO [mask] later") == "mask"
    assert tagged("print('TODO [mask]')") is None  # not a comment
    assert tagged("# TODO: nothing named") is None


def test_markers_found_anywhere_in_a_line():
    assert begin_id("    ### BEGIN SOLUTION mask") == "mask"
    assert begin_id("###BEGIN SOLUTION   last-step  ") == "last-step"
    assert begin_id("### BEGIN SOLUTION") is None
    assert is_end("        ### END SOLUTION") and is_end("###END SOLUTION")
    assert not is_end("# END SOLUTION")


def test_pending_message_is_what_the_stub_raises():
    assert pending_message("mask", "aplica la máscara") == "TODO [mask] pendiente: aplica la máscara"
    assert pending_message("mask", None) == "TODO [mask] pendiente"
    stub = make_stub(SOLUTION, "attention.py", TITLES)
    assert 'raise NotImplementedError("TODO [scale] pendiente: escala las puntuaciones")' in stub


@pytest.mark.parametrize(
    "text",
    [
        'raise NotImplementedError("TODO [scale] pendiente: escala las puntuaciones")',
        "raise NotImplementedError( 'TODO [scale] pending: scale the scores')",
        "NotImplementedError: TODO [scale] pendiente: escala las puntuaciones",
        "E   NotImplementedError: TODO [scale] à faire",
        'raise NotImplementedError(f"TODO [scale] pendiente: {title}")',  # a learner's own f-string
    ],
)
def test_pending_todo_reads_the_tag_whatever_the_words(text):
    assert pending_todo(text) == "scale"


@pytest.mark.parametrize(
    "text",
    [
        "AssertionError: TODO [scale] pendiente",  # not a stub's error
        "NotImplementedError: todavía no",
        "# TODO [scale]: escala las puntuaciones",
        "",
    ],
)
def test_pending_todo_claims_nothing_else(text):
    assert pending_todo(text) is None


def test_pending_todo_reads_the_real_error_of_a_stub():
    """The stub make_stub writes, run: the error it raises names its TODO."""
    stub = make_stub(SOLUTION, "attention.py", TITLES)
    run = subprocess.run([sys.executable, "-c", stub + "\nattend(1, 1)\n"], capture_output=True, text=True)
    assert run.returncode == 1
    assert pending_todo(run.stderr.strip().splitlines()[-1]) == "scale"


def test_pending_pattern_needs_nothing_but_re():
    """The notebook's runner gets the pattern as text and compiles it with plain `re`."""
    import re

    assert re.search(regions.PENDING_PATTERN, "NotImplementedError: TODO [x-1] y")[1] == "x-1"


def test_the_three_writers_agree_with_the_reader():
    found = parse_regions(SOLUTION, "attention.py")
    assert [(r.id, r.start_line, r.end_line) for r in found] == [("scale", 2, 5), ("mask", 6, 9)]
    assert found[0].hint == ["divide por la raíz de la dimensión"]
    assert found[1].stub_lines == ["    scores = scores"]
    stub = make_stub(SOLUTION, "attention.py", TITLES)
    assert tagged(stub.splitlines()[1]) == "scale" and tagged(stub.splitlines()[3]) == "mask"
    assert not has_regions(stub) and parse_regions(stub, "x.py") == []
    finished = strip_markers(SOLUTION)
    assert "###" not in finished and "scores = q @ k / 8" in finished and "#=" not in finished
    reverted = revert_region(SOLUTION, "attention.py", 1, TITLES)
    assert "scores = q @ k / 8" in reverted and "# TODO [mask]" in reverted
    assert "masked_fill" not in reverted and "BEGIN SOLUTION" not in reverted


def test_has_regions_sees_malformed_markers_too():
    assert has_regions(SOLUTION)
    assert has_regions("x = 1\n### begin solution\n")
    assert not has_regions("x = 1  # TODO [scale]\n")


def test_errors_name_the_file_and_line():
    with pytest.raises(RegionError, match=r"^a\.py:2: .*never closed"):
        parse_regions("x = 1\n### BEGIN SOLUTION scale\n", "a.py")
    with pytest.raises(RegionError, match=r"^a\.py:2: unknown region id 'other'"):
        make_stub("x = 1\n### BEGIN SOLUTION other\n### END SOLUTION\n", "a.py", TITLES)
    assert issubclass(RegionError, ValueError)
