"""The instructor's live view (autograder/service/live.py, staff.py, live_data.py) through the
service's real ASGI app (starlette's TestClient, HTTPS base URL so the cookie's Secure flag is
shown) on a real SQLite store, and `autograder staff` as a process.

Shown here: without a session nothing but the login form (the page, the script and the state
all refuse, 401); a forged token, a token passed in a URL and a revoked token open nothing, and
revoking ends the open sessions at once; the session cookie is HttpOnly, Secure, SameSite=Strict
and limited to {prefix}/staff, and only hashes of tokens and session ids are stored; every POST
without the session's CSRF token, from another origin, or from a client that says nothing of
where it comes from is refused; a learner's and a staff member's name written as markup are
never markup in the page; the state holds the grid, the queue (by lane, per worker), where the
cohort is stuck as the cohort report counts it, and one learner's history with every result;
"regrade" queues on the regrade lane (instructors only). No grading: results are recorded
through the Store API."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import insert, select
from starlette.testclient import TestClient
from support import term_results
from support.project import ROOT
from support.service_records import record_push

from autograder.cohort.report import Cohort, Entry, todo_rates
from autograder.cohort.store import Record
from autograder.core import i18n
from autograder.core.manifest import load_course
from autograder.core.roster import parse
from autograder.render.results_json import from_json_dict
from autograder.service import schema
from autograder.service.app import Services, create_app
from autograder.service.config import ServiceConfig
from autograder.service.live import COOKIE
from autograder.service.live_page import LIVE_JS
from autograder.service.staff import SESSION_LIFETIME, Staff, StaffError
from autograder.service.store import Store
from autograder.service.worker import graders_hash

PUBLIC = "https://grader.example"
PREFIX = "/curso"
STAFF = PREFIX + "/staff"
ORIGIN = {"Origin": PUBLIC}
HOSTILE = '<img src=x onerror="alert(1)">'
HOSTILE_REPO = 'curso/"><script>alert(2)</script>'
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)
ROSTER = """\
version: 1
learners:
  - {id: ana, name: Ana Alba}
  - {id: bea, name: Bea Bravo}
"""


@dataclass
class Live:
    client: TestClient
    store: Store
    staff: Staff
    course: object
    tokens: dict


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    base = tmp_path_factory.mktemp("live")
    course = load_course(ROOT / "course.yml")
    roster_file = base / "roster.yml"
    roster_file.write_text(ROSTER, encoding="utf-8")
    config = ServiceConfig(
        course_file=ROOT / "course.yml",
        roster_file=roster_file,
        public_url=PUBLIC + PREFIX,
        issuer="https://issuer.example",
        data_dir=base,
        lessons=("01", "02"),
    )
    store = Store(config.database)
    store.create()
    services = Services(config, course, parse(ROSTER, roster_file), store, None, None, None)
    app = create_app(services)
    staff = Staff(store.engine)
    tokens = {
        "prof": staff.add("prof", "instructor"),
        "ayud": staff.add("ayud", "assistant"),
        "<b>mala</b>": staff.add("<b>mala</b>", "instructor"),
    }
    # ana: lesson 01 half right (stuck on its TODOs), lesson 02 complete; the hostile learner:
    # an error; bea: a push still waiting.
    ana = record_push(store, "ana", 1, at=T0)
    result = term_results.result_json(course, ("01",), 0.5)
    data = json.loads(result)
    second = json.loads(term_results.result_json(course, ("02",), 1.0))
    data["lessons"] += second["lessons"]
    data["score"] += second["score"]
    data["max_score"] += second["max_score"]
    assert store.complete(ana.id, "w1", status="done", result_json=json.dumps(data), graders_hash="h" * 64)
    hostile = record_push(store, HOSTILE, 2, at=T0, repository=HOSTILE_REPO)
    assert store.complete(
        hostile.id,
        "w1",
        status="error",
        result_json=json.dumps(
            {"error": {"key": schema.LOST, "params": {"attempts": 3}}}
        ),  # as reap writes it
        graders_hash="h" * 64,
        error=schema.LOST,
    )
    record_push(store, "bea", 3, at=T0 + timedelta(minutes=5))
    with TestClient(app, base_url=PUBLIC) as client:
        yield Live(client, store, staff, course, tokens)
    store.close()


def login(live: Live, name: str = "prof") -> str:
    """A fresh session for `name`; its CSRF token. The client keeps the cookie."""
    live.client.cookies.clear()
    answer = live.client.post(
        f"{STAFF}/login", data={"token": live.tokens[name]}, headers=ORIGIN, follow_redirects=False
    )
    assert answer.status_code == 303, answer.text
    page = live.client.get(f"{STAFF}/")
    assert page.status_code == 200
    return page.text.split('data-csrf="', 1)[1].split('"', 1)[0]


def assert_strict(headers) -> None:
    csp = headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp and "default-src 'none'" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert headers["cache-control"] == "no-store"


def test_without_a_session_there_is_nothing_but_the_login_form(live):
    live.client.cookies.clear()
    for path in ("/", "", "/live.js", "/live.css", "/state", "/state?learner=ana"):
        answer = live.client.get(STAFF + path)
        assert answer.status_code == 401, path
        assert_strict(answer.headers)
        for secret in ("ana", "bea", "Ana Alba", "onerror", "w1"):
            assert secret not in answer.text, (path, secret)
    page = live.client.get(f"{STAFF}/")
    assert '<form method="post"' in page.text and 'name="token"' in page.text and "<script" not in page.text
    state = live.client.get(f"{STAFF}/state").json()
    assert state == {
        "error": "service.live.no_session",
        "message": i18n.translate("service.live.no_session", "es"),
    }
    assert live.client.get(f"{STAFF}/login").status_code == 200


def test_forged_urls_and_revoked_tokens_open_nothing_and_revoking_ends_sessions_now(live):
    live.client.cookies.clear()
    real = live.tokens["prof"]
    for forged in (
        "",
        "agst_" + "A" * 43,
        real[:-1] + ("B" if real[-1] != "B" else "C"),
        real + "x",
        "x" * 5000,
    ):
        answer = live.client.post(
            f"{STAFF}/login", data={"token": forged}, headers=ORIGIN, follow_redirects=False
        )
        assert answer.status_code in (401, 413) and "set-cookie" not in answer.headers
    # A token in the URL is never read: no session, whichever route.
    for path in (f"/login?token={real}", f"/?token={real}", f"/state?token={real}"):
        answer = live.client.get(STAFF + path, follow_redirects=False)
        assert answer.status_code in (200, 401) and "set-cookie" not in answer.headers
        assert live.client.get(f"{STAFF}/state").status_code == 401

    # A token that is revoked: its open sessions end at once, and it opens no new one.
    token = live.staff.add("temporal", "assistant")
    live.tokens["temporal"] = token
    login(live, "temporal")
    assert live.client.get(f"{STAFF}/state").status_code == 200
    assert live.staff.revoke("temporal") == 1
    assert live.client.get(f"{STAFF}/state").status_code == 401
    answer = live.client.post(f"{STAFF}/login", data={"token": token}, headers=ORIGIN, follow_redirects=False)
    assert answer.status_code == 401 and i18n.translate("service.live.bad_token", "es") in answer.text


def test_the_cookie_is_httponly_secure_strict_and_path_limited_and_only_hashes_are_stored(live):
    live.client.cookies.clear()
    answer = live.client.post(
        f"{STAFF}/login?lang=en", data={"token": live.tokens["prof"]}, headers=ORIGIN, follow_redirects=False
    )
    assert answer.status_code == 303
    assert answer.headers["location"] == f"{STAFF}/?lang=en"  # no token, no session id in it
    cookie = answer.headers["set-cookie"]
    sid = cookie.split(";", 1)[0].removeprefix(f"{COOKIE}=")
    flags = [part.strip().lower() for part in cookie.split(";")[1:]]
    assert {"httponly", "secure", "samesite=strict", f"path={STAFF}"} <= set(flags), flags
    assert live.tokens["prof"] not in answer.text
    db = live.store.url.removeprefix("sqlite:///")
    with sqlite3.connect(db) as conn:
        dump = "\n".join(conn.iterdump())
    for token in live.tokens.values():
        assert token not in dump
    assert sid not in dump and len(sid) >= 40
    page = live.client.get(f"{STAFF}/?lang=en")
    assert page.status_code == 200 and live.tokens["prof"] not in page.text and sid not in page.text
    assert_strict(page.headers)
    assert page.headers["x-frame-options"] == "DENY"


def test_every_post_needs_the_sessions_csrf_token_and_the_services_origin(live):
    csrf = login(live, "prof")
    regrade = f"{STAFF}/regrade"
    good = {**ORIGIN, "X-CSRF-Token": csrf}
    refused = [
        ({"Origin": PUBLIC}, 403),  # no CSRF token
        ({**ORIGIN, "X-CSRF-Token": csrf[:-1] + "x"}, 403),  # another one
        ({"Origin": "https://evil.example", "X-CSRF-Token": csrf}, 403),
        ({"Origin": "null", "X-CSRF-Token": csrf}, 403),
        ({"X-CSRF-Token": csrf}, 403),  # says nothing of where it comes from
        ({**good, "Sec-Fetch-Site": "cross-site"}, 403),
        ({**good, "Sec-Fetch-Site": "same-site"}, 403),
    ]
    for headers, status in refused:
        answer = live.client.post(regrade, json={"learners": ["ana"]}, headers=headers)
        assert answer.status_code == status, headers
        assert answer.json()["error"] in ("service.live.bad_csrf", "service.live.cross_site")
    # A form (not JSON) is refused too: only the page's script sends this action.
    form = live.client.post(regrade, data={"learners": "ana"}, headers=good)
    assert form.status_code == 415
    # Logging out takes the CSRF token too, from the form.
    assert live.client.post(f"{STAFF}/logout", data={}, headers=ORIGIN).status_code == 403
    assert (
        live.client.post(
            f"{STAFF}/logout", data={"csrf": csrf}, headers={"Origin": "https://x.example"}
        ).status_code
        == 403
    )
    assert live.client.get(f"{STAFF}/state").status_code == 200  # still signed in
    # Login from another site is refused as well (login CSRF).
    other = live.client.post(
        f"{STAFF}/login", data={"token": live.tokens["prof"]}, headers={"Origin": "https://evil.example"}
    )
    assert other.status_code == 403 and "set-cookie" not in other.headers
    out = live.client.post(
        f"{STAFF}/logout",
        data={"csrf": csrf},
        headers={"Sec-Fetch-Site": "same-origin"},
        follow_redirects=False,
    )
    assert out.status_code == 303 and out.headers["location"] == f"{STAFF}/login?lang=es"
    assert f"{COOKIE}=" in out.headers["set-cookie"] and "max-age=0" in out.headers["set-cookie"].lower()
    assert live.client.get(f"{STAFF}/state").status_code == 401


def test_regrade_queues_on_the_regrade_lane_and_only_for_instructors(live):
    csrf = login(live, "ayud")
    answer = live.client.post(f"{STAFF}/regrade", json={}, headers={**ORIGIN, "X-CSRF-Token": csrf})
    assert answer.status_code == 403 and answer.json()["error"] == "service.live.not_instructor"
    csrf = login(live, "prof")
    for body in ([], {"learners": "ana"}, {"learners": [1]}, {"learners": []}):
        answer = live.client.post(f"{STAFF}/regrade", json=body, headers={**ORIGIN, "X-CSRF-Token": csrf})
        assert answer.status_code == 400, body
    before = {s.id: s for s in live.store.submissions("ana")}
    answer = live.client.post(
        f"{STAFF}/regrade", json={"learners": ["ana"]}, headers={**ORIGIN, "X-CSRF-Token": csrf}
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["queued"] == 1
    assert answer.json()["message"] == i18n.translate("service.live.regrade_queued", "es", n=1)
    again = {s.id: s for s in live.store.submissions("ana")}
    (sid,) = before
    assert again[sid].state == "queued" and again[sid].lane == "regrade"
    lessons = [live.course.lesson("01"), live.course.lesson("02")]  # the service's --lessons
    assert again[sid].graders_hash == graders_hash(live.course, lessons, live.course.language)  # its own
    # The old score is still shown, beside the submission's new state.
    state = live.client.get(f"{STAFF}/state?learner=ana").json()
    row = next(line for line in state["grid"] if line["learner"] == "ana")
    assert row["state"] == "queued" and row["cells"][0]["score"] is not None
    waiting = {w["lane"]: w["n"] for w in state["queue"]["waiting"]}
    assert waiting == {"push": 1, "regrade": 1}
    (entry,) = state["history"]["submissions"]
    # Until the new graders' result exists the old one is the current one (the store's rule).
    assert [(r["current"], r["graders"]) for r in entry["results"]] == [(True, "h" * 12)]
    # Back as it was, for the other tests: graded with the service's graders.
    assert live.store.complete(
        sid,
        "w2",
        status="done",
        result_json=live.store.results_of(sid)[0].result_json,
        graders_hash=again[sid].graders_hash,
    )
    entry = live.client.get(f"{STAFF}/state?learner=ana").json()["history"]["submissions"][0]
    assert [(r["current"], r["graders"]) for r in entry["results"]] == [
        (True, again[sid].graders_hash[:12]),
        (False, "h" * 12),  # the old score kept beside the new one
    ]


def test_names_written_as_markup_are_never_markup(live):
    login(live, "<b>mala</b>")
    page = live.client.get(f"{STAFF}/")
    assert "<b>mala</b>" not in page.text and "&lt;b&gt;mala&lt;/b&gt;" in page.text
    assert HOSTILE not in page.text and "onerror" not in page.text
    state = live.client.get(f"{STAFF}/state", params={"learner": HOSTILE}).json()
    # In the JSON the names are data, which the script sets as text only.
    assert any(line["learner"] == HOSTILE for line in state["grid"])
    assert state["history"]["submissions"][0]["repository"] == HOSTILE_REPO
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "Function("):
        assert sink not in LIVE_JS
    script = live.client.get(f"{STAFF}/live.js")
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
    assert script.headers["x-content-type-options"] == "nosniff"


def test_the_state_has_the_grid_the_queue_the_stuck_causes_and_one_history(live):
    with live.store.engine.begin() as conn:
        conn.execute(
            insert(schema.metadata.tables["workers"]).values(
                name="maquina-1:42",
                host="maquina-1",
                pid=42,
                graders_hash="h" * 64,
                threads=2,
                started_at=T0,
                seen_at=schema.now_utc(),
                state="running",
                detail="",
            )
        )
        conn.execute(
            insert(schema.metadata.tables["workers"]).values(
                name="maquina-2:7",
                host="maquina-2",
                pid=7,
                graders_hash="g" * 64,
                threads=1,
                started_at=T0,
                seen_at=T0,
                state="running",
                detail="",
            )
        )
    login(live, "prof")
    state = live.client.get(f"{STAFF}/state?lang=en&learner=ana").json()
    assert [lesson["id"] for lesson in state["lessons"]] == ["01", "02"]
    rows = {line["learner"]: line for line in state["grid"]}
    assert list(rows)[:2] == ["ana", "bea"] and HOSTILE in rows  # the roster's order, then the rest
    course = live.course
    top01 = sum(float(spec.points) for spec in course.lesson("01").checks)
    top02 = sum(float(spec.points) for spec in course.lesson("02").checks)
    ana = {cell["lesson"]: cell for cell in rows["ana"]["cells"]}
    assert (ana["01"]["score"], ana["01"]["max"], ana["01"]["status"]) == (top01 / 2, top01, "partial")
    assert (ana["02"]["score"], ana["02"]["max"], ana["02"]["status"]) == (top02, top02, "passed")
    assert rows["bea"]["state"] == "queued" and rows["bea"]["state_text"] == "queued"
    assert all(cell["status"] == "none" for cell in rows["bea"]["cells"])
    assert rows[HOSTILE]["state"] == "error"

    queue = state["queue"]
    assert queue["failed"] == 1 and queue["failed_recent"][0]["lost"] is True
    assert queue["failed_recent"][0]["reason"] == i18n.translate(schema.LOST, "en", attempts=3)
    workers = {w["name"]: w for w in queue["workers"]}
    assert workers["maquina-1:42"]["state"] == "running" and workers["maquina-2:7"]["state"] == "gone"

    # Where the cohort is stuck: the cohort report's own counts over the same results.
    result = from_json_dict(
        json.loads(live.store.current_result(live.store.submissions("ana")[0].id).result_json)
    )
    cohort = Cohort(
        course,
        [course.lesson("01"), course.lesson("02")],
        0,
        [Entry(Record(learner="ana", key="k", status="graded"), result)],
    )
    expected = [(r.lesson, r.id, r.stuck, r.total) for r in todo_rates(cohort) if r.stuck]
    assert (
        expected
        and [(t["lesson"], t["id"], t["stuck"], t["total"]) for t in state["stuck"]["todos"]] == expected
    )
    assert state["stuck"]["graded"] == 1
    assert state["stuck"]["errors"] == [
        {"learner": HOSTILE, "reason": i18n.translate(schema.LOST, "en", attempts=3)}
    ]

    history = state["history"]
    assert history["learner"] == "ana"
    (only,) = history["submissions"]
    assert only["sha"] == f"{1:040x}" and only["page"].startswith("/s/")
    assert only["results"][0]["current"] is True  # newest first; the current one marked
    assert only["results"][0]["score"] == top01 / 2 + top02


def test_a_session_ends_after_its_lifetime_and_roles_and_names_are_checked(live):
    member = Staff(live.store.engine)
    token = member.add("caduca", "assistant", now=T0)
    sid, session = member.login(token, now=T0)
    assert member.session(sid, now=T0 + SESSION_LIFETIME - timedelta(seconds=1)) == session
    assert member.session(sid, now=T0 + SESSION_LIFETIME) is None
    assert member.session(sid + "x") is None and member.session("") is None
    for name, role, key in (
        ("otra", "admin", "service.staff.bad_role"),
        ("", "assistant", "service.staff.bad_name"),
        ("a\x1b[2Jb", "assistant", "service.staff.bad_name"),
        ("caduca", "assistant", "service.staff.exists"),
    ):
        with pytest.raises(StaffError) as refused:
            member.add(name, role)
        assert refused.value.key == key
    member.revoke("caduca")
    assert member.login(token) is None


def test_staff_command_adds_lists_and_revokes(tmp_path, monkeypatch, capsys):
    from autograder import cli

    monkeypatch.delenv("AUTOGRADER_SERVE_DATABASE_URL", raising=False)
    monkeypatch.delenv("AUTOGRADER_SERVE_DATA", raising=False)
    head = [
        "--lang",
        "en",
        "--course",
        str(ROOT / "course.yml"),
        "staff",
        "--data",
        str(tmp_path / "servicio"),
    ]

    def staff(*args):  # in this process (a process each costs seconds): (code, stdout, stderr)
        code = cli.main([*head, *args])
        said = capsys.readouterr()
        return code, said.out, said.err

    # Once as a process, as an instructor runs it: the token alone on stdout.
    added = subprocess.run(
        [sys.executable, "-m", "autograder", *head, "add", "Marta Ruiz", "--role", "assistant"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if not k.startswith("AUTOGRADER_SERVE_")},
        timeout=120,
    )
    assert added.returncode == 0, added.stderr
    token = added.stdout.strip()
    assert token.startswith("agst_") and len(token) > 40 and "\n" not in token
    assert "Marta Ruiz" in added.stderr and token not in added.stderr
    code, out, err = staff("add", "Marta Ruiz")
    assert code == 1 and "revoke it first" in err and out == ""
    code, out, _ = staff("list")
    assert code == 0 and "Marta Ruiz · assistant" in out and "active" in out and token not in out
    store = Store(f"sqlite:///{tmp_path / 'servicio' / 'servicio.db'}")
    try:
        assert Staff(store.engine).login(token) is not None
        code, out, _ = staff("revoke", "Marta Ruiz")
        assert code == 0 and "1 session ended" in out
        assert Staff(store.engine).login(token) is None
        with store.engine.connect() as conn:
            rows = conn.execute(select(schema.metadata.tables["staff_tokens"])).all()
        assert len(rows) == 1 and rows[0].revoked_at is not None and token not in str(tuple(rows[0]))
    finally:
        store.close()
    assert "revoked" in staff("list")[1]
    assert staff("revoke", "nadie")[0] == 1
    code, out, _ = staff("add", "Marta Ruiz")  # a new token once the old one is revoked
    assert code == 0 and out.strip().startswith("agst_") and out.strip() != token
