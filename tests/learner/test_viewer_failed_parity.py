"""The attention viewer never says "el futuro queda vacío" (viewer.status_ok) above a parity
line that failed: the real `autograder viewer` command, asked over real HTTP on 127.0.0.1 for
the fused path of a learner's files, which it reads afresh on every request (as a learner edits
and saves, one viewer serves each version below)."""

from __future__ import annotations

import http.client
import json
import re
import select
import signal
import subprocess
import sys

import pytest
from lessons.lesson03_variants import BUGGY
from support.grading import write_submission
from support.learner_course import ctrl_c_as_in_a_shell
from support.project import ROOT
from support.variants import solution_files

from autograder.core import i18n

VARIANTS = {variant.name: variant for variant in BUGGY}
SENTENCE = "hola mundo"
START_SECONDS = 60


@pytest.fixture(scope="module")
def viewer(tmp_path_factory, lesson03):
    """(port, folder, the solution's files): one viewer for the module, on a folder the tests
    rewrite."""
    files = solution_files(lesson03)
    folder = write_submission(tmp_path_factory.mktemp("parity"), files)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "autograder",
            "viewer",
            "--no-browser",
            "--port",
            "0",
            "--submission",
            str(folder),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ctrl_c_as_in_a_shell,
    )
    ready, _, _ = select.select([proc.stdout], [], [], START_SECONDS)
    line = proc.stdout.readline() if ready else ""
    found = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
    if not found:
        proc.kill()
        pytest.fail(f"the viewer did not start: {line!r} {proc.communicate()[1][-2000:]!r}")
    yield int(found[1]), folder, files
    proc.send_signal(signal.SIGINT)
    try:
        proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()


def fused(port: int) -> dict:
    """What the page gets for the sentence on the fused path."""
    body = json.dumps({"text": SENTENCE, "mode": "fused"}).encode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request(
            "POST",
            "/api/attention",
            body=body,
            headers={"Content-Type": "application/json", "Content-Length": str(len(body))},
        )
        response = conn.getresponse()
        assert response.status == 200, response.read()
        return json.loads(response.read())
    finally:
        conn.close()


def save(folder, files: dict[str, str], *variants: str) -> None:
    """The learner saves attention.py: the solution with `variants` applied."""
    changed = dict(files)
    for name in variants:
        changed.update(VARIANTS[name].apply(changed))
    (folder / "attention.py").write_text(changed["attention.py"], encoding="utf-8")


def _said(key: str, text: str) -> bool:
    return i18n.recognise(key, "es", text) is not None


def test_matching_paths_are_ok(viewer):
    port, folder, files = viewer
    save(folder, files)
    data = fused(port)
    assert _said("viewer.parity_ok", data["fused"]["parity"]), data["fused"]
    assert data["status"] == "ok" and not data["messages"], data


def test_a_fused_output_that_differs_from_the_explicit_one_is_not_ok(viewer):
    port, folder, files = viewer
    # The explicit path forgets 1/sqrt(hs); the fused one (SDPA) is right and causal: the drawn
    # weights are fine, the outputs are not the same.
    save(folder, files, "scale-none")
    data = fused(port)
    assert _said("viewer.parity_differs", data["fused"]["parity"]), data["fused"]
    assert data["fused"]["sdpa_called"] and data["fused"]["sdpa_causal"]
    assert not any(cell for head in data["leaks"] for row in head for cell in row)
    assert data["status"] == "warning", data["status"]


def test_a_fused_output_that_cannot_be_compared_is_not_ok(viewer):
    port, folder, files = viewer
    # The explicit path's mask is still the stub: nothing to compare the fused output with.
    text = files["attention.py"]
    masked = 'att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))'
    assert text.count(masked) == 1
    stub = 'raise NotImplementedError("TODO [mask] pendiente: registra la máscara causal")'
    (folder / "attention.py").write_text(text.replace(masked, stub), encoding="utf-8")
    data = fused(port)
    assert _said("viewer.parity_unknown", data["fused"]["parity"]), data["fused"]
    assert data["status"] == "warning", data["status"]
