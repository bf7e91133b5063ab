"""autograder/github/ (api.py, rest.py, actions.py, texts.py) against a real local HTTP server that
emulates the GitHub REST endpoints it uses, plus workflow-command escaping, environment files and
the stdlib-only promise."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml
from support.fake_github import BOT, HEAD_SHA, REPO, TOKEN, FakeGitHub

from autograder.github import actions, texts
from autograder.github import api as github
from autograder.github.actions import annotation, append_summary, escape_data, escape_property, set_output
from autograder.github.rest import DEFAULT_MARKER, GitHubAPI, GitHubError

ROOT = Path(__file__).resolve().parents[2]
SHA = "0123456789abcdef0123456789abcdef01234567"
NOTE_COMMENT_ES = "_(Mensaje recortado: superaba el tamaño máximo de un comentario de GitHub.)_"
NOTE_SUMMARY_ES = "_(Resumen recortado: superaba el tamaño máximo del resumen de un job de GitHub, 1 MiB.)_"
HUMAN = {"login": "profe", "type": "User"}


@pytest.fixture
def fake(monkeypatch):
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    with FakeGitHub() as state:
        yield state


@pytest.fixture
def api(fake):
    return GitHubAPI(fake.base, TOKEN, REPO, timeout=10)


# --- REST -----------------------------------------------------------------------------------


def test_upsert_creates_once_then_updates(fake, api):
    url = api.upsert_comment("commit", SHA, "## Nota: 3/10")
    assert url.endswith(f"#comment-{fake.next_id}")
    [comment] = fake.all_comments()
    assert comment["body"] == f"{DEFAULT_MARKER}\n## Nota: 3/10\n"
    assert api.upsert_comment("commit", SHA, "## Nota: 10/10") == url
    assert api.upsert_comment("commit", SHA.upper(), "## Nota: 9/10") == url  # same commit
    [comment] = fake.all_comments()
    assert comment["body"] == f"{DEFAULT_MARKER}\n## Nota: 9/10\n"
    assert fake.count("POST") == 1 and fake.count("PATCH") == 2
    patch_paths = [p for m, p, _ in fake.requests if m == "PATCH"]
    assert patch_paths == [f"/repos/{REPO}/comments/{comment['id']}"] * 2


def test_upsert_finds_its_comment_on_a_later_page(fake, api):
    for i in range(5):
        fake.add_comment("commit", SHA, f"comentario {i}", HUMAN if i % 2 else BOT)
    ours = fake.add_comment("commit", SHA, f"{DEFAULT_MARKER}\nantigua", BOT)  # 6th: page 3 of 2
    url = api.upsert_comment("commit", SHA, "nueva")
    assert url == ours["html_url"]
    assert len(fake.all_comments()) == 6 and ours["body"] == f"{DEFAULT_MARKER}\nnueva\n"
    pages = [p for m, p, _ in fake.requests if m == "GET"]
    assert any("page=3" in p for p in pages) and len(pages) == 3
    assert "per_page=100" in pages[0]


def test_upsert_ignores_a_human_quoting_the_marker(fake, api):
    quoted = f"> {DEFAULT_MARKER}\n> ¿Por qué falla esto?"
    human = fake.add_comment("issue", "7", quoted, HUMAN)
    other_bot = fake.add_comment("issue", "7", "CI de otro bot, sin marcador", BOT)
    first = api.upsert_comment("issue", 7, "feedback 1")
    assert first not in (human["html_url"], other_bot["html_url"])
    assert api.upsert_comment("issue", "7", "feedback 2") == first
    assert human["body"] == quoted and other_bot["body"] == "CI de otro bot, sin marcador"
    ours = [c for c in fake.all_comments() if c["body"].startswith(DEFAULT_MARKER)]
    assert len(ours) == 1 and ours[0]["body"] == f"{DEFAULT_MARKER}\nfeedback 2\n"
    assert [p for m, p, _ in fake.requests if m == "PATCH"] == [
        f"/repos/{REPO}/issues/comments/{ours[0]['id']}"
    ]


def test_upsert_with_a_custom_marker_keeps_comments_apart(fake, api):
    a = api.upsert_comment("issue", 7, "lección 03", "<!-- autograder:lesson-03 -->")
    b = api.upsert_comment("issue", 7, "lección 04", "<!-- autograder:lesson-04 -->")
    assert a != b and len(fake.all_comments()) == 2
    with pytest.raises(ValueError):
        api.upsert_comment("issue", 7, "x", "not a marker")
    with pytest.raises(ValueError):
        api.upsert_comment("issue", 7, "x", "<!-- a --> <!-- b -->")


def test_long_body_is_truncated_to_githubs_limit(fake, api):
    line = "😀 línea con emoji y texto " * 3
    body = f"{DEFAULT_MARKER}\n```text\n" + "\n".join([line] * 2000) + "\n```\nfin"  # marker inside too
    api.upsert_comment("commit", SHA, body)
    [comment] = fake.all_comments()
    stored = comment["body"]
    assert len(stored.encode("utf-16-le")) // 2 <= 65536
    assert len(stored.encode("utf-16-le")) // 2 > 60000  # cut near the limit, not far below
    assert stored.startswith(DEFAULT_MARKER + "\n") and stored.count(DEFAULT_MARKER) == 1
    assert stored.rstrip("\n").endswith(NOTE_COMMENT_ES)
    assert stored.count("```") % 2 == 0  # the open code fence was closed before the note
    api.upsert_comment("commit", SHA, body, lang="en")
    assert (
        fake.all_comments()[0]["body"]
        .rstrip()
        .endswith("_(Message truncated: it exceeded the maximum size of a GitHub comment.)_")
    )


def test_commit_status_description_is_truncated(fake, api):
    data = api.set_commit_status(
        SHA,
        "success",
        "Nota: 10/10 · " + "x" * 300,
        "autograder/03",
        target_url="https://github.example/run/1",
    )
    [status] = fake.statuses
    assert len(status["description"]) == 140 and status["description"].endswith("…")
    assert status["description"].startswith("Nota: 10/10 · xxx")
    assert (status["state"], status["context"], status["target_url"]) == (
        "success",
        "autograder/03",
        "https://github.example/run/1",
    )
    assert data["url"].endswith(f"/statuses/{SHA}")
    api.set_commit_status(SHA, "failure", "corto", "autograder/04")
    assert fake.statuses[1]["description"] == "corto" and "target_url" not in fake.statuses[1]
    for bad in (("nope", "success"), (SHA, "bogus")):
        with pytest.raises(ValueError):
            api.set_commit_status(bad[0], bad[1], "d", "c")
    assert len(fake.statuses) == 2


def test_errors_surface_as_github_error(fake, api):
    with pytest.raises(GitHubError) as info:
        api.upsert_comment("issue", 999, "x")
    assert (info.value.status, info.value.message) == (404, "Not Found")
    with pytest.raises(GitHubError) as info:
        api.request("POST", f"/repos/{REPO}/statuses/{SHA}", {"state": "bogus", "context": "c"})
    assert info.value.status == 422
    assert info.value.message == "Validation Failed: state is not included in the list"
    with pytest.raises(GitHubError) as info:
        api.pull_request_head_sha(8)
    assert info.value.status == 404
    with pytest.raises(GitHubError) as info:
        GitHubAPI(fake.base, "wrong-token", REPO).request("GET", f"/repos/{REPO}/pulls/7")
    assert (info.value.status, info.value.message) == (401, "Bad credentials")
    assert TOKEN not in str(info.value) and "wrong-token" not in str(info.value)


def test_headers_and_pull_request_head(fake, api):
    assert api.pull_request_head_sha(7) == HEAD_SHA
    _, path, headers = fake.requests[-1]
    assert path == f"/repos/{REPO}/pulls/7"
    assert headers["Authorization"] == f"Bearer {TOKEN}"
    assert headers["Accept"] == "application/vnd.github+json"
    assert headers["X-GitHub-Api-Version"] == "2022-11-28"
    assert headers["User-Agent"].startswith("transformers-desde-cero-autograder/")
    assert TOKEN not in repr(api)
    for bad in (0, -1, "7a", "", True):
        with pytest.raises(ValueError):
            api.pull_request_head_sha(bad)


def test_pagination_never_follows_another_host(fake, api):
    for i in range(3):
        fake.add_comment("commit", SHA, f"c{i}", HUMAN)
    fake.foreign_next = True
    with pytest.raises(GitHubError) as info:
        list(api.paginate(f"/repos/{REPO}/commits/{SHA}/comments"))
    assert "another host" in info.value.message and info.value.status == 0
    fake.foreign_next = False
    assert [c["body"] for c in api.paginate(f"/repos/{REPO}/commits/{SHA}/comments")] == ["c0", "c1", "c2"]


def test_unreachable_api_is_a_github_error(fake):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(GitHubError) as info:
        GitHubAPI(f"http://127.0.0.1:{port}", TOKEN, REPO, timeout=5).request("GET", "/x")
    assert info.value.status == 0 and TOKEN not in str(info.value)


def test_constructor_validates():
    for args in (
        ("ftp://x", TOKEN, REPO),
        ("https://api.github.com", "", REPO),
        ("https://api.github.com", TOKEN, "no-slash"),
        ("https://api.github.com", TOKEN, "a/b/c"),
    ):
        with pytest.raises(ValueError):
            GitHubAPI(*args)
    api = GitHubAPI.from_env({"GH_TOKEN": TOKEN, "GITHUB_REPOSITORY": REPO})
    assert api.api_url == "https://api.github.com" and api.repository == REPO


# --- command line ---------------------------------------------------------------------------


def run_cli(fake, *args: str, env_extra: dict | None = None, drop: tuple[str, ...] = ()):
    env = {
        "PATH": os.environ.get("PATH", ""),
        "GITHUB_API_URL": fake.base,
        "GITHUB_TOKEN": TOKEN,
        "GITHUB_REPOSITORY": REPO,
        "PYTHONDONTWRITEBYTECODE": "1",
        **(env_extra or {}),
    }
    for name in drop:
        env.pop(name, None)
    proc = subprocess.run(
        [sys.executable, "-m", "autograder.github.api", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert TOKEN not in proc.stdout and TOKEN not in proc.stderr
    return proc


def test_cli_comment_creates_then_updates(fake, tmp_path):
    body = tmp_path / "feedback.md"
    body.write_text("# Lección 03\n\nNota: 3/10\n", encoding="utf-8")
    first = run_cli(fake, "comment", "--kind", "commit", "--target", SHA, "--body-file", str(body))
    assert first.returncode == 0, first.stderr
    body.write_text("# Lección 03\n\nNota: 10/10 `$(rm -rf ~)`\n", encoding="utf-8")
    second = run_cli(fake, "comment", "--kind", "commit", "--target", SHA, "--body-file", str(body))
    assert second.returncode == 0, second.stderr
    assert first.stdout.strip() == second.stdout.strip() != ""
    [comment] = fake.all_comments()
    assert comment["body"] == f"{DEFAULT_MARKER}\n# Lección 03\n\nNota: 10/10 `$(rm -rf ~)`\n"

    pr = run_cli(
        fake,
        "comment",
        "--kind",
        "issue",
        "--target",
        "7",
        "--body-file",
        str(body),
        "--marker",
        "<!-- autograder:pr -->",
        drop=("GITHUB_TOKEN",),
        env_extra={"GH_TOKEN": TOKEN},
    )
    assert pr.returncode == 0, pr.stderr
    assert fake.comments[("issue", "7")][0]["body"].startswith("<!-- autograder:pr -->\n")


def test_cli_status(fake):
    proc = run_cli(
        fake,
        "status",
        "--sha",
        SHA,
        "--state",
        "success",
        "--description",
        "Nota " + "9" * 200,
        "--context",
        "autograder",
        "--target-url",
        "https://github.example/runs/1",
    )
    assert proc.returncode == 0, proc.stderr
    [status] = fake.statuses
    assert len(status["description"]) == 140 and status["target_url"] == "https://github.example/runs/1"
    assert proc.stdout.strip().endswith(f"/statuses/{SHA}")


@pytest.mark.parametrize(
    "args, drop, expected",
    [
        (
            ["status", "--sha", "abc123", "--state", "success", "--description", "d", "--context", "c"],
            (),
            "40 hexadecimal",
        ),
        (
            ["status", "--sha", SHA, "--state", "bogus", "--description", "d", "--context", "c"],
            (),
            "invalid choice",
        ),
        (
            [
                "status",
                "--sha",
                SHA,
                "--state",
                "success",
                "--description",
                "d",
                "--context",
                "c",
                "--target-url",
                "javascript:alert(1)",
            ],
            (),
            "http(s)",
        ),
        (
            ["status", "--sha", SHA, "--state", "success", "--description", "d", "--context", " "],
            (),
            "context",
        ),
        (["comment", "--kind", "issue", "--target", "0", "--body-file", "{body}"], (), "positive integer"),
        (["comment", "--kind", "issue", "--target", "-3", "--body-file", "{body}"], (), "positive integer"),
        (
            ["comment", "--kind", "issue", "--target", "7; rm -rf /", "--body-file", "{body}"],
            (),
            "positive integer",
        ),
        (["comment", "--kind", "commit", "--target", "7", "--body-file", "{body}"], (), "40 hexadecimal"),
        (
            ["comment", "--kind", "commit", "--target", SHA, "--body-file", "/nonexistent/f.md"],
            (),
            "cannot read",
        ),
        (
            ["comment", "--kind", "commit", "--target", SHA, "--body-file", "{body}", "--marker", "<b>"],
            (),
            "marker",
        ),
        (["comment", "--kind", "pr", "--target", "7", "--body-file", "{body}"], (), "invalid choice"),
        (
            ["comment", "--kind", "commit", "--target", SHA, "--body-file", "{body}"],
            ("GITHUB_TOKEN",),
            "GITHUB_TOKEN",
        ),
        (
            ["comment", "--kind", "commit", "--target", SHA, "--body-file", "{body}"],
            ("GITHUB_REPOSITORY",),
            "GITHUB_REPOSITORY",
        ),
        ([], (), "required"),
    ],
)
def test_cli_bad_input_exits_2_before_any_request(fake, tmp_path, args, drop, expected):
    body = tmp_path / "b.md"
    body.write_text("hola", encoding="utf-8")
    proc = run_cli(fake, *[a.replace("{body}", str(body)) for a in args], drop=drop)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert expected in proc.stderr
    assert "Traceback" not in proc.stderr
    assert fake.requests == []


def test_cli_api_error_exits_1_with_githubs_message(fake, tmp_path):
    body = tmp_path / "b.md"
    body.write_text("hola", encoding="utf-8")
    proc = run_cli(fake, "comment", "--kind", "issue", "--target", "999", "--body-file", str(body))
    assert proc.returncode == 1
    assert "404" in proc.stderr and "Not Found" in proc.stderr and "Traceback" not in proc.stderr
    bad = run_cli(
        fake,
        "status",
        "--sha",
        SHA,
        "--state",
        "success",
        "--description",
        "d",
        "--context",
        "c",
        env_extra={"GITHUB_TOKEN": "wrong-" + TOKEN},
    )
    assert bad.returncode == 1 and "Bad credentials" in bad.stderr


# --- workflow commands ----------------------------------------------------------------------


def _unescape(text: str, prop: bool) -> str:
    if prop:
        text = text.replace("%3A", ":").replace("%2C", ",")
    return text.replace("%0D", "\r").replace("%0A", "\n").replace("%25", "%")


def parse_command(line: str) -> tuple[str, dict[str, str], str]:
    """A workflow command as the runner reads it: ::name k=v,k=v::message"""
    assert line.startswith("::") and "\n" not in line and "\r" not in line
    end = line.index("::", 2)
    head, message = line[2:end], line[end + 2 :]
    name, _, props = head.partition(" ")
    parsed = {}
    for item in filter(None, props.split(",")):
        key, _, value = item.partition("=")
        parsed[key] = _unescape(value, prop=True)
    return name, parsed, _unescape(message, prop=False)


def test_escaping_functions():
    assert escape_data("100% listo\r\nsiguiente: a, b") == "100%25 listo%0D%0Asiguiente: a, b"
    assert escape_property("100% listo\r\nsiguiente: a, b") == "100%25 listo%0D%0Asiguiente%3A a%2C b"
    assert escape_data("%0A") == "%250A"  # already-escaped text is not unescaped by the runner


def test_annotation_escapes_every_part():
    line = annotation(
        "error",
        "50% hecho\nfalta: a, b",
        file="lecciones/03: atención, v2.py",
        line=57,
        end_line=60,
        title="TODO [mask]: fuga, 100%",
    )
    assert line == (
        "::error file=lecciones/03%3A atención%2C v2.py,line=57,endLine=60,"
        "title=TODO [mask]%3A fuga%2C 100%25::50%25 hecho%0Afalta: a, b"
    )
    name, props, message = parse_command(line)
    assert name == "error"
    assert props == {
        "file": "lecciones/03: atención, v2.py",
        "line": "57",
        "endLine": "60",
        "title": "TODO [mask]: fuga, 100%",
    }
    assert message == "50% hecho\nfalta: a, b"
    # Hostile text cannot start a second command on its own line.
    hostile = annotation("notice", "ok\n::add-mask::x\r\n::error::boom", title="a::b")
    assert hostile.count("\n") == 0 and parse_command(hostile)[1] == {"title": "a::b"}
    assert annotation("warning", "solo") == "::warning::solo"
    for bad in (dict(level="fatal"), dict(level="error", line=0), dict(level="error", end_line="3")):
        level = bad.pop("level")
        with pytest.raises(ValueError):
            annotation(level, "m", **bad)


def parse_env_file(text: str) -> dict[str, str]:
    """GITHUB_OUTPUT as GitHub documents it: `name=value` lines, or `name<<DELIM`, value lines,
    then a line that is exactly DELIM."""
    out: dict[str, str] = {}
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    i = 0
    while i < len(lines):
        line = lines[i]
        eq, heredoc = line.find("="), line.find("<<")
        if heredoc >= 0 and (eq < 0 or heredoc < eq):
            name, delimiter = line[:heredoc], line[heredoc + 2 :]
            value = []
            i += 1
            while i < len(lines) and lines[i] != delimiter:
                value.append(lines[i])
                i += 1
            assert i < len(lines), "unterminated heredoc"
            out[name] = "\n".join(value)
        elif eq > 0:
            out[line[:eq]] = line[eq + 1 :]
        else:
            raise AssertionError(f"invalid line {line!r}")
        i += 1
    return out


def test_set_output_cannot_be_hijacked(tmp_path, monkeypatch):
    out = tmp_path / "output"
    out.write_text("", encoding="utf-8")
    env = {"GITHUB_OUTPUT": str(out)}
    planted = uuid.UUID("00000000-0000-4000-8000-000000000001")
    hostile = (
        f"primera\nghadelimiter_{planted}\nresult=pass\nscore=100\nEOF\nother<<EOF\nx\nEOF\nghadelimiter_\n"
    )
    # The first delimiter drawn occurs in the value: it must be refused and another drawn.
    draws = iter([planted, uuid.UUID("00000000-0000-4000-8000-000000000002")])
    monkeypatch.setattr(actions.uuid, "uuid4", lambda: next(draws))
    assert set_output("result", hostile, env) is True
    text = out.read_text(encoding="utf-8")
    assert parse_env_file(text) == {"result": hostile}
    assert f"ghadelimiter_{planted}\n" in text and text.endswith(
        "ghadelimiter_00000000-0000-4000-8000-000000000002\n"
    )
    monkeypatch.undo()
    assert set_output("seed", 1234, env) is True
    assert parse_env_file(out.read_text(encoding="utf-8")) == {"result": hostile, "seed": "1234"}


def test_set_output_validates_the_name_and_needs_actions(tmp_path):
    for bad in ("", "a=b", "a<<b", "a\nb", "1x", "a b"):
        with pytest.raises(ValueError):
            set_output(bad, "v", {"GITHUB_OUTPUT": str(tmp_path / "o")})
    assert set_output("x", "v", {}) is False
    assert not (tmp_path / "o").exists()


def test_append_summary(tmp_path):
    summary = tmp_path / "summary.md"
    assert append_summary("# Hola", {}) is False
    assert append_summary("# Hola", {"GITHUB_STEP_SUMMARY": str(summary)}) is True
    assert append_summary("segunda\n", {"GITHUB_STEP_SUMMARY": str(summary)}) is True
    assert summary.read_text(encoding="utf-8") == "# Hola\nsegunda\n"


def test_append_summary_truncates_to_one_mib(tmp_path):
    summary = tmp_path / "summary.md"
    summary.write_text("x" * 300_000 + "\n", encoding="utf-8")  # what earlier calls wrote
    block = "\n".join("línea ñ " + "a" * 60 for _ in range(20_000))
    markdown = (
        f"# Resumen\n\n<details><summary>traza</summary>\n\n````text\n{block}\n````\n\n</details>\nfin\n"
    )
    assert len(markdown.encode("utf-8")) > 1024 * 1024
    assert append_summary(markdown, {"GITHUB_STEP_SUMMARY": str(summary)}) is True
    raw = summary.read_bytes()
    assert len(raw) <= 1024 * 1024 and len(raw) > 1024 * 1024 - 200
    text = raw.decode("utf-8")  # cut on a character boundary
    added = text[300_001:]
    assert added.startswith("# Resumen\n") and "fin" not in added[-200:]
    assert added.rstrip("\n").endswith(NOTE_SUMMARY_ES)
    assert added.count("````") == 2 and added.count("</details>") == 1  # closed before the note
    assert (
        added.index("````", added.index("````") + 1)
        < added.index("</details>")
        < added.index(NOTE_SUMMARY_ES)
    )


def test_catalog_reader_agrees_with_yaml():
    for lang in ("es", "en"):
        path = ROOT / "autograder" / "messages" / lang / "formats.yml"
        expected = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert texts.catalog_messages(lang) == expected
        assert {"formats.truncated_comment", "formats.truncated_summary"} <= set(expected)
        ci = yaml.safe_load((path.parent / "ci.yml").read_text(encoding="utf-8"))
        assert texts.catalog_messages(lang, "ci") == ci and {"ci.pr_status", "ci.pr_title"} <= set(ci)


def _modules_loaded_by(module: str) -> list[str]:
    """Every module that `import module` adds, in a bare interpreter: -I (no environment, no user
    site) and -S (no site-packages on the path at all), as a workflow step's bare checkout has."""
    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "before = set(sys.modules)\n"
        f"import {module}\n"
        "print(repr(sorted(set(sys.modules) - before)))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return eval(proc.stdout)


def test_imports_only_the_standard_library():
    new = _modules_loaded_by("autograder.github.api")
    bad = [
        m for m in new if m.split(".")[0] not in sys.stdlib_module_names and m.split(".")[0] != "autograder"
    ]
    ours = [m for m in new if m.split(".")[0] == "autograder"]
    heavy = [m for m in ("yaml", "rich", "torch", "numpy", "jsonschema", "pytest") if m in new]
    assert bad == [] and heavy == []
    assert sorted(ours) == [
        "autograder",
        "autograder.core",
        "autograder.core.neutral",
        "autograder.github",
        "autograder.github.api",
        "autograder.github.rest",
        "autograder.github.texts",
    ]  # neutral: stdlib only too


def test_workflow_commands_import_only_the_standard_library():
    # steps.py writes every workflow command and output through actions.py: the same promise.
    new = _modules_loaded_by("autograder.github.actions")
    assert sorted(m for m in new if m.split(".")[0] not in sys.stdlib_module_names) == [
        "autograder",
        "autograder.github",
        "autograder.github.actions",
        "autograder.github.texts",
    ]


# --- a pull request's grade (grade-comment.yml) ---------------------------------------------


def forged_artifact(folder: Path, number: int = 7) -> Path:
    """What a pull request that rewrote grade.yml can upload: any comment.md and status.json,
    a results.json claiming every XP, with Markdown and escape sequences in its texts."""
    import json

    folder.mkdir()
    (folder / "pr.json").write_text(json.dumps({"number": number, "head_sha": HEAD_SHA}), encoding="utf-8")
    (folder / "comment.md").write_text("## ✔ XP 300/300 · verificado por el profesor\n", encoding="utf-8")
    (folder / "status.json").write_text(json.dumps({"description": "XP 300/300"}), encoding="utf-8")
    title = "## ✔ XP 300/300 [click](http://x) <img src=x> \x1b]52;c;SGk=\x07"
    (folder / "results.json").write_text(
        json.dumps(
            {
                "course": "c",
                "language": "es",
                "xp": 300,
                "xp_max": 300,
                "score": 600,
                "max_score": 600,
                "lessons": [
                    {
                        "id": "01",
                        "title": title,
                        "score": 100,
                        "max_score": 100,
                        "xp": 50,
                        "xp_max": 50,
                        "completed": True,
                        "checks": [{"id": "vocab", "status": "passed"}],
                    }
                ],
            }
        ),
        encoding="utf-8",
    )
    return folder


def test_cli_pr_comment_says_unverified_whatever_the_artifact_claims(fake, tmp_path):
    artifact = forged_artifact(tmp_path / "graded")
    proc = run_cli(
        fake,
        "pr-comment",
        "--graded-dir",
        str(artifact),
        "--head-sha",
        HEAD_SHA,
        "--run-url",
        "https://github.example/o/r/actions/runs/9",
    )
    assert proc.returncode == 0, proc.stderr
    [comment] = fake.comments_on("issue", "7")
    body = comment["body"]
    assert "Nota de práctica, sin verificar." in body and "verificado por el profesor" not in body
    assert "\n## " not in body and "<img" not in body and "\x1b" not in body and "](http://x)" not in body
    [status] = fake.statuses
    assert status["description"] == "Práctica, sin verificar: el pull request calcula 300/300 XP"
    # Never the context of a push's grade (a practice one included): a pull request's own run can
    # neither overwrite that status nor satisfy a branch protection rule that requires it.
    from autograder.github.steps import PRACTICE_STATUS_CONTEXT, STATUS_CONTEXT

    assert status["context"] == github.PR_STATUS_CONTEXT == "autograder / práctica (PR)"
    assert len({github.PR_STATUS_CONTEXT, STATUS_CONTEXT, PRACTICE_STATUS_CONTEXT}) == 3


def test_cli_pr_comment_refuses_an_artifact_without_results(fake, tmp_path):
    artifact = forged_artifact(tmp_path / "graded")
    (artifact / "results.json").write_text('{"xp": "300", "lessons": []}', encoding="utf-8")
    proc = run_cli(fake, "pr-comment", "--graded-dir", str(artifact), "--head-sha", HEAD_SHA)
    assert proc.returncode == 2 and "results.json" in proc.stderr and "Traceback" not in proc.stderr
    (artifact / "results.json").unlink()
    proc = run_cli(fake, "pr-comment", "--graded-dir", str(artifact), "--head-sha", HEAD_SHA)
    assert proc.returncode == 2 and "no results.json" in proc.stderr
    assert fake.requests == []
