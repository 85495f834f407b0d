"""The forward pass starts before authentication only for credentials that just authenticated
here and were not refused since; the request is still authenticated, throttled and validated."""

import pytest

from accounts.authentication import RecentCredentials, recent_credentials
from accounts.tokens import revoke_token
from contexts.api import early
from contexts.protocol.throttling import AgentRateThrottle
from contexts.retrieval import dense
from tests.api.conftest import as_token

URL = "/api/contexts/retrieve"
SCOPE = {"org_id": "acme", "repo_id": "web"}


@pytest.fixture(autouse=True)
def no_remembered_credentials():
    recent_credentials.clear()
    yield
    recent_credentials.clear()


@pytest.fixture
def started(monkeypatch) -> list[str]:
    """The queries whose embedding was started, by the middleware or by the view."""
    queries: list[str] = []
    real = dense.QueryEmbedding

    class Spy(real):
        def __init__(self, query, *args, **kwargs):
            queries.append(query)
            super().__init__(query, *args, **kwargs)

    monkeypatch.setattr(early.dense, "QueryEmbedding", Spy)
    return queries


def ask(api, query="why does the rate limiter drop requests?", **body):
    return api.post(URL, {"query": query, "scope": SCOPE, **body}, format="json")


def early_started(response) -> bool:
    return early.started_embedding(response.wsgi_request) is not None


def test_a_credential_seen_authenticating_starts_the_pass_as_the_request_arrives(
        api, cast, world, started):
    as_token(api, cast.raw_token)
    first = ask(api)
    assert first.status_code == 200 and not early_started(first)  # unknown until it worked
    second = ask(api)
    assert second.status_code == 200 and early_started(second)
    # One forward pass per request (the view used the one the middleware started), and the
    # early path answers exactly as the view's own path did.
    assert started == ["why does the rate limiter drop requests?"] * 2
    assert second.json()["fragments"] == first.json()["fragments"]


def test_no_credential_or_a_wrong_one_never_starts_a_pass(api, cast, world, started):
    assert ask(api).status_code == 401
    prefix = cast.raw_token.rsplit("_", 1)[0]
    for _ in range(2):
        response = ask(as_token(api, f"{prefix}_wrongsecret"))
        assert response.status_code == 401 and not early_started(response)
    assert started == []


def test_a_throttled_credential_stops_starting_passes(api, cast, world, started, monkeypatch):
    monkeypatch.setattr(AgentRateThrottle, "THROTTLE_RATES", {"agent": "2/min"})
    as_token(api, cast.raw_token)
    statuses = [ask(api, f"rate limiter question {n}") for n in range(4)]
    assert [r.status_code for r in statuses] == [200, 200, 429, 429]
    assert [early_started(r) for r in statuses] == [False, True, True, False]
    # The refused third one had started (it could not be known yet); the fourth did not.
    assert len(started) == 3


def test_a_revoked_credential_is_refused_and_forgotten(api, cast, world, started):
    as_token(api, cast.raw_token)
    assert ask(api).status_code == 200
    revoke_token(cast.token)
    refused = ask(api)
    assert refused.status_code == 401 and early_started(refused)  # known until refused once
    again = ask(api)
    assert again.status_code == 401 and not early_started(again)


@pytest.mark.parametrize("body, field", [
    (b'{"query": "rate limiter", "scope": ', None),                         # not JSON
    (b'[' * 5000 + b']' * 5000, None),                                        # too deep
    (b'{"query": ["x"], "scope": {"org_id": "acme", "repo_id": "web"}}', "query"),
])
def test_a_bad_body_from_a_known_credential_gets_the_views_answer(api, cast, world, body,
                                                                   field):
    as_token(api, cast.raw_token)
    assert ask(api).status_code == 200
    response = api.post(URL, body, content_type="application/json")
    assert response.status_code == 400, response.json()
    assert response.json()["error"]["field"] == field
    assert not early_started(response)


def test_a_large_body_is_left_to_the_views_parser(api, cast, world, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2048
    as_token(api, cast.raw_token)
    assert ask(api).status_code == 200
    response = ask(api, padding="x" * 4000)
    assert response.status_code == 413 and not early_started(response)


def test_a_body_over_the_early_cap_is_left_to_the_view(api, cast, world):
    as_token(api, cast.raw_token)
    assert ask(api).status_code == 200
    response = ask(api, padding="x" * (early.MAX_EARLY_BODY + 1))  # within the API's limit
    assert response.status_code == 400 and response.json()["error"]["field"] == "padding"
    assert not early_started(response)


def test_credentials_expire_and_the_oldest_go_first():
    now = [100.0]
    credentials = RecentCredentials(ttl=10, size=2)
    credentials_time = pytest.MonkeyPatch()
    credentials_time.setattr("accounts.authentication.time.monotonic", lambda: now[0])
    try:
        credentials.remember("ctx_a_1")
        credentials.remember("ctx_b_2")
        assert "ctx_a_1" in credentials and "ctx_c_3" not in credentials
        credentials.remember("ctx_c_3")  # over size: a, the oldest, goes
        assert "ctx_a_1" not in credentials and "ctx_b_2" in credentials
        now[0] = 111.0
        assert "ctx_b_2" not in credentials and "ctx_c_3" not in credentials
        credentials.remember("ctx_c_3")
        credentials.forget("ctx_c_3")
        assert "ctx_c_3" not in credentials
        credentials.forget(None)  # a request without a bearer credential
    finally:
        credentials_time.undo()
