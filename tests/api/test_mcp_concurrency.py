"""MCP tool calls run side by side within one web process, as REST requests do.

The ``/mcp`` application is served in this process (``build_application``, behind its token
middleware, the SDK's stateless transport and session manager); two ``tools/call`` requests are
sent at once. The use case they reach waits at a barrier of two: it is passed only if both calls
are in flight at the same moment. Were the calls run one at a time (as asgiref's thread-sensitive
executor ran them), the first would wait alone until the barrier gave up and both would answer
``server_error``. No clock is read: overlap is what is observed.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import httpx2
import pytest

from contexts.mcp import server as mcp_server
from contexts.usecases import proposals as proposal_cases
from tests.domain.conftest import Cast

pytestmark = pytest.mark.django_db(transaction=True)  # the calls' threads read the token

# Only a guard against a hang: with the calls serialised the barrier breaks here.
BARRIER_GUARD = 20.0


async def _call_tool(client: httpx2.AsyncClient, raw_token: str, name: str,
                     arguments: dict[str, Any]) -> dict[str, Any]:
    response = await client.post("/mcp", content=json.dumps({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": name, "arguments": arguments}}), headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {raw_token}"})
    assert response.status_code == 200, response.text
    return response.json()["result"]


async def _two_calls_at_once(raw_token: str) -> list[dict[str, Any]]:
    app = mcp_server.build_application()
    transport = httpx2.ASGITransport(app=app)
    async with mcp_server.server.session_manager.run(), \
            httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        return await asyncio.gather(*(
            _call_tool(client, raw_token, "proposal_status", {"proposal_id": f"prop_{n}"})
            for n in range(2)))


def test_two_tool_calls_are_in_flight_at_once(cast: Cast, monkeypatch, settings):
    settings.ALLOWED_HOSTS = ["127.0.0.1"]
    both_in_flight = threading.Barrier(2, timeout=BARRIER_GUARD)
    threads: set[str] = set()
    real = proposal_cases.own_proposal

    def own_proposal(principal, proposal_id):
        threads.add(threading.current_thread().name)
        both_in_flight.wait()  # BrokenBarrierError (a server_error) unless the other is here
        return real(principal, proposal_id)

    monkeypatch.setattr(proposal_cases, "own_proposal", own_proposal)
    results = asyncio.run(_two_calls_at_once(cast.raw_token))

    # Both passed the barrier and went on to the real use case: an unknown proposal, each
    # answered with the REST error body naming the argument (the error contract holds).
    for result in results:
        assert result["isError"] is True
        assert result["structuredContent"]["error"]["code"] == "not_found", result
        assert result["structuredContent"]["error"]["field"] == "proposal_id"
    assert len(threads) == 2, threads  # each call in a thread of its own

