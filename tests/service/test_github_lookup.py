"""The service's GitHub credential and lookups (autograder/service/credentials.py,
github_lookup.py) against the GitHub stand-in over real HTTP.

Shown here: a GitHub App's JWT (real RS256, checked by the stand-in against the App's public key,
its exp and iss) exchanged for an installation token that the lookups then use, kept while it
lives and exchanged again when it is about to expire; a wrong key or another App's installation
said plainly; the credential picked from the environment, an App set up by halves refused; a
repository's default branch by id; and the submission time: the run's creation time when the run
is the token's commit and repository, else the push's time from the activity, each capped at the
token's iat, else iat, whatever GitHub answers (a run of another sha or repository, a 404, a 500,
a rate limit, no answer at all, no credential)."""

from __future__ import annotations

import socket
import time
from datetime import datetime, timedelta, timezone

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from support.fake_github import TOKEN, FakeGitHub

from autograder.core import i18n
from autograder.service.claims import Identity
from autograder.service.credentials import AppInstallation, StaticToken, credential_from_env
from autograder.service.errors import ServiceRefusal
from autograder.service.github_lookup import GitHubLookup, RepoInfo, SubmissionTime

APP_ID, INSTALLATION = 90210, 777
SHA = "3f786850e387550fdab836ed7e6dc881de23001b"
OTHER_SHA = "0" * 39 + "1"
ISSUED = datetime(2025, 3, 14, 12, 0, 0, tzinfo=timezone.utc)  # the token's iat


def pem(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


@pytest.fixture(scope="module")
def key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def github(key):
    with FakeGitHub() as fake:
        fake.add_app(APP_ID, key.public_key(), INSTALLATION)
        yield fake


@pytest.fixture
def fresh(github):
    """The stand-in as a test left it, put back afterwards: working, no armed answers."""
    yield github
    github.fail_after(None)
    github.armed.clear()
    github.installation_token_s = 3600


def repo(github: FakeGitHub, name: str, **kwargs) -> dict:
    return github.repo(name) or github.add_repo(name, **kwargs)


def ident(repository: dict, *, sha: str = SHA, run_id: int = 1, repository_id: int | None = None) -> Identity:
    return Identity(
        repository_id=repository["id"] if repository_id is None else repository_id,
        repository=repository["full_name"],
        repository_owner=repository["full_name"].split("/")[0],
        sha=sha,
        ref="refs/heads/main",
        event_name="push",
        run_id=run_id,
        run_attempt=1,
        issued_at=ISSUED,
        token_id="jti-1",
        actor="alumna",
    )


def lookup(github: FakeGitHub) -> GitHubLookup:
    return GitHubLookup(github.url, StaticToken(TOKEN))


def said(refusal: ServiceRefusal) -> str:
    for lang in ("es", "en"):
        assert refusal.key in i18n.catalog(lang)
    return i18n.translate(refusal.key, "en", **refusal.params)


# ------------------------------------------------------------------------------ the App


def test_the_app_jwt_becomes_an_installation_token_that_the_lookups_use(fresh, key):
    app = AppInstallation(APP_ID, pem(key), INSTALLATION, fresh.url)
    made = jwt.decode(app.app_jwt(), key.public_key(), algorithms=["RS256"], options={"verify_exp": False})
    assert made["iss"] == str(APP_ID) and made["exp"] - made["iat"] <= 660 and made["iat"] <= time.time() - 59
    trunk = repo(fresh, "curso/tdc-ana", default_branch="trunk")
    start = len(fresh.log)
    info = GitHubLookup(fresh.url, app).repository(trunk["id"])
    assert info == RepoInfo(trunk["id"], "curso/tdc-ana", "trunk", "https://github.example/curso/tdc-ana.git")
    calls = [(e["method"], e["path"], e["status"]) for e in fresh.log[start:]]
    assert calls == [
        ("POST", f"/app/installations/{INSTALLATION}/access_tokens", 201),
        ("GET", f"/repositories/{trunk['id']}", 200),
    ]
    token = app.token()
    assert token.startswith("ghs_") and token in fresh.installation_tokens and token not in repr(app)


def test_the_installation_token_is_kept_while_it_lives_and_renewed_before_it_expires(fresh, key):
    app = AppInstallation(APP_ID, pem(key), INSTALLATION, fresh.url)
    first = app.token()
    assert [app.token() for _ in range(3)] == [first] * 3 and app.exchanges == 1
    fresh.installation_token_s = 120  # less than the five minutes a token must have left
    short = AppInstallation(APP_ID, pem(key), INSTALLATION, fresh.url)
    tokens = {short.token(), short.token()}
    assert len(tokens) == 2 and short.exchanges == 2


def test_a_wrong_key_or_another_apps_installation_is_said_plainly(fresh, key):
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(ServiceRefusal) as wrong:
        AppInstallation(APP_ID, pem(stranger), INSTALLATION, fresh.url).token()
    assert (wrong.value.key, wrong.value.status, wrong.value.params["answer"]) == (
        "service.github.app_token",
        502,
        401,
    )
    assert "could not be decoded" in said(wrong.value)
    with pytest.raises(ServiceRefusal) as elsewhere:
        AppInstallation(APP_ID, pem(key), INSTALLATION + 1, fresh.url).token()
    assert elsewhere.value.params["answer"] == 404
    fresh.fail_after(0)
    with pytest.raises(ServiceRefusal) as down:
        AppInstallation(APP_ID, pem(key), INSTALLATION, fresh.url).token()
    assert down.value.params["answer"] == 500


def test_the_stand_in_refuses_app_jwts_github_would_refuse(fresh, key):
    """The stand-in's checks are real: a JWT that lives too long or has expired is refused."""
    now = int(time.time())
    for claims, words in (
        ({"iat": now - 60, "exp": now + 3600, "iss": str(APP_ID)}, "too far in the future"),
        ({"iat": now - 900, "exp": now - 60, "iss": str(APP_ID)}, "future time"),
    ):
        token = jwt.encode(claims, key, algorithm="RS256")
        app = AppInstallation(APP_ID, pem(key), INSTALLATION, fresh.url)
        app.app_jwt = lambda now=None, token=token: token
        with pytest.raises(ServiceRefusal) as refused:
            app.token()
        assert refused.value.params["answer"] == 401 and words in refused.value.params["detail"]


# ------------------------------------------------------------------------------ from the environment


def test_the_credential_comes_from_the_environment_app_first(key, tmp_path):
    key_file = tmp_path / "app.pem"
    key_file.write_bytes(pem(key))
    app = {
        "AUTOGRADER_GITHUB_APP_ID": str(APP_ID),
        "AUTOGRADER_GITHUB_APP_KEY": str(key_file),
        "AUTOGRADER_GITHUB_APP_INSTALLATION": str(INSTALLATION),
    }
    made = credential_from_env({**app, "GITHUB_TOKEN": "ghp_x"}, "https://api.example")
    assert isinstance(made, AppInstallation) and (made.app_id, made.installation_id, made.api_url) == (
        str(APP_ID),
        INSTALLATION,
        "https://api.example",
    )
    both = credential_from_env({"AUTOGRADER_SERVICE_TOKEN": "ghs_service", "GITHUB_TOKEN": "ghp_x"}, "")
    assert both.token() == "ghs_service" and "ghs_service" not in repr(both)
    assert credential_from_env({"GITHUB_TOKEN": " ghp_x\n"}, "").token() == "ghp_x"
    assert credential_from_env({"GITHUB_TOKEN": "", "AUTOGRADER_SERVICE_TOKEN": "  "}, "") is None


@pytest.mark.parametrize(
    "env, key_name",
    [
        ({"AUTOGRADER_GITHUB_APP_ID": "1", "GITHUB_TOKEN": "ghp_x"}, "service.github.app_config"),
        ({"AUTOGRADER_GITHUB_APP_ID": "1", "AUTOGRADER_GITHUB_APP_KEY": "K", "AUTOGRADER_GITHUB_APP_INSTALLATION": "x"},
         "service.github.app_config_number"),
        ({"AUTOGRADER_GITHUB_APP_ID": "1", "AUTOGRADER_GITHUB_APP_KEY": "/no/such.pem",
          "AUTOGRADER_GITHUB_APP_INSTALLATION": "2"}, "service.github.app_key"),
        ({"AUTOGRADER_GITHUB_APP_ID": "1", "AUTOGRADER_GITHUB_APP_KEY": "NOT_A_PEM",
          "AUTOGRADER_GITHUB_APP_INSTALLATION": "2"}, "service.github.app_key"),
    ],
)  # fmt: skip
def test_an_app_set_up_by_halves_is_an_error_not_a_weaker_credential(env, key_name, tmp_path):
    env = {k: str(tmp_path / "not.pem") if v == "NOT_A_PEM" else v for k, v in env.items()}
    (tmp_path / "not.pem").write_text("-----BEGIN NOTHING-----\n")
    with pytest.raises(ServiceRefusal) as refused:
        credential_from_env(env, "https://api.github.com")
    assert (refused.value.key, refused.value.status) == (key_name, 500)
    assert "{" not in said(refused.value)


# ------------------------------------------------------------------------------ repository


def test_a_repository_is_looked_up_by_id_and_none_when_github_cannot_say(fresh):
    renamed = repo(fresh, "curso/tdc-viejo")
    fresh.rename("curso/tdc-viejo", "tdc-nuevo")
    assert lookup(fresh).repository(renamed["id"]).full_name == "curso/tdc-nuevo"
    assert lookup(fresh).repository(99999999) is None
    start = len(fresh.log)
    assert GitHubLookup(fresh.url, None).repository(renamed["id"]) is None
    assert len(fresh.log) == start  # no credential: nothing asked
    fresh.fail_after(0)
    assert lookup(fresh).repository(renamed["id"]) is None


# ------------------------------------------------------------------------------ submission time


def test_the_runs_creation_time_is_the_submission_time(fresh):
    ana = repo(fresh, "curso/tdc-rosa")
    run = fresh.add_run("curso/tdc-rosa", head_sha=SHA, created_at=ISSUED - timedelta(seconds=40))
    fresh.add_activity("curso/tdc-rosa", after=SHA, timestamp=ISSUED - timedelta(seconds=50))
    assert lookup(fresh).submission_time(ident(ana, run_id=run["id"])) == SubmissionTime(
        ISSUED - timedelta(seconds=40), "run"
    )


def test_a_run_of_another_commit_or_repository_tells_nothing_and_the_push_counts(fresh):
    pablo = repo(fresh, "curso/tdc-pablo")
    other = fresh.add_run("curso/tdc-pablo", head_sha=OTHER_SHA, created_at=ISSUED - timedelta(seconds=5))
    fresh.add_activity("curso/tdc-pablo", after=OTHER_SHA, timestamp=ISSUED - timedelta(hours=3))
    fresh.add_activity(
        "curso/tdc-pablo", after=SHA, timestamp=ISSUED - timedelta(hours=2), ref="refs/heads/otra"
    )
    fresh.add_activity(
        "curso/tdc-pablo", after=SHA, timestamp=ISSUED - timedelta(hours=1), activity_type="force_push"
    )
    fresh.add_activity("curso/tdc-pablo", after=SHA, timestamp=ISSUED - timedelta(minutes=1))
    pushed = SubmissionTime(ISSUED - timedelta(hours=1), "push")  # the earliest time main had it
    assert lookup(fresh).submission_time(ident(pablo, run_id=other["id"])) == pushed
    # the token names another repository id (the name was reused): its run is not this one's
    mine = fresh.add_run("curso/tdc-pablo", head_sha=SHA, created_at=ISSUED - timedelta(seconds=5))
    assert (
        lookup(fresh).submission_time(ident(pablo, run_id=mine["id"], repository_id=pablo["id"] + 1))
        == pushed
    )
    assert lookup(fresh).submission_time(ident(pablo, run_id=mine["id"])).source == "run"


def test_a_time_after_the_tokens_iat_is_impossible_and_iat_is_taken(fresh):
    quim = repo(fresh, "curso/tdc-quim")
    late = fresh.add_run("curso/tdc-quim", head_sha=SHA, created_at=ISSUED + timedelta(minutes=10))
    assert lookup(fresh).submission_time(ident(quim, run_id=late["id"])) == SubmissionTime(ISSUED, "token")
    fresh.add_activity("curso/tdc-quim", after=SHA, timestamp=ISSUED + timedelta(days=1))
    assert lookup(fresh).submission_time(ident(quim, run_id=404404)) == SubmissionTime(ISSUED, "token")


def test_whatever_github_answers_the_token_time_is_the_fallback(fresh):
    sara = repo(fresh, "curso/tdc-sara")
    run = fresh.add_run("curso/tdc-sara", head_sha=SHA, created_at=ISSUED - timedelta(seconds=30))
    fallback = SubmissionTime(ISSUED, "token")
    assert lookup(fresh).submission_time(ident(sara, run_id=run["id"] + 1000)) == fallback  # run 404, no push
    fresh.arm_primary(reset_in=3600)
    fresh.arm_secondary(retry_after=600, status=429)
    assert (
        lookup(fresh).submission_time(ident(sara, run_id=run["id"])) == fallback
    )  # rate limited, not waited
    fresh.fail_after(0)
    assert lookup(fresh).submission_time(ident(sara, run_id=run["id"])) == fallback  # GitHub 500
    fresh.fail_after(None)
    assert GitHubLookup(fresh.url, None).submission_time(ident(sara, run_id=run["id"])) == fallback
    with socket.socket() as closed:  # a port nothing listens on: GitHub unreachable
        closed.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{closed.getsockname()[1]}"
    assert (
        GitHubLookup(nowhere, StaticToken(TOKEN)).submission_time(ident(sara, run_id=run["id"])) == fallback
    )
    assert lookup(fresh).submission_time(ident(sara, run_id=run["id"])).source == "run"  # and back


def test_an_app_that_cannot_get_a_token_falls_back_too(fresh, key):
    tina = repo(fresh, "curso/tdc-tina")
    run = fresh.add_run("curso/tdc-tina", head_sha=SHA, created_at=ISSUED - timedelta(seconds=30))
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    broken = GitHubLookup(fresh.url, AppInstallation(APP_ID, pem(stranger), INSTALLATION, fresh.url))
    assert broken.submission_time(ident(tina, run_id=run["id"])) == SubmissionTime(ISSUED, "token")
    assert broken.repository(tina["id"]) is None
