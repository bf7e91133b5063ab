"""The service's own fetch of a learner's commit (autograder/service/fetch.py), against real git
repositories: bare repositories as the remotes, fetched by sha over file://
(uploadpack.allowAnySHA1InWant) and over git's smart HTTP protocol from the GitHub stand-in
(`git http-backend` behind a Basic x-access-token credential, as github.com asks for one).

Shown here: a commit's regular files written, shaped like the learner's clone and nothing else
(no .git, no scratch repository left); a symlink to /etc/passwd, a symlinked exercises/ and a
submodule skipped and counted; a hand-made tree with `..` or a name twice refused; the size caps
(a pack over RLIMIT_FSIZE, a small pack that inflates past the cap), the file-count cap and the
time cap; a commit or a repository that is not there; URLs outside what is allowed; the user's
own git configuration never read; git run as the unprivileged user when we are root, with the
credential in its environment and never on any process's command line; and the whole chain with
a GitHub App: the installation token made from the App's JWT fetches the commit.

The remotes live outside pytest's private temporary folder (git runs as `nobody` when we are
root and must reach them). The stand-in is started once for the module."""

from __future__ import annotations

import base64
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from support.fake_github import TOKEN, FakeGitHub

from autograder.cohort.roster import Allowed, Learner
from autograder.core import i18n
from autograder.service.credentials import AppInstallation, StaticToken
from autograder.service.errors import ServiceRefusal
from autograder.service.fetch import FetchLimits, fetch, fetch_commit

GIT = [
    "git",
    "-c",
    "user.name=Alumna",
    "-c",
    "user.email=alumna@example.org",
    "-c",
    "init.defaultBranch=main",
]
LOCAL = Allowed(schemes=("file",), hosts=())
HTTP = Allowed(schemes=("http",), hosts=("127.0.0.1",))
LESSON = "exercises/01-tensores"
ROOT = os.geteuid() == 0


def git(*args: str, cwd: Path, input: bytes | None = None) -> str:
    done = subprocess.run([*GIT, *args], cwd=cwd, input=input, capture_output=True, check=True)
    return done.stdout.decode().strip()


class Remotes:
    """Learners' repositories as bare repositories under one folder (OWNER/NAME.git)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.template = f"file://{root}/{{repository}}.git"

    def bare(self, repository: str) -> Path:
        bare = self.root / f"{repository}.git"
        if not bare.exists():
            bare.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run([*GIT, "init", "-q", "--bare", str(bare)], check=True)
            git("config", "uploadpack.allowAnySHA1InWant", "true", cwd=bare)
        return bare

    def commit(self, repository: str, files: dict[str, bytes | str], *, links: dict[str, str] = {}) -> str:
        """Commit `files` (and symlinks: path -> target) as the branch's whole tree; its sha."""
        work = Path(tempfile.mkdtemp(dir=self.root))
        git("init", "-q", cwd=work)
        for name, content in files.items():
            path = work / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content.encode() if isinstance(content, str) else content)
        for name, target in links.items():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            os.symlink(target, work / name)
        git("add", "-A", cwd=work)
        git("commit", "-q", "-m", "entrega", cwd=work)
        return self._push(repository, work)

    def _push(self, repository: str, work: Path, sha: str = "HEAD") -> str:
        sha = git("rev-parse", sha, cwd=work)
        git("push", "-q", "--force", str(self.bare(repository)), f"{sha}:refs/heads/main", cwd=work)
        subprocess.run(["chmod", "-R", "a+rX", str(self.root)], check=True)
        shutil.rmtree(work)
        return sha

    def handmade(self, repository: str, entries: list[tuple[str, str, bytes]]) -> str:
        """A commit whose root tree is exactly `entries` (mode, name, content of a blob, or of a
        tree for mode 40000 given as more entries), written as raw objects: trees git itself
        would never make."""
        work = Path(tempfile.mkdtemp(dir=self.root))
        git("init", "-q", cwd=work)

        def tree(items) -> str:
            raw = b""
            for mode, name, content in items:
                oid = (
                    tree(content)
                    if mode == "40000"
                    else git("hash-object", "-w", "--stdin", cwd=work, input=content)
                )
                raw += f"{mode} {name}".encode() + b"\0" + bytes.fromhex(oid)
            return git("hash-object", "-w", "--literally", "-t", "tree", "--stdin", cwd=work, input=raw)

        commit = git("commit-tree", tree(entries), "-m", "a mano", cwd=work)
        return self._push(repository, work, commit)


@pytest.fixture(scope="module")
def remotes():
    root = Path(tempfile.mkdtemp(prefix="autograder-fetch-test-"))
    os.chmod(root, 0o755)
    try:
        yield Remotes(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def github(remotes):
    with FakeGitHub() as fake:
        fake.git_root = remotes.root
        yield fake


@pytest.fixture
def dest():
    """A scratch folder as the worker makes one (mkdtemp: 0700, ours)."""
    folder = Path(tempfile.mkdtemp(prefix="fetch-dest-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def refusal(call) -> ServiceRefusal:
    with pytest.raises(ServiceRefusal) as caught:
        call()
    for lang in ("es", "en"):  # every refusal has words in both catalogs, every parameter filled
        said = i18n.translate(caught.value.key, lang, **caught.value.params)
        assert caught.value.key in i18n.catalog(lang) and "{" not in said.replace("{repository}", ""), said
    return caught.value


def files_below(folder: Path) -> dict[str, bytes]:
    found = {}
    for path in sorted(folder.rglob("*")):
        assert not path.is_symlink(), path
        if path.is_file():
            found[path.relative_to(folder).as_posix()] = path.read_bytes()
    return found


def local(remotes: Remotes, repository: str, sha: str, dest: Path, **kwargs):
    return fetch(repository, sha, dest, url_template=remotes.template, allowed=LOCAL, **kwargs)


# ------------------------------------------------------------------------------ what is written


def test_a_commit_is_written_as_the_learners_clone_and_nothing_else(remotes, dest):
    files = {
        f"{LESSON}/tensores.py": "def suma(a, b):\n    return a + b\n",
        f"{LESSON}/datos/pesos.bin": bytes(range(256)) * 4,
        f"{LESSON}/run.sh": "#!/bin/sh\necho hola\n",
        "README.md": "# Mi curso\n",
        "notas/ñandú.txt": "acentos\n",
    }
    remotes.commit("curso/ana", {"viejo.py": "x = 1\n"})
    sha = remotes.commit("curso/ana", files)  # the older commit's file is not in this one
    folder = fetch_commit(
        "curso/ana", sha, dest, url_template=remotes.template, allowed=LOCAL, credential=None
    )
    assert folder == dest / "learner"
    assert files_below(folder) == {name: c.encode() if isinstance(c, str) else c for name, c in files.items()}
    assert Learner("ana", folder).exercises == folder / "exercises"
    assert sorted(p.name for p in dest.iterdir()) == ["learner"]  # the scratch repository is gone


def test_links_and_submodules_are_skipped_and_counted(remotes, dest):
    work = Path(tempfile.mkdtemp(dir=remotes.root))
    git("init", "-q", cwd=work)
    (work / LESSON).mkdir(parents=True)
    (work / LESSON / "tensores.py").write_text("x = 1\n")
    os.symlink("/etc/passwd", work / LESSON / "datos.py")
    os.symlink("../../solutions", work / "exercises" / "02-atencion")
    git("add", "-A", cwd=work)
    git("update-index", "--add", "--cacheinfo", f"160000,{'a' * 40},exercises/03-modulo", cwd=work)
    git("commit", "-q", "-m", "trampas", cwd=work)
    sha = remotes._push("curso/bruno", work)
    fetched = local(remotes, "curso/bruno", sha, dest)
    assert files_below(fetched.folder) == {f"{LESSON}/tensores.py": b"x = 1\n"}
    assert fetched.links == (f"{LESSON}/datos.py", "exercises/02-atencion")
    assert fetched.submodules == ("exercises/03-modulo",)
    assert (fetched.files, fetched.other) == (1, ())


def test_a_folder_named_git_is_not_written(remotes, dest):
    """grade-all would take a learner's folder holding .git for a clone and run git in it."""
    config = b"[core]\n\tfsmonitor = touch /tmp/pwned\n"
    sha = remotes.handmade(
        "curso/bea",
        [
            ("100644", "a.py", b"x = 1\n"),
            ("40000", ".git", [("100644", "config", config)]),
            ("40000", "mio", [("40000", ".GIT", [("100644", "config", config)])]),
        ],
    )
    fetched = local(remotes, "curso/bea", sha, dest)
    assert files_below(fetched.folder) == {"a.py": b"x = 1\n"}
    assert fetched.other == (".git/config", "mio/.GIT/config")


def test_an_exercises_folder_that_is_a_symlink_is_not_written(remotes, dest):
    sha = remotes.commit("curso/carla", {"README.md": "hola\n"}, links={"exercises": "/etc"})
    fetched = local(remotes, "curso/carla", sha, dest)
    assert files_below(fetched.folder) == {"README.md": b"hola\n"}
    assert fetched.links == ("exercises",)
    # grade-all's intake then finds no exercises/ and every lesson missing
    assert Learner("carla", fetched.folder).exercises == fetched.folder


@pytest.mark.parametrize(
    "entries",
    [
        [("40000", "..", [("100644", "evil.py", b"x = 1\n")])],
        [("40000", "exercises", [("40000", ".", [("100644", "a.py", b"x = 1\n")])])],
        [("100644", "a.py", b"uno\n"), ("100644", "a.py", b"dos\n")],
        [("100644", "a", b"un fichero\n"), ("40000", "a", [("100644", "b.py", b"x = 1\n")])],
    ],
    ids=["dotdot", "dot", "twice", "file-and-folder"],
)
def test_a_hand_made_tree_git_never_writes_is_refused(remotes, dest, entries, request):
    repository = f"curso/mano-{request.node.callspec.id}"
    sha = remotes.handmade(repository, entries)
    refused = refusal(lambda: local(remotes, repository, sha, dest))
    assert (refused.key, refused.status) == ("service.fetch.bad_path", 422)
    assert not (dest / "evil.py").exists() and not (dest.parent / "evil.py").exists()


# ------------------------------------------------------------------------------ caps and failures


def test_a_pack_over_the_size_cap_is_stopped_by_the_file_size_limit(remotes, dest):
    sha = remotes.commit("curso/diego", {"pesos.bin": os.urandom(3 * 1024 * 1024)})  # incompressible
    refused = refusal(lambda: local(remotes, "curso/diego", sha, dest, limits=FetchLimits(bytes=1024 * 1024)))
    assert (refused.key, refused.status) == ("service.fetch.too_big", 413)
    assert refused.params["mib"] == "1"
    assert not (dest / "learner" / "pesos.bin").exists()


def test_a_small_pack_that_inflates_past_the_cap_is_refused_before_writing(remotes, dest):
    sha = remotes.commit("curso/elena", {"ceros.bin": bytes(20 * 1024 * 1024)})  # a pack of ~20 KB
    refused = refusal(
        lambda: local(remotes, "curso/elena", sha, dest, limits=FetchLimits(bytes=4 * 1024 * 1024))
    )
    assert (refused.key, refused.status) == ("service.fetch.too_big", 413)
    assert files_below(dest) == {}


def test_too_many_files_are_refused(remotes, dest):
    sha = remotes.commit("curso/fede", {f"{LESSON}/f{i}.py": f"x = {i}\n" for i in range(12)})
    refused = refusal(lambda: local(remotes, "curso/fede", sha, dest, limits=FetchLimits(files=10)))
    assert (refused.key, refused.status, refused.params["files"]) == ("service.fetch.too_many_files", 422, 10)
    assert files_below(dest) == {}
    assert local(remotes, "curso/fede", sha, dest / "otra", limits=FetchLimits(files=12)).files == 12


def test_a_commit_not_in_the_repository_is_the_learners_to_fix(remotes, dest):
    remotes.commit("curso/gema", {"a.py": "x = 1\n"})
    missing = "0123456789abcdef" * 2 + "01234567"
    refused = refusal(lambda: local(remotes, "curso/gema", missing, dest))
    assert (refused.key, refused.status) == ("service.fetch.no_commit", 422)
    assert refused.params == {"repository": "curso/gema", "sha": missing}


def test_a_repository_that_is_not_there_may_work_later(remotes, dest):
    refused = refusal(lambda: local(remotes, "curso/nadie", "a" * 40, dest))
    assert (refused.key, refused.status) == ("service.fetch.no_repository", 502)


def test_the_time_cap_stops_a_fetch_that_hangs(remotes, github, dest):
    sha = remotes.commit("curso/hugo", {"a.py": "x = 1\n"})
    release = threading.Event()
    github.on_git_request = lambda path: release.wait(60)  # GitHub stops answering
    try:
        refused = refusal(
            lambda: fetch(
                "curso/hugo",
                sha,
                dest,
                url_template=f"{github.url}/git/{{repository}}.git",
                allowed=HTTP,
                credential=StaticToken(TOKEN),
                limits=FetchLimits(seconds=1),
            )
        )
    finally:
        github.on_git_request = None
        release.set()
    assert (refused.key, refused.status) == ("service.fetch.timeout", 504)


# ------------------------------------------------------------------------------ where from, how


@pytest.mark.parametrize(
    "template, allowed",
    [
        ("https://evil.example/{repository}.git", Allowed()),
        ("https://github.com.evil.example/{repository}.git", Allowed()),
        ("http://github.com/{repository}.git", Allowed()),
        ("file:///srv/git/{repository}.git", Allowed()),  # file:// only when named
        ("file://otra-maquina/srv/{repository}.git", LOCAL),
        ("ext::sh -c touch% /tmp/pwned% {repository}", Allowed(schemes=("ext", "https"))),
        ("/srv/git/{repository}.git", LOCAL),
    ],
)
def test_urls_outside_what_is_allowed_are_refused_before_git_runs(dest, template, allowed):
    refused = refusal(lambda: fetch("curso/ana", "a" * 40, dest, url_template=template, allowed=allowed))
    assert (refused.key, refused.status) == ("service.fetch.url_not_allowed", 500)
    assert list(dest.iterdir()) == []


def test_a_template_without_the_repository_is_refused(dest):
    refused = refusal(lambda: fetch("curso/ana", "a" * 40, dest, url_template="https://github.com/x.git"))
    assert (refused.key, refused.status) == ("service.fetch.url_template", 500)


@pytest.mark.parametrize("repository", ["../../etc", "curso/..", "curso", "curso/a b", "-c/x"])
def test_a_repository_name_that_is_not_owner_slash_name_is_refused(dest, repository):
    refused = refusal(
        lambda: fetch(repository, "a" * 40, dest, url_template="file:///r/{repository}", allowed=LOCAL)
    )
    assert refused.key == "service.fetch.bad_repository"


def test_the_users_own_git_configuration_is_never_read(remotes, dest, monkeypatch, tmp_path):
    sha = remotes.commit("curso/ines", {"a.py": "x = 1\n"})
    hostile = tmp_path / "gitconfig"
    hostile.write_text(
        f'[url "file:///nowhere/"]\n\tinsteadOf = file://{remotes.root}/\n[protocol]\n\tallow = never\n'
    )
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(hostile))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'core.hookspath'='/nowhere'")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert files_below(local(remotes, "curso/ines", sha, dest).folder) == {"a.py": b"x = 1\n"}


def test_git_runs_as_the_unprivileged_user_and_the_credential_never_reaches_a_command_line(
    remotes, github, dest
):
    sha = remotes.commit("curso/juan", {f"{LESSON}/a.py": "x = 1\n"})
    header = base64.b64encode(f"x-access-token:{TOKEN}".encode())
    seen: list[dict] = []

    def look(path: str) -> None:  # while git waits for this answer
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
                environ = Path(f"/proc/{entry}/environ").read_bytes()
                uid = int(Path(f"/proc/{entry}/status").read_text().split("\nUid:")[1].split()[1])
            except (OSError, IndexError):
                continue
            seen.append(
                {
                    "ours": f"GIT_DIR={dest / 'git'}".encode() in environ.split(b"\0"),
                    "uid": uid,
                    "argv_leak": TOKEN.encode() in cmdline or header in cmdline,
                    "env_has_header": header in environ,
                }
            )

    github.on_git_request = look
    try:
        fetched = fetch(
            "curso/juan",
            sha,
            dest,
            url_template=f"{github.url}/git/{{repository}}.git",
            allowed=HTTP,
            credential=StaticToken(TOKEN),
        )
    finally:
        github.on_git_request = None
    assert files_below(fetched.folder) == {f"{LESSON}/a.py": b"x = 1\n"}
    ours = [process for process in seen if process["ours"]]
    assert ours, "no git process of this fetch was seen while it fetched"
    expected = pwd.getpwnam("nobody").pw_uid if ROOT else os.getuid()
    assert {process["uid"] for process in ours} == {expected}
    assert not any(process["argv_leak"] for process in seen)
    assert any(process["env_has_header"] for process in ours)  # it travelled, through the environment


def test_without_the_credential_the_fetch_is_denied_and_may_work_later(remotes, github, dest):
    sha = remotes.commit("curso/kira", {"a.py": "x = 1\n"})
    start = len(github.git_requests)
    refused = refusal(
        lambda: fetch(
            "curso/kira",
            sha,
            dest,
            url_template=f"{github.url}/git/{{repository}}.git",
            allowed=HTTP,
            credential=None,
        )
    )
    assert (refused.key, refused.status) == ("service.fetch.denied", 502)
    assert github.git_requests[start:] and not any(r["authorized"] for r in github.git_requests[start:])


def test_a_github_app_installation_token_fetches_the_commit(remotes, github, dest):
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    github.add_app(31337, key.public_key(), installation_id=4242)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    app = AppInstallation(31337, pem, 4242, github.url)
    sha = remotes.commit("curso/lola", {f"{LESSON}/a.py": "x = 2\n"})
    start = len(github.git_requests)
    folder = fetch_commit(
        "curso/lola",
        sha,
        dest,
        url_template=f"{github.url}/git/{{repository}}.git",
        allowed=HTTP,
        credential=app,
    )
    assert files_below(folder) == {f"{LESSON}/a.py": b"x = 2\n"}
    assert app.exchanges == 1 and all(r["authorized"] for r in github.git_requests[start:])


@pytest.mark.skipif(not ROOT, reason="git switches user only when the service runs as root")
def test_a_user_that_does_not_exist_or_is_root_is_refused(remotes, dest):
    sha = remotes.commit("curso/mia", {"a.py": "x = 1\n"})
    assert (
        refusal(lambda: local(remotes, "curso/mia", sha, dest, user="no-existe-aqui")).key
        == "service.fetch.no_user"
    )
    assert (
        refusal(lambda: local(remotes, "curso/mia", sha, dest / "b", user="root")).key
        == "service.fetch.root_user"
    )


@pytest.mark.skipif(not ROOT, reason="git switches user only when the service runs as root")
def test_a_scratch_folder_only_root_may_enter_is_made_traversable_for_git(remotes, dest):
    assert stat.S_IMODE(dest.stat().st_mode) == 0o700
    sha = remotes.commit("curso/nora", {"a.py": "x = 1\n"})
    assert local(remotes, "curso/nora", sha, dest).files == 1
    assert stat.S_IMODE(dest.stat().st_mode) & 0o011 == 0o011
