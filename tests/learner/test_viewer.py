"""The attention viewer end to end: the real `autograder viewer` command, serving real learner
files through the sandbox, driven by Debian's Chromium through Playwright; its HTTP guards with
real connections; and the PNG export, decoded pixel by pixel."""

from __future__ import annotations

import http.client
import io
import json
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from lessons.lesson03_variants import BUGGY
from support.browser import chromium
from support.grading import grade_folder, write_submission
from support.learner_course import ctrl_c_as_in_a_shell
from support.processes import descendants
from support.project import ROOT, SEED
from support.variants import solution_files

from autograder.core import i18n
from autograder.learner.attention_probe import BLOCK_SIZE, N_HEAD, InputError, tokenize
from autograder.learner.viewer import ViewerApp, ViewerServer
from autograder.render.attention_png import LEAK_COLOR, NAN_COLOR, attention_png

VARIANTS = {variant.name: variant for variant in BUGGY}
SENTENCE = "hola mundo"  # 10 tokens, a space among them
START_SECONDS = 60


# ---------------------------------------------------------------- the viewer as a process


@dataclass
class Viewer:
    proc: subprocess.Popen
    port: int
    folder: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def stop(self) -> tuple[int, str]:
        """Ctrl-C, as a learner stops it: (exit code, stderr)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return self.proc.returncode, err


def launch(folder: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "autograder", "viewer", "--no-browser", "--submission", str(folder), *extra],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ctrl_c_as_in_a_shell,  # stopped with Ctrl-C (SIGINT), as a learner stops it
    )


def start_viewer(folder: Path, *extra: str) -> Viewer:
    """`autograder viewer` on a free port, once it says where it listens."""
    proc = launch(folder, "--port", "0", *extra)
    ready, _, _ = select.select([proc.stdout], [], [], START_SECONDS)
    line = proc.stdout.readline() if ready else ""
    found = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
    if not found:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"the viewer did not start: stdout {line!r}, stderr {err[-2000:]!r}")
    return Viewer(proc, int(found[1]), folder)


def submission(tmp: Path, lesson, *variant_names: str) -> Path:
    """The solution's files (markers stripped), with the named variants applied."""
    files = solution_files(lesson)
    for name in variant_names:
        files.update(VARIANTS[name].apply(files))
    return write_submission(tmp, files)


@pytest.fixture(scope="module")
def solution_viewer(tmp_path_factory, lesson03):
    viewer = start_viewer(submission(tmp_path_factory.mktemp("solution"), lesson03))
    yield viewer
    viewer.stop()


@pytest.fixture(scope="module")
def leaky_viewer(tmp_path_factory, lesson03):
    # No mask on either path: masked_fill's result thrown away (explicit), no is_causal (fused).
    folder = submission(
        tmp_path_factory.mktemp("leaky"), lesson03, "mask-result-discarded", "fused-not-causal"
    )
    viewer = start_viewer(folder)
    yield viewer
    viewer.stop()


# ---------------------------------------------------------------- the browser


@pytest.fixture(scope="module")
def browser():
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


READ_GRIDS = """() => Array.from(document.querySelectorAll('table.attention')).map(table => ({
  head: Number(table.dataset.head),
  keys: Array.from(table.querySelectorAll('thead th.key')).map(th => th.textContent),
  queries: Array.from(table.querySelectorAll('tbody th.query')).map(th => th.textContent),
  rows: Array.from(table.querySelectorAll('tbody tr')).map(tr =>
    Array.from(tr.querySelectorAll('td.cell')).map(td => ({
      i: Number(td.dataset.i), j: Number(td.dataset.j), weight: td.dataset.weight,
      text: td.textContent, masked: td.classList.contains('masked'), leak: td.classList.contains('leak'),
      outline: getComputedStyle(td).outlineColor, outlineStyle: getComputedStyle(td).outlineStyle,
      background: getComputedStyle(td).backgroundColor}))),
}))"""


def show(page, viewer: Viewer, text: str, mode: str = "explicit", *, typed: bool = True) -> str:
    """Type `text` into the page (key by key, as a learner does), pick the mode, and wait until
    the page shows the answer for exactly that text and mode; returns the page's status."""
    if page.url != viewer.url:
        page.goto(viewer.url)
        page.wait_for_selector("body[data-ready='1']")
    page.check(f"input[name='mode'][value='{mode}']")
    box = page.locator("#sentence")
    box.fill("")
    if typed:
        box.press_sequentially(text)
    else:
        box.fill(text)
    page.wait_for_function(
        """([text, mode]) => { const s = document.getElementById('status');
             return document.body.dataset.settled === '1' && s.dataset.text === text && s.dataset.mode === mode; }""",
        arg=[text, mode],
        timeout=START_SECONDS * 1000,
    )
    return page.get_attribute("#status", "data-status")


def messages(page) -> list[str]:
    return page.eval_on_selector_all("#messages .message", "nodes => nodes.map(n => n.textContent)")


def css_rgb(hex_color: str) -> str:
    r, g, b = (int(hex_color[k : k + 2], 16) for k in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


def labels(text: str) -> list[str]:
    return ["\u2423" if ch == " " else ch for ch in text]


def weights_of(grid: dict) -> np.ndarray:
    return np.array([[float(cell["weight"]) for cell in row] for row in grid["rows"]])


# ---------------------------------------------------------------- in the browser


def test_solution_grid_is_causal_on_both_paths(page, solution_viewer):
    T = len(SENTENCE)
    assert show(page, solution_viewer, SENTENCE) == "ok"
    explicit = page.evaluate(READ_GRIDS)
    assert [grid["head"] for grid in explicit] == list(range(N_HEAD))
    for grid in explicit:
        assert grid["keys"] == labels(SENTENCE) and grid["queries"] == labels(SENTENCE)
        assert len(grid["rows"]) == T and all(len(row) == T for row in grid["rows"])
        for row in grid["rows"]:
            for cell in row:
                if cell["j"] > cell["i"]:  # the future: empty, and drawn as empty
                    assert cell["masked"] and cell["text"] == "" and float(cell["weight"]) == 0.0, cell
                    assert cell["background"] == "rgb(255, 255, 255)" and not cell["leak"], cell
                else:
                    assert not cell["masked"] and not cell["leak"], cell
        w = weights_of(grid)
        np.testing.assert_allclose(w.sum(axis=1), np.ones(T), atol=1e-4)
        assert (w[np.tril_indices(T)] > 0).all(), "every visible cell of this sentence has some weight"
    assert messages(page) == []
    assert page.is_visible("#export")
    growth = page.inner_text("#growth-text")
    assert f"T = {T}" in growth and str(T * T) in growth and str(N_HEAD * T * T) in growth
    assert page.inner_text("#growth-table tr.current").split() == [
        str(v) for v in (T, T * T, T * (T + 1) // 2, N_HEAD * T * T)
    ]

    # The fused path: its weights are measured (SDPA keeps none), and they are the same.
    assert show(page, solution_viewer, SENTENCE, "fused", typed=False) == "ok"
    fused = page.evaluate(READ_GRIDS)
    for grid_e, grid_f in zip(explicit, fused):
        assert all(cell["masked"] for row in grid_f["rows"] for cell in row if cell["j"] > cell["i"])
        np.testing.assert_allclose(weights_of(grid_f), weights_of(grid_e), atol=1e-5)
    assert page.inner_text("#sdpa") == i18n.translate("viewer.sdpa_causal", "es")
    parity_ok = i18n.translate("viewer.parity_ok", "es", difference="DIFF").split("DIFF")[0]
    assert page.inner_text("#parity").startswith(parity_ok)


def test_leaking_mask_is_marked_not_hidden(page, leaky_viewer):
    T = len(SENTENCE)
    future = T * (T - 1) // 2
    for mode in ("explicit", "fused"):
        assert show(page, leaky_viewer, SENTENCE, mode, typed=mode == "explicit") == "leak"
        for grid in page.evaluate(READ_GRIDS):
            cells = [cell for row in grid["rows"] for cell in row]
            leaks = [cell for cell in cells if cell["leak"]]
            # Every future cell has weight (there is no mask at all) and is outlined in red.
            assert len(leaks) == future and all(cell["j"] > cell["i"] for cell in leaks)
            assert all(float(cell["weight"]) > 0 and not cell["masked"] for cell in leaks)
            assert all(
                cell["outline"] == css_rgb(LEAK_COLOR) and cell["outlineStyle"] == "solid" for cell in leaks
            )
        shown = messages(page)
        assert shown[:2] == [
            i18n.translate("lesson03.future_weights", "es", count=future),
            i18n.translate("viewer.leak_marked", "es"),
        ]
    assert page.inner_text("#sdpa") == i18n.translate("viewer.sdpa_not_causal", "es")
    assert i18n.translate("lesson03.sdpa_not_causal", "es") in shown

    # The PNG export draws the same picture: the leaks outlined in the same red.
    href = page.get_attribute("#export", "href")
    response = page.request.get(leaky_viewer.url.rstrip("/") + href)
    assert response.status == 200 and response.headers["content-type"] == "image/png"
    assert red_pixels(response.body()) > 0


def test_pending_stub_shows_the_graders_message(page, course, lesson03, copy_of):
    stub = copy_of(ROOT / "exercises" / lesson03.folder)
    graded = {check.id: check for check in grade_folder(course, lesson03, stub, SEED).checks}
    viewer = start_viewer(stub)
    try:
        # The explicit path is what weights-causal [mask] checks; the fused one, fused-parity [fused].
        for mode, check in (("explicit", "weights-causal"), ("fused", "fused-parity")):
            assert show(page, viewer, "hola", mode, typed=False) == "error"
            expected = i18n.feedback_text(graded[check].feedback, "es").split("\n")
            assert messages(page) == expected
            assert expected[0].startswith("TODO [mask] pendiente")
            assert page.query_selector("table.attention") is None and not page.is_visible("#export")
    finally:
        viewer.stop()


def test_oversize_sentence_gets_a_message_and_the_page_recovers(page, solution_viewer):
    too_long = "a" * (BLOCK_SIZE + 6)
    assert show(page, solution_viewer, too_long, typed=False) == "invalid"
    assert messages(page) == [i18n.translate("viewer.too_long", "es", count=BLOCK_SIZE + 6, max=BLOCK_SIZE)]
    assert page.query_selector("table.attention") is None
    assert "over" in page.get_attribute("#counter", "class")
    # The longest allowed sentence is drawn in full: a block_size x block_size grid.
    longest = "ab" * (BLOCK_SIZE // 2)
    assert show(page, solution_viewer, longest, typed=False) == "ok"
    sizes = page.eval_on_selector_all(
        "table.attention",
        "tables => tables.map(t => [t.tBodies[0].rows.length, t.querySelectorAll('td.cell').length,"
        " t.querySelectorAll('td.masked').length])",
    )
    side = BLOCK_SIZE
    assert sizes == [[side, side * side, side * (side - 1) // 2]] * N_HEAD


# ---------------------------------------------------------------- HTTP, without a browser


def request(
    port: int,
    method: str,
    path: str,
    body: bytes | None = None,
    *,
    host: str | None = None,
    address: str = "127.0.0.1",
    headers: dict | None = None,
) -> tuple[int, dict, bytes]:
    conn = http.client.HTTPConnection(address, port, timeout=60)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", host if host is not None else f"127.0.0.1:{port}")
        for name, value in (headers or {}).items():
            conn.putheader(name, value)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def ask(
    port: int, text: str, mode: str = "explicit", *, headers: dict | None = None, **kwargs
) -> tuple[int, dict]:
    body = json.dumps({"text": text, "mode": mode}).encode()
    status, _, answer = request(
        port,
        "POST",
        "/api/attention",
        body,
        headers={"Content-Type": "application/json", **(headers or {})},
        **kwargs,
    )
    return status, json.loads(answer)


def test_foreign_host_and_cross_site_requests_are_refused(solution_viewer):
    port = solution_viewer.port
    # A DNS-rebinding page reaches 127.0.0.1 under its own name: refused, with the reason.
    status, headers, body = request(port, "GET", "/", host=f"rebind.example:{port}")
    assert status == 403
    assert body.decode().strip() == i18n.translate("viewer.refused_host", "es", host=f"rebind.example:{port}")
    status, answer = ask(port, "hola", host="rebind.example")
    assert status == 403 and answer["status"] == "refused"
    assert answer["messages"][0]["text"] == i18n.translate("viewer.refused_host", "es", host="rebind.example")
    # Another site's page in the learner's browser, posting to the viewer.
    status, answer = ask(
        port, "hola", headers={"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}
    )
    assert status == 403
    assert answer["messages"][0]["text"] == i18n.translate(
        "viewer.refused_origin", "es", origin="https://evil.example"
    )
    # An opaque origin (a sandboxed frame, a file: or data: page) is no site of ours either.
    for origin in ("null", "Null"):
        status, answer = ask(port, "hola", headers={"Origin": origin})
        assert status == 403 and answer["status"] == "refused", origin
        assert answer["messages"][0]["text"] == i18n.translate("viewer.refused_origin", "es", origin=origin)
    status, headers, body = request(port, "GET", "/", headers={"Origin": "null"})
    assert status == 403 and "null" in body.decode()
    # The viewer's own page, posting from its own origin, is served.
    status, answer = ask(
        port, "hola", headers={"Origin": f"http://127.0.0.1:{port}", "Sec-Fetch-Site": "same-origin"}
    )
    assert status == 200, answer
    # This machine's own names are served, and the page forbids framing and foreign scripts.
    for host in (f"localhost:{port}", f"[::1]:{port}", f"127.0.0.1:{port}"):
        status, headers, _ = request(port, "GET", "/", host=host)
        assert status == 200, host
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    assert "script-src 'self'" in headers["Content-Security-Policy"]


def test_oversize_and_malformed_bodies_are_refused(solution_viewer):
    port = solution_viewer.port
    huge = json.dumps({"text": "a" * 100_000}).encode()
    status, _, body = request(
        port, "POST", "/api/attention", huge, headers={"Content-Type": "application/json"}
    )
    assert status == 413
    assert json.loads(body)["messages"][0]["text"] == i18n.translate(
        "viewer.body_too_large", "es", size=len(huge), max=4096
    )
    status, _, body = request(port, "POST", "/api/attention", b"hola", headers={"Content-Type": "text/plain"})
    assert status == 415 and json.loads(body)["status"] == "refused"
    status, _, body = request(
        port, "POST", "/api/attention", b"{not json", headers={"Content-Type": "application/json"}
    )
    assert status == 400
    status, answer = ask(port, "hola", mode="sideways")
    assert status == 400 and "explicit, fused" in answer["messages"][0]["text"]
    status, answer = ask(port, "hola\x07")
    assert status == 422 and answer["messages"][0]["text"] == i18n.translate(
        "viewer.control_character", "es", code="U+0007"
    )
    # The server is still there and answers a good request.
    status, answer = ask(port, "ok")
    assert status == 200 and answer["status"] == "ok"


def _outward_address() -> str | None:
    """This machine's address on a non-loopback interface, if it has one."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # a route lookup only: UDP connect sends nothing
        address = probe.getsockname()[0]
    except OSError:
        return None
    finally:
        probe.close()
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def test_non_local_peers_are_refused(solution_viewer, tmp_path):
    address = _outward_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address to connect from")
    # The command binds 127.0.0.1 only: from another interface there is nobody to talk to.
    with pytest.raises(ConnectionRefusedError):
        request(solution_viewer.port, "GET", "/", address=address)
    # And a server that did listen everywhere would still refuse the peer, saying why.
    server = ViewerServer(("0.0.0.0", 0), ViewerApp(tmp_path, "es", {}))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        status, _, body = request(port, "GET", "/", address=address, host=f"localhost:{port}")
        assert status == 403
        assert body.decode().strip() == i18n.translate("viewer.refused_peer", "es", peer=address)
        status, _, _ = request(port, "GET", "/", host=f"localhost:{port}")
        assert status == 200
    finally:
        server.shutdown()
        server.server_close()


def test_codespaces_forwarded_host_is_this_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("CODESPACE_NAME", "octocat-fluffy-space-1234")
    monkeypatch.setenv("GITHUB_CODESPACES_PORT_FORWARDING_DOMAIN", "app.github.dev")
    server = ViewerServer(("127.0.0.1", 0), ViewerApp(tmp_path, "en", {}))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        status, _, body = request(port, "GET", "/", host=f"octocat-fluffy-space-1234-{port}.app.github.dev")
        assert status == 200 and b'<html lang="en">' in body
        # Another codespace, or another port of this one, is not this viewer.
        for host in (f"someone-else-{port}.app.github.dev", "octocat-fluffy-space-1234-1.app.github.dev"):
            status, _, body = request(port, "GET", "/", host=host)
            assert status == 403 and body.decode().strip() == i18n.translate(
                "viewer.refused_host", "en", host=host
            )
    finally:
        server.shutdown()
        server.server_close()


def test_saved_edits_show_at_once_and_english_is_selectable(tmp_path, lesson03):
    folder = submission(tmp_path / "learner", lesson03)
    viewer = start_viewer(folder, "--lang", "en")
    try:
        status, answer = ask(viewer.port, "abc")
        assert status == 200 and answer["status"] == "ok" and answer["messages"] == []
        # The learner breaks the mask and saves: the next sentence runs the new file.
        broken = submission(tmp_path / "broken", lesson03, "mask-result-discarded") / "attention.py"
        shutil.copyfile(broken, folder / "attention.py")
        status, answer = ask(viewer.port, "abc")
        assert answer["status"] == "leak"
        assert answer["messages"][0]["text"] == i18n.translate("lesson03.future_weights", "en", count=3)
        assert answer["leaks"] == [[[0, 1, 1], [0, 0, 1], [0, 0, 0]]] * N_HEAD
        spawned = descendants(viewer.proc.pid)
        assert spawned, "the sandbox's warm pool runs in processes of the viewer's"
    finally:
        code, err = viewer.stop()
    assert code == 0 and i18n.translate("viewer.stopped", "en") in err
    # Ctrl-C leaves nothing behind: the warm pool and its workers are gone with the viewer.
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{pid}").exists() for pid in spawned) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [pid for pid in spawned if Path(f"/proc/{pid}").exists()]


def test_a_second_viewer_on_the_same_port_says_so(solution_viewer):
    proc = launch(solution_viewer.folder, "--port", str(solution_viewer.port))
    out, err = proc.communicate(timeout=START_SECONDS)
    assert proc.returncode == 2 and out == ""
    reason = err.strip().split("(", 1)[1].split(")", 1)[0]
    assert err.strip() == i18n.translate("viewer.port_busy", "es", port=solution_viewer.port, reason=reason)


def test_missing_folder_is_a_usage_error(tmp_path):
    proc = launch(tmp_path / "nowhere", "--port", "0")
    _, err = proc.communicate(timeout=START_SECONDS)
    assert proc.returncode == 2
    assert err.strip() == i18n.translate("viewer.no_folder", "es", folder=str(tmp_path / "nowhere"))


# ---------------------------------------------------------------- tokens and the PNG


def test_tokens_are_characters_after_nfc():
    assert tokenize("e\u0301 a") == ["é", " ", "a"]  # e + combining accent is one character
    assert len(tokenize("x" * BLOCK_SIZE)) == BLOCK_SIZE
    for bad, key in (
        ("", "viewer.empty"),
        ("x" * (BLOCK_SIZE + 1), "viewer.too_long"),
        ("a\tb", "viewer.control_character"),
    ):
        with pytest.raises(InputError) as caught:
            tokenize(bad)
        assert caught.value.text.key == key


def red_pixels(png: bytes) -> int:
    """Pixels of the leak outline's red (no shade of the weights' colour map comes near it)."""
    from PIL import Image

    rgb = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    return int(((rgb[..., 0] > 200) & (rgb[..., 1] < 50) & (rgb[..., 2] < 50)).sum())


def colour_pixels(png: bytes, hex_color: str) -> int:
    from PIL import Image

    rgb = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    target = np.array([int(hex_color[k : k + 2], 16) for k in (1, 3, 5)])
    return int((np.abs(rgb - target).sum(axis=-1) <= 6).sum())


def test_attention_png_outlines_leaks_and_greys_nan():
    from PIL import Image

    T = 6
    causal = np.tril(np.ones((T, T)))
    causal /= causal.sum(axis=1, keepdims=True)
    clean = attention_png(causal, list("hola m"))
    assert clean.startswith(b"\x89PNG\r\n\x1a\n")
    assert red_pixels(clean) == 0
    leaky = causal.copy()
    leaky[1, 4] = 0.3
    heads = np.stack([causal, leaky])  # (heads, T, T): only head 1 leaks, at one cell
    marked = attention_png(heads, list("hola m"), lang="en", title="test")
    assert red_pixels(marked) > 0
    width, height = Image.open(io.BytesIO(marked)).size
    assert width > Image.open(io.BytesIO(clean)).size[0] and height > 100
    with_nan = causal.copy()
    with_nan[0, 0] = np.nan
    # A cell is hundreds of pixels; the labels' anti-aliasing gives a few greys of its own.
    assert colour_pixels(attention_png(with_nan), NAN_COLOR) > colour_pixels(clean, NAN_COLOR) + 500
    with pytest.raises(ValueError):
        attention_png(np.ones((3, 4)))
    with pytest.raises(ValueError):
        attention_png(causal, ["a"])


def test_export_png_of_the_solution_has_no_leak(solution_viewer):
    status, headers, body = request(solution_viewer.port, "GET", "/export.png?text=el+faro&mode=fused")
    assert status == 200 and headers["Content-Type"] == "image/png"
    assert body.startswith(b"\x89PNG") and red_pixels(body) == 0
    status, _, body = request(solution_viewer.port, "GET", "/export.png?text=&mode=explicit")
    assert status == 422 and body.decode().strip() == i18n.translate("viewer.empty", "es")
