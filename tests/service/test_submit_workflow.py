"""The learner's side of the grading service: the released grade.yml's `submit` job, run locally.

The job's `run:` steps run in order (support.workflow_runner) in a workspace laid out exactly as
its sparse checkout leaves it (copied from a real learner release, `autograder release`), with
`python3` started without site-packages (-S -E): what runs is the release's own
autograder/github/submit.py, on the standard library alone, as on a hosted runner with no
install. GitHub's OIDC token request endpoint is a stand-in on 127.0.0.1 (support.token_endpoint)
minting with a real local issuer (support.oidc_issuer.LocalIssuer: RSA keys, JWKS over HTTP).

Two services answer the job: a small real HTTP server speaking the service's API
(POST /submissions, GET /submissions/<key>), which verifies every token with the service's own
checks (autograder.service.tokens, claims) and answers what each test scripts (a verdict after a
few polls, a refusal, a 429, a 5xx, a redirect, a page that never finishes); and, at the end,
the real `autograder serve` (started once for the module) grading a real learner repository.

What is not exercised here: GitHub's real token endpoint and issuer, the hosted runner, and the
`actions/checkout` action (its sparse checkout is reproduced by the test, cone mode).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
import pytest
import yaml
from support.fake_github import TOKEN, FakeGitHub
from support.grading import grade_folder, write_submission
from support.local_http import JSONHandler, serve, stop
from support.oidc_issuer import LocalIssuer
from support.project import ROOT
from support.token_endpoint import TokenEndpoint
from support.variants import solution_files
from support.workflow_runner import Expressions, JobRun, LocalRunner

from autograder.core import i18n, neutral
from autograder.github import submit as submit_module
from autograder.service.claims import identity
from autograder.service.errors import ServiceRefusal
from autograder.service.jwks import KeySet
from autograder.service.tokens import verify

WORKFLOW = ROOT / ".github" / "workflows" / "grade.yml"
ROSTERED_ID = "812345678"  # LocalIssuer's default repository_id
REPOSITORY = "curso-tdc/tdc-ana-garcia"


# --- the released workflow, and the workspace its sparse checkout leaves ------------------------


@pytest.fixture(scope="module")
def release(course, tmp_path_factory) -> Path:
    from autograder.course.release import build_release

    out = tmp_path_factory.mktemp("release") / "release"
    build_release(course, out)  # runs check_learner_workflow on grade.yml: it must accept it
    return out


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> Path:
    """A folder whose `python3` is this interpreter without site-packages or PYTHON* variables:
    nothing installed is importable, as on a runner where nothing was installed."""
    folder = tmp_path_factory.mktemp("bin")
    script = folder / "python3"
    script.write_text(f'#!/bin/sh\nexec {sys.executable} -S -E "$@"\n', encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return folder


def sparse_checkout(source: Path, workspace: Path, folders: list[str]) -> None:
    """What actions/checkout's `sparse-checkout` (cone mode, its default) leaves: every file at
    the top, the files directly in each parent folder of a listed folder, and the listed folders
    whole."""
    workspace.mkdir(parents=True)
    wanted = [Path(f.strip().strip("/")) for f in folders if f.strip()]
    parents = {Path(".")} | {p for folder in wanted for p in folder.parents}
    for path in sorted(source.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        rel = path.relative_to(source)
        if rel.parent in parents or any(folder in rel.parents for folder in wanted):
            (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, workspace / rel)


def submit_job(release: Path) -> dict:
    return yaml.safe_load((release / ".github" / "workflows" / "grade.yml").read_text(encoding="utf-8"))[
        "jobs"
    ]["submit"]


def github_context(
    workspace: Path, temp: Path, *, sha: str, event_name: str = "push", ref: str = "refs/heads/main"
):
    event = {"ref": ref, "after": sha, "repository": {"full_name": REPOSITORY, "default_branch": "main"}}
    event_path = temp / "event.json"
    event_path.write_text(json.dumps(event), encoding="utf-8")
    return {
        "event_name": event_name,
        "sha": sha,
        "ref": ref,
        "ref_name": ref.rsplit("/", 1)[-1],
        "repository": REPOSITORY,
        "server_url": "https://github.example",
        "api_url": "https://api.github.example",
        "run_id": "11223344556",
        "event_path": str(event_path),
        "token": "unused",
        "workspace": str(workspace),
        "event": event,
    }


def run_submit(
    tmp_path: Path,
    release: Path,
    bare_python: Path,
    endpoint: TokenEndpoint | None,
    service_url: str,
    *,
    sha: str | None = None,
    wait: str | None = "30",
    extra_env: dict[str, str] | None = None,
    workspace_source: Path | None = None,
    claims: dict[str, str] | None = None,
) -> JobRun:
    """The released workflow's submit job, its `run:` steps in order, against `service_url`."""
    sha = sha or secrets.token_hex(20)
    run_dir = tmp_path / f"run-{secrets.token_hex(3)}"
    workspace, temp = run_dir / "workspace", run_dir / "runner"
    temp.mkdir(parents=True)
    job = submit_job(release)

    def checkout(step: dict, exprs: Expressions) -> None:
        folders = str((step.get("with") or {}).get("sparse-checkout", "")).splitlines()
        sparse_checkout(workspace_source or release, workspace, folders)

    if endpoint is not None:
        endpoint.claims = {"sha": sha, "repository": REPOSITORY, "run_id": "11223344556", **(claims or {})}
    env = {"PATH": f"{bare_python}:{os.environ['PATH']}", **(endpoint.env() if endpoint else {})}
    env.update(extra_env or {})
    runner = LocalRunner(
        release / ".github" / "workflows" / "grade.yml",
        "submit",
        workspace,
        temp,
        github=github_context(workspace, temp, sha=sha),
        variables={
            "AUTOGRADER_SERVICE_URL": service_url,
            **({} if wait is None else {"AUTOGRADER_SERVICE_WAIT": wait}),
        },
        extra_env=env,
        stand_ins={"actions/checkout": checkout},
    )
    assert [s.get("uses") for s in job["steps"]][0] == "actions/checkout@v4"
    return runner.run()


def submit_step(run: JobRun):
    return run.step("submit")


# --- a real HTTP server speaking the service's API ---------------------------------------------


class StandInService:
    """POST /submissions and GET /submissions/<key> as the service answers them, every token
    verified with the service's own checks (signature, issuer, audience exactly this URL, times,
    claims; the repository must be ROSTERED_ID). `script` decides what comes back:

        "accept"   202, then `polls_before_done` polls answer "queued", then `final`
        "never"    202, then "grading" forever
        a callable (handler) -> (status, headers, body): any answer to the POST
    """

    def __init__(self, issuer: LocalIssuer) -> None:
        self.issuer = issuer
        self.keys = KeySet(issuer.url)
        self.script: Any = "accept"
        self.polls_before_done = 2
        self.final: dict[str, Any] = {}
        self.poll_answers: list[tuple[int, dict]] = []  # answered first, one per poll
        self.posts: list[dict[str, Any]] = []
        self.polls: list[dict[str, Any]] = []
        self.submissions: dict[str, dict[str, Any]] = {}
        self.warnings: list[str] = []
        self.wait: float | None = None  # the `wait` of the 202's body, when set
        self._lock = threading.Lock()

    def reset(self) -> None:
        self.script, self.polls_before_done, self.final = "accept", 2, {}
        self.poll_answers, self.posts, self.polls, self.warnings, self.wait = [], [], [], [], None

    def __enter__(self) -> StandInService:
        service = self

        class Handler(JSONHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                authorization = self.headers.get("Authorization", "")
                with service._lock:
                    service.posts.append({"path": self.path, "authorization": authorization, "body": body})
                if self.path != "/submissions":
                    return self._send(404, {"error": "not_found", "message": "Not Found"})
                if callable(service.script):
                    status, headers, answer = service.script(self)
                    return self._send(status, answer, headers)
                scheme, _, token = authorization.partition(" ")
                try:
                    if scheme != "Bearer":
                        raise ServiceRefusal("service.token.malformed", 401)
                    claims = verify(token, service.keys, issuer=service.issuer.url, audience=service.url)
                    ident = identity(claims)
                    if str(ident.repository_id) != ROSTERED_ID:
                        raise ServiceRefusal(
                            "service.claims.not_on_roster",
                            403,
                            repository=ident.repository,
                            repository_id=ident.repository_id,
                        )
                except ServiceRefusal as refusal:
                    message = i18n.translate(refusal.key, "es", **refusal.params)
                    return self._send(refusal.status, {"error": refusal.key, "message": message})
                with service._lock:
                    again = next((k for k, s in service.submissions.items() if s["sha"] == ident.sha), None)
                    key = again or secrets.token_urlsafe(24)
                    service.submissions.setdefault(key, {"sha": ident.sha, "claims": claims, "polls": 0})
                self._send(200 if again else 202, service.accepted(key))

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                split = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(split.query))
                with service._lock:
                    service.polls.append(
                        {
                            "path": split.path,
                            "query": query,
                            "authorization": self.headers.get("Authorization"),
                        }
                    )
                    key = split.path.removeprefix("/submissions/")
                    record = service.submissions.get(key)
                    if record is None or not split.path.startswith("/submissions/"):
                        return self._send(404, {"error": "not_found", "message": "Not Found"})
                    record["polls"] += 1
                    if service.poll_answers:
                        status, body = service.poll_answers.pop(0)
                        return self._send(status, body)
                    done = service.script == "accept" and record["polls"] > service.polls_before_done
                body = {
                    **service.state(key, "done" if done else "grading"),
                    **(service.final if done else {}),
                }
                self._send(200, body)

        self._server, self.url = serve(Handler)
        return self

    def __exit__(self, *exc: Any) -> None:
        stop(self._server)
        self._server = None

    def accepted(self, key: str) -> dict[str, Any]:
        return {
            "submission": key,
            "state": "queued",
            "page": f"{self.url}/s/{key}",
            "poll": f"{self.url}/submissions/{key}",
            "warnings": list(self.warnings),
            **({} if self.wait is None else {"wait": self.wait}),
        }

    def state(self, key: str, state: str) -> dict[str, Any]:
        return {
            "state": state,
            "page": f"{self.url}/s/{key}",
            "official": True,
            "score": None,
            "max": None,
            "markdown": "",
            "text": "",
        }


class Recorder:
    """A server that records every request it gets and answers 200 {}: where a redirect points."""

    def __enter__(self) -> Recorder:
        recorder = self
        self.requests: list[dict[str, Any]] = []

        class Handler(JSONHandler):
            def _any(self) -> None:
                recorder.requests.append(
                    {"path": self.path, "authorization": self.headers.get("Authorization")}
                )
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            do_GET = do_POST = _any  # noqa: N815 - http.server's names

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        stop(self._server)
        self._server = None


@pytest.fixture(scope="module")
def issuer():
    with LocalIssuer() as local:
        yield local


@pytest.fixture(scope="module")
def endpoint(issuer):
    with TokenEndpoint(issuer) as stand_in:
        yield stand_in


@pytest.fixture
def service(issuer, endpoint):
    with StandInService(issuer) as stand_in:
        endpoint.available = True
        endpoint.requests.clear()
        endpoint.minted.clear()
        yield stand_in


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"  # nothing listens there once the socket is closed


VERDICT_TEXT = (
    "Nota oficial según el servicio: 30/38\n"
    "Lección 03 · Atención causal  30/38\n"
    "::error file=exercises/03/attention.py,line=1::injected by the learner's own output\n"
    "::add-mask::Lección\n"
)
VERDICT_MARKDOWN = "### Nota oficial según el servicio\n\n| Lección | Puntos |\n|---|---:|\n| 03 | 30/38 |\n"


def commands(run: JobRun) -> list[str]:
    """The workflow commands GitHub's runner would act on in the submit step's log: lines that
    start with "::", except between `::stop-commands::END` and `::END::`."""
    found, stopped = [], None
    for line in submit_step(run).stdout.splitlines():
        if stopped is not None:
            if line == f"::{stopped}::":
                stopped = None
            continue
        if line.startswith("::stop-commands::"):
            stopped = line.removeprefix("::stop-commands::")
        elif line.startswith("::"):
            found.append(line)
    return found


def annotations(run: JobRun, level: str) -> list[str]:
    return [line for line in commands(run) if line.startswith(f"::{level} ")]


def assert_token_kept_secret(run: JobRun, endpoint: TokenEndpoint) -> None:
    """The token is masked on the job's first line and appears nowhere else."""
    step = submit_step(run)
    (token,) = endpoint.minted
    lines = step.stdout.splitlines()
    assert lines[0] == f"::add-mask::{token}"
    rest = "\n".join(lines[1:]) + step.stderr + run.summary + json.dumps(step.outputs)
    assert token not in rest
    # Nor any of its three parts (a printed header or payload would give the claims away too).
    assert not any(part in rest for part in token.split("."))


# --- the job's shape ---------------------------------------------------------------------------


def test_the_submit_job_is_light_and_holds_no_credential_but_its_oidc_token(release):
    job = submit_job(release)
    assert job["permissions"] == {"id-token": "write", "contents": "read"}
    assert [s["uses"] for s in job["steps"] if "uses" in s] == ["actions/checkout@v4"]
    checkout = job["steps"][0]["with"]
    assert checkout["persist-credentials"] is False
    assert set(checkout["sparse-checkout"].split()) == {
        "autograder/core",
        "autograder/github",
        "autograder/messages",
    }
    runs = [s["run"] for s in job["steps"] if "run" in s]
    assert runs == ["python3 -m autograder.github.submit"]  # no pip, no torch, no set-up
    assert "needs" not in job and "needs" not in yaml.safe_load(WORKFLOW.read_text())["jobs"]["grade"]
    assert job["timeout-minutes"] * 60 > submit_module.MAX_WAIT_S
    # The released file is the project's, byte for byte (release.py copies it after checking it).
    assert (release / ".github/workflows/grade.yml").read_bytes() == WORKFLOW.read_bytes()


@pytest.mark.parametrize(
    ("variable", "event_name", "ref", "runs"),
    [
        ("https://notas.example.org", "push", "refs/heads/main", True),
        ("https://notas.example.org", "workflow_dispatch", "refs/heads/main", True),
        ("", "push", "refs/heads/main", False),  # no service: only the practice grade
        (None, "push", "refs/heads/main", False),
        ("https://notas.example.org", "push", "refs/heads/borrador", False),  # not the branch that counts
        ("https://notas.example.org", "pull_request", "refs/pull/3/merge", False),
    ],
)
def test_the_job_runs_where_a_service_is_set_on_the_default_branch_only(variable, event_name, ref, runs):
    condition = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))["jobs"]["submit"]["if"]
    context = {
        "vars": {} if variable is None else {"AUTOGRADER_SERVICE_URL": variable},
        "github": {
            "event_name": event_name,
            "ref": ref,
            "ref_name": ref.rsplit("/", 1)[-1] if event_name != "pull_request" else "3/merge",
            "event": {"repository": {"default_branch": "main"}},
        },
    }
    assert Expressions(context).condition(condition) is runs


# --- against a real HTTP server speaking the API ----------------------------------------------


def test_a_verdict_is_shown_as_a_copy_linked_to_its_record(tmp_path, release, bare_python, endpoint, service):
    service.final = {"score": 30, "max": 38, "text": VERDICT_TEXT, "markdown": VERDICT_MARKDOWN}
    service.warnings = ["El repositorio se llamaba curso-tdc/tdc-ana; cuenta por su número."]
    sha = secrets.token_hex(20)
    run = run_submit(tmp_path, release, bare_python, endpoint, service.url, sha=sha)
    step = submit_step(run)
    assert step.outcome == "success", step.stdout + step.stderr
    assert_token_kept_secret(run, endpoint)

    # The token GitHub minted names this service exactly, and came from the job's own request token.
    ((audience, authorization),) = endpoint.requests
    assert audience == service.url and authorization == f"bearer {endpoint.request_token}"
    claims = jwt.decode(endpoint.minted[0], options={"verify_signature": False})
    assert claims["aud"] == service.url and claims["sha"] == sha
    # One POST, the token as a Bearer credential and nothing in the body; the polls carry no token.
    ((post,),) = [service.posts]
    assert post["authorization"] == f"Bearer {endpoint.minted[0]}" and post["body"] == b""
    assert len(service.polls) == 3 and all(p["authorization"] is None for p in service.polls)
    assert all(p["query"] == {"lang": "es"} for p in service.polls)  # course.yml's language

    (key,) = service.submissions
    page = f"{service.url}/s/{key}"
    # The verdict's text in the log, inert: the learner's own output cannot annotate or mask.
    assert "Lección 03 · Atención causal  30/38" in step.stdout
    assert annotations(run, "error") == []
    assert re.search(r"^::stop-commands::(\w+)\n(?:.*\n)*?::add-mask::Lección\n::\1::$", step.stdout, re.M)
    # The score as a notice, linked; the service's warning as a warning.
    notices = annotations(run, "notice")
    assert len(notices) == 1 and "30/38" in notices[0] and page in notices[0]
    assert any("cuenta por su número" in w for w in annotations(run, "warning"))
    # The summary: the service's Markdown, with the link to the page that is the record.
    assert VERDICT_MARKDOWN in run.summary and f"]({page})" in run.summary
    assert step.outputs == {"page": page, "state": "done", "score": "30", "max": "38"}


def test_a_resubmission_is_the_same_submission(tmp_path, release, bare_python, endpoint, service):
    service.final = {"score": 38, "max": 38, "text": "38/38\n", "markdown": "ok\n"}
    sha = secrets.token_hex(20)
    first = run_submit(tmp_path, release, bare_python, endpoint, service.url, sha=sha)
    endpoint.minted.clear()
    again = run_submit(tmp_path, release, bare_python, endpoint, service.url, sha=sha)  # Re-run jobs
    assert submit_step(first).outcome == submit_step(again).outcome == "success"
    assert len(service.submissions) == 1
    assert "ya tenía registrada esta entrega" in submit_step(again).stdout
    assert submit_step(first).outputs["page"] == submit_step(again).outputs["page"]


def test_queued_when_the_wait_runs_out(tmp_path, release, bare_python, endpoint, service):
    service.script = "never"
    run = run_submit(tmp_path, release, bare_python, endpoint, service.url, wait="2")
    step = submit_step(run)
    assert step.outcome == "success"
    (key,) = service.submissions
    (notice,) = annotations(run, "notice")
    assert "En cola" in notice and f"{service.url}/s/{key}" in notice
    assert "En cola" in run.summary and step.outputs["state"] == "grading"
    assert len(service.polls) >= 2  # it asked more than once within the wait
    assert_token_kept_secret(run, endpoint)


@pytest.mark.parametrize("variable", [None, "pronto"])
def test_the_job_waits_as_long_as_the_service_says(
    tmp_path, release, bare_python, endpoint, service, variable
):
    service.script, service.wait = "never", 2
    run = run_submit(tmp_path, release, bare_python, endpoint, service.url, wait=variable)
    step = submit_step(run)
    assert step.outcome == "success" and "como mucho 2 s" in step.stdout
    assert "En cola" in annotations(run, "notice")[0] and service.polls
    warnings = annotations(run, "warning")
    assert (warnings == []) if variable is None else ("pronto" in warnings[0])


def test_no_wait_at_all_says_queued_with_the_link(tmp_path, release, bare_python, endpoint, service):
    run = run_submit(tmp_path, release, bare_python, endpoint, service.url, wait="0")
    assert submit_step(run).outcome == "success" and service.polls == []
    assert "En cola" in annotations(run, "notice")[0]


def test_a_refused_token_fails_the_job_with_the_services_message(
    tmp_path, release, bare_python, endpoint, service
):
    # A repository that is not on the roster: the service's refusal, word for word, as an error.
    run = run_submit(tmp_path, release, bare_python, endpoint, service.url, claims={"repository_id": "999"})
    step = submit_step(run)
    assert step.outcome == "failure"
    expected = i18n.translate("service.claims.not_on_roster", "es", repository=REPOSITORY, repository_id=999)
    (error,) = annotations(run, "error")
    assert "HTTP 403" in error and expected in error
    assert error.startswith("::error title=Entrega rechazada por el servicio::")
    assert neutral.markdown_inline(expected) in run.summary
    assert service.submissions == {} and service.polls == []
    assert_token_kept_secret(run, endpoint)


def test_too_many_submissions_say_when_to_try_again(tmp_path, release, bare_python, endpoint, service):
    message = "Demasiadas entregas de este repositorio en la última hora."
    service.script = lambda handler: (
        429,
        {"Retry-After": "600"},
        {"error": "service.app.rate_limited", "message": message},
    )
    run = run_submit(tmp_path, release, bare_python, endpoint, service.url)
    assert submit_step(run).outcome == "failure"
    (error,) = annotations(run, "error")
    assert message in error and "HTTP 429" in error


def silent_server() -> tuple[socket.socket, str]:
    """A socket that accepts connections and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    return sock, f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.mark.parametrize("kind", ["refused", "503", "502_html", "timeout", "not_the_api"])
def test_the_service_down_is_said_plainly_and_is_no_red_mark(
    tmp_path, release, bare_python, endpoint, service, kind
):
    sock = None
    url = service.url
    if kind == "refused":
        url = closed_port_url()
    elif kind == "503":
        service.script = lambda handler: (
            503,
            {},
            {"error": "service.claims.branch_unknown", "message": "GitHub no responde ahora."},
        )
    elif kind == "502_html":  # a proxy in front of a stopped service
        service.script = lambda handler: (502, {"Content-Type": "text/html"}, b"<html>Bad Gateway</html>")
    elif kind == "not_the_api":  # a 202 whose links could carry a line of their own into the log
        page = f"{service.url}/s/x\n::error::planted"
        service.script = lambda handler: (202, {}, {"state": "queued", "page": page, "poll": page})
    else:
        sock, url = silent_server()
    try:
        run = run_submit(
            tmp_path, release, bare_python, endpoint, url, extra_env={"AUTOGRADER_SERVICE_TIMEOUT": "2"}
        )
    finally:
        if sock is not None:
            sock.close()
    step = submit_step(run)
    assert step.outcome == "success", step.stdout + step.stderr
    assert annotations(run, "error") == []
    (warning,) = annotations(run, "warning")
    assert "no está disponible" in warning and "No es fallo tuyo" in warning
    reasons = {
        "refused": "Connection refused",
        "503": "GitHub no responde ahora.",
        "502_html": "HTTP 502",
        "timeout": "no answer in 2 s",
        "not_the_api": "HTTP 202: not the service's answer",
    }
    assert reasons[kind] in warning and "planted" not in submit_step(run).stdout
    assert "no está disponible" in run.summary
    assert_token_kept_secret(run, endpoint)


def test_without_id_token_permission_the_job_says_what_is_missing(tmp_path, release, bare_python, service):
    run = run_submit(tmp_path, release, bare_python, None, service.url)
    assert submit_step(run).outcome == "failure"
    (error,) = annotations(run, "error")
    assert "id-token: write" in error and service.posts == []


def test_the_token_endpoint_down_is_no_red_mark(tmp_path, release, bare_python, endpoint, service):
    endpoint.available = False
    run = run_submit(tmp_path, release, bare_python, endpoint, service.url)
    step = submit_step(run)
    assert step.outcome == "success" and service.posts == []
    (warning,) = annotations(run, "warning")
    assert "GitHub no ha dado" in warning and "HTTP 503" in warning
    assert not any(line.startswith("::add-mask::") for line in step.stdout.splitlines())


def test_a_redirect_is_not_followed_and_the_token_goes_nowhere_else(
    tmp_path, release, bare_python, endpoint, service
):
    with Recorder() as elsewhere:
        service.script = lambda handler: (307, {"Location": f"{elsewhere.url}/submissions"}, {})
        run = run_submit(tmp_path, release, bare_python, endpoint, service.url)
        assert elsewhere.requests == []
    assert submit_step(run).outcome == "failure"
    (error,) = annotations(run, "error")
    assert "redirección" in error and elsewhere.url in error
    assert_token_kept_secret(run, endpoint)


@pytest.mark.parametrize(
    "url", ["http://notas.example.org", "ftp://127.0.0.1/", "https://notas.example.org/?x=1"]
)
def test_a_url_that_would_expose_the_token_is_refused_before_asking_for_one(
    tmp_path, release, bare_python, endpoint, service, url
):
    run = run_submit(tmp_path, release, bare_python, endpoint, url)
    assert submit_step(run).outcome == "failure"
    (error,) = annotations(run, "error")
    assert "AUTOGRADER_SERVICE_URL" in error and endpoint.requests == []


def test_polling_rides_out_a_blip_and_shows_a_superseded_submission(
    tmp_path, release, bare_python, endpoint, service
):
    service.poll_answers = [
        (503, {"error": "x", "message": "reiniciando"}),
        (200, {"state": "superseded", "page": "ignored", "official": True}),
    ]
    run = run_submit(tmp_path, release, bare_python, endpoint, service.url)
    step = submit_step(run)
    assert step.outcome == "success" and len(service.polls) == 2
    (notice,) = annotations(run, "notice")
    (key,) = service.submissions
    assert "Un push más reciente" in notice and f"{service.url}/s/{key}" in notice
    assert step.outputs["state"] == "superseded"


def test_an_error_result_is_shown_and_is_no_red_mark(tmp_path, release, bare_python, endpoint, service):
    service.polls_before_done = 0
    service.final = {
        "state": "error",
        "text": "No se pudo traer el commit.\n",
        "markdown": "Error al traer\n",
    }
    run = run_submit(tmp_path, release, bare_python, endpoint, service.url)
    step = submit_step(run)
    assert step.outcome == "success" and "No se pudo traer el commit." in step.stdout
    (warning,) = annotations(run, "warning")
    assert "no ha podido corregir" in warning
    assert "Error al traer" in run.summary and step.outputs["state"] == "error"


def test_the_job_speaks_the_learners_language(tmp_path, release, bare_python, endpoint, service):
    service.final = {"score": 1, "max": 2, "text": "1/2\n", "markdown": "1/2\n"}
    run = run_submit(
        tmp_path, release, bare_python, endpoint, service.url, extra_env={"AUTOGRADER_LANG": "en"}
    )
    assert all(p["query"] == {"lang": "en"} for p in service.polls)
    (notice,) = annotations(run, "notice")
    assert "Official grade according to the service: 1/2" in notice


def test_the_catalog_line_reader_reads_what_yaml_reads():
    for lang in i18n.LANGUAGES:
        expected = {k: v for k, v in i18n.catalog(lang).items() if k.startswith("service.submit.")}
        assert submit_module.messages(lang) == expected and len(expected) > 10
    es, en = (submit_module.messages(lang) for lang in i18n.LANGUAGES)
    assert set(es) == set(en)
    for key in es:
        assert sorted(re.findall(r"\{(\w+)", es[key])) == sorted(re.findall(r"\{(\w+)", en[key])), key


# --- against the real service: `autograder serve`, grading a real learner repository ----------

SERVE_START_S = 120  # an outer bound on the service's start, so that a hang fails
GRADE_WAIT_S = "300"  # the job's wait for the verdict: a cold worker imports torch first
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Ana",
    "GIT_AUTHOR_EMAIL": "ana@example.com",
    "GIT_COMMITTER_NAME": "Ana",
    "GIT_COMMITTER_EMAIL": "ana@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


class Served:
    """`autograder serve` with one worker, grading lesson 03, over the stand-in of GitHub's API
    (repositories by id, workflow runs, git over smart HTTP from bare repositories) and the
    module's OIDC issuer; the learner's repository is made from the release."""

    def __init__(self, base: Path, issuer: LocalIssuer, github: FakeGitHub, release: Path) -> None:
        self.base, self.issuer, self.github = base, issuer, github
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        github.git_root = base / "git"
        self.repo = github.add_repo(REPOSITORY)
        self.origin = github.git_root / f"{REPOSITORY}.git"
        self.origin.parent.mkdir(parents=True)
        git(base, "init", "-q", "--bare", "-b", "main", str(self.origin))
        self.work = base / "work"
        shutil.copytree(release, self.work)  # the learner's repository, made from the template
        git(self.work, "init", "-q", "-b", "main")
        git(self.work, "remote", "add", "origin", str(self.origin))
        self.roster = base / "roster.yml"
        self.roster.write_text(
            "version: 1\norganization: curso-tdc\nrepository_prefix: tdc-\nlearners:\n"
            f"  - id: ana\n    github: ana-garcia\n    repository_id: {self.repo['id']}\n",
            encoding="utf-8",
        )
        self.data = base / "servicio"
        self.proc: subprocess.Popen | None = None
        self.runs = 0

    def start(self) -> None:
        log = open(self.base / "serve.log", "w")
        env = {**os.environ, "AUTOGRADER_SERVICE_TOKEN": TOKEN}
        env.pop("AUTOGRADER_LANG", None)
        args = [
            sys.executable, "-m", "autograder", "--course", str(ROOT / "course.yml"), "serve",
            "--roster", str(self.roster), "--public-url", self.url, "--issuer", self.issuer.url,
            "--github-api", self.github.url, "--data", str(self.data), "--port", str(self.port),
            "--workers", "1", "--lessons", "03",
            "--clone-url", f"{self.github.url}/git/{{repository}}.git",
            "--allow-scheme", "http", "--allow-host", "127.0.0.1",
        ]  # fmt: skip
        self.proc = subprocess.Popen(args, cwd=self.base, stdout=log, stderr=subprocess.STDOUT, env=env)
        log.close()
        end = time.monotonic() + SERVE_START_S
        while time.monotonic() < end:
            assert self.proc.poll() is None, self.log()
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=5) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise AssertionError(f"the service did not answer within {SERVE_START_S} s\n{self.log()}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=60)

    def log(self) -> str:
        return (self.base / "serve.log").read_text(encoding="utf-8", errors="replace")

    def push(self, message: str, files: dict[str, str]) -> tuple[str, str]:
        """A commit of the learner's on main, pushed, and the workflow run GitHub makes for it:
        (sha, run id)."""
        for name, text in files.items():
            path = self.work / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        git(self.work, "add", "-A")
        git(self.work, "commit", "-q", "--allow-empty", "-m", message)
        git(self.work, "push", "-q", "origin", "HEAD:refs/heads/main")
        sha = git(self.work, "rev-parse", "HEAD")
        self.runs += 1
        run = self.github.add_run(REPOSITORY, head_sha=sha, created_at=time.time() - 20)
        return sha, str(run["id"])


@pytest.fixture(scope="module")
def served(issuer, release):
    # Outside pytest's private temporary folder: the service runs git as `nobody` when root.
    base = Path(tempfile.mkdtemp(prefix="autograder-submit-test-"))
    os.chmod(base, 0o755)
    with FakeGitHub() as github:
        running = Served(base, issuer, github, release)
        try:
            running.start()
            yield running
        finally:
            running.stop()
            shutil.rmtree(base, ignore_errors=True)


def solved_lesson03(course) -> dict[str, str]:
    lesson = course.lesson("03")
    return {f"exercises/{lesson.folder}/{name}": text for name, text in solution_files(lesson).items()}


def test_the_real_service_grades_the_push_and_the_job_shows_its_verdict(
    tmp_path, release, bare_python, served, course
):
    with TokenEndpoint(served.issuer) as endpoint:
        sha, run_id = served.push("Lección 03 resuelta", solved_lesson03(course))
        claims = {"repository_id": str(served.repo["id"]), "run_id": run_id}
        run = run_submit(
            tmp_path, release, bare_python, endpoint, served.url, sha=sha, wait=GRADE_WAIT_S, claims=claims
        )
    step = submit_step(run)
    assert step.outcome == "success", step.stdout + step.stderr + served.log()
    assert step.outputs["state"] == "done", step.stdout + served.log()
    assert_token_kept_secret(run, endpoint)
    # The same grade as the engine gives those files here (`autograder grade`'s engine call).
    lesson = course.lesson("03")
    folder = write_submission(tmp_path / "same-files", solution_files(lesson))
    local = grade_folder(course, lesson, folder)
    score, top = (f"{value:g}" for value in (local.score, local.max_score))
    assert (step.outputs["score"], step.outputs["max"]) == (score, top) and score == top
    (notice,) = annotations(run, "notice")
    assert f"Nota oficial según el servicio: {score}/{top}" in notice and step.outputs["page"] in notice
    # The service's own rendering, as a copy: its text in the log, its Markdown in the summary.
    assert "Nota oficial según el servicio" in step.stdout and step.outputs["page"] in run.summary
    assert lesson.title["es"] in run.summary
    # The record: the page the link names is the service's, and it shows this commit.
    with urllib.request.urlopen(step.outputs["page"], timeout=30) as page:
        assert sha[:7] in page.read().decode("utf-8")


def test_the_real_service_refusing_a_token_fails_the_job_with_its_words(
    tmp_path, release, bare_python, served
):
    # A repository the roster does not have (a learner's fork, or a copy under another account).
    with TokenEndpoint(served.issuer) as endpoint:
        run = run_submit(
            tmp_path, release, bare_python, endpoint, served.url, claims={"repository_id": "424242"}
        )
    step = submit_step(run)
    assert step.outcome == "failure"
    expected = i18n.translate(
        "service.claims.not_on_roster", "es", repository=REPOSITORY, repository_id=424242
    )
    (error,) = annotations(run, "error")
    assert "HTTP 403" in error and expected in error
    assert_token_kept_secret(run, endpoint)


def test_the_real_service_not_answering_is_a_plain_warning(tmp_path, release, bare_python, served):
    # The service frozen (SIGSTOP): it takes the connection and never answers, as a hung server
    # does. The token is for no repository on the roster, so the request it answers once thawed
    # records nothing.
    with TokenEndpoint(served.issuer) as endpoint:
        os.kill(served.proc.pid, signal.SIGSTOP)
        try:
            run = run_submit(
                tmp_path,
                release,
                bare_python,
                endpoint,
                served.url,
                claims={"repository_id": "434343"},
                extra_env={"AUTOGRADER_SERVICE_TIMEOUT": "2"},
            )
        finally:
            os.kill(served.proc.pid, signal.SIGCONT)
    step = submit_step(run)
    assert step.outcome == "success"
    assert annotations(run, "error") == []
    (warning,) = annotations(run, "warning")
    assert "no está disponible" in warning and "no answer in 2 s" in warning
    assert "Re-run jobs" in warning
    assert_token_kept_secret(run, endpoint)
