"""A stand-in for the few GitHub REST endpoints the workflows call, served over real HTTP on
127.0.0.1, so autograder.github's real client code runs in the tests: commit and issue
comments (listed in pages with Link headers, created, updated), commit statuses, and pull
requests. State lives in plain lists and dicts that the tests inspect."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PAGE_SIZE = 2  # small, so that a handful of comments already spans several pages


class FakeGitHub:
    def __init__(self, repository: str = "learner/curso", token: str = "test-token-0123456789") -> None:
        self.repository, self.token = repository, token
        self.comments: list[dict[str, Any]] = []  # each: id, kind, target, body, user
        self.statuses: list[dict[str, Any]] = []
        self.pulls: dict[int, dict[str, Any]] = {}
        self.requests: list[tuple[str, str]] = []
        self._next_id = 100
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> "FakeGitHub":
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def add_comment(self, kind: str, target: str, body: str, user_type: str = "Bot") -> dict:
        with self._lock:
            self._next_id += 1
            comment = {"id": self._next_id, "kind": kind, "target": str(target), "body": body,
                       "user": {"login": "github-actions[bot]" if user_type == "Bot" else "learner",
                                "type": user_type}}
            self.comments.append(comment)
            return comment

    def comments_on(self, kind: str, target: str) -> list[dict]:
        return [c for c in self.comments if c["kind"] == kind and c["target"] == str(target)]

    # ------------------------------------------------------------------ HTTP
    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _reply(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> Any:
                length = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(length) or b"null")

            def _route(self, method: str) -> None:
                fake.requests.append((method, self.path))
                if self.headers.get("Authorization") != f"Bearer {fake.token}":
                    return self._reply(401, {"message": "Bad credentials"})
                path, _, query = self.path.partition("?")
                prefix = f"/repos/{fake.repository}"
                if not path.startswith(prefix):
                    return self._reply(404, {"message": "Not Found"})
                rest = path[len(prefix):]
                page = int(dict(p.split("=", 1) for p in query.split("&") if "=" in p).get("page", 1))
                if m := re.fullmatch(r"/(commits|issues)/(\w+)/comments", rest):
                    kind = "commit" if m.group(1) == "commits" else "issue"
                    if method == "GET":
                        items = fake.comments_on(kind, m.group(2))
                        chunk = items[(page - 1) * PAGE_SIZE: page * PAGE_SIZE]
                        headers = {}
                        if page * PAGE_SIZE < len(items):
                            headers["Link"] = f'<{fake.url}{path}?page={page + 1}>; rel="next"'
                        return self._reply(200, [_public(c) for c in chunk], headers)
                    comment = fake.add_comment(kind, m.group(2), self._body()["body"])
                    return self._reply(201, _public(comment))
                if m := re.fullmatch(r"/(issues/)?comments/(\d+)", rest):
                    kind = "issue" if m.group(1) else "commit"
                    for comment in fake.comments:
                        if comment["id"] == int(m.group(2)) and comment["kind"] == kind and method == "PATCH":
                            comment["body"] = self._body()["body"]
                            return self._reply(200, _public(comment))
                    return self._reply(404, {"message": "Not Found"})
                if m := re.fullmatch(r"/statuses/([0-9a-f]{40})", rest):
                    status = {"sha": m.group(1), **self._body()}
                    fake.statuses.append(status)
                    return self._reply(201, status)
                if m := re.fullmatch(r"/pulls/(\d+)", rest):
                    pull = fake.pulls.get(int(m.group(1)))
                    return self._reply(200, pull) if pull else self._reply(404, {"message": "Not Found"})
                return self._reply(404, {"message": "Not Found"})

            def do_GET(self) -> None:
                self._route("GET")

            def do_POST(self) -> None:
                self._route("POST")

            def do_PATCH(self) -> None:
                self._route("PATCH")

        return Handler


def _public(comment: dict) -> dict:
    return {"id": comment["id"], "body": comment["body"], "user": comment["user"],
            "html_url": f"https://github.example/comment/{comment['id']}"}
