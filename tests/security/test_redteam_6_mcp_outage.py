"""Red-team finding 6: with PostgreSQL down, MCP answered a plain-text HTTP 500 where REST and the
console answer a clean 503. And, noted in passing, MCP responses lacked the security headers
REST sends.

The served application (Django and ``/mcp`` in one uvicorn process, as ``make run`` serves it)
runs on the test database and on a Redis of this module's own; PostgreSQL and that Redis are
really stopped. MCP must answer an outage with the REST API's 503 body, ``Retry-After`` and retry
hint — the same bytes REST sends for the same outage.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from django.db import OperationalError, connections

from contexts.kernel import availability
from contexts.models import Fragment
from contexts.stack.servers import EmbeddedRedis, free_port
from contexts.web.csp import security_headers
from tests.domain.conftest import cast  # noqa: F401 - fixture
from tests.security.mcp_process import Served, serve, tool_error

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SECURITY_HEADERS = set(security_headers(secure=False))
RETRY_AFTER = str(availability.RETRY_AFTER_SECONDS)


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(tmp_path_factory.mktemp("redis"), free_port())
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def served(services, django_db_setup, redis_server, tmp_path_factory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("served")
    env = {**services.env(), "REDIS_URL": redis_server.url,
           "CONTEXTS_INDEX_DIR": str(root / "index"), "STATIC_ROOT": str(root / "static")}
    with serve(env, root) as app:
        yield app


@pytest.fixture
def postgres(services):
    """The session's PostgreSQL, started again after the test whatever happened."""
    yield services.postgres
    services.postgres.start()  # a no-op if the test started it already
    connections.close_all()  # this process's connections died with the server


def _headers(response) -> dict[str, str]:
    return {name: response.headers.get(name) for name in SECURITY_HEADERS}


def test_mcp_answers_the_rest_503_while_postgresql_is_down(
        served, cast, postgres):  # noqa: F811
    tools = served.mcp(cast.raw_token, "tools/list")
    assert tools.status_code == 200, tools.text[:300]  # up, and the token is good

    postgres.stop()  # fast shutdown: every open session is terminated
    mcp = served.call_tool(cast.raw_token, "feedback",
                           {"fragment_id": "frag_0123456789abcdef0123", "signal": "helped"})
    rest = served.rest("POST", "/api/contexts/retrieve", cast.raw_token,
                       {"query": "anything", "scope": {"org_id": "acme"}})

    assert rest.status_code == 503 and rest.headers["Retry-After"] == RETRY_AFTER
    assert mcp.status_code == 503, (mcp.status_code, mcp.text[:300])
    assert mcp.headers["Retry-After"] == RETRY_AFTER
    assert mcp.headers["Content-Type"] == "application/json"
    assert mcp.json() == rest.json()
    assert mcp.json()["error"]["code"] == "database_unavailable"
    assert mcp.json()["error"]["retry_after"] == availability.RETRY_AFTER_SECONDS
    assert _headers(mcp) == _headers(rest)

    # Back: the very next call, on the connection the restart broke, is served.
    postgres.start()
    again = served.mcp(cast.raw_token, "tools/list")
    assert again.status_code == 200, again.text[:300]


def test_a_write_over_mcp_is_refused_like_rest_while_redis_is_down(
        served, cast, redis_server):  # noqa: F811
    """Redis matters to writes (their follow-up work is queued): refused up front, before
    anything is written, with the REST body and retry hint as the tool's error."""
    scope = {"org_id": "acme", "repo_id": "web", "session_id": cast.session.external_id}
    # Reads need no Redis and no broker check: the server has no remembered "up" to trust, so
    # the first write below meets the stopped server.
    assert served.mcp(cast.raw_token, "tools/list").status_code == 200
    before = Fragment.objects.count()
    redis_server.stop()
    try:
        mcp = served.call_tool(cast.raw_token, "write_session_fragment",
                               {"scope": scope, "body": "written while Redis is down"})
        rest = served.rest("POST", "/api/fragments", cast.raw_token,
                           {"scope": scope, "body": "written while Redis is down"})
    finally:
        redis_server.start()
    assert rest.status_code == 503 and rest.headers["Retry-After"] == RETRY_AFTER
    error = tool_error(mcp)
    assert error == rest.json()
    assert error["error"]["code"] == "queue_unavailable"
    assert error["error"]["retry_after"] == availability.RETRY_AFTER_SECONDS
    assert Fragment.objects.count() == before


def test_a_database_lost_inside_a_tool_is_the_rest_503_body():
    """After the token check, a tool that meets a lost connection answers through the API's
    handler: the same body and retry hint (tested in-process: no outage can be timed to fall
    between the two)."""
    from contexts.mcp.server import _error

    result = _error(OperationalError("server closed the connection unexpectedly"))
    assert result.is_error
    body = json.loads(result.content[0].text)
    assert body["error"]["code"] == "database_unavailable"
    assert body["error"]["retry_after"] == availability.RETRY_AFTER_SECONDS


def test_mcp_responses_carry_the_security_headers_rest_sends(served, cast):  # noqa: F811
    rest = served.rest("GET", "/api/whoami", cast.raw_token)
    assert rest.status_code == 200
    expected = _headers(rest)
    assert None not in expected.values(), expected  # REST sends every one of them
    answers = {
        "tools/list": served.mcp(cast.raw_token, "tools/list"),
        "no token": served.mcp(None, "tools/list"),
        "bad token": served.mcp("ctx_not_a_token", "tools/list"),
    }
    assert answers["tools/list"].status_code == 200
    assert answers["no token"].status_code == answers["bad token"].status_code == 401
    for what, response in answers.items():
        assert _headers(response) == expected, what
