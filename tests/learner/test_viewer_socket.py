"""The attention viewer's listening socket (autograder/learner/viewer.py, ViewerServer): a
restarted viewer gets its port back at once, even after serving a page, and a second viewer
never shares a port that one is listening on. Real sockets on this machine's loopback."""

from __future__ import annotations

import errno
import os
import socket
import threading
from http.server import ThreadingHTTPServer

import pytest
from support.project import ROOT

from autograder.learner.viewer import BIND_ADDRESS, ViewerApp, ViewerHandler, ViewerServer


def _app() -> ViewerApp:
    return ViewerApp(ROOT / "solutions" / "03-atencion-causal", "es", {})


def _serve_one_page(server: ViewerServer) -> None:
    """Serve one request and stop. The client reads until the server has closed the connection
    (HTTP/1.0), so the server closed first and its side waits in TIME_WAIT on the port."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with socket.create_connection((BIND_ADDRESS, server.server_address[1]), timeout=30) as conn:
            conn.sendall(f"GET / HTTP/1.0\r\nHost: {BIND_ADDRESS}\r\n\r\n".encode())
            answer = b""
            while chunk := conn.recv(65536):  # until the server closes its side
                answer += chunk
        assert answer.startswith(b"HTTP/1.0 200") and b"<html" in answer.lower()
    finally:
        server.shutdown()
        thread.join(timeout=30)
        server.server_close()


class _WithoutReuse(ThreadingHTTPServer):
    allow_reuse_address = False


def test_a_restarted_viewer_gets_its_port_back_at_once():
    first = ViewerServer((BIND_ADDRESS, 0), _app())
    port = first.server_address[1]
    _serve_one_page(first)
    if os.name != "nt":
        # The TIME_WAIT is real: a server without the option cannot bind the port now.
        with pytest.raises(OSError) as caught:
            _WithoutReuse((BIND_ADDRESS, port), ViewerHandler)
        assert caught.value.errno == errno.EADDRINUSE
    again = ViewerServer((BIND_ADDRESS, port), _app())
    try:
        assert again.server_address[1] == port
    finally:
        again.server_close()


def test_a_second_viewer_cannot_bind_a_port_in_use():
    first = ViewerServer((BIND_ADDRESS, 0), _app())
    try:
        with pytest.raises(OSError) as caught:
            ViewerServer((BIND_ADDRESS, first.server_address[1]), _app())
        assert caught.value.errno in (errno.EADDRINUSE, getattr(errno, "WSAEADDRINUSE", errno.EADDRINUSE))
    finally:
        first.server_close()
