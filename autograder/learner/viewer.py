"""`autograder viewer`: a local page that draws the attention of the learner's own lesson-03 module.

    autograder viewer [--submission DIR] [--port N] [--lang es|en] [--no-browser]

The learner types a sentence and sees, head by head, the attention weights their
CausalSelfAttention gives it (autograder/learner/attention_probe.py measures them behind the sandbox),
with the explicit or the fused path, how the matrix grows with the sentence (T^2 per head), and
can download the same picture as a PNG (autograder/render/attention_png.py).

Routes: GET / (the page, its strings in the course language), GET /static/<file>, POST
/api/attention ({"text", "mode"} -> JSON), GET /export.png?text=...&mode=...

The server is the standard library's ThreadingHTTPServer, bound to 127.0.0.1 only. Since it
runs the learner's code (in the sandbox) on request, it answers nobody but this machine:
a request is refused, with a message that says why, when its peer is not a loopback address,
when its Host header is not this machine (localhost, 127.0.0.1, [::1]: a foreign name there is
a DNS-rebinding page in the learner's browser), or when a browser says it comes from another
site (Origin, Sec-Fetch-Site; `Origin: null`, sent by sandboxed frames, file: and data: pages,
names no site of ours either). In a GitHub Codespace the forwarded address
(<codespace>-<port>.<forwarding domain>) is this machine too. Sentences are capped at
attention_probe.BLOCK_SIZE characters and request bodies at MAX_BODY_BYTES.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import math
import os
import sys
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from autograder.core import i18n
from autograder.core.results import Feedback, Text, message
from autograder.engine.feedback import redact, secrets_from_environ

DEFAULT_PORT = 8765  # .devcontainer/devcontainer.json forwards this port
BIND_ADDRESS = "127.0.0.1"
MAX_BODY_BYTES = 4096  # a 64-character sentence in JSON is far below this
DRAIN_LIMIT = 1 << 20  # read (and drop) at most this much of a refused body before answering
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
STATIC = Path(__file__).with_name("viewer_static")
STATIC_FILES = {"viewer.js": "text/javascript; charset=utf-8", "viewer.css": "text/css; charset=utf-8"}
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


# ---------------------------------------------------------------- command line


def add_parser(subparsers) -> None:
    viewer = subparsers.add_parser(
        "viewer", help=message("cli.viewer.help"), description=message("cli.viewer.description")
    )
    viewer.add_argument(
        "--submission",
        type=Path,
        default=None,
        metavar=message("cli.metavar.dir"),
        help=message("cli.viewer.submission"),
    )
    viewer.add_argument(
        "--port", type=_port, default=DEFAULT_PORT, help=message("cli.viewer.port", port=DEFAULT_PORT)
    )
    viewer.add_argument("--lang", choices=i18n.LANGUAGES, default=None, help=message("cli.viewer.lang"))
    viewer.add_argument("--no-browser", action="store_true", help=message("cli.viewer.no_browser"))


def _port(text: str) -> int:
    # argparse._ is the command line's language while parsing (cli.argparse_language).
    try:
        port = int(text)
    except ValueError:
        port = None
    if port is None or not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(argparse._("%r is not a port number (0-65535)") % text)
    return port


def main(course, args) -> int:
    from autograder.engine.grading import lesson_submission_dir
    from autograder.learner.attention_probe import ATTENTION_FILE

    lang = args.lang or course.language
    lesson = attention_lesson(course)
    if lesson is None:
        print(i18n.translate("viewer.no_lesson", lang, file=ATTENTION_FILE), file=sys.stderr)
        return 2
    folder = lesson_submission_dir(course, lesson, args.submission, single=True)
    if not folder.is_dir():
        print(i18n.translate("viewer.no_folder", lang, folder=str(folder)), file=sys.stderr)
        return 2
    # The same trust boundary as grading: the learner's worker must not read our environment
    # (a Codespace's GITHUB_TOKEN, say) through /proc.
    from autograder.sandbox.isolation import hide_environment

    hide_environment()
    app = ViewerApp(folder, lang, {todo.id: dict(todo.title) for todo in lesson.todos})
    try:
        server = ViewerServer((BIND_ADDRESS, args.port), app)
    except OSError as exc:
        print(
            i18n.translate("viewer.port_busy", lang, port=args.port, reason=exc.strerror or str(exc)),
            file=sys.stderr,
        )
        return 2
    url = f"http://{BIND_ADDRESS}:{server.server_address[1]}/"
    print(i18n.translate("viewer.serving", lang, url=url, folder=str(folder)), flush=True)
    threading.Thread(target=app.warm_up, daemon=True).start()
    if not args.no_browser and _graphical_session():
        import webbrowser

        threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print(i18n.translate("viewer.stopped", lang), file=sys.stderr)
    finally:
        server.server_close()
    return 0


def _graphical_session() -> bool:
    """Whether opening a browser tab makes sense. Not in a Codespace (the forwarded port's
    notification opens it) nor on a Linux without a display, where Python's webbrowser would
    fall back to a text browser in this very terminal."""
    if os.environ.get("CODESPACES"):
        return False
    if sys.platform.startswith("linux"):
        return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    return True


def attention_lesson(course):
    """The course's lesson whose files include the attention module (lesson 03), or None."""
    from autograder.learner.attention_probe import ATTENTION_FILE

    return next((lesson for lesson in course.lessons if ATTENTION_FILE in lesson.files), None)


# ---------------------------------------------------------------- the application


class Refused(Exception):
    """A request answered with `status` and a catalog message, without running anything."""

    def __init__(self, status: HTTPStatus, text: Text) -> None:
        super().__init__(text.key)
        self.status, self.text = status, text


class ViewerApp:
    """What the routes do, apart from HTTP: measure a sentence, draw it, serve the page."""

    def __init__(self, submission: Path, lang: str, todo_titles: dict) -> None:
        self.submission, self.lang, self.todo_titles = Path(submission), lang, todo_titles
        # One learner module at a time: each measurement has a worker of its own, and on a
        # small machine two at once would only slow both down.
        self._lock = threading.Lock()

    def warm_up(self) -> None:
        from autograder.learner.attention_probe import warm_up

        try:
            with self._lock:
                warm_up(self.submission)
        except Exception:  # only a head start: the first real request will report any problem
            pass

    def measure(self, text: Any, mode: Any):
        from autograder.learner.attention_probe import MODES, InputError, measure, tokenize

        if not isinstance(text, str):
            raise Refused(HTTPStatus.BAD_REQUEST, message("viewer.bad_request"))
        if mode not in MODES:
            raise Refused(HTTPStatus.BAD_REQUEST, message("viewer.bad_mode", modes=", ".join(MODES)))
        try:
            tokens = tokenize(text)
        except InputError as exc:
            raise Refused(HTTPStatus.UNPROCESSABLE_ENTITY, exc.text) from None
        with self._lock:
            return measure(self.submission, tokens, mode, self.todo_titles)

    def attention_json(self, payload: Any) -> dict:
        if not isinstance(payload, dict):
            raise Refused(HTTPStatus.BAD_REQUEST, message("viewer.bad_request"))
        result = self.measure(payload.get("text"), payload.get("mode", "explicit"))
        return self.describe(result)

    def describe(self, result) -> dict:
        """A measurement as the page's JSON (NaN weights become null)."""
        from autograder.learner.attention_probe import parity_text
        from autograder.render.attention_png import token_label

        out: dict[str, Any] = {
            "status": result.status,
            "mode": result.mode,
            "tokens": result.tokens,
            "labels": [token_label(t) for t in result.tokens],
            "messages": self.parts(result.problems),
            "weights": None,
            "leaks": None,
            "fused": None,
        }
        if result.weights is not None:
            w = result.weights
            # 6 significant digits keep a tiny leak non-zero; JSON has no NaN or inf: null.
            out["weights"] = [
                [[float(f"{v:.6g}") if math.isfinite(v) else None for v in row] for row in head] for head in w
            ]
            out["leaks"] = result.leaks.astype(int).tolist()
        if result.fused is not None:
            out["fused"] = {
                "sdpa_called": result.fused.sdpa_called,
                "sdpa_causal": result.fused.sdpa_causal,
                "parity": self.text(parity_text(result.fused)),
            }
        return out

    def png(self, query: dict[str, list[str]]) -> bytes:
        from autograder.render.attention_png import attention_png

        text = (query.get("text") or [None])[0]
        mode = (query.get("mode") or ["explicit"])[0]
        result = self.measure(text, mode)
        if result.weights is None:
            raise Refused(HTTPStatus.UNPROCESSABLE_ENTITY, message("viewer.nothing_to_draw"))
        title = i18n.translate(
            "viewer.png_title", self.lang, text=text, mode=self.text(message(f"viewer.mode_{mode}"))
        )
        return attention_png(result.weights, result.tokens, result.leaks, lang=self.lang, title=title)

    def page(self) -> bytes:
        from autograder.learner import attention_probe
        from autograder.render import attention_png

        settings = {
            "lang": self.lang,
            "strings": {
                key: value for key, value in _catalog(self.lang).items() if key.startswith("viewer.")
            },
            "maxTokens": attention_probe.BLOCK_SIZE,
            "heads": attention_probe.N_HEAD,
            # The numbers the page's explanations quote, so the prose follows the code.
            "facts": {
                "max": attention_probe.BLOCK_SIZE,
                "heads": attention_probe.N_HEAD,
                "char_dims": attention_probe.CHAR_DIMS,
                "n_embd": attention_probe.N_EMBD,
                "hs": attention_probe.HS,
                "seed": attention_probe.WEIGHT_SEED,
            },
            "colors": {
                "stops": attention_png.COLOR_STOPS,
                "masked": attention_png.MASKED_COLOR,
                "leak": attention_png.LEAK_COLOR,
                "nan": attention_png.NAN_COLOR,
                "border": attention_png.BORDER_COLOR,
            },
        }
        # Inside <script type="application/json">: "</" must not end the element early.
        blob = json.dumps(settings, ensure_ascii=False).replace("</", "<\\/")
        html = (STATIC / "index.html").read_text(encoding="utf-8")
        return html.replace("{{lang}}", self.lang).replace("{{settings}}", blob).encode("utf-8")

    def text(self, text: Text) -> str:
        return i18n.localize(text, self.lang)

    def parts(self, feedback: Feedback) -> list[dict]:
        # As `autograder grade` does: a learner's message never echoes a secret of this process.
        secrets = secrets_from_environ(os.environ)
        return [
            {"kind": kind, "text": redact(text, secrets)}
            for kind, text in i18n.render_parts(feedback, self.lang)
        ]


def _catalog(lang: str) -> dict[str, str]:
    return {**i18n.catalog(i18n.DEFAULT_LANGUAGE), **i18n.catalog(lang)}


# ---------------------------------------------------------------- HTTP


class ViewerServer(ThreadingHTTPServer):
    daemon_threads = True
    # Restarting the viewer must not wait for the old connections' TIME_WAIT. On Linux and macOS
    # SO_REUSEADDR allows that and still refuses a port someone is listening on. On Windows it
    # would let a second socket bind a port in use (and take its connections), and it is not
    # needed there (a bind succeeds past TIME_WAIT), so a second viewer fails to bind instead;
    # socket.create_server makes the same choice. Not SO_EXCLUSIVEADDRUSE either: it would refuse
    # the restart while the browser's last connections linger, and Windows already keeps other
    # users from taking a port that is in use.
    allow_reuse_address = os.name != "nt"

    def __init__(self, address: tuple[str, int], app: ViewerApp) -> None:
        self.app = app
        super().__init__(address, ViewerHandler)


def allowed_peer(host: str) -> bool:
    """Whether a connection's peer address is this machine."""
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1 on a dual-stack socket
    return (mapped or address).is_loopback


def host_name(header: str) -> str:
    """The name in a Host header ("localhost:8765" -> "localhost", "[::1]:8765" -> "::1")."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def local_names(port: int, environ=os.environ) -> frozenset[str]:
    """The host names that mean this machine: loopback, and a Codespace's forwarded address."""
    names = set(LOCAL_HOSTS)
    codespace, domain = environ.get("CODESPACE_NAME"), environ.get("GITHUB_CODESPACES_PORT_FORWARDING_DOMAIN")
    if codespace and domain:
        names.add(f"{codespace}-{port}.{domain}".lower())
    return frozenset(names)


class ViewerHandler(BaseHTTPRequestHandler):
    server: ViewerServer
    server_version = "autograder-viewer"
    sys_version = ""

    # ------------------------------------------------------------ guards
    def _guard(self) -> None:
        """Refuse anything that does not come from this machine (see the module docstring)."""
        peer = self.client_address[0]
        if not allowed_peer(peer):
            raise Refused(HTTPStatus.FORBIDDEN, message("viewer.refused_peer", peer=peer))
        names = local_names(self.server.server_address[1])
        host = self.headers.get("Host")
        if host is None or host_name(host).rstrip(".") not in names:
            raise Refused(HTTPStatus.FORBIDDEN, message("viewer.refused_host", host=host or "—"))
        origin = self.headers.get("Origin")
        if origin and (origin.strip().lower() == "null" or host_name(urlsplit(origin).netloc) not in names):
            raise Refused(HTTPStatus.FORBIDDEN, message("viewer.refused_origin", origin=origin))
        if self.headers.get("Sec-Fetch-Site", "").lower() == "cross-site":
            raise Refused(HTTPStatus.FORBIDDEN, message("viewer.refused_origin", origin=origin or "—"))

    def _body(self) -> Any:
        length_header = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding") or length_header is None:
            raise Refused(HTTPStatus.LENGTH_REQUIRED, message("viewer.length_required"))
        try:
            length = int(length_header)
        except ValueError:
            raise Refused(HTTPStatus.BAD_REQUEST, message("viewer.bad_request")) from None
        if length > MAX_BODY_BYTES:
            self._drain(length)
            raise Refused(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                message("viewer.body_too_large", size=length, max=MAX_BODY_BYTES),
            )
        content_type = self.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
        body = self.rfile.read(length) if length > 0 else b""
        if content_type != "application/json":
            raise Refused(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, message("viewer.json_required"))
        try:
            return json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise Refused(HTTPStatus.BAD_REQUEST, message("viewer.bad_request")) from None

    def _drain(self, length: int) -> None:
        """Read a refused body (up to DRAIN_LIMIT) so the client sees our answer, not a reset."""
        remaining = min(length, DRAIN_LIMIT)
        while remaining > 0:
            chunk = self.rfile.read(min(remaining, 65536))
            if not chunk:
                break
            remaining -= len(chunk)

    # ------------------------------------------------------------ routes
    def do_GET(self) -> None:
        self._handle(self._get)

    def do_POST(self) -> None:
        self._handle(self._post)

    def _handle(self, route) -> None:
        app = self.server.app
        try:
            self._guard()
            route(urlsplit(self.path))
        except Refused as refused:
            if refused.status is HTTPStatus.FORBIDDEN:
                self.log_message("%s", app.text(refused.text))
            self._refuse(refused.status, refused.text)
        except Exception:  # ours, not the learner's (their errors are measured, not raised)
            import traceback

            self.log_message("%s", traceback.format_exc())
            self._refuse(HTTPStatus.INTERNAL_SERVER_ERROR, message("viewer.internal_error"))

    def _refuse(self, status: HTTPStatus, text: Text) -> None:
        """The message in the page's JSON shape for the API, as plain text elsewhere."""
        shown = self.server.app.text(text)
        if urlsplit(self.path).path.startswith("/api/"):
            # "invalid": the sentence cannot be measured (the learner fixes it); "refused": the
            # request itself is not acceptable.
            kind = "invalid" if status is HTTPStatus.UNPROCESSABLE_ENTITY else "refused"
            body = {"status": kind, "messages": [{"kind": "text", "text": shown}]}
            self._send(status, json.dumps(body, ensure_ascii=False).encode("utf-8"), "application/json")
        else:
            self._send(status, (shown + "\n").encode("utf-8"), "text/plain; charset=utf-8")

    def _get(self, url) -> None:
        app = self.server.app
        if url.path == "/":
            self._send(HTTPStatus.OK, app.page(), "text/html; charset=utf-8")
        elif url.path.startswith("/static/") and url.path[len("/static/") :] in STATIC_FILES:
            name = url.path[len("/static/") :]
            self._send(HTTPStatus.OK, (STATIC / name).read_bytes(), STATIC_FILES[name])
        elif url.path == "/favicon.ico":
            self._send(HTTPStatus.NO_CONTENT, b"", "image/x-icon")
        elif url.path == "/export.png":
            png = app.png(parse_qs(url.query, keep_blank_values=True))
            self._send(HTTPStatus.OK, png, "image/png", download="atencion.png")
        else:
            raise Refused(HTTPStatus.NOT_FOUND, message("viewer.not_found", path=url.path[:200]))

    def _post(self, url) -> None:
        if url.path != "/api/attention":
            raise Refused(HTTPStatus.NOT_FOUND, message("viewer.not_found", path=url.path[:200]))
        answer = self.server.app.attention_json(self._body())
        self._send(HTTPStatus.OK, json.dumps(answer, ensure_ascii=False).encode("utf-8"), "application/json")

    def _send(self, status: HTTPStatus, body: bytes, content_type: str, download: str | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("Referrer-Policy", "no-referrer")
        if download:
            self.send_header("Content-Disposition", f'inline; filename="{download}"')
        self.end_headers()
        self.wfile.write(body)

    def log_request(self, code: Any = "-", size: Any = "-") -> None:
        pass  # a line per request would bury the learner's terminal; refusals and errors are logged

    def log_message(self, format: str, *args: Any) -> None:
        sys.stderr.write(f"autograder viewer: {self.client_address[0]}: {format % args}\n")
