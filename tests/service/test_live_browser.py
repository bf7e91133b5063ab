"""The live view in a real browser: Debian's Chromium (/usr/bin/chromium, driven by playwright as
tests/learner/test_viewer.py drives it; no browser download) against the service's app served by
a real uvicorn on 127.0.0.1, started once for the module, with one browser for the module.

Shown here: without a token the page shows nothing of the cohort (a login form only; the state
answers 401 even to a script on the page); after logging in with a staff token, a submission
graded in the store (a result recorded through the Store API: no grading) changes the grid
WITHOUT A RELOAD (the main frame does not navigate again, and a value left on the page's
window survives); a learner's name written as markup shows as those characters and runs
nothing; the strict CSP is never violated (the page has no inline script or style)."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import uvicorn
from support import term_results
from support.browser import chromium
from support.project import ROOT
from support.servers import free_port
from support.service_records import record_push

from autograder.core.manifest import load_course
from autograder.core.roster import parse
from autograder.service.app import Services, create_app
from autograder.service.config import ServiceConfig
from autograder.service.staff import Staff
from autograder.service.store import Store

WAIT_MS = 30_000  # a hang guard: the page polls every 3 s
HOSTILE = '<img src=x onerror="window.__pwned=1">'
HOSTILE_REPO = 'curso/"><script src=/x.js></script><img src=y onerror="window.__pwned=2">'
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)
ROSTER = """\
version: 1
learners:
  - {id: ana, name: Ana Alba}
  - {id: bea, name: Bea Bravo}
"""


@dataclass
class Served:
    url: str  # the public URL, with its path
    store: Store
    token: str
    course: object


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    base: Path = tmp_path_factory.mktemp("live-browser")
    course = load_course(ROOT / "course.yml")
    roster_file = base / "roster.yml"
    roster_file.write_text(ROSTER, encoding="utf-8")
    port = free_port()
    public = f"http://127.0.0.1:{port}/curso"
    config = ServiceConfig(
        course_file=ROOT / "course.yml",
        roster_file=roster_file,
        public_url=public,
        issuer="https://issuer.example",
        data_dir=base,
        lessons=("01",),
    )
    store = Store(config.database)
    store.create()
    services = Services(config, course, parse(ROSTER, roster_file), store, None, None, None)
    server = uvicorn.Server(
        uvicorn.Config(create_app(services), host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, name="live-uvicorn", daemon=True)
    thread.start()
    end = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < end, "uvicorn did not start"
        time.sleep(0.05)
    hostile = record_push(store, HOSTILE, 1, at=T0, repository=HOSTILE_REPO)
    assert store.complete(
        hostile.id,
        "w",
        status="done",
        result_json=term_results.result_json(course, ("01",), 1.0),
        graders_hash="h" * 64,
    )
    token = Staff(store.engine).add("prof", "instructor")
    try:
        yield Served(public, store, token, course)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        store.close()


@pytest.fixture(scope="module")
def browser():
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"error: {exc}"))
    page.on("dialog", lambda dialog: (problems.append(f"dialog: {dialog.message}"), dialog.dismiss()))
    page.on(
        "console",
        lambda msg: (
            problems.append(f"console: {msg.text}") if "Content Security Policy" in msg.text else None
        ),
    )
    yield page
    context.close()
    assert not problems, problems


def test_without_a_token_the_page_shows_nothing_of_the_cohort(page, served):
    answer = page.goto(served.url + "/staff/")
    assert answer.status == 401
    text = page.inner_text("body")
    assert page.locator("input[name=token]").count() == 1
    for secret in ("ana", "bea", "onerror", "Ana Alba"):
        assert secret not in text and secret not in page.content()
    assert page.evaluate("() => fetch('state').then(r => r.status)") == 401
    # A wrong token: the form again, with why, and still nothing.
    page.fill("input[name=token]", "agst_" + "x" * 43)
    page.click("button[type=submit]")
    page.wait_for_selector("#login-error")
    assert "ana" not in page.content() and page.context.cookies() == []


def test_after_login_the_grid_changes_when_a_submission_is_graded_without_a_reload(page, served):
    page.goto(served.url + "/staff/login")
    page.fill("input[name=token]", served.token)
    with page.expect_navigation():
        page.click("button[type=submit]")
    assert page.url == served.url + "/staff/?lang=es"  # no token in it
    (cookie,) = page.context.cookies()
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/curso/staff"
    assert not cookie["secure"]  # plain HTTP on 127.0.0.1 here; Secure under an https public URL
    assert served.token not in page.url and cookie["value"] != served.token
    cell = "#grid tr[data-learner='ana'] td[data-lesson='01']"
    page.wait_for_selector(cell, timeout=WAIT_MS)
    assert page.inner_text(cell) == "\u2013"  # nothing graded yet

    # The hostile name: one row whose button says it, as text; no element made of it.
    names = page.eval_on_selector_all("#grid tbody th button", "bs => bs.map(b => b.textContent)")
    assert HOSTILE in names and page.locator("#live img").count() == 0
    assert page.evaluate("() => window.__pwned === undefined")
    assert page.evaluate("() => document.cookie") == ""  # HttpOnly: no script reads the session

    navigations: list[str] = []
    page.on(
        "framenavigated", lambda frame: navigations.append(frame.url) if frame == page.main_frame else None
    )
    page.evaluate("() => { window.__kept = 'still here'; }")
    polls = int(page.get_attribute("#live", "data-polls") or "0")

    sub = record_push(served.store, "ana", 2, at=T0 + timedelta(minutes=1))
    result = term_results.result_json(served.course, ("01",), 0.5)
    assert served.store.complete(sub.id, "w", status="done", result_json=result, graders_hash="h" * 64)
    top = json.loads(result)["lessons"][0]
    expected = f"{top['score']:g}/{top['max_score']:g}"
    page.wait_for_function(
        "([sel, want]) => { const c = document.querySelector(sel); return c && c.textContent === want; }",
        arg=[cell, expected],
        timeout=WAIT_MS,
    )
    assert "partial" in (page.get_attribute(cell, "class") or "")
    assert navigations == [], navigations  # the page was not loaded again
    assert page.evaluate("() => window.__kept") == "still here"
    assert int(page.get_attribute("#live", "data-polls")) > polls

    # One learner's history, also without a reload.
    page.click("#grid tr[data-learner='ana'] th button")
    page.wait_for_function(
        "sha => document.querySelector('#history-body') && "
        "document.querySelector('#history-body').textContent.includes(sha)",
        arg=f"{2:040x}"[:12],
        timeout=WAIT_MS,
    )
    assert navigations == [] and page.evaluate("() => window.__kept") == "still here"

    # The hostile learner's history: their repository's name as text, nothing run or loaded.
    page.click(f"#grid tbody th button >> text={HOSTILE}")
    page.wait_for_function(
        "repo => document.querySelector('#history-body').textContent.includes(repo)",
        arg=HOSTILE_REPO,
        timeout=WAIT_MS,
    )
    assert page.locator("#live img, #live script").count() == 0
    assert page.evaluate("() => window.__pwned === undefined")
    assert navigations == []
