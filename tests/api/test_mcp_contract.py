"""One agent contract over MCP (issue 40, item 4), through the served application.

- Every tool answers bad input — a required argument missing, a wrong JSON type, a NUL byte, an
  unknown id, a number out of range, a misspelt scope key, an unknown tool — with a result
  ``isError: true`` whose ``structuredContent`` is the REST error body
  (``{"error": {"code", "message", "field"}}``) naming the argument, made by REST's own mapping
  (``contexts.protocol.errors``): no pydantic text, never a ``server_error``. The SDK checks the
  arguments against the tool's schema before the tool runs; that check used to answer pydantic's
  multi-line text ("1 validation error for retrieveArguments …").
- A request without a valid token — none, another scheme, malformed, unknown, revoked, expired,
  a member's personal token — is a 401 as the MCP authorization rules have it: a
  ``WWW-Authenticate: Bearer`` challenge naming the protected resource's metadata (RFC 9728),
  which is served; its body is a JSON-RPC error carrying the REST body, so the SDK's client
  reports the reason instead of "Server returned an error response".

The walk derives its cases from each tool's advertised input schema, so a tool added later is
walked too.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
import pytest
from django.utils import timezone
from mcp import ClientSession, MCPError
from mcp.types import CallToolResult

from accounts.models import ApiToken
from accounts.tokens import create_personal_token, create_token, revoke_token
from tests.api.test_mcp import (  # noqa: F401 - the served stack and its world, shared
    WEB,
    Stack,
    World,
    connect,
    leaves,
    run,
    stack,
    world,
)
from tests.domain.conftest import Cast

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

UNKNOWN_FRAGMENT = "frag_00000000000000000000"
UNKNOWN_PROPOSAL = "prop_aaaaaaaaaaaaaa"
# A value of another JSON type than the schema's, per type.
WRONG_TYPE = {"string": 12345, "integer": "many", "number": "far", "boolean": "maybe",
              "array": "not a list", "object": "not an object"}


def rest_error(result: CallToolResult) -> dict[str, Any]:
    """The REST error body of a tool error: isError, structuredContent == text == the body."""
    assert result.is_error, result.content
    text = result.content[0].text
    assert "validation error" not in text and "pydantic" not in text, text
    body = json.loads(text)
    assert result.structured_content == body
    assert set(body) == {"error"}
    error = body["error"]
    assert {"code", "message", "field"} <= set(error), error
    assert error["code"] != "server_error", error
    assert isinstance(error["message"], str) and "\n" not in error["message"], error
    return error


def _types(schema: dict[str, Any], defs: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """A property's JSON type (``anyOf [T, null]`` → T) and, for an object, its schema."""
    if "$ref" in schema:
        target = defs[schema["$ref"].rsplit("/", 1)[-1]]
        return "object", target
    for option in schema.get("anyOf", []):
        if option.get("type") != "null":
            return _types(option, defs)
    return schema.get("type"), schema


def bad_inputs(tool: Any, base: dict[str, Any]) -> list[tuple[str, dict[str, Any], str]]:
    """(what, arguments, the field the error must name) for one tool, from its schema."""
    schema = tool.input_schema
    defs = schema.get("$defs", {})
    cases = []
    for name in schema.get("required", []):
        cases.append((f"{name} missing", {k: v for k, v in base.items() if k != name}, name))
    for name, prop in schema["properties"].items():
        kind, resolved = _types(prop, defs)
        cases.append((f"{name} wrong type", {**base, name: WRONG_TYPE[kind]}, name))
        if kind == "string":
            cases.append((f"{name} NUL", {**base, name: "a\x00b"}, name))
        if kind == "array":
            cases.append((f"{name} NUL item", {**base, name: ["a\x00b"]}, name))
        if kind == "object":
            inner = dict(base[name])
            for sub in resolved.get("required", []):
                cases.append((f"{name}.{sub} missing",
                              {**base, name: {k: v for k, v in inner.items() if k != sub}},
                              f"{name}.{sub}"))
            for sub, sub_prop in resolved["properties"].items():
                sub_kind, _ = _types(sub_prop, defs)
                cases.append((f"{name}.{sub} wrong type",
                              {**base, name: {**inner, sub: WRONG_TYPE[sub_kind]}},
                              f"{name}.{sub}"))
                if sub_kind == "string":
                    cases.append((f"{name}.{sub} NUL", {**base, name: {**inner, sub: "a\x00b"}},
                                   f"{name}.{sub}"))
            cases.append((f"{name} misspelt key", {**base, name: {**inner, "repo": "web"}},
                          f"{name}.repo"))
    return cases


def test_every_tool_answers_bad_input_with_the_rest_error_body(
        stack: Stack, cast: Cast, world: World):
    session_scope = {**WEB, "session_id": cast.session.external_id}
    # A valid call of each tool, varied one argument at a time below.
    bases = {
        "retrieve": {"query": "rate limiter", "scope": WEB},
        "write_session_fragment": {"scope": session_scope, "body": "A finding."},
        "feedback": {"fragment_id": world.limiter.public_id, "signal": "helped"},
        "propose_promotion": {"fragment_id": world.session_note.public_id},
        "propose_fragment": {"scope": WEB, "body": "A rule."},
        "proposal_status": {"proposal_id": UNKNOWN_PROPOSAL},
    }
    # Unknown ids and numbers out of range: the use case's and the serializer's refusals.
    specific = [
        ("feedback", {"fragment_id": UNKNOWN_FRAGMENT, "signal": "helped"}, "fragment_id"),
        ("feedback", {"fragment_id": "not an id", "signal": "helped"}, "fragment_id"),
        ("propose_promotion", {"fragment_id": UNKNOWN_FRAGMENT}, "fragment_id"),
        ("proposal_status", {"proposal_id": UNKNOWN_PROPOSAL}, "proposal_id"),
        ("proposal_status", {"proposal_id": "prop_\x00"}, "proposal_id"),
        ("retrieve", {**bases["retrieve"], "budget_tokens": 0}, "budget_tokens"),
        ("retrieve", {**bases["retrieve"], "budget_tokens": 10**12}, "budget_tokens"),
        ("retrieve", {**bases["retrieve"], "budget_tokens": 2.5}, "budget_tokens"),
        ("retrieve", {**bases["retrieve"], "k_lexical": -1}, "k_lexical"),
        ("retrieve", {**bases["retrieve"], "k_dense": 10**6}, "k_dense"),
        ("retrieve", {**bases["retrieve"], "min_score": 1.5}, "min_score"),
        ("retrieve", {**bases["retrieve"], "freshness_halflife_days": 0},
         "freshness_halflife_days"),
        ("retrieve", {**bases["retrieve"], "max_age_days": -1}, "max_age_days"),
        ("retrieve", {**bases["retrieve"], "query": "x" * 100_000}, "query"),
        ("retrieve", {**bases["retrieve"], "exclude_states": ["stale"]}, "exclude_states"),
        ("retrieve", {**bases["retrieve"], "scope": {"org_id": "acme", "repo_id": "**"}},
         "scope.repo_id"),
        ("write_session_fragment", {**bases["write_session_fragment"], "body": "   "}, "body"),
        ("write_session_fragment", {**bases["write_session_fragment"],
                                    "heading_path": ["x" * 1000]}, "heading_path"),
    ]

    async def scenario(session: ClientSession):
        tools = (await session.list_tools()).tools
        assert {tool.name for tool in tools} == set(bases), "a tool without a walk"
        answers = []
        for tool in tools:
            for what, arguments, field in bad_inputs(tool, bases[tool.name]):
                answers.append((f"{tool.name}: {what}", field,
                                await session.call_tool(tool.name, arguments)))
        for name, arguments, field in specific:
            answers.append((f"{name}: {arguments}", field,
                            await session.call_tool(name, arguments)))
        answers.append(("unknown tool", "name", await session.call_tool("retreive", {})))
        return answers

    answers = run(stack, cast.raw_token, scenario)
    assert len(answers) > 60
    for what, field, result in answers:
        error = rest_error(result)
        assert error["field"] == field or str(error["field"]).startswith(field + "."), (
            what, error)
    # The words are REST's: the same missing field reads the same on both surfaces.
    missing = next(rest_error(r) for w, _, r in answers if w == "retrieve: scope.org_id missing")
    assert missing["message"] == "This field is required."
    misspelt = next(rest_error(r) for w, _, r in answers if w == "retrieve: scope misspelt key")
    assert misspelt["message"].startswith("unknown field 'repo'; expected one of: org_id")
    unknown = next(rest_error(r) for w, _, r in answers if UNKNOWN_FRAGMENT in w)
    assert unknown["code"] == "not_found"


def _initialize(headers: dict[str, str], url: str) -> httpx2.Response:
    body = {"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"}}}
    return httpx2.post(url, json=body, timeout=30, headers={
        "Accept": "application/json, text/event-stream", **headers})


def test_every_refused_token_is_a_401_with_a_bearer_challenge(stack: Stack, cast: Cast):
    revoked, raw_revoked = create_token(cast.org, "revoked", [cast.repo.scope])
    revoke_token(revoked)
    expired, raw_expired = create_token(cast.org, "expired", [cast.repo.scope])
    ApiToken.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(days=1))
    _, raw_personal = create_personal_token(cast.org, cast.teammate, "script")
    prefix = cast.raw_token.rsplit("_", 1)[0]
    presented = {
        "malformed": "Bearer not-a-token",
        "malformed, two words": "Bearer ctx_a b",
        "unknown": "Bearer ctx_nope_nope",
        "wrong secret": f"Bearer {prefix}_{'x' * 30}",
        "revoked": f"Bearer {raw_revoked}",
        "expired": f"Bearer {raw_expired}",
        "a member's personal token": f"Bearer {raw_personal}",
    }
    absent = {"none": None, "no token": "Bearer", "basic": "Basic dXNlcjpwdw=="}
    challenges = set()
    for what, header in [*absent.items(), *presented.items()]:
        response = _initialize({"Authorization": header} if header else {}, stack.mcp_url)
        assert response.status_code == 401, (what, response.status_code, response.text)
        challenge = response.headers["www-authenticate"]
        assert challenge.startswith("Bearer "), (what, challenge)
        assert 'realm="contexts"' in challenge
        assert 'resource_metadata="' in challenge
        assert ('error="invalid_token"' in challenge) == (what in presented), (what, challenge)
        challenges.add(challenge)
        body = response.json()
        # A JSON-RPC error (what the SDK's client surfaces) carrying the REST error body.
        assert body["jsonrpc"] == "2.0" and body["id"] is None
        assert body["error"]["code"] == -32001
        expected = "authentication_failed" if what in presented else "not_authenticated"
        assert body["error"]["data"]["error"]["code"] == expected
        assert body["error"]["data"]["error"]["message"] == body["error"]["message"]
    # Malformed, unknown, revoked, expired: one answer, nothing tells them apart.
    assert len(challenges) == 2

    # The metadata the challenge names is served, without a token, and names /mcp.
    metadata_url = challenge.split('resource_metadata="', 1)[1].split('"', 1)[0]
    path = urlsplit(metadata_url).path
    assert path == "/.well-known/oauth-protected-resource/mcp"
    metadata = httpx2.get(stack.base_url + path, timeout=30)
    assert metadata.status_code == 200, metadata.text
    document = metadata.json()
    assert document["resource"] == metadata_url.replace(
        "/.well-known/oauth-protected-resource", "")
    assert document["bearer_methods_supported"] == ["header"]

    # The SDK's client reports the reason, not a bare failed request.
    async def refused() -> None:
        async with connect(stack.mcp_url, "ctx_nope_nope"):
            pass

    with pytest.raises(BaseExceptionGroup) as refused_by_sdk:
        anyio.run(refused)
    errors = [e for e in leaves(refused_by_sdk.value) if isinstance(e, MCPError)]
    assert errors and errors[0].error.message == "invalid, expired or revoked token"
    assert errors[0].error.data["error"]["code"] == "authentication_failed"
