"""The service's token checks against a real local OIDC issuer: discovery and JWKS over HTTP,
RS256 signatures, every forgery and every refusal with the words the learner reads."""

from __future__ import annotations

import socket
import time
from concurrent.futures import ThreadPoolExecutor

import jwt
import pytest
from support.oidc_issuer import FORGERIES, LocalIssuer

from autograder.core import i18n
from autograder.service.errors import ServiceRefusal
from autograder.service.jwks import FetchFailed, KeySet, allowed_url, rsa_signing_keys
from autograder.service.tokens import verify

SERVICE = "https://grader.example.org"


class Clock:
    """A monotonic clock the test moves by hand: refetch windows pass without sleeping."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def issuer():
    with LocalIssuer(audience=SERVICE) as running:
        yield running


@pytest.fixture(scope="module")
def keys(issuer):
    """One KeySet for the tests that do not count fetches: it refetches on every unknown kid, so
    the keys other tests rotate in are found whatever order the tests run in."""
    return KeySet(issuer.url, min_refetch_s=0)


def check(token: str, keys: KeySet, issuer: LocalIssuer, **kwargs) -> dict:
    return verify(token, keys, issuer=issuer.url, audience=SERVICE, **kwargs)


def refused(token: str, keys: KeySet, issuer: LocalIssuer, **kwargs) -> ServiceRefusal:
    with pytest.raises(ServiceRefusal) as caught:
        check(token, keys, issuer, **kwargs)
    refusal = caught.value
    for lang in i18n.LANGUAGES:
        text = i18n.translate(refusal.key, lang, **refusal.params)
        assert text != refusal.key and not text.startswith(refusal.key), (lang, refusal.key)
        assert "{" not in text, text  # every placeholder filled
        if token:
            assert token not in text and token not in str(refusal) and token not in repr(refusal.params)
    return refusal


def spanish(refusal: ServiceRefusal) -> str:
    return i18n.translate(refusal.key, "es", **refusal.params)


# ------------------------------------------------------------------------------ a valid token


def test_a_token_minted_like_githubs_is_accepted(issuer, keys):
    token = issuer.mint(repository="curso-tdc/tdc-luis", repository_id="900001")
    claims = check(token, keys, issuer)
    assert claims["repository"] == "curso-tdc/tdc-luis" and claims["repository_id"] == "900001"
    assert claims["aud"] == SERVICE and claims["iss"] == issuer.url
    assert jwt.get_unverified_header(token)["kid"] == issuer.kid
    assert issuer.jwks_fetches >= 1 and issuer.discovery_fetches >= 1


def test_an_audience_list_of_exactly_the_service_is_accepted(issuer, keys):
    assert check(issuer.mint(aud=[SERVICE]), keys, issuer)["aud"] == [SERVICE]


def test_a_token_just_expired_within_the_leeway_is_accepted(issuer, keys):
    now = time.time()
    token = issuer.mint(exp=int(now) - 30)
    assert check(token, keys, issuer, now=now, leeway_s=60)["exp"] == int(now) - 30


# ------------------------------------------------------------------------------ forgeries


@pytest.mark.parametrize(
    "kind, reason",
    [
        ("none", "algorithm"),
        ("hs256_public_key", "algorithm"),
        ("rs512", "algorithm"),
        ("es256", "algorithm"),
        ("no_kid", "no_key_id"),
        ("foreign_key", "signature"),
        ("unknown_kid", "unknown_key"),
    ],
)
def test_every_forgery_is_refused(issuer, keys, kind, reason):
    refusal = refused(issuer.forge(kind), keys, issuer)
    assert (refusal.key, refusal.status) == (f"service.token.{reason}", 401), FORGERIES[kind]


def test_the_forgeries_cover_every_kind_the_issuer_offers():
    assert set(FORGERIES) == {
        "none",
        "hs256_public_key",
        "rs512",
        "es256",
        "no_kid",
        "foreign_key",
        "unknown_kid",
    }


def test_hs256_with_the_public_key_fails_the_signature_check_too(issuer, keys):
    """Behind the header check, PyJWT told RS256 only refuses it as well: two walls, not one."""
    token = issuer.forge("hs256_public_key")
    with pytest.raises(jwt.InvalidTokenError):
        jwt.decode(token, keys.key(issuer.kid), algorithms=["RS256"], audience=SERVICE)


def test_the_algorithm_message_names_what_the_token_claims(issuer, keys):
    text = spanish(refused(issuer.forge("none"), keys, issuer))
    assert "«none»" in text and "RS256" in text and "Vuelve a ejecutar el workflow" in text


@pytest.mark.parametrize(
    "token",
    [
        "",
        "not-a-token",
        "a.b",
        "a.b.c.d",
        "eyJhbGciOiJSUzI1NiJ9.e30.c2ln extra",
        "!!!.@@@.###",
        "bm90IGpzb24.e30.c2ln",  # the header is not JSON
        "x" * 20000 + ".e30.c2ln",
    ],
)
def test_malformed_tokens_are_refused(issuer, keys, token):
    assert refused(token, keys, issuer).key == "service.token.malformed"


def test_a_token_that_is_not_a_string_is_refused(issuer, keys):
    with pytest.raises(ServiceRefusal) as caught:
        verify(None, keys, issuer=issuer.url, audience=SERVICE)  # type: ignore[arg-type]
    assert caught.value.key == "service.token.malformed"


# ------------------------------------------------------------------------------ claims


def test_another_issuer_is_refused(issuer, keys):
    refusal = refused(issuer.mint(iss="https://token.actions.example.com"), keys, issuer)
    assert refusal.key == "service.token.issuer"
    assert "https://token.actions.example.com" in spanish(refusal) and issuer.url in spanish(refusal)


@pytest.mark.parametrize(
    "aud",
    [
        "https://other.example.org",
        SERVICE + "/",  # exact means exact: not the same string
        SERVICE.upper(),
        [SERVICE, "https://other.example.org"],  # meant for someone else as well
        [],
        "",
    ],
)
def test_another_audience_is_refused(issuer, keys, aud):
    refusal = refused(issuer.mint(aud=aud), keys, issuer)
    assert refusal.key == "service.token.audience"
    assert "AUTOGRADER_SERVICE_URL" in spanish(refusal) and SERVICE in spanish(refusal)


@pytest.mark.parametrize("aud", ["https://github.com/curso-tdc", ["https://github.com/curso-tdc"]])
def test_githubs_default_audience_says_the_workflow_forgot_it(issuer, keys, aud):
    refusal = refused(issuer.mint(aud=aud), keys, issuer)
    assert refusal.key == "service.token.default_audience"
    text = spanish(refusal)
    assert "https://github.com/curso-tdc" in text and "audience" in text and SERVICE in text


def test_an_expired_token_says_run_the_workflow_again(issuer, keys):
    now = time.time()
    token = issuer.mint(issued_at=now - 3600)  # exp = iat + 300: expired 3300 s ago
    refusal = refused(token, keys, issuer, now=now)
    assert refusal.key == "service.token.expired" and refusal.params["ago"] == 3300
    assert "Vuelve a ejecutar el workflow" in spanish(refusal) and "3300 s" in spanish(refusal)
    english = i18n.translate(refusal.key, "en", **refusal.params)
    assert "Run the workflow again" in english


def test_a_token_past_the_leeway_is_expired(issuer, keys):
    now = time.time()
    token = issuer.mint(exp=int(now) - 61)
    assert refused(token, keys, issuer, now=now, leeway_s=60).key == "service.token.expired"


@pytest.mark.parametrize(
    "times",
    [
        {"issued_at_ahead": 1000},  # nbf, iat and exp all in the future
        {"iat_ahead": 120},  # issued in the future, though nbf has passed
    ],
)
def test_a_token_from_the_future_is_not_yet_valid(issuer, keys, times):
    now = time.time()
    if "issued_at_ahead" in times:
        token = issuer.mint(issued_at=now + times["issued_at_ahead"])
    else:
        token = issuer.mint(iat=int(now) + times["iat_ahead"], nbf=int(now) - 600)
    refusal = refused(token, keys, issuer, now=now, leeway_s=60)
    assert refusal.key == "service.token.not_yet_valid" and refusal.params["ahead"] > 60


@pytest.mark.parametrize("claim", ["iss", "aud", "exp", "iat"])
def test_a_token_without_a_claim_the_checks_need_is_refused(issuer, keys, claim):
    refusal = refused(issuer.mint(drop=(claim,)), keys, issuer)
    assert refusal.key == "service.token.missing_claim" and refusal.params["claim"] == claim


@pytest.mark.parametrize("claim, value", [("exp", "9999999999"), ("iat", True), ("nbf", None)])
def test_a_time_that_is_not_a_number_is_refused(issuer, keys, claim, value):
    refusal = refused(issuer.mint(**{claim: value}), keys, issuer)
    assert refusal.key == "service.token.malformed_claim" and refusal.params["claim"] == claim


# ------------------------------------------------------------------------------ the keys


def test_a_rotated_key_is_fetched_once_and_accepted(issuer):
    clock = Clock()
    keys = KeySet(issuer.url, min_refetch_s=60, clock=clock)
    old_kid = issuer.kid
    check(issuer.mint(), keys, issuer)
    fetched = issuer.jwks_fetches
    check(issuer.mint(), keys, issuer)
    assert issuer.jwks_fetches == fetched  # cached

    new_kid = issuer.rotate()
    try:
        clock.now += 61
        claims = check(issuer.mint(), keys, issuer)
        assert claims["iss"] == issuer.url and issuer.jwks_fetches == fetched + 1
        assert keys.key(old_kid) is not None and keys.key(new_kid) is not None
        assert issuer.jwks_fetches == fetched + 1  # both keys now known: no further fetch
    finally:
        issuer.withdraw(old_kid)  # the module's other KeySet refetches when it meets the new kid


def test_unknown_kids_refetch_at_most_once_per_window(issuer):
    clock = Clock()
    keys = KeySet(issuer.url, min_refetch_s=60, clock=clock)
    check(issuer.mint(), keys, issuer)  # the first fetch, at 1000
    fetched = issuer.jwks_fetches
    forged = [issuer.forge("unknown_kid") for _ in range(5)]

    def flood(seconds: int) -> None:
        for step in range(seconds):
            clock.now += 1
            assert refused(forged[step % 5], keys, issuer).key == "service.token.unknown_key"

    flood(59)  # 1001..1059: inside the first fetch's window
    assert issuer.jwks_fetches == fetched
    flood(1)  # 1060: the window has passed, one refetch
    assert issuer.jwks_fetches == fetched + 1
    flood(59)  # 1061..1119: inside the refetch's window
    assert issuer.jwks_fetches == fetched + 1
    flood(120)  # two more windows: one fetch each
    assert issuer.jwks_fetches == fetched + 3


def test_a_flood_of_unknown_kids_from_many_threads_costs_one_fetch_per_window(issuer):
    clock = Clock()
    keys = KeySet(issuer.url, min_refetch_s=60, clock=clock)
    check(issuer.mint(), keys, issuer)
    fetched = issuer.jwks_fetches
    forged = [issuer.forge("unknown_kid") for _ in range(4)]

    def attempt(index: int) -> str:
        try:
            check(forged[index % 4], keys, issuer)
        except ServiceRefusal as refusal:
            return refusal.key
        return "accepted"

    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(attempt, range(200)))
    assert set(answers) == {"service.token.unknown_key"} and issuer.jwks_fetches == fetched

    clock.now += 60  # the window has passed: the next flood costs exactly one fetch
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(attempt, range(200)))
    assert set(answers) == {"service.token.unknown_key"} and issuer.jwks_fetches == fetched + 1
    assert check(issuer.mint(), keys, issuer)["iss"] == issuer.url  # the real key still works


def test_a_withdrawn_key_stops_being_accepted_after_max_age(issuer):
    clock = Clock()
    keys = KeySet(issuer.url, clock=clock, max_age_s=3600)
    kid = issuer.rotate()
    token = issuer.mint()
    check(token, keys, issuer)
    issuer.withdraw(kid)
    try:
        clock.now += 1800
        check(token, keys, issuer)  # cached: still accepted
        clock.now += 1800
        assert refused(token, keys, issuer).key == "service.token.unknown_key"
    finally:
        issuer.rotate()  # mint() must sign with a published key again


def test_the_issuer_down_is_a_503_and_is_not_hammered(issuer):
    clock = Clock()
    keys = KeySet(issuer.url, clock=clock, retry_s=10)
    token = issuer.mint()
    issuer.available = False
    try:
        fetches = issuer.discovery_fetches
        refusal = refused(token, keys, issuer)
        assert (refusal.key, refusal.status) == ("service.token.issuer_unavailable", 503)
        assert "vuelve a ejecutar el workflow dentro de unos minutos" in spanish(refusal)
        assert "503" in refusal.params["detail"]  # for the instructor's log
        for _ in range(20):
            assert refused(token, keys, issuer).status == 503
        assert issuer.discovery_fetches == fetches + 1  # one try, then the retry wait
        issuer.available = True
        assert refused(token, keys, issuer).status == 503  # still within the retry wait
        clock.now += 10
        assert check(token, keys, issuer)["iss"] == issuer.url
    finally:
        issuer.available = True


def test_known_keys_stay_accepted_while_the_issuer_is_down(issuer):
    clock = Clock()
    keys = KeySet(issuer.url, clock=clock, max_age_s=3600)
    token = issuer.mint()
    check(token, keys, issuer)
    issuer.available = False
    try:
        clock.now += 4000  # stale: a refresh is tried, fails, and the keys known are kept
        assert check(token, keys, issuer)["iss"] == issuer.url
        # ...but a new kid cannot be told from a forgery now: the answer is "try later", not "forged"
        assert refused(issuer.forge("unknown_kid"), keys, issuer).status == 503
    finally:
        issuer.available = True


def test_an_issuer_nobody_listens_on_is_a_503():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    keys = KeySet(f"http://127.0.0.1:{port}", timeout_s=2)
    with pytest.raises(ServiceRefusal) as caught:
        keys.key("any")
    assert (caught.value.key, caught.value.status) == ("service.token.issuer_unavailable", 503)


def test_a_discovery_document_naming_another_issuer_is_not_trusted(issuer):
    # The same server under another name: its discovery document says it is 127.0.0.1.
    other_name = issuer.url.replace("127.0.0.1", "localhost")
    keys = KeySet(other_name)
    with pytest.raises(ServiceRefusal) as caught:
        keys.key(issuer.kid)
    assert caught.value.status == 503 and "names issuer" in caught.value.params["detail"]


# ------------------------------------------------------------------------------ where keys may come from


@pytest.mark.parametrize(
    "url, allowed",
    [
        ("https://token.actions.githubusercontent.com", True),
        ("http://127.0.0.1:8080", True),
        ("http://localhost:8080", True),
        ("http://[::1]:8080", True),
        ("http://token.actions.githubusercontent.com", False),
        ("http://10.0.0.1", False),
        ("http://127.0.0.1.example.org", False),
        ("https://user:secret@token.example.org", False),
        ("ftp://127.0.0.1", False),
        ("file:///etc/passwd", False),
        ("", False),
    ],
)
def test_keys_come_over_https_or_from_loopback(url, allowed):
    assert allowed_url(url) is allowed


def test_a_plain_http_issuer_is_refused_at_start():
    with pytest.raises(ServiceRefusal) as caught:
        KeySet("http://token.example.org")
    assert caught.value.key == "service.token.issuer_not_https"
    assert "https://" in i18n.translate(caught.value.key, "es", **caught.value.params)


def test_only_rsa_signing_keys_are_kept(issuer):
    real = issuer.jwks()["keys"][0]
    document = {
        "keys": [
            real,
            {**real, "kid": "enc", "use": "enc"},
            {**real, "kid": "rs512", "alg": "RS512"},
            {"kty": "EC", "kid": "ec", "crv": "P-256", "x": "AAAA", "y": "AAAA"},
            {"kty": "oct", "kid": "hmac", "k": "c2VjcmV0"},
            {**real, "kid": "broken", "n": "!!"},
            {**real, "kid": ""},
            "not a key",
        ]
    }
    assert set(rsa_signing_keys(document)) == {real["kid"]}
    with pytest.raises(FetchFailed, match="no RSA signing key"):
        rsa_signing_keys({"keys": document["keys"][1:]})  # a fetch that fails: known keys stay


def test_the_catalogs_have_every_identity_message_in_both_languages():
    es, en = i18n.catalog("es"), i18n.catalog("en")
    ours = {key for key in es if key.startswith(("service.token.", "service.claims."))}
    assert len(ours) > 20 and ours == {
        key for key in en if key.startswith(("service.token.", "service.claims."))
    }
