"""The live view's HTML, script and style (live.py serves them): no build step, no inline script
or style (the CSP allows 'self' only), no cohort data in the HTML.

The page is a skeleton in the reader's language; its script asks /staff/state every few seconds
and draws the grid, the queue, where the cohort is stuck and one learner's history from the
JSON, with DOM calls that set text only (textContent, never innerHTML): a learner's name or
repository written as markup shows as those characters. The texts the script needs come from
the catalogs, in a data attribute of the page (HTML-escaped JSON), like the CSRF token.
"""

from __future__ import annotations

import html
import json

from autograder.core import i18n

LABELS = (
    "col_learner",
    "col_last_push",
    "col_state",
    "waiting",
    "grading",
    "failed",
    "workers",
    "col_worker",
    "col_worker_state",
    "col_graders",
    "col_grading",
    "col_seen",
    "no_workers",
    "todos",
    "checks",
    "no_run",
    "hung",
    "errors",
    "col_lesson",
    "col_todo",
    "col_check",
    "col_stuck",
    "nothing_stuck",
    "graded",
    "choose_learner",
    "regrade_learner",
    "regrade_all",
    "confirm_all",
    "updated",
    "offline",
    "current",
    "page_link",
    "results_none",
    "nothing_waiting",
    "lost",
)


def _t(key: str, lang: str, **params: object) -> str:
    return html.escape(i18n.translate(key, lang, **params), quote=True)


def _document(lang: str, title: str, body: str, *, styled: bool, base: str) -> str:
    style = f'<link rel="stylesheet" href="{html.escape(base)}/live.css">\n' if styled else ""
    return (
        "<!doctype html>\n"
        f'<html lang="{html.escape(lang)}">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="robots" content="noindex, nofollow">\n'
        f"{style}<title>{title}</title>\n</head>\n<body>\n{body}\n</body>\n</html>\n"
    )


def login_page(*, lang: str, action: str, error: str | None = None) -> str:
    """The login form: the only page anybody without a session gets. The token is posted in the
    body (never a URL); no script, no style sheet (both need a session)."""
    note = f'<p role="alert" id="login-error">{_t(error, lang)}</p>\n' if error else ""
    other = "en" if lang == "es" else "es"
    body = (
        f"<main>\n<h1>{_t('service.live.login_heading', lang)}</h1>\n{note}"
        f'<form method="post" action="{html.escape(action, quote=True)}" autocomplete="off">\n'
        f'<label for="token">{_t("service.live.login_token", lang)}</label>\n'
        '<input type="password" id="token" name="token" required autocomplete="off" spellcheck="false">\n'
        f'<button type="submit">{_t("service.live.login_submit", lang)}</button>\n</form>\n'
        f"<p>{_t('service.live.login_help', lang)}</p>\n"
        f'<p><a href="?lang={other}" hreflang="{other}">{_t("service.live.other_language", lang)}</a></p>\n'
        "</main>"
    )
    return _document(lang, _t("service.live.login_title", lang), body, styled=False, base="")


def live_page(
    *, lang: str, base: str, name: str, role: str, csrf: str, poll_s: int, can_regrade: bool
) -> str:
    """The page's skeleton: headings and empty sections the script fills."""
    labels = {key: i18n.translate(f"service.live.{key}", lang) for key in LABELS}
    attrs = {
        "data-labels": json.dumps(labels, ensure_ascii=False),
        "data-base": base,
        "data-prefix": base.removesuffix("/staff"),
        "data-lang": lang,
        "data-csrf": csrf,
        "data-poll": str(poll_s),
        "data-regrade": "1" if can_regrade else "0",
    }
    data = " ".join(f'{key}="{html.escape(value, quote=True)}"' for key, value in attrs.items())
    other = "en" if lang == "es" else "es"
    who = _t(
        "service.live.signed_in", lang, name=name, role=i18n.translate(f"service.staff.role_{role}", lang)
    )
    regrade_all = (
        f'<button type="button" id="regrade-all">{_t("service.live.regrade_all", lang)}</button>\n'
        if can_regrade
        else ""
    )
    body = f"""<main id="live" {data}>
<header>
<h1>{_t("service.live.heading", lang)}</h1>
<p class="who">{who}</p>
<form method="post" action="{html.escape(base, quote=True)}/logout?lang={lang}">
<input type="hidden" name="csrf" value="{html.escape(csrf, quote=True)}">
<button type="submit" id="logout">{_t("service.live.logout", lang)}</button>
</form>
<p><a href="?lang={other}" hreflang="{other}">{_t("service.live.other_language", lang)}</a></p>
<p id="status" role="status">{_t("service.live.loading", lang)}</p>
<noscript><p>{_t("service.live.noscript", lang)}</p></noscript>
</header>
<section id="queue"><h2>{_t("service.live.queue", lang)}</h2>
{regrade_all}<p id="action-status" role="status"></p>
<div id="queue-body"></div></section>
<section id="grid-section"><h2>{_t("service.live.grid", lang)}</h2>
<div class="scroll"><table id="grid"></table></div></section>
<section id="stuck"><h2>{_t("service.live.stuck", lang)}</h2><div id="stuck-body"></div></section>
<section id="history"><h2>{_t("service.live.history", lang)}</h2><div id="history-body"></div></section>
</main>
<script src="{html.escape(base, quote=True)}/live.js"></script>"""
    return _document(lang, _t("service.live.title", lang), body, styled=True, base=base)


LIVE_CSS = """\
body { font-family: system-ui, sans-serif; margin: 1.5rem; color: #1f2328; line-height: 1.4; }
header form { display: inline; }
.who { color: #59636e; }
section { margin-top: 1.5rem; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; }
td, th { padding: .2rem .5rem; border-bottom: 1px solid #d1d9e0; text-align: left; white-space: nowrap; }
td.cell { text-align: right; font-variant-numeric: tabular-nums; }
.passed { background: #dafbe1; } .partial { background: #fff8c5; } .failed { background: #ffebe9; }
.none { color: #8c959f; }
.state-error, .lost { color: #cf222e; } .state-grading, .state-queued { color: #9a6700; }
button.learner { background: none; border: none; padding: 0; color: #0969da; cursor: pointer;
                 text-decoration: underline; font: inherit; }
#status.offline { color: #cf222e; }
ul.results { margin: .2rem 0 .6rem 1rem; }
code { font-family: ui-monospace, monospace; }
"""

LIVE_JS = r"""'use strict';
(function () {
  var root = document.getElementById('live');
  if (!root) { return; }
  var L = JSON.parse(root.getAttribute('data-labels'));
  var base = root.getAttribute('data-base');
  var prefix = root.getAttribute('data-prefix');
  var lang = root.getAttribute('data-lang');
  var csrf = root.getAttribute('data-csrf');
  var pollMs = 1000 * Number(root.getAttribute('data-poll'));
  var canRegrade = root.getAttribute('data-regrade') === '1';
  var chosen = null;
  var timer = null;

  // Every value from the state is set as text: nothing a learner wrote becomes markup.
  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) { node.className = cls; }
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    return node;
  }
  function add(parent, child) { parent.appendChild(child); return child; }
  function clear(node) { while (node.firstChild) { node.removeChild(node.firstChild); } }
  function when(iso) { return iso ? new Date(iso).toLocaleString(lang) : '\u2013'; }
  function num(x) { return x === null || x === undefined ? '\u2013' : String(Math.round(x * 100) / 100); }
  function row(cells, header) {
    var tr = el('tr');
    cells.forEach(function (c) { add(tr, el(header ? 'th' : 'td', null, c)); });
    return tr;
  }
  function table(headers, rows) {
    var t = el('table');
    add(add(t, el('thead')), row(headers, true));
    var body = add(t, el('tbody'));
    rows.forEach(function (r) { add(body, row(r, false)); });
    return t;
  }

  function drawGrid(state) {
    var grid = document.getElementById('grid');
    clear(grid);
    var head = add(add(grid, el('thead')), el('tr'));
    [L.col_learner, L.col_last_push, L.col_state].forEach(function (t) { add(head, el('th', null, t)); });
    state.lessons.forEach(function (lesson) {
      var th = add(head, el('th', null, lesson.id));
      th.title = lesson.title;
    });
    var body = add(grid, el('tbody'));
    state.grid.forEach(function (line) {
      var tr = add(body, el('tr'));
      tr.setAttribute('data-learner', line.learner);
      var button = add(add(tr, el('th')), el('button', 'learner', line.learner));
      button.type = 'button';
      button.addEventListener('click', function () { choose(line.learner); });
      add(tr, el('td', null, when(line.last_push)));
      add(tr, el('td', 'state-' + line.state, line.state_text));
      line.cells.forEach(function (cell) {
        var td = add(tr, el('td', 'cell ' + cell.status,
          cell.score === null ? '\u2013' : num(cell.score) + '/' + num(cell.max)));
        td.setAttribute('data-lesson', cell.lesson);
      });
    });
  }

  function drawQueue(queue) {
    var box = document.getElementById('queue-body');
    clear(box);
    var list = add(box, el('ul'));
    if (!queue.waiting.length) { add(list, el('li', null, L.waiting + ': 0')); }
    queue.waiting.forEach(function (w) { add(list, el('li', 'waiting', L.waiting + ' (' + w.text + '): ' + w.n)); });
    add(list, el('li', 'grading', L.grading + ': ' + queue.grading.length));
    add(list, el('li', 'failed', L.failed + ': ' + queue.failed));
    if (queue.grading.length) {
      add(box, table([L.col_learner, L.col_worker, L.col_seen],
        queue.grading.map(function (g) { return [g.learner, g.worker, when(g.since)]; })));
    }
    if (queue.failed_recent.length) {
      var failed = add(box, el('ul', 'failed'));
      queue.failed_recent.forEach(function (f) {
        add(failed, el('li', f.lost ? 'lost' : null, f.learner + ' \u00b7 ' + when(f.at) + ' \u00b7 ' + f.reason));
      });
    }
    add(box, el('h3', null, L.workers));
    if (!queue.workers.length) { add(box, el('p', null, L.no_workers)); return; }
    add(box, table([L.col_worker, L.col_worker_state, L.col_graders, L.col_grading, L.col_seen],
      queue.workers.map(function (w) {
        return [w.name, w.state_text + (w.detail ? ' \u00b7 ' + w.detail : ''), w.graders, w.grading, when(w.seen)];
      })));
  }

  function drawStuck(stuck) {
    var box = document.getElementById('stuck-body');
    clear(box);
    add(box, el('p', null, L.graded + ': ' + stuck.graded));
    var any = false;
    function rates(title, items, col) {
      if (!items.length) { return; }
      any = true;
      add(box, el('h3', null, title));
      add(box, table([col, L.col_lesson, L.col_stuck], items.map(function (r) {
        return [r.id, r.lesson, r.stuck + ' / ' + r.total];
      })));
    }
    rates(L.todos, stuck.todos, L.col_todo);
    rates(L.checks, stuck.checks, L.col_check);
    function listed(title, items, line) {
      if (!items.length) { return; }
      any = true;
      add(box, el('h3', null, title));
      var ul = add(box, el('ul'));
      items.forEach(function (item) { add(ul, el('li', null, line(item))); });
    }
    listed(L.no_run, stuck.no_run, function (n) {
      return n.learner + ' \u00b7 ' + n.lesson + ' \u00b7 ' + n.where.join(', ') + ' \u00b7 ' + n.why.join(' / ');
    });
    listed(L.hung, stuck.hung, function (h) {
      return h.learner + ' \u00b7 ' + h.lesson + ' \u00b7 ' + h.checks.join(', ');
    });
    listed(L.errors, stuck.errors, function (e) { return e.learner + ' \u00b7 ' + e.reason; });
    if (!any) { add(box, el('p', null, L.nothing_stuck)); }
  }

  function drawHistory(history) {
    var box = document.getElementById('history-body');
    clear(box);
    if (!history) { add(box, el('p', null, L.choose_learner)); return; }
    add(box, el('h3', null, history.learner));
    if (canRegrade) {
      var again = add(box, el('button', null, L.regrade_learner));
      again.type = 'button';
      again.id = 'regrade-learner';
      again.addEventListener('click', function () { regrade([history.learner]); });
    }
    var list = add(box, el('ol', 'submissions'));
    history.submissions.forEach(function (s) {
      var li = add(list, el('li'));
      add(li, el('code', null, s.sha.slice(0, 12)));
      add(li, el('span', null, ' \u00b7 ' + s.repository + ' \u00b7 ' + when(s.submitted) + ' \u00b7 '));
      add(li, el('span', 'state-' + s.state, s.state_text));
      add(li, el('span', null, ' \u00b7 '));
      var link = add(li, el('a', null, L.page_link));
      link.href = prefix + s.page;
      link.rel = 'noreferrer';
      var results = add(li, el('ul', 'results'));
      if (!s.results.length) { add(results, el('li', null, L.results_none)); }
      s.results.forEach(function (r) {
        var text = num(r.score) + '/' + num(r.max) + ' \u00b7 ' + r.graders + ' \u00b7 ' + when(r.created);
        if (r.lane) { text += ' \u00b7 ' + r.lane; }
        if (r.reason) { text += ' \u00b7 ' + r.reason; }
        if (r.current) { text += ' \u00b7 ' + L.current; }
        add(results, el('li', 'result-' + r.status, text));
      });
    });
  }

  function setStatus(text, bad) {
    var status = document.getElementById('status');
    status.textContent = text;
    status.className = bad ? 'offline' : '';
  }

  function draw(state) {
    drawGrid(state);
    drawQueue(state.queue);
    drawStuck(state.stuck);
    drawHistory(state.history || null);
  }

  function poll() {
    if (timer !== null) { clearTimeout(timer); timer = null; }
    var url = base + '/state?lang=' + encodeURIComponent(lang);
    if (chosen !== null) { url += '&learner=' + encodeURIComponent(chosen); }
    fetch(url, { credentials: 'same-origin', cache: 'no-store', headers: { 'Accept': 'application/json' } })
      .then(function (answer) {
        if (answer.status === 401) {  // the session ended (revoked, expired): the login form
          window.location.assign(base + '/login?lang=' + encodeURIComponent(lang));
          return null;
        }
        if (!answer.ok) { throw new Error(String(answer.status)); }
        return answer.json();
      })
      .then(function (state) {
        if (state === null) { return; }
        draw(state);
        setStatus(L.updated + ' ' + new Date().toLocaleTimeString(lang), false);
        root.setAttribute('data-polls', String(Number(root.getAttribute('data-polls') || '0') + 1));
        timer = setTimeout(poll, pollMs);
      })
      .catch(function () {
        setStatus(L.offline, true);
        timer = setTimeout(poll, pollMs);
      });
  }

  function choose(learner) { chosen = learner; poll(); }

  function regrade(learners) {
    var body = learners ? { learners: learners } : {};
    fetch(base + '/regrade?lang=' + encodeURIComponent(lang), {
      method: 'POST',
      credentials: 'same-origin',
      cache: 'no-store',
      headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': csrf },
      body: JSON.stringify(body)
    }).then(function (answer) { return answer.json(); })
      .then(function (said) { document.getElementById('action-status').textContent = said.message; poll(); })
      .catch(function () { setStatus(L.offline, true); });
  }

  var all = document.getElementById('regrade-all');
  if (all) {
    all.addEventListener('click', function () { if (window.confirm(L.confirm_all)) { regrade(null); } });
  }
  poll();
}());
"""
