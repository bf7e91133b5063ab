"""`autograder handout` against the GitHub stand-in over real HTTP
(tests/support/fake_github.py, one server for the module): private repositories created once from the
template in the organization, learners invited with write and never admin, a wrong pending
invitation fixed, an admin demoted, a public repository left alone, a renamed repository found by
its id; a rerun changes nothing (no mutating request, the roster byte-identical); a run killed
half-way (GitHub answering 500, or SIGKILL) resumes; rate-limit answers are waited out for real
and a wait past --max-wait stops the run cleanly; a learner that fails costs only that learner."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.fake_github import TOKEN, FakeGitHub
from support.learner_course import cli_env
from support.project import ROOT

from autograder import cli
from autograder.core import roster as rosters

MUTATING = ("POST", "PUT", "PATCH", "DELETE")
_names = itertools.count(1)


@pytest.fixture(scope="module")
def fake():
    with FakeGitHub() as server:
        yield server


@pytest.fixture
def github(fake, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_API_URL", fake.url)
    monkeypatch.delenv("GH_TOKEN", raising=False)
    monkeypatch.delenv("AUTOGRADER_LANG", raising=False)
    yield fake
    fake.fail_after(None)
    fake.armed.clear()


class Course:
    """One organization with its template and learners, fresh for each test (the stand-in is
    shared by the module)."""

    def __init__(self, fake: FakeGitHub, tmp_path: Path, logins: tuple[str, ...] = ("ana", "beto", "carla")):
        n = next(_names)
        self.fake, self.org = fake, f"curso-{n}"
        self.template = f"{self.org}/plantilla"
        fake.add_org(self.org)
        fake.add_repo(self.template, is_template=True)
        self.logins = {login: f"{login}-{n}" for login in logins}
        fake.add_user(*self.logins.values())
        self.path = tmp_path / "roster.yml"

    def write(self, learners: str | None = None, head: str | None = None) -> Path:
        if learners is None:
            learners = "".join(
                f"  # {ident}\n  - id: {ident}\n    name: {ident.title()} Pérez\n"
                f"    github: {login}   # su usuario\n"
                for ident, login in self.logins.items()
            )
        head = (
            head
            if head is not None
            else (
                f"# Curso de prueba\nversion: 1\norganization: {self.org}\n"
                f"template: {self.template}\nrepository_prefix: tdc-\n"
            )
        )
        self.path.write_text(head + "learners:\n" + learners, encoding="utf-8")
        return self.path

    def repo_of(self, ident: str) -> dict | None:
        return self.fake.repo(f"{self.org}/tdc-{self.logins[ident]}")


def handout(capsys, *args) -> tuple[int, str, str]:
    code = cli.main(["handout", *map(str, args)])
    out, err = capsys.readouterr()
    assert TOKEN not in out + err  # the token is never printed
    return code, out, err


def mutations(fake: FakeGitHub, since: int) -> list[dict]:
    return [entry for entry in fake.log[since:] if entry["method"] in MUTATING]


# ------------------------------------------------------------------ the whole cycle


def test_repositories_created_once_private_from_the_template_learners_invited_write(github, tmp_path, capsys):
    course = Course(github, tmp_path)
    path = course.write()
    original = path.read_text(encoding="utf-8")
    start = len(github.log)

    code, out, err = handout(capsys, path, "--pause", "0")
    assert code == 0, out + err
    created = mutations(github, start)
    generates = [entry for entry in created if entry["path"].endswith("/generate")]
    assert [entry["path"] for entry in generates] == [f"/repos/{course.template}/generate"] * 3
    for ident, login in course.logins.items():
        repo = course.repo_of(ident)
        assert repo["private"] and repo["owner"]["login"] == course.org
        assert repo["template_repository"]["full_name"] == course.template
        invitations = repo["invitations"]
        assert [(i["invitee"]["login"], i["permissions"]) for i in invitations] == [(login, "write")]
        assert repo["collaborators"] == {}
        assert f"{ident}: creado el repositorio privado {repo['full_name']} desde {course.template}." in out
        assert f"{ident}: {login} invitado con permiso de escritura a {repo['full_name']}" in out
    assert all(
        entry["body"]["private"] is True and entry["body"]["owner"] == course.org for entry in generates
    )
    puts = [entry for entry in created if entry["method"] == "PUT"]
    assert len(puts) == 3 and all(entry["body"] == {"permission": "push"} for entry in puts)
    assert "admin" not in repr([entry["body"] for entry in created])
    assert "Hecho: 3 alumnos listos, 0 con error." in out

    # The roster learned each repository and its id, its comments and layout kept.
    expected = original
    for ident, login in course.logins.items():
        repo = course.repo_of(ident)
        expected = expected.replace(
            f"    github: {login}   # su usuario\n",
            f"    github: {login}   # su usuario\n    repository: {repo['full_name']}\n"
            f"    repository_id: {repo['id']}\n",
        )
    assert path.read_text(encoding="utf-8") == expected

    # A rerun: no mutating request, the roster byte-identical, each learner still to accept.
    before, start = path.read_bytes(), len(github.log)
    code, out, _ = handout(capsys, path, "--pause", "0")
    assert code == 0 and mutations(github, start) == [] and path.read_bytes() == before
    assert out.count("falta que la acepte") == 3
    # Once they accept: ready, and still nothing changed.
    for ident, login in course.logins.items():
        github.accept(course.repo_of(ident)["full_name"], login)
    start = len(github.log)
    code, out, _ = handout(capsys, path, "--pause", "0", "--lang", "en")
    assert code == 0 and mutations(github, start) == [] and path.read_bytes() == before
    assert out.count(": ready: ") == 3 and "Done: 3 learners ready, 0 with an error." in out
    assert all(
        course.repo_of(ident)["collaborators"] == {login: "write"} for ident, login in course.logins.items()
    )


def test_a_dry_run_says_what_it_would_do_and_changes_nothing(github, tmp_path, capsys):
    course = Course(github, tmp_path, ("ana", "beto"))
    path = course.write()
    before, start = path.read_bytes(), len(github.log)
    code, out, _ = handout(capsys, path, "--dry-run")
    assert code == 0 and mutations(github, start) == [] and path.read_bytes() == before
    assert course.repo_of("ana") is None
    login = course.logins["ana"]
    assert f"ana: crearía el repositorio privado {course.org}/tdc-{login} desde {course.template}." in out
    assert f"ana: invitaría a {login} con permiso de escritura" in out
    assert "Simulación: 4 cambios por hacer y 0 con error; no se ha cambiado nada." in out


# ------------------------------------------------------------------ what exists already


def test_a_wrong_pending_invitation_is_fixed_and_an_admin_demoted(github, tmp_path, capsys):
    course = Course(github, tmp_path, ("ana", "beto", "carla", "dario"))
    repos = {
        ident: github.add_repo(f"{course.org}/tdc-{login}", template={"full_name": course.template})
        for ident, login in course.logins.items()
    }
    github.next_id += 1
    repos["ana"]["invitations"].append(
        {"id": github.next_id, "invitee": {"login": course.logins["ana"]}, "permissions": "admin"}
    )
    repos["beto"]["collaborators"][course.logins["beto"]] = "admin"
    repos["carla"]["collaborators"][course.logins["carla"]] = "read"
    repos["dario"]["collaborators"][course.logins["dario"]] = "maintain"
    # ana and beto are on the roster with their ids; carla and dario by name only.
    learners = "".join(
        f"  - id: {ident}\n    github: {login}\n"
        + (f"    repository_id: {repos[ident]['id']}\n" if ident in ("ana", "beto") else "")
        for ident, login in course.logins.items()
    )
    path = course.write(learners)
    start = len(github.log)
    code, out, err = handout(capsys, path, "--pause", "0")
    assert code == 0, out + err
    changed = mutations(github, start)
    assert not any(entry["path"].endswith("/generate") for entry in changed)  # nothing created
    assert repos["ana"]["invitations"][0]["permissions"] == "write"
    assert "la invitación pendiente de" in out and "daba permiso «admin»; ahora da escritura" in out
    assert repos["beto"]["collaborators"] == {course.logins["beto"]: "write"}
    assert f"beto: {course.logins['beto']} era administrador de {repos['beto']['full_name']}" in out
    assert repos["carla"]["collaborators"] == {course.logins["carla"]: "write"}  # read -> write (204)
    assert f"carla: {course.logins['carla']} tiene ya permiso de escritura" in out
    assert repos["dario"]["collaborators"] == {course.logins["dario"]: "maintain"}  # not admin: left alone
    assert [(e["method"], e["body"]) for e in changed] == [
        ("PATCH", {"permissions": "write"}),
        ("PUT", {"permission": "push"}),
        ("PUT", {"permission": "push"}),
    ]
    assert "ya existe y es privado" in out
    learned = rosters.load(path)
    assert [learner.repository_id for learner in learned.learners] == [repo["id"] for repo in repos.values()]


def test_a_public_repository_is_reported_and_never_touched(github, tmp_path, capsys):
    course = Course(github, tmp_path, ("ana", "beto"))
    public = github.add_repo(f"{course.org}/tdc-{course.logins['ana']}", private=False)
    path = course.write()
    start = len(github.log)
    code, out, _ = handout(capsys, path, "--pause", "0")
    assert code == 1
    assert f"ana: error: el repositorio {public['full_name']} es PÚBLICO" in out
    assert "Con error: ana." in out
    assert not any(public["full_name"] in entry["path"] for entry in mutations(github, start))
    assert public["invitations"] == [] and public["collaborators"] == {} and not public["private"]
    assert rosters.load(path).learner("ana").repository_id is None
    assert course.repo_of("beto")["private"]  # the others go on


def test_a_renamed_repository_is_found_by_its_id(github, tmp_path, capsys):
    course = Course(github, tmp_path, ("ana", "beto"))
    path = course.write()
    assert handout(capsys, path, "--pause", "0")[0] == 0
    old = course.repo_of("ana")["full_name"]
    renamed = github.rename(old, "ana-transformers")
    count, start = len(github.repos), len(github.log)
    code, out, _ = handout(capsys, path, "--pause", "0")
    assert code == 0 and mutations(github, start) == [] and len(github.repos) == count
    assert (
        f"ana: aviso: el repositorio {old} ahora se llama {renamed['full_name']} (es el mismo, "
        f"id {renamed['id']})"
    ) in out
    assert f"GET /repositories/{renamed['id']}" in [f"{e['method']} {e['path']}" for e in github.log[start:]]
    learned = rosters.load(path).learner("ana")
    assert (learned.repository, learned.repository_id) == (renamed["full_name"], renamed["id"])
    # Without the id (a roster written by hand), GitHub's redirect from the old name finds it too.
    path.write_text(
        path.read_text(encoding="utf-8")
        .replace(f"    repository_id: {renamed['id']}\n", "")
        .replace(renamed["full_name"], old),
        encoding="utf-8",
    )
    code, out, _ = handout(capsys, path, "--pause", "0")
    assert code == 0 and len(github.repos) == count and "ahora se llama" in out
    assert rosters.load(path).learner("ana").repository_id == renamed["id"]


def test_a_redirect_to_another_host_is_not_followed_with_the_token(github, tmp_path):
    from autograder.github.rest import GitHubAPI, GitHubError

    course = Course(github, tmp_path, ("ana",))
    repo = github.add_repo(f"{course.org}/viejo")
    github.rename(repo["full_name"], "nuevo")
    api = GitHubAPI(github.url, TOKEN, None, timeout=10)
    assert api.request("GET", f"/repos/{course.org}/viejo")["id"] == repo["id"]  # same origin: followed
    github.foreign_next = True
    try:
        with pytest.raises(GitHubError) as info:
            api.request("GET", f"/repos/{course.org}/viejo")
    finally:
        github.foreign_next = False
    assert info.value.status == 301  # refused, not "could not reach evil.example"


# ------------------------------------------------------------------ failures


def test_a_learner_that_fails_costs_only_that_learner(github, tmp_path, capsys):
    course = Course(github, tmp_path, ("ana", "beto"))
    learners = (
        f"  - id: ana\n    github: {course.logins['ana']}\n"
        f"  - id: nadie\n    github: no-existe-{course.org}\n"
        f"  - id: sin-usuario\n    name: Sin Usuario\n"
        f"  - id: ajena\n    github: {course.logins['beto']}\n    repository: org-inexistente/curso\n"
    )
    path = course.write(learners)
    code, out, _ = handout(capsys, path, "--pause", "0")
    assert code == 1
    assert f"nadie: error: el usuario de GitHub «no-existe-{course.org}» no existe ({path}:9)" in out
    assert f"sin-usuario: error: falta su usuario de GitHub (campo github, {path}:11)" in out
    assert (
        "ajena: error: GitHub no ha creado org-inexistente/curso: 422 Validation Failed: Could not resolve to "
        "an owner"
    ) in out
    assert "Con error: nadie, sin-usuario, ajena." in out
    assert course.repo_of("ana")["invitations"][0]["permissions"] == "write"

    (tmp_path / "b").mkdir()
    other = Course(github, tmp_path / "b", ("ana",))
    path = other.write(head=f"version: 1\norganization: {other.org}\ntemplate: {other.org}/no-existe\n")
    code, out, _ = handout(capsys, path, "--pause", "0")
    assert code == 1 and f"GitHub no encuentra la plantilla {other.org}/no-existe" in out


def test_a_run_broken_half_way_resumes_where_it_stopped(github, tmp_path, capsys):
    course = Course(github, tmp_path)
    path = course.write()
    github.fail_after(4)  # ana's user, repository, creation and permission; then 500 for ever
    code, out, _ = handout(capsys, path, "--pause", "0")
    assert code == 1 and out.count("GitHub respondió con un error (500 Server Error)") == 3
    assert (
        rosters.load(path).learner("ana").repository_id == course.repo_of("ana")["id"]
    )  # learned before the break
    github.fail_after(None)
    start = len(github.log)
    code, out, _ = handout(capsys, path, "--pause", "0")
    assert code == 0, out
    assert [e["path"] for e in mutations(github, start) if e["path"].endswith("/generate")] == [
        f"/repos/{course.template}/generate"
    ] * 2  # beto's and carla's; ana's exists
    for ident, login in course.logins.items():
        assert [i["permissions"] for i in course.repo_of(ident)["invitations"]] == ["write"]
    assert sum(1 for repo in github.repos.values() if repo["full_name"].startswith(course.org + "/tdc-")) == 3


def test_a_run_killed_anywhere_resumes(github, tmp_path):
    course = Course(github, tmp_path)
    path = course.write()
    env = cli_env(GITHUB_TOKEN=TOKEN, GITHUB_API_URL=github.url)
    start = len(github.log)
    proc = subprocess.Popen(
        [sys.executable, "-m", "autograder", "handout", str(path), "--pause", "1"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not any(e["path"].endswith("/generate") and e["status"] == 201 for e in github.log[start:]):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert rosters.load(path)  # whole, whatever the moment of the kill
    rerun = subprocess.run(
        [sys.executable, "-m", "autograder", "handout", str(path), "--pause", "0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    generated = [e for e in github.log[start:] if e["path"].endswith("/generate") and e["status"] == 201]
    assert sorted(e["body"]["name"] for e in generated) == sorted(
        f"tdc-{login}" for login in course.logins.values()
    )
    learned = rosters.load(path)
    for ident in course.logins:
        repo = course.repo_of(ident)
        assert learned.learner(ident).repository_id == repo["id"] and len(repo["invitations"]) == 1


# ------------------------------------------------------------------ rate limits


def test_rate_limit_answers_are_waited_out(github, tmp_path, capsys):
    course = Course(github, tmp_path, ("ana", "beto"))
    path = course.write()
    github.arm_secondary(1)  # 403 with Retry-After: 1
    github.arm_primary(1)  # then the hourly limit spent, reset in a second
    github.arm_secondary(1, status=429)
    start = len(github.log)
    code, out, err = handout(capsys, path, "--pause", "0.5")
    assert code == 0, out + err
    assert out.count("GitHub pide esperar") == 3 and "GitHub pide esperar 1 s (límite de peticiones)" in out
    first = github.log[start : start + 4]
    assert [e["status"] for e in first] == [403, 403, 429, 200]
    assert len({e["path"] for e in first}) == 1  # the same request, retried
    # The waits really happened: each retry came after the wait GitHub asked for.
    assert first[1]["time"] - first[0]["time"] >= 1.0
    assert first[3]["time"] - first[2]["time"] >= 1.0
    # And mutating requests kept --pause apart.
    changed = mutations(github, start)
    assert len(changed) == 4 and all(b["time"] - a["time"] >= 0.5 for a, b in zip(changed, changed[1:]))
    assert all(course.repo_of(ident)["private"] for ident in course.logins)


def test_a_wait_past_max_wait_stops_the_run_cleanly(github, tmp_path, capsys):
    course = Course(github, tmp_path, ("ana", "beto"))
    path = course.write()
    before, start = path.read_bytes(), len(github.log)
    github.arm_secondary(3600)
    code, out, _ = handout(capsys, path, "--pause", "0", "--max-wait", "5")
    assert code == 1
    assert "GitHub pide esperar 3600 s, más de lo que permite --max-wait (5 s)" in out
    assert "vuelve a lanzar la misma orden a partir de las" in out and "Sin hacer: ana, beto." in out
    assert mutations(github, start) == [] and path.read_bytes() == before and len(github.log) == start + 1
    # Short waits, but GitHub keeps limiting: after three of them the run stops all the same.
    for _ in range(4):
        github.arm_secondary(0)
    code, out, _ = handout(capsys, path, "--pause", "0", "--max-wait", "5")
    assert code == 1 and "GitHub sigue pidiendo esperar después de varias esperas" in out
    assert "Sin hacer: ana, beto." in out and mutations(github, start) == [] and path.read_bytes() == before


# ------------------------------------------------------------------ input


def test_unusable_input_is_refused_before_any_request(github, tmp_path, capsys, monkeypatch):
    course = Course(github, tmp_path, ("ana",))
    path = course.write()
    start = len(github.log)

    monkeypatch.delenv("GITHUB_TOKEN")
    code, _, err = handout(capsys, path)
    assert code == 2 and "Falta el token de GitHub. Ponlo en la variable GITHUB_TOKEN" in err
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)

    cases = [
        (
            ["--organization", "otra"],
            f"{path} dice organization: {course.org}, y la orden --organization otra",
        ),
        (
            ["--template", "sin-barra"],
            "--template sin-barra: tiene que ser DUEÑO/NOMBRE del repositorio plantilla",
        ),
    ]
    bad = tmp_path / "bad.yml"
    bad.write_text("version: 1\nlearners:\n  - id: ana\n    githb: ana\n", encoding="utf-8")
    cases.append(([bad], f"{bad}:4: el campo «githb» no existe"))
    no_org = tmp_path / "no-org.yml"
    no_org.write_text(
        "version: 1\ntemplate: a/b\nlearners:\n  - id: ana\n    github: ana\n", encoding="utf-8"
    )
    cases.append(([no_org], f"{no_org}: falta la organización donde crear los repositorios"))
    urls = tmp_path / "urls.csv"
    urls.write_text("id,github,repository\nana,ana,https://github.com/a/b.git\n", encoding="utf-8")
    cases.append(
        (
            [urls, "--organization", "o", "--template", "o/t"],
            f"{urls}:1: la columna repository de esta lista CSV tiene urls de git",
        )
    )
    cases.append(([tmp_path / "no-hay.yml"], "no-hay.yml: no se puede leer la lista de alumnos"))
    for args, expected in cases:
        if not isinstance(args[0], Path):
            args = [path, *args]
        code, out, err = handout(capsys, *args)
        assert code == 2 and expected in err, (args, err)
        assert out == ""
    assert len(github.log) == start  # not one request


def test_a_csv_roster_takes_the_course_from_the_options_and_gets_its_columns(github, tmp_path, capsys):
    course = Course(github, tmp_path, ("ana", "beto"))
    path = tmp_path / "roster.csv"
    path.write_text(
        "id,name,email,github\n"
        + "".join(
            f"{ident},{ident.title()},{ident}@example.org,{login}\n" for ident, login in course.logins.items()
        ),
        encoding="utf-8",
    )
    code, out, err = handout(
        capsys,
        path,
        "--organization",
        course.org,
        "--template",
        course.template,
        "--prefix",
        "tdc-",
        "--pause",
        "0",
        "--lang",
        "en",
    )
    assert code == 0, out + err
    assert "Done: 2 learners ready, 0 with an error." in out
    rows = path.read_text(encoding="utf-8").splitlines()
    assert rows[0] == "id,name,email,github,repository,repository_id"
    repo = course.repo_of("beto")
    assert rows[2] == f"beto,Beto,beto@example.org,{course.logins['beto']},{repo['full_name']},{repo['id']}"
    before, start = path.read_bytes(), len(github.log)
    assert (
        handout(
            capsys,
            path,
            "--organization",
            course.org,
            "--template",
            course.template,
            "--prefix",
            "tdc-",
            "--pause",
            "0",
        )[0]
        == 0
    )
    assert mutations(github, start) == [] and path.read_bytes() == before


def test_the_help_comes_from_the_catalogs(capsys):
    with pytest.raises(SystemExit):
        cli.main(["handout", "--help"])
    spanish = " ".join(capsys.readouterr().out.split())
    assert spanish.startswith("uso: autograder handout") and "reparte" not in spanish  # description, not help
    assert "crea en la organización un repositorio privado desde la plantilla" in spanish
    with pytest.raises(SystemExit):
        cli.main(["--lang", "en", "handout", "--help"])
    english = " ".join(capsys.readouterr().out.split())
    assert english.startswith("usage: autograder handout")
    assert "creates a private repository in the organization from the template" in english
