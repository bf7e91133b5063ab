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

For the grading service (autograder/service/credentials.py, github_lookup.py, fetch.py), with
GitHub's shapes and codes ("REST API endpoints for workflow runs / repositories / GitHub Apps",
"Generating an installation access token for a GitHub App"):

    GET  /repositories/{id}                  as above, with `default_branch` (add_repo's, "main")
    GET  /repos/{owner}/{repo}/actions/runs/{run_id}
                                             a run added with `add_run`: id, head_sha, event,
                                             created_at, run_attempt, repository {id, full_name},
                                             ...; 404 for another repository's run or none
    GET  /repos/{owner}/{repo}/activity      entries added with `add_activity` (id, before,
                                             after, ref, timestamp, activity_type, actor), newest
                                             first; filters ref (refs/heads/X or X),
                                             activity_type, direction, per_page (max 100), with a
                                             cursor `after` in the Link header's next page
    POST /app/installations/{id}/access_tokens
                                             Authorization: Bearer <App JWT>, checked as GitHub
                                             does: RS256 against the public key `add_app`
                                             registered for the App the JWT's `iss` names, exp in
                                             the future and at most 10 minutes ahead, iat not
                                             ahead (401 with GitHub's messages); 404 for an
                                             installation not of that App; 201 {token, expires_at,
                                             permissions, repository_selection}. The token then
                                             works as `token` does, until `expires_at`
                                             (`installation_token_s` after it was made: 3600)

    POST /repos/{owner}/{repo}/check-runs  with an installation token only (403 otherwise),
                                             validated as GitHub does (route_check_runs); kept
                                             in `check_runs`

and git's smart HTTP protocol for the repositories below `git_root` (bare repositories named
OWNER/NAME.git), at {url}/git/OWNER/NAME.git, served by `git http-backend` (protocol v2 too,
uploadpack.allowAnySHA1InWant on, so a commit is fetched by sha as from GitHub). It asks for
`Authorization: Basic base64(x-access-token:TOKEN)` (`token` or an installation token), and
answers 401 with a Basic challenge without it. `git_requests` records each request (method,
path, whether its credential was good); `on_git_request`, when set, is called with the request's
path while the git client waits for the answer (a test can look at the client's processes then).
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import subprocess
import threading
import time
import urllib.parse
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

import jwt

TOKEN = "ghs_TESTtoken0123456789abcdefSECRET"
REPO = "curso/transformers"
CHECK_RUNS = re.compile(r"/repos/([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)/check-runs")
CONCLUSIONS = (
    "action_required",
    "cancelled",
    "failure",
    "neutral",
    "success",
    "skipped",
    "stale",
    "timed_out",
)
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
        # the grading service: Apps, installations and their tokens, runs, activity, git over HTTP
        self.apps: dict[str, Any] = {}  # App id -> its public key
        self.installations: dict[int, str] = {}  # installation id -> App id
        self.installation_tokens: dict[str, float] = {}  # token -> when it expires (Unix time)
        self.installation_token_s = 3600
        self.runs: dict[int, dict] = {}
        self.activity: dict[int, list[dict]] = {}  # repository id -> entries, newest first
        self.git_root: Path | None = None
        self.git_requests: list[dict] = []
        self.on_git_request: Callable[[str], None] | None = None
        # check runs (the service's official verdicts): what was created, and when
        self.check_runs: list[dict] = []

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
        if self.git_root is not None and split.path.startswith("/git/"):
            return self.serve_git(h, method, split, raw)
        with self.lock:
            self.requests.append((method, h.path, h.headers))
            body = json.loads(raw) if raw else None
            self.log.append(
                {"method": method, "path": split.path, "body": body, "time": time.time(), "status": None}
            )
            app = split.path.startswith("/app/")  # authenticated by the App's JWT instead
            if (
                not app
                and h.headers.get("Authorization") != f"Bearer {self.token}"
                and not self.installation_token(h)
            ):
                return self.send(h, 401, {"message": "Bad credentials"})
            if self.failing_after is not None:
                if self.failing_after <= 0:
                    return self.send(h, 500, {"message": "Server Error"})
                self.failing_after -= 1
            if self.armed:
                status, data, headers = self.armed.pop(0)
                return self.send(h, status, data, headers)
            if app:
                return self.route_app(h, method, split.path)
            if m := CHECK_RUNS.fullmatch(split.path):
                return self.route_check_runs(h, method, m.group(1), body)
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
        self,
        full_name: str,
        *,
        private: bool = True,
        is_template: bool = False,
        template: dict | None = None,
        default_branch: str = "main",
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
            "default_branch": default_branch,
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
        if (m := re.fullmatch(r"/actions/runs/(\d+)", rest)) and method == "GET":
            run = self.runs.get(int(m.group(1)))
            if run is None or run["repository"]["id"] != repo["id"]:
                return self.not_found(h)
            return self.send(h, 200, run)
        if rest == "/activity" and method == "GET":
            return self.activity_page(h, repo, query)
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

    def route_check_runs(self, h, method, full_name, body):
        """POST /repos/{owner}/{repo}/check-runs as GitHub validates it: only a GitHub App may
        create check runs (403 for any other token), name and a 40-hex head_sha required, a
        completed run needs a conclusion from GitHub's list, output needs title and summary
        (summary at most 65535 characters). 201 with the run; `check_runs` keeps each one with
        the Unix time it was created."""
        if method != "POST":
            return self.not_found(h)
        if not self.installation_token(h):
            return self.send(h, 403, {"message": "You must authenticate via a GitHub App."})
        body = body if isinstance(body, dict) else {}
        if not body.get("name"):
            return self.invalid(h, "name wasn't supplied")
        if not re.fullmatch(r"[0-9a-f]{40}", str(body.get("head_sha") or "")):
            return self.invalid(h, "head_sha wasn't supplied or is not a commit")
        if body.get("status", "queued") not in ("queued", "in_progress", "completed"):
            return self.invalid(h, "status is not included in the list")
        if body.get("status") == "completed" and body.get("conclusion") not in CONCLUSIONS:
            return self.invalid(h, "conclusion is not included in the list")
        output = body.get("output")
        if output is not None:
            if not isinstance(output, dict) or not output.get("title") or not output.get("summary"):
                return self.invalid(h, "output needs a title and a summary")
            if len(output["summary"]) > 65535:
                return self.invalid(h, "summary is too long (maximum is 65535 characters)")
        self.next_id += 1
        run = {
            **body,
            "id": self.next_id,
            "repository": full_name,
            "created": time.time(),
            "html_url": f"https://github.example/{full_name}/runs/{self.next_id}",
        }
        self.check_runs.append(run)
        return self.send(h, 201, {k: v for k, v in run.items() if k != "created"})

    def count(self, method: str | None = None) -> int:
        return sum(1 for m, _, _ in self.requests if method in (None, m))

    # --- the grading service: Apps, runs, activity, git over HTTP ----------------------------

    def add_app(self, app_id: str | int, public_key: Any, installation_id: int) -> None:
        """A GitHub App (its JWTs verified with `public_key`) installed as `installation_id`."""
        self.apps[str(app_id)] = public_key
        self.installations[int(installation_id)] = str(app_id)

    def installation_token(self, h) -> str | None:
        """The live installation token the request's Authorization header carries, if any."""
        auth = h.headers.get("Authorization") or ""
        scheme, _, token = auth.partition(" ")
        if scheme.lower() in ("bearer", "token") and self.installation_tokens.get(token, 0) > time.time():
            return token
        return None

    def route_app(self, h, method, path):
        m = re.fullmatch(r"/app/installations/(\d+)/access_tokens", path)
        if m is None or method != "POST":
            return self.not_found(h)
        scheme, _, token = (h.headers.get("Authorization") or "").partition(" ")
        undecodable = {
            "message": "A JSON web token could not be decoded",
            "documentation_url": "https://docs.github.com/rest",
        }
        if scheme.lower() != "bearer":
            return self.send(h, 401, undecodable)
        try:
            issuer = str(jwt.decode(token, options={"verify_signature": False}).get("iss"))
            key = self.apps.get(issuer)
            if key is None:
                return self.send(h, 401, {"message": "Integration not found", "documentation_url": ""})
            claims = jwt.decode(
                token,
                key,
                algorithms=["RS256"],
                options={"require": ["iat", "exp", "iss"], "verify_exp": False, "verify_iat": False},
            )
        except jwt.PyJWTError:
            return self.send(h, 401, undecodable)
        now = time.time()
        if not isinstance(claims["exp"], (int, float)) or claims["exp"] <= now:
            return self.send(
                h,
                401,
                {
                    "message": "'Expiration time' claim ('exp') must be a numeric value representing "
                    "the future time at which the assertion expires",
                },
            )
        if claims["exp"] > now + 600:
            return self.send(h, 401, {"message": "'Expiration time' claim ('exp') is too far in the future"})
        if not isinstance(claims["iat"], (int, float)) or claims["iat"] > now + 1:
            return self.send(
                h,
                401,
                {
                    "message": "'Issued at' claim ('iat') must be an Integer representing the time "
                    "that the assertion was issued",
                },
            )
        if self.installations.get(int(m.group(1))) != issuer:
            return self.not_found(h)
        token = "ghs_" + secrets.token_urlsafe(27)
        expires = now + self.installation_token_s
        self.installation_tokens[token] = expires
        return self.send(
            h,
            201,
            {
                "token": token,
                "expires_at": iso(expires),
                "permissions": {"actions": "read", "contents": "read", "metadata": "read"},
                "repository_selection": "all",
            },
        )

    def add_run(
        self,
        full_name: str,
        *,
        head_sha: str,
        created_at: float | datetime | str,
        run_id: int | None = None,
        event: str = "push",
        head_branch: str = "main",
        run_attempt: int = 1,
    ) -> dict:
        """A workflow run of `full_name` (a repository added with add_repo), shaped as GitHub's."""
        repo = self.repo(full_name)
        self.next_id += 1
        run_id = run_id or self.next_id
        created = iso(created_at)
        run = {
            "id": run_id,
            "name": "grade",
            "node_id": f"WFR_{run_id}",
            "check_suite_id": run_id + 1,
            "head_branch": head_branch,
            "head_sha": head_sha,
            "path": ".github/workflows/grade.yml",
            "run_number": len(self.runs) + 1,
            "event": event,
            "display_title": "entrega",
            "status": "completed",
            "conclusion": "success",
            "workflow_id": 161335,
            "url": f"{self.base}/repos/{repo['full_name']}/actions/runs/{run_id}",
            "html_url": f"https://github.example/{repo['full_name']}/actions/runs/{run_id}",
            "created_at": created,
            "updated_at": created,
            "run_attempt": run_attempt,
            "run_started_at": created,
            "actor": {"login": "alumna", "type": "User"},
            "repository": {"id": repo["id"], "name": repo["name"], "full_name": repo["full_name"]},
            "head_repository": {"id": repo["id"], "name": repo["name"], "full_name": repo["full_name"]},
        }
        self.runs[run_id] = run
        return run

    def add_activity(
        self,
        full_name: str,
        *,
        after: str,
        timestamp: float | datetime | str,
        activity_type: str = "push",
        ref: str = "refs/heads/main",
        before: str = "0" * 40,
        actor: str = "alumna",
    ) -> dict:
        """One entry of `full_name`'s activity (the newest so far), shaped as GitHub's."""
        repo = self.repo(full_name)
        self.next_id += 1
        entry = {
            "id": self.next_id,
            "node_id": f"RA_{self.next_id}",
            "before": before,
            "after": after,
            "ref": ref,
            "timestamp": iso(timestamp),
            "activity_type": activity_type,
            "actor": {"login": actor, "id": abs(hash(actor)) % 10**8, "type": "User"},
        }
        self.activity.setdefault(repo["id"], []).insert(0, entry)
        return entry

    def activity_page(self, h, repo, query):
        entries = list(self.activity.get(repo["id"], []))
        if query.get("ref"):
            ref = query["ref"] if query["ref"].startswith("refs/") else f"refs/heads/{query['ref']}"
            entries = [e for e in entries if e["ref"] == ref]
        if query.get("activity_type"):
            entries = [e for e in entries if e["activity_type"] == query["activity_type"]]
        if query.get("direction") == "asc":
            entries.reverse()
        per_page = min(int(query.get("per_page", 30)), 100)
        start = int(query.get("after", 0))
        chunk = entries[start : start + per_page]
        headers = {}
        if start + per_page < len(entries):
            rest = {k: v for k, v in query.items() if k != "after"}
            rest["after"] = str(start + per_page)
            path = f"/repos/{repo['full_name']}/activity"
            headers["Link"] = f'<{self.base}{path}?{urllib.parse.urlencode(rest)}>; rel="next"'
        return self.send(h, 200, chunk, headers)

    def serve_git(self, h, method, split, raw):
        """git's smart HTTP protocol through `git http-backend` (a CGI program)."""
        scheme, _, encoded = (h.headers.get("Authorization") or "").partition(" ")
        try:
            user, _, password = base64.b64decode(encoded).decode().partition(":")
        except ValueError:
            user = password = ""
        good = scheme.lower() == "basic" and (
            password == self.token or self.installation_tokens.get(password, 0) > time.time()
        )
        with self.lock:
            self.git_requests.append({"method": method, "path": split.path, "authorized": good})
        if not good:
            body = b"Authentication required\n"
            h.send_response(401)
            h.send_header("WWW-Authenticate", 'Basic realm="GitHub"')
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body)
            return
        if self.on_git_request is not None:
            self.on_git_request(split.path)
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "GIT_PROJECT_ROOT": str(self.git_root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "uploadpack.allowAnySHA1InWant",
            "GIT_CONFIG_VALUE_0": "true",
            "REQUEST_METHOD": method,
            "PATH_INFO": split.path[len("/git") :],
            "QUERY_STRING": split.query,
            "CONTENT_TYPE": h.headers.get("Content-Type") or "",
            "CONTENT_LENGTH": str(len(raw)),
            "REMOTE_USER": user,
            "REMOTE_ADDR": "127.0.0.1",
        }
        for header, variable in (
            ("Git-Protocol", "GIT_PROTOCOL"),
            ("Content-Encoding", "HTTP_CONTENT_ENCODING"),
        ):
            if h.headers.get(header):
                env[variable] = h.headers[header]
        proc = subprocess.run(["git", "http-backend"], input=raw, env=env, capture_output=True)
        ends = [end for end in (b"\r\n\r\n", b"\n\n") if end in proc.stdout]
        head, _, body = proc.stdout.partition(min(ends, key=proc.stdout.index) if ends else b"\n\n")
        status, headers = 200, []
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name, value.strip()))
        h.send_response(status)
        for name, value in headers:
            h.send_header(name, value)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)


def iso(when: float | datetime | str) -> str:
    """GitHub's timestamp format, 2024-05-01T10:00:00Z, for Unix seconds or an aware datetime."""
    if isinstance(when, str):
        return when
    if isinstance(when, datetime):
        when = when.timestamp()
    return datetime.fromtimestamp(int(when), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
