"""A stand-in for the few GitHub REST endpoints the autograder calls, served over real HTTP on
127.0.0.1 so that autograder.github.rest's real client code runs in the tests: commit and issue
comments (paginated with Link headers, created, updated), commit statuses and pull requests,
with GitHub's validation errors (422) and 401/404 answers. State lives in plain dicts and
lists that the tests inspect.

    with FakeGitHub() as fake:          # fake.url is the API's base URL
        ...

For `autograder handout`, the endpoints it calls, with GitHub's status codes, headers and JSON
shapes ("REST API endpoints for repositories / collaborators / repository invitations"):

    GET  /users/{login}                                   404 for an unknown user
    GET  /repos/{owner}/{repo}, /repositories/{id}        a renamed repository's old name answers
                                                          301 to /repositories/{id}, as GitHub does
    PATCH /repos/{owner}/{repo} {name}                    rename
    POST /repos/{template_owner}/{template_repo}/generate {owner, name, private, ...}
                                                          201; 404 no template; 422 not a template,
                                                          the name taken, an unknown owner
    GET  /repos/{owner}/{repo}/collaborators/{user}/permission   permission and role_name
    PUT  /repos/{owner}/{repo}/collaborators/{user} {permission: pull|triage|push|maintain|admin}
                                                          201 + invitation, 204 for a collaborator
    GET  /repos/{owner}/{repo}/invitations, PATCH .../invitations/{id} {permissions}

Every answer carries x-ratelimit-* headers. Arm rate-limit answers with `arm_secondary` (a 403 or
429 with Retry-After) and `arm_primary` (403, x-ratelimit-remaining 0 and x-ratelimit-reset),
and a broken GitHub with `fail_after` (500 for every request after the next N). `log` records
every request (method, path, JSON body, time, answered status).
"""

from __future__ import annotations

import json
import re
import threading
import time
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
        # handout: users and organizations, repositories by id, rate limits and failures
        self.users: set[str] = set()
        self.orgs: set[str] = set()
        self.repos: dict[int, dict] = {}
        self.moved: dict[str, int] = {}  # a renamed repository's old full name (lower case) -> id
        self.log: list[dict] = []
        self.armed: list[tuple[int, dict, dict]] = []  # answers to give before any other
        self.failing_after: int | None = None
        self.remaining = 5000

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

            def do_PUT(self):
                handle(self, "PUT")

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
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
            body = json.loads(raw) if raw else None
            self.log.append(
                {"method": method, "path": split.path, "body": body, "time": time.time(), "status": None}
            )
            if h.headers.get("Authorization") != f"Bearer {self.token}":
                return self.send(h, 401, {"message": "Bad credentials"})
            if self.failing_after is not None:
                if self.failing_after <= 0:
                    return self.send(h, 500, {"message": "Server Error"})
                self.failing_after -= 1
            if self.armed:
                status, data, headers = self.armed.pop(0)
                return self.send(h, status, data, headers)
            if self.repos or self.users:
                answered = self.route_handout(h, method, split.path, query, body)
                if answered is not NotImplemented:
                    return answered
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
        return self.send(
            h, 404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}
        )

    def invalid(self, h, detail):
        return self.send(
            h,
            422,
            {
                "message": "Validation Failed",
                "errors": [{"resource": "Thing", "code": "custom", "message": detail}],
            },
        )

    def send(self, h, status, data, headers=None):
        raw = b"" if status == 204 else json.dumps(data).encode("utf-8")
        if self.log:
            self.log[-1]["status"] = status
        h.send_response(status)
        if status != 204:
            h.send_header("Content-Type", "application/json; charset=utf-8")
        h.send_header("Content-Length", str(len(raw)))
        self.remaining = max(1, self.remaining - 1)  # an armed answer spends it, never this
        limits = {
            "x-ratelimit-limit": "5000",
            "x-ratelimit-remaining": str(self.remaining),
            "x-ratelimit-reset": str(int(time.time()) + 3600),
            "x-ratelimit-resource": "core",
        }
        for name, value in {**limits, **(headers or {})}.items():
            h.send_header(name, value)
        h.end_headers()
        h.wfile.write(raw)

    # --- handout: users, repositories, collaborators, invitations --------------------------

    def add_user(self, *logins: str) -> None:
        self.users.update(logins)

    def add_org(self, login: str) -> None:
        self.orgs.add(login)

    def add_repo(
        self, full_name: str, *, private: bool = True, is_template: bool = False, template: dict | None = None
    ) -> dict:
        owner, name = full_name.split("/")
        self.next_id += 1
        repo = {
            "id": self.next_id,
            "node_id": f"R_{self.next_id}",
            "name": name,
            "full_name": full_name,
            "owner": {"login": owner, "type": "Organization" if owner in self.orgs else "User"},
            "private": private,
            "visibility": "private" if private else "public",
            "is_template": is_template,
            "template_repository": template,
            "collaborators": {},
            "invitations": [],
        }
        self.repos[repo["id"]] = repo
        return repo

    def repo(self, full_name: str) -> dict | None:
        return next((r for r in self.repos.values() if r["full_name"].lower() == full_name.lower()), None)

    def rename(self, full_name: str, new_name: str) -> dict:
        repo = self.repo(full_name)
        self.moved[full_name.lower()] = repo["id"]
        repo["name"], repo["full_name"] = new_name, f"{repo['owner']['login']}/{new_name}"
        return repo

    def arm_secondary(self, retry_after: int = 1, status: int = 403) -> None:
        """The next request gets a secondary rate limit answer that names its wait."""
        self.armed.append(
            (
                status,
                {
                    "message": "You have exceeded a secondary rate limit. Please wait a few minutes "
                    "before you try again.",
                    "documentation_url": "https://docs.github.com/rest/overview/rate-limits",
                },
                {"Retry-After": str(retry_after)},
            )
        )

    def arm_primary(self, reset_in: int = 1) -> None:
        """The next request finds the hourly limit spent, reset `reset_in` seconds from now."""
        self.armed.append(
            (
                403,
                {
                    "message": "API rate limit exceeded for user ID 1.",
                    "documentation_url": "https://docs.github.com/rest/overview/rate-limits",
                },
                {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(time.time()) + reset_in)},
            )
        )

    def fail_after(self, count: int | None) -> None:
        """Every request after the next `count` answers 500 (None: GitHub works again)."""
        self.failing_after = count

    def mutations(self) -> list[dict]:
        return [entry for entry in self.log if entry["method"] in ("POST", "PUT", "PATCH", "DELETE")]

    def public(self, repo: dict) -> dict:
        shown = {key: value for key, value in repo.items() if key not in ("collaborators", "invitations")}
        shown.update(
            html_url=f"https://github.example/{repo['full_name']}",
            clone_url=f"https://github.example/{repo['full_name']}.git",
            url=f"{self.base}/repos/{repo['full_name']}",
        )
        return shown

    _ROLE_PERMISSION = {
        "admin": "admin",
        "maintain": "write",
        "write": "write",
        "triage": "read",
        "read": "read",
    }
    _PUT_ROLE = {
        "pull": "read",
        "triage": "triage",
        "push": "write",
        "maintain": "maintain",
        "admin": "admin",
    }

    def route_handout(self, h, method, path, query, body):
        if method == "GET" and (m := re.fullmatch(r"/users/([^/]+)", path)):
            login = next((u for u in self.users | self.orgs if u.lower() == m.group(1).lower()), None)
            return (
                self.send(h, 200, {"login": login, "id": abs(hash(login)) % 10**8, "type": "User"})
                if login
                else self.not_found(h)
            )
        if method == "GET" and (m := re.fullmatch(r"/repositories/(\d+)", path)):
            repo = self.repos.get(int(m.group(1)))
            return self.send(h, 200, self.public(repo)) if repo else self.not_found(h)
        if m := re.fullmatch(r"/repos/([^/]+)/([^/]+)(/.*)?", path):
            full, rest = f"{m.group(1)}/{m.group(2)}", m.group(3) or ""
            repo = self.repo(full)
            if repo is None and full.lower() in self.moved:
                moved = self.moved[full.lower()]
                host = "http://evil.example:9" if self.foreign_next else self.base
                return self.send(
                    h,
                    301,
                    {"message": "Moved Permanently", "url": f"{host}/repositories/{moved}"},
                    {"Location": f"{host}/repositories/{moved}{rest}"},
                )
            if rest == "/generate" and method == "POST":
                return self.generate(h, repo, body or {})
            if repo is None:
                return (
                    NotImplemented
                    if rest.startswith(("/commits", "/issues", "/statuses", "/pulls", "/comments"))
                    else self.not_found(h)
                )
            return self.repo_route(h, method, repo, rest, query, body or {})
        return NotImplemented

    def generate(self, h, template, body):
        if template is None:
            return self.not_found(h)
        if not template["is_template"]:
            return self.invalid(h, f"{template['full_name']} is not a template repository")
        owner, name = body.get("owner"), body.get("name")
        if owner not in self.orgs and owner not in self.users:
            return self.invalid(h, f"Could not resolve to an owner with the login of '{owner}'")
        if not name or self.repo(f"{owner}/{name}") is not None:
            return self.invalid(h, "Name already exists on this account")
        repo = self.add_repo(
            f"{owner}/{name}",
            private=bool(body.get("private")),
            template={"id": template["id"], "full_name": template["full_name"]},
        )
        return self.send(h, 201, self.public(repo))

    def repo_route(self, h, method, repo, rest, query, body):
        if rest == "" and method == "GET":
            return self.send(h, 200, self.public(repo))
        if rest == "" and method == "PATCH":
            if body.get("name"):
                self.rename(repo["full_name"], body["name"])
            return self.send(h, 200, self.public(repo))
        if m := re.fullmatch(r"/collaborators/([^/]+)/permission", rest):
            if method != "GET":
                return self.not_found(h)
            user = self.known(m.group(1))
            if user is None:
                return self.not_found(h)
            role = repo["collaborators"].get(user)
            return self.send(
                h,
                200,
                {
                    "permission": self._ROLE_PERMISSION.get(role, "none"),
                    "role_name": role or "none",
                    "user": {"login": user},
                },
            )
        if (m := re.fullmatch(r"/collaborators/([^/]+)", rest)) and method == "PUT":
            user = self.known(m.group(1))
            if user is None:
                return self.not_found(h)
            role = self._PUT_ROLE.get(body.get("permission", "push"))
            if role is None:
                return self.invalid(h, "permission is not included in the list")
            if user in repo["collaborators"]:
                repo["collaborators"][user] = role
                return self.send(h, 204, None)
            invitation = next((i for i in repo["invitations"] if i["invitee"]["login"] == user), None)
            if invitation is None:
                self.next_id += 1
                invitation = {
                    "id": self.next_id,
                    "invitee": {"login": user},
                    "inviter": BOT,
                    "repository": {"id": repo["id"], "full_name": repo["full_name"]},
                }
                repo["invitations"].append(invitation)
            invitation["permissions"] = role
            return self.send(h, 201, invitation)
        if rest == "/invitations" and method == "GET":
            return self.page(h, f"/repos/{repo['full_name']}/invitations", query, repo["invitations"])
        if (m := re.fullmatch(r"/invitations/(\d+)", rest)) and method == "PATCH":
            invitation = next((i for i in repo["invitations"] if i["id"] == int(m.group(1))), None)
            if invitation is None:
                return self.not_found(h)
            if body.get("permissions") not in ("read", "triage", "write", "maintain", "admin"):
                return self.invalid(h, "permissions is not included in the list")
            invitation["permissions"] = body["permissions"]
            return self.send(h, 200, invitation)
        return NotImplemented

    def known(self, login: str) -> str | None:
        return next((u for u in self.users if u.lower() == login.lower()), None)

    def accept(self, full_name: str, login: str) -> None:
        """The learner accepts their invitation: a collaborator with its role."""
        repo = self.repo(full_name)
        invitation = next(i for i in repo["invitations"] if i["invitee"]["login"] == login)
        repo["invitations"].remove(invitation)
        repo["collaborators"][login] = invitation["permissions"]

    def count(self, method: str | None = None) -> int:
        return sum(1 for m, _, _ in self.requests if method in (None, m))
