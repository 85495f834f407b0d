"""The MCP tools at ``/mcp`` end to end, driven by the official SDK's own client.

The real ASGI application (``contexts.asgi:application``: Django + the MCP server) runs under
uvicorn in a child process on the test database, with a real Celery worker that indexes what the
tools write; the client talks Streamable HTTP to it. Data must be committed for those processes
to see it, hence ``transaction=True``.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx2
import pytest
from mcp import Client, ClientSession, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from accounts.permissions import SYSTEM
from accounts.tokens import create_token
from contexts.indexes.follower import reindex_fragments
from contexts.models import Fragment, RetrievalTrace
from contexts.services.fragments import create_fragment, indexing_handled_by_caller
from tests.conftest import ROOT, start_worker, stop_worker
from tests.domain.conftest import Cast

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

T = TypeVar("T")
STARTUP_TIMEOUT = 60.0
# A fragment written through MCP is indexed by the worker after commit (as in production).
INDEX_TIMEOUT = 60.0


@dataclass
class Stack:
    base_url: str
    index_dir: Path

    @property
    def mcp_url(self) -> str:
        return f"{self.base_url}/mcp"


@pytest.fixture(scope="module")
def stack(services, django_db_setup, tmp_path_factory) -> Iterator[Stack]:
    """uvicorn serving ``contexts.asgi:application`` (statics collected first, as runstack does)
    and a Celery worker, both on the test database and one lexical index directory."""
    root = tmp_path_factory.mktemp("mcp")
    index_dir = root / "index"
    env = {**services.env(), "CONTEXTS_INDEX_DIR": str(index_dir),
           "STATIC_ROOT": str(root / "static"),
           "CONTEXTS_METRICS_ALLOW": "127.0.0.1"}  # /healthz's details, for the test below
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
                   cwd=ROOT, env=env, check=True, timeout=300)
    # uvicorn inherits a socket already bound here (--fd): no window in which another process
    # (tests run in parallel sessions) could take a port picked beforehand.
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    log_path = root / "uvicorn.log"
    with listener, open(log_path, "ab") as log:
        web = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "contexts.asgi:application",
             "--fd", str(listener.fileno()), "--lifespan", "on", "--no-access-log"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            pass_fds=[listener.fileno()],
        )
    worker = None
    try:
        base_url = f"http://127.0.0.1:{port}"
        _wait_until_serving(web, base_url, log_path)
        worker = start_worker(services, name="mcp", extra_env={"CONTEXTS_INDEX_DIR":
                                                               str(index_dir)})
        yield Stack(base_url=base_url, index_dir=index_dir)
    finally:
        if worker is not None:
            stop_worker(worker)
        stop_worker(web)  # SIGTERM to its process group, SIGKILL after 20 s


def _wait_until_serving(process: subprocess.Popen, base_url: str, log_path: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"uvicorn exited: {log_path.read_text()}")
        try:
            httpx2.get(f"{base_url}/mcp", timeout=1)
            return
        except httpx2.TransportError:
            time.sleep(0.2)
    raise RuntimeError(f"uvicorn did not answer within {STARTUP_TIMEOUT} s: "
                       f"{log_path.read_text()}")


@dataclass
class World:
    limiter: Fragment       # repo web
    session_note: Fragment  # the cast's session
    globex: Fragment        # the other organization


@pytest.fixture
def world(cast: Cast, settings, stack: Stack) -> World:
    # The server and worker use the stack's index directory; each test's organization gets its
    # own subdirectory in it (org-<pk>).
    settings.LEXICAL_INDEX_DIR = stack.index_dir
    with indexing_handled_by_caller():  # indexed right here, not queued for the worker
        w = World(
            limiter=create_fragment(
                SYSTEM, cast.repo.scope, title="Rate limiter",
                body="The rate limiter drops requests on burst because the token bucket "
                     "refills once per second; RateLimiter.acquire raises ERR_RATE."),
            session_note=create_fragment(
                SYSTEM, cast.session.scope, title="Session finding",
                body="In this session we found the limiter bucket size is 10.",
                kind="session-summary"),
            globex=create_fragment(
                SYSTEM, cast.other_org.scope, title="Globex secret",
                body="Globex rate limiter secret: the bucket is unlimited for VIPs."),
        )
    reindex_fragments([f.pk for f in vars(w).values()])
    return w


# --- the SDK client -----------------------------------------------------------------------------
@asynccontextmanager
async def connect(url: str, raw_token: str):
    headers = {"Authorization": f"Bearer {raw_token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(120)) as http, \
            streamable_http_client(url, http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        yield session


def run(stack: Stack, raw_token: str, scenario: Callable[[ClientSession], Awaitable[T]]) -> T:
    """Run ``scenario`` against the server in a fresh event loop (the tests stay synchronous so
    that the ORM is used outside of it)."""

    async def main() -> T:
        async with connect(stack.mcp_url, raw_token) as session:
            return await scenario(session)

    return anyio.run(main)


def ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


def error_of(result: CallToolResult) -> dict[str, Any]:
    """The REST-shaped error body a tool error carries (as its text and structured)."""
    assert result.is_error, result.content
    body = json.loads(result.content[0].text)
    assert result.structured_content == body
    return body["error"]


def leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def ids(payload: dict[str, Any]) -> list[str]:
    return [f["id"] for f in payload["fragments"]]


WEB = {"org_id": "acme", "repo_id": "web"}


# --- tests --------------------------------------------------------------------------------------
def test_the_tools_are_listed_with_their_arguments(stack: Stack, cast: Cast):
    async def scenario(session: ClientSession):
        return (await session.list_tools()).tools

    tools = {tool.name: tool for tool in run(stack, cast.raw_token, scenario)}
    assert set(tools) == {"retrieve", "write_session_fragment", "feedback",
                          "propose_promotion", "propose_fragment", "proposal_status"}
    assert set(tools["propose_promotion"].input_schema["required"]) == {"fragment_id"}
    assert set(tools["proposal_status"].input_schema["required"]) == {"proposal_id"}
    assert set(tools["retrieve"].input_schema["required"]) == {"query", "scope"}
    assert "budget_tokens" in tools["retrieve"].input_schema["properties"]
    assert set(tools["write_session_fragment"].input_schema["required"]) == {"scope", "body"}
    assert set(tools["feedback"].input_schema["required"]) == {"fragment_id", "signal"}
    scopes = tools["retrieve"].input_schema["$defs"]["RetrievalScope"]
    assert scopes["additionalProperties"] is False  # misspelt scope keys are refused


def test_retrieve_returns_cited_fragments_and_a_trace_like_rest(
        stack: Stack, cast: Cast, world: World, api):
    arguments = {"query": "why does the rate limiter drop requests?", "scope": WEB}

    async def scenario(session: ClientSession):
        return await session.call_tool("retrieve", arguments)

    payload = ok(run(stack, cast.raw_token, scenario))
    assert ids(payload)[0] == world.limiter.public_id
    first = payload["fragments"][0]
    assert first["text"] and first["tokens"] > 0
    # Written, not read from a file: where it was written, never null (issue 40).
    assert first["source"]["kind"] == "console" and first["doc_id"] == first["id"]
    assert first["updated_at"].endswith("Z")  # rendered as the REST API renders it
    assert payload["trace_id"].startswith("tr_") and payload["reranker"] == "none"
    # The repo token never sees the session's or the other organization's fragments.
    assert set(ids(payload)) == {world.limiter.public_id}
    # Recorded as the token's retrieval, and the same answer as REST for the same request.
    trace = RetrievalTrace.objects.get(public_id=payload["trace_id"])
    assert trace.token_id == cast.token.pk
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {cast.raw_token}")
    rest = api.post("/api/contexts/retrieve", arguments, format="json").json()
    assert ids(rest) == ids(payload)


def test_a_session_fragment_written_over_mcp_is_retrieved_in_that_session(
        stack: Stack, cast: Cast, world: World):
    session_scope = {**WEB, "session_id": cast.session.external_id}

    async def scenario(session: ClientSession):
        written = ok(await session.call_tool("write_session_fragment", {
            "scope": session_scope, "title": "Summary",
            "body": "We raised the limiter bucket to 20 and the burst drops stopped."}))
        # The worker indexes it after commit; retrieval finds it once it has.
        deadline = anyio.current_time() + INDEX_TIMEOUT
        while True:
            found = ok(await session.call_tool("retrieve", {
                "query": "limiter bucket burst drops", "scope": session_scope}))
            if written["id"] in ids(found) or anyio.current_time() > deadline:
                break
            await anyio.sleep(0.5)
        outside = ok(await session.call_tool("retrieve", {
            "query": "limiter bucket burst drops", "scope": WEB}))
        helped = ok(await session.call_tool("feedback", {
            "fragment_id": written["id"], "signal": "helped", "trace_id": found["trace_id"]}))
        return written, found, outside, helped

    written, found, outside, helped = run(stack, cast.raw_token, scenario)
    assert written["kind"] == "session-summary" and written["version"] == 1
    assert written["scope"] == cast.session.scope.public_id
    assert written["id"] in ids(found), "not retrievable within the session"
    assert world.session_note.public_id in ids(found)
    assert not {written["id"], world.session_note.public_id} & set(ids(outside))
    assert helped == {"id": written["id"], "signal": "helped"}
    assert Fragment.objects.get(public_id=written["id"]).scope_id == cast.session.scope.pk


def test_an_agent_opens_a_session_and_proposes_a_finding_over_mcp(stack: Stack, cast: Cast):
    """A new session_id opens the session on first write; the proposal waits for review."""
    new_session = {**WEB, "session_id": "MCP-42"}

    async def scenario(session: ClientSession):
        written = ok(await session.call_tool("write_session_fragment", {
            "scope": new_session, "body": "The MCP tools share the REST token bucket."}))
        proposed = ok(await session.call_tool("propose_promotion", {
            "fragment_id": written["id"], "target": "repository"}))
        status = ok(await session.call_tool("proposal_status",
                                            {"proposal_id": proposed["id"]}))
        refused = error_of(await session.call_tool("propose_fragment", {
            "scope": WEB, "body": "A rule nobody reviewed."}))
        return written, proposed, status, refused

    written, proposed, status, refused = run(stack, cast.raw_token, scenario)
    assert written["scope"].startswith("sess_")
    assert proposed["state"] == status["state"] == "open"
    assert status["source_fragment"] == written["id"]
    assert refused["code"] == "permission_denied"  # the token does not allow proposals


def test_the_high_level_client_negotiates_the_current_protocol(
        stack: Stack, cast: Cast, world: World):
    """``mcp.Client`` (mode "auto") probes server/discover first: the 2026 per-request path."""

    async def main() -> tuple[str, list[str]]:
        headers = {"Authorization": f"Bearer {cast.raw_token}"}
        async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(120)) as http, \
                Client(streamable_http_client(stack.mcp_url, http_client=http)) as client:
            result = await client.call_tool("retrieve", {"query": "rate limiter", "scope": WEB})
            return client.protocol_version, ids(ok(result))

    version, found = anyio.run(main)
    assert version in MODERN_PROTOCOL_VERSIONS
    assert found == [world.limiter.public_id]


def test_requests_without_a_valid_token_are_401(stack: Stack):
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"}}}
    accept = {"Accept": "application/json, text/event-stream"}
    for headers, code in [
        ({}, "not_authenticated"),
        ({"Authorization": "Basic dXNlcjpwdw=="}, "not_authenticated"),
        ({"Authorization": "Bearer ctx_nope_nope"}, "authentication_failed"),
    ]:
        response = httpx2.post(stack.mcp_url, json=initialize, headers={**accept, **headers})
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer realm=\"contexts\"")
        # A JSON-RPC error carrying the REST body (tests/api/test_mcp_contract.py).
        assert response.json()["error"]["data"]["error"]["code"] == code

    # Django's ALLOWED_HOSTS applies here too (DNS rebinding).
    foreign = httpx2.post(stack.mcp_url, json=initialize,
                          headers={**accept, "Host": "evil.example"})
    assert foreign.status_code == 400 and foreign.json()["error"]["code"] == "bad_request"

    async def refused() -> None:
        async with connect(stack.mcp_url, "ctx_nope_nope"):
            pass

    # The SDK's client fails the handshake (an MCPError inside its task groups).
    with pytest.raises(BaseExceptionGroup) as refused_by_sdk:
        anyio.run(refused)
    assert any(isinstance(error, MCPError) for error in leaves(refused_by_sdk.value))


def test_scopes_of_another_organization_are_refused(stack: Stack, cast: Cast, world: World):
    _, globex_token = create_token(cast.other_org, "globex-agent", [cast.other_org.scope])

    async def scenario(session: ClientSession):
        return (await session.call_tool("retrieve", {"query": "rate limiter", "scope": WEB}),
                await session.call_tool("feedback", {"fragment_id": world.limiter.public_id,
                                                     "signal": "helped"}),
                await session.call_tool("write_session_fragment", {
                    "scope": {**WEB, "session_id": cast.session.external_id},
                    "body": "not mine to write"}))

    retrieved, feedback, written = run(stack, globex_token, scenario)
    assert error_of(retrieved) == {"code": "permission_denied", "field": None,
                                   "message": "scope not found or not readable"}
    assert error_of(feedback)["code"] == "not_found"
    assert error_of(written)["message"] == "scope not found or not readable"
    assert not Fragment.objects.filter(body="not mine to write").exists()


def test_star_searches_every_readable_repository_and_an_empty_answer_hints(
        stack: Stack, cast: Cast, world: World):
    """``"repo_id": "*"`` and the ``hint`` over MCP: the REST semantics (tests/api/
    test_org_wide_scope.py), through the served app."""
    from tests.factories import RepositoryFactory

    empty = RepositoryFactory(org=cast.org, slug="empty")
    _, raw = create_token(cast.org, "two repos", [empty.scope, cast.repo.scope])
    query = "why does the rate limiter drop requests?"

    async def scenario(session: ClientSession):
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        return (tools["retrieve"],
                ok(await session.call_tool("retrieve", {"query": query, "scope": {
                    "org_id": "acme", "repo_id": "empty"}})),
                ok(await session.call_tool("retrieve", {"query": query, "scope": {
                    "org_id": "acme", "repo_id": "*"}})),
                error_of(await session.call_tool("retrieve", {"query": query, "scope": {
                    "org_id": "acme", "repo_id": "**"}})))

    tool, narrow, wide, bad = run(stack, raw, scenario)
    described = tool.input_schema["$defs"]["RetrievalScope"]["properties"]["repo_id"]
    assert '"*"' in described["description"]
    assert ids(narrow) == [] and narrow["hint"] == (
        "no fragments in repository 'empty'; 1 fragment you can read is elsewhere in "
        "organization 'acme' — ask with \"repo_id\": \"*\" to search its organization-wide "
        "fragments and every repository you can read")
    # The token reads web and empty: the limiter, never the globex note or the session's.
    assert ids(wide) == [world.limiter.public_id] and wide["hint"] is None
    assert (bad["code"], bad["field"]) == ("invalid", "scope.repo_id")


def test_invalid_input_is_a_tool_error_naming_the_field(stack: Stack, cast: Cast, world: World):
    async def scenario(session: ClientSession):
        calls = [
            ("retrieve", {"query": "x", "scope": WEB, "budget_tokens": -1}),
            ("retrieve", {"query": "x", "scope": WEB, "as_of": "yesterday"}),
            ("retrieve", {"query": "x", "scope": {"org_id": ""}}),
            ("retrieve", {"query": "x", "scope": WEB, "reranker": "gpt"}),
            ("feedback", {"fragment_id": world.limiter.public_id, "signal": "meh"}),
            ("write_session_fragment", {
                "scope": {**WEB, "session_id": cast.session.external_id}, "body": "x",
                "kind": "nonsense"}),
        ]
        errors = [error_of(await session.call_tool(name, args)) for name, args in calls]
        # Wrong types and missing arguments: the SDK's own argument check, in REST's words.
        missing = error_of(await session.call_tool("retrieve", {"query": "x", "scope": {}}))
        no_session = error_of(await session.call_tool("write_session_fragment",
                                                      {"scope": WEB, "body": "x"}))
        # A misspelt scope key is refused like in REST, not dropped (which would widen scope).
        misspelt = error_of(await session.call_tool("retrieve", {"query": "x", "scope": {
            "org_id": "acme", "repo": "web"}}))
        # Unknown top-level arguments are the SDK's to check, and it ignores them (docs/api.md).
        extra = ok(await session.call_tool("retrieve", {"query": "rate limiter", "scope": WEB,
                                                        "budget": 5}))
        # The server is still fine afterwards.
        still = ok(await session.call_tool("retrieve", {"query": "rate limiter", "scope": WEB}))
        return errors, missing, no_session, misspelt, extra, still

    errors, missing, no_session, misspelt, extra, still = run(stack, cast.raw_token, scenario)
    assert [(e["code"], e["field"]) for e in errors] == [
        ("invalid", "budget_tokens"), ("invalid", "as_of"), ("invalid", "scope.org_id"),
        ("invalid", "reranker"), ("invalid", "signal"), ("invalid", "kind")]
    assert (missing["field"], missing["message"]) == ("scope.org_id", "This field is required.")
    assert no_session["field"] == "scope.session_id"
    assert misspelt["field"] == "scope.repo"
    assert world.limiter.public_id in ids(extra)
    assert world.limiter.public_id in ids(still)


def test_django_is_still_served_next_to_mcp(stack: Stack):
    health = httpx2.get(f"{stack.base_url}/healthz", timeout=30)
    assert health.headers["content-type"].startswith("application/json")
    # Database, Redis and the stack's worker all answer.
    assert health.status_code == 200 and health.json()["status"] == "ok", health.text
    css = httpx2.get(f"{stack.base_url}/static/css/contexts.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert httpx2.get(f"{stack.base_url}/api/").status_code == 200
    # Only /mcp and below belong to the MCP server.
    assert httpx2.get(f"{stack.base_url}/mcpx").status_code == 404


def test_rest_retrieval_through_the_served_app_writes_its_trace_after_answering(
        stack: Stack, cast: Cast, world: World):
    # Django runs as its WSGI application inside the ASGI server (contexts/asgi.py). The trace
    # row is written once the response is sent, from the response's close(), which the adapter
    # must call (uvicorn's own WSGI adapter never did).
    response = httpx2.post(
        f"{stack.base_url}/api/contexts/retrieve", timeout=60,
        json={"query": "why does the rate limiter drop requests?", "scope": WEB},
        headers={"Authorization": f"Bearer {cast.raw_token}"})
    assert response.status_code == 200, response.text
    payload = response.json()
    assert ids(payload) == [world.limiter.public_id]
    deadline = time.monotonic() + 10
    while not RetrievalTrace.objects.filter(public_id=payload["trace_id"]).exists():
        assert time.monotonic() < deadline, "the trace was never written"
        time.sleep(0.05)
