"""From a verified token to an admitted submission: the claims read as GitHub sends them, the
learner found by repository_id on a real roster (never by name or actor), and the pushes the
course does not grade refused with words the learner can act on."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest
from support.oidc_issuer import LocalIssuer

from autograder.core import i18n
from autograder.core.roster import parse
from autograder.service.claims import Admitted, Identity, admit, identity
from autograder.service.errors import ServiceRefusal
from autograder.service.jwks import KeySet
from autograder.service.tokens import verify

SERVICE = "https://grader.example.org"
SHA = "3f786850e387550fdab836ed7e6dc881de23001b"
ROSTER = """\
version: 1
organization: curso-tdc
repository_prefix: tdc-
learners:
  - id: ana
    name: Ana García López
    github: ana-garcia
    repository: curso-tdc/tdc-ana-garcia
    repository_id: 812345678
  - id: luis
    github: luis-p
    repository_id: 812345679          # repository from the course's defaults: curso-tdc/tdc-luis-p
  - id: marta
    github: marta-r                   # handout has not recorded her repository's id yet
"""


@pytest.fixture(scope="module")
def issuer():
    with LocalIssuer(audience=SERVICE) as running:
        yield running


@pytest.fixture(scope="module")
def roster():
    return parse(ROSTER, Path("roster.yml"))


def claims_of(issuer: LocalIssuer, **overrides) -> dict:
    """What verify() returns for a token minted with `overrides` (real signature, real JWKS)."""
    keys = KeySet(issuer.url, min_refetch_s=0)
    return verify(issuer.mint(**overrides), keys, issuer=issuer.url, audience=SERVICE)


def ident(issuer: LocalIssuer, **overrides) -> Identity:
    return identity(issuer.claims(**{"sha": SHA, **overrides}))


def texts(refusal: ServiceRefusal) -> dict[str, str]:
    out = {lang: i18n.translate(refusal.key, lang, **refusal.params) for lang in i18n.LANGUAGES}
    for lang, text in out.items():
        assert not text.startswith(refusal.key) and "{" not in text, (lang, text)
    return out


def refusal_of(call, *args) -> ServiceRefusal:
    with pytest.raises(ServiceRefusal) as caught:
        call(*args)
    texts(caught.value)
    return caught.value


# ------------------------------------------------------------------------------ identity


def test_a_verified_token_becomes_an_identity(issuer):
    claims = claims_of(issuer, sha=SHA, run_id="11223344556", run_attempt="2", actor="profe-ayudante")
    found = identity(claims)
    assert found == Identity(
        repository_id=812345678,
        repository="curso-tdc/tdc-ana-garcia",
        repository_owner="curso-tdc",
        sha=SHA,
        ref="refs/heads/main",
        event_name="push",
        run_id=11223344556,
        run_attempt=2,
        issued_at=datetime.fromtimestamp(claims["iat"], tz=timezone.utc),
        token_id=claims["jti"],
        actor="profe-ayudante",
    )
    assert found.issued_at.tzinfo is timezone.utc


@pytest.mark.parametrize(
    "claim", ["repository_id", "repository", "sha", "ref", "event_name", "run_id", "jti", "iat"]
)
def test_a_missing_claim_is_refused_by_name(issuer, claim):
    refusal = refusal_of(identity, issuer.claims(sha=SHA, drop=(claim,)))
    assert (refusal.key, refusal.status, refusal.params["claim"]) == ("service.claims.missing", 401, claim)


@pytest.mark.parametrize(
    "claim, value, rule",
    [
        ("repository_id", 812345678, "digits"),  # GitHub sends a string: an int is another format
        ("repository_id", "abc", "digits"),
        ("repository_id", "-5", "digits"),
        ("repository_id", "0", "digits"),
        ("repository_id", "٣٤", "digits"),  # str.isdigit() would take Arabic-Indic digits
        ("repository_id", "99999999999999999999999", "digits"),  # beyond a 64-bit column
        ("run_id", "12.5", "digits"),
        ("run_attempt", "", "digits"),
        ("sha", SHA.upper(), "sha"),
        ("sha", SHA[:12], "sha"),
        ("sha", "example-sha", "sha"),
        ("repository", "no-slash", "repository"),
        ("repository", "curso-tdc/../x", "repository"),
        ("ref", "main", "ref"),
        ("iat", "1632493567", "time"),
        ("event_name", "", "text"),
        ("jti", "x" * 300, "text"),
        ("repository_owner", "curso\ntdc", "text"),
    ],
)
def test_a_claim_not_of_githubs_shape_is_refused(issuer, claim, value, rule):
    refusal = refusal_of(identity, issuer.claims(**{"sha": SHA, claim: value}))
    assert (refusal.key, refusal.status) == ("service.claims.bad_value", 401)
    assert refusal.params["claim"] == claim and refusal.params["rule"].key == f"service.claims.rule_{rule}"
    assert "\n" not in texts(refusal)["es"]


def test_actor_is_display_only_and_may_be_absent(issuer):
    assert ident(issuer, drop=("actor",)).actor == ""


# ------------------------------------------------------------------------------ admission


def test_a_push_to_the_default_branch_of_a_roster_repository_is_admitted(issuer, roster):
    admitted = admit(ident(issuer), roster, "main")
    assert isinstance(admitted, Admitted)
    assert admitted.learner.id == "ana" and admitted.warnings == () and admitted.identity.sha == SHA


def test_workflow_dispatch_and_another_default_branch_are_admitted(issuer, roster):
    found = ident(
        issuer,
        repository="curso-tdc/tdc-luis-p",
        repository_id="812345679",
        event_name="workflow_dispatch",
        ref="refs/heads/trunk",
    )
    assert admit(found, roster, "trunk").learner.id == "luis"


def test_the_learner_is_found_by_repository_id_never_by_actor(issuer, roster):
    # Ana's repository, pushed by Luis (a collaborator, or a re-run): it is Ana's submission.
    assert admit(ident(issuer, actor="luis-p"), roster, "main").learner.id == "ana"
    # Luis pushing from a repository that is not on the roster: nobody's, whatever the actor.
    stranger = ident(issuer, repository="luis-p/tdc-ana-garcia", repository_id="555", actor="ana-garcia")
    refusal = refusal_of(admit, stranger, roster, "main")
    assert (refusal.key, refusal.status) == ("service.claims.not_on_roster", 403)
    assert "luis-p/tdc-ana-garcia" in texts(refusal)["es"] and "555" in texts(refusal)["es"]


def test_a_repository_recreated_under_a_rostered_name_is_not_that_learner(issuer, roster):
    # Same name as Ana's, another id (deleted and created again, or someone took the name).
    impostor = ident(issuer, repository="curso-tdc/tdc-ana-garcia", repository_id="999999")
    assert refusal_of(admit, impostor, roster, "main").key == "service.claims.not_on_roster"


def test_a_renamed_repository_is_admitted_with_a_warning(issuer, roster):
    renamed = ident(issuer, repository="curso-tdc/ana-transformers")
    admitted = admit(renamed, roster, "main")
    assert admitted.learner.id == "ana" and len(admitted.warnings) == 1
    warning = i18n.translate(admitted.warnings[0].key, "es", **admitted.warnings[0].params)
    assert "curso-tdc/tdc-ana-garcia" in warning and "curso-tdc/ana-transformers" in warning
    assert "812345678" in warning
    # A default repository (organization + prefix + login) renamed: the same warning.
    luis = ident(issuer, repository="curso-tdc/luis-gpt", repository_id="812345679")
    assert "curso-tdc/tdc-luis-p" in str(admit(luis, roster, "main").warnings[0].params)


def test_a_name_that_differs_only_in_case_is_no_rename(issuer, roster):
    assert admit(ident(issuer, repository="Curso-TDC/TDC-Ana-Garcia"), roster, "main").warnings == ()


def test_a_rostered_name_without_its_id_tells_the_instructor_to_record_it(issuer, roster):
    marta = ident(issuer, repository="curso-tdc/tdc-marta-r", repository_id="812345680")
    refusal = refusal_of(admit, marta, roster, "main")
    assert (refusal.key, refusal.status) == ("service.claims.roster_without_id", 403)
    assert "autograder handout" in texts(refusal)["es"] and "marta" not in refusal.params.values()


@pytest.mark.parametrize(
    "event", ["pull_request", "pull_request_target", "schedule", "release", "workflow_run"]
)
def test_only_push_and_workflow_dispatch_count(issuer, roster, event):
    refusal = refusal_of(admit, ident(issuer, event_name=event, ref="refs/pull/3/merge"), roster, "main")
    assert (refusal.key, refusal.status) == ("service.claims.event", 403)
    assert event in texts(refusal)["es"] and "push" in texts(refusal)["es"]


@pytest.mark.parametrize("ref", ["refs/heads/dev", "refs/tags/v1", "refs/heads/main-old", "refs/heads/Main"])
def test_only_the_default_branch_counts(issuer, roster, ref):
    refusal = refusal_of(admit, ident(issuer, ref=ref), roster, "main")
    assert (refusal.key, refusal.status) == ("service.claims.branch", 403)
    text = texts(refusal)["es"]
    assert "main" in text and ref.removeprefix("refs/heads/") in text


def test_an_unknown_default_branch_is_try_again_later(issuer, roster):
    refusal = refusal_of(admit, ident(issuer), roster, None)
    assert (refusal.key, refusal.status) == ("service.claims.branch_unknown", 503)
    assert "vuelve a ejecutar el workflow" in texts(refusal)["es"]


def test_the_roster_check_comes_before_the_others(issuer, roster):
    # A stranger learns that it is not on the roster, not which branch the course grades.
    stranger = ident(issuer, repository_id="555", event_name="pull_request", ref="refs/pull/1/merge")
    assert refusal_of(admit, stranger, roster, None).key == "service.claims.not_on_roster"
