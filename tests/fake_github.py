"""A stand-in for the few GitHub REST endpoints the autograder calls, served over real HTTP on
127.0.0.1 so that autograder.github.api's real client code runs in the tests: commit and issue
comments (paginated with Link headers, created, updated), commit statuses and pull requests,
with GitHub's validation errors (422) and 401/404 answers. State lives in plain dicts and
lists that the tests inspect.

    with FakeGitHub() as fake:          # fake.url is the API's base URL
        ...
"""

from __future__ import annotations

import json
import re
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOKEN = "ghs_TESTtoken0123456789abcdefSECRET"
REPO = "curso/transformers"
HEAD_SHA = "fedcba9876543210fedcba9876543210fedcba98"
BOT = {"login": "github-actions[bot]", "type": "Bot"}


class FakeGitHub:
    def __init__(self, repository: str = REPO, token: str = TOKEN, page_size: int = 2):
        self.repository, self.token = repository, token
        self.page_size = page_size
        self.comments: dict[tuple[str, str], list[dict]] = {}
        self.statuses: list[dict] = []
        self.issues = {7}  # pull request #7 exists
        self.pulls = {7: {"number": 7, "head": {"sha": HEAD_SHA}}}
        self.requests: list[tuple[str, str, Any]] = []
        self.next_id = 1000
        self.foreign_next = False
        self.lock = threading.Lock()
        self.base = ""

    def add_comment(self, kind: str, target: str, body: str, user: dict) -> dict:
        self.next_id += 1
        comment = {
            "id": self.next_id,
            "body": body,
            "user": dict(user),
            "html_url": f"https://github.example/{self.repository}/{kind}/{target}#comment-{self.next_id}",
            "url": f"{self.base}/repos/{self.repository}/comments/{self.next_id}",
        }
        self.comments.setdefault((kind, str(target)), []).append(comment)
        return comment

    def all_comments(self) -> list[dict]:
        return [c for thread in self.comments.values() for c in thread]

    def comments_on(self, kind: str, target: str) -> list[dict]:
        return list(self.comments.get((kind, str(target)), []))

    @property
    def url(self) -> str:
        return self.base

    def __enter__(self) -> "FakeGitHub":
        handle = self.handle

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                handle(self, "GET")

            def do_POST(self):
                handle(self, "POST")

            def do_PATCH(self):
                handle(self, "PATCH")

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        split = urllib.parse.urlsplit(h.path)
        query = dict(urllib.parse.parse_qsl(split.query))
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        with self.lock:
            self.requests.append((method, h.path, h.headers))
            if h.headers.get("Authorization") != f"Bearer {self.token}":
                return self.send(h, 401, {"message": "Bad credentials"})
            body = json.loads(raw) if raw else None
            return self.route(h, method, split.path, query, body)

    def route(self, h, method, path, query, body):
        repo = f"/repos/{self.repository}"
        if m := re.fullmatch(rf"{repo}/commits/([0-9a-f]{{40}})/comments", path):
            key = ("commit", m.group(1))
        elif m := re.fullmatch(rf"{repo}/issues/(\d+)/comments", path):
            if int(m.group(1)) not in self.issues and int(m.group(1)) not in self.pulls:
                return self.not_found(h)
            key = ("issue", m.group(1))
        else:
            key = None
        if key is not None and method == "GET":
            return self.page(h, path, query, self.comments.get(key, []))
        if key is not None and method == "POST":
            if len(body.get("body", "")) > 65536:
                return self.invalid(h, "Body is too long (maximum is 65536 characters)")
            return self.send(h, 201, self.add_comment(key[0], key[1], body["body"], BOT))
        if method == "PATCH" and (m := re.fullmatch(rf"{repo}/(issues/)?comments/(\d+)", path)):
            kind = "issue" if m.group(1) else "commit"
            for (k, _), thread in self.comments.items():
                for comment in thread:
                    if k == kind and comment["id"] == int(m.group(2)):
                        comment["body"] = body["body"]
                        return self.send(h, 200, comment)
            return self.not_found(h)
        if method == "POST" and (m := re.fullmatch(rf"{repo}/statuses/([0-9a-f]{{40}})", path)):
            if body.get("state") not in ("error", "failure", "pending", "success"):
                return self.invalid(h, "state is not included in the list")
            if len(body.get("description") or "") > 140:
                return self.invalid(h, "description is too long (maximum is 140 characters)")
            status = {**body, "sha": m.group(1), "url": f"{self.base}{path}"}
            self.statuses.append(status)
            return self.send(h, 201, status)
        if method == "GET" and (m := re.fullmatch(rf"{repo}/pulls/(\d+)", path)):
            pull = self.pulls.get(int(m.group(1)))
            return self.send(h, 200, pull) if pull else self.not_found(h)
        return self.not_found(h)

    def page(self, h, path, query, items):
        per_page = min(int(query.get("per_page", 30)), self.page_size)
        page = int(query.get("page", 1))
        chunk = items[(page - 1) * per_page : page * per_page]
        links = []
        if page * per_page < len(items):
            host = "http://evil.example:9" if self.foreign_next else self.base
            links.append(f'<{host}{path}?per_page={per_page}&page={page + 1}>; rel="next"')
            last = (len(items) + per_page - 1) // per_page
            links.append(f'<{self.base}{path}?per_page={per_page}&page={last}>; rel="last"')
        return self.send(h, 200, chunk, {"Link": ", ".join(links)} if links else {})

    def not_found(self, h):
        return self.send(h, 404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"})

    def invalid(self, h, detail):
        return self.send(h, 422, {"message": "Validation Failed",
                                  "errors": [{"resource": "Thing", "code": "custom", "message": detail}]})

    def send(self, h, status, data, headers=None):
        raw = json.dumps(data).encode("utf-8")
        h.send_response(status)
        h.send_header("Content-Type", "application/json; charset=utf-8")
        h.send_header("Content-Length", str(len(raw)))
        for name, value in (headers or {}).items():
            h.send_header(name, value)
        h.end_headers()
        h.wfile.write(raw)

    def count(self, method: str | None = None) -> int:
        return sum(1 for m, _, _ in self.requests if method in (None, m))
