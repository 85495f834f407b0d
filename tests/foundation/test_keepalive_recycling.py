"""A keep-alive connection is closed by the server after ``CONTEXTS_KEEPALIVE_REQUESTS``
requests (contexts/web/worker.py), so that connections opened together spread over the web
processes again instead of staying with the one that accepted them.

Against a real server started the way ``make run`` starts it (gunicorn, the project's uvicorn
worker, ``contexts.asgi``).
"""

from __future__ import annotations

import http.client
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from devtools.loadtest import gunicorn

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 3


@pytest.fixture(scope="module")
def port(services, django_db_setup) -> Iterator[int]:
    env = {**services.env(), "CONTEXTS_KEEPALIVE_REQUESTS": str(LIMIT),
           "CONTEXTS_QUERY_ENCODER": "thread"}
    with gunicorn(1, asgi=True, env=env, keepalive=60) as base_url:
        yield urlsplit(base_url).port


def _get(conn: http.client.HTTPConnection) -> tuple[int, str | None, str]:
    conn.request("GET", "/api/")
    response = conn.getresponse()
    body = response.read()
    return response.status, response.getheader("Connection"), body.decode()[:200]


@pytest.mark.django_db
def test_the_connection_closes_after_its_last_request_and_the_client_reconnects(port: int):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        seen = []
        for _ in range(LIMIT):
            status, connection, body = _get(conn)
            assert status == 200, body
            seen.append(connection)
            socket_after = conn.sock
        # The first LIMIT - 1 answers keep the connection; the last one says close, and the
        # server then closes it (http.client drops its socket on "Connection: close").
        assert seen[:-1] == [None] * (LIMIT - 1)
        assert seen[-1] == "close" and socket_after is None
        # The client opens a new connection for its next request, served as before.
        status, connection, body = _get(conn)
        assert status == 200 and connection is None, body
    finally:
        conn.close()


@pytest.mark.django_db
def test_other_connections_are_not_affected(port: int):
    first = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    second = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        for _ in range(LIMIT - 1):
            assert _get(first)[:2] == (200, None)
        # Requests on another connection do not count towards the first one's limit.
        for _ in range(LIMIT - 1):
            assert _get(second)[:2] == (200, None)
        assert _get(first)[:2] == (200, "close")
    finally:
        first.close()
        second.close()


def test_a_negative_limit_is_a_configuration_error():
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "contexts.settings",
             "CONTEXTS_KEEPALIVE_REQUESTS": "-1"},
        capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "CONTEXTS_KEEPALIVE_REQUESTS: must be at least 0, not -1" in result.stderr


@pytest.mark.django_db
def test_pipelined_requests_past_the_limit_get_a_clean_close_not_an_error(port: int):
    # A hostile client sends more requests at once than the connection will serve. uvicorn
    # answers only the first of pipelined requests (upstream; the others would wait for the
    # keep-alive timeout); past the limit the connection ends at once with "Connection: close"
    # on a whole answer — no error status, no half-sent response, no wait.
    request = b"GET /api/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request * (LIMIT + 3))
        received = b""
        while chunk := sock.recv(65536):  # a socket.timeout here is the hang this refuses
            received += chunk
    statuses = re.findall(rb"^HTTP/1\.1 (\d{3})", received, flags=re.MULTILINE)
    assert 1 <= len(statuses) <= LIMIT and set(statuses) == {b"200"}, received[:500]
    head, _, body = received.rpartition(b"\r\n\r\n")
    assert b"\r\nconnection: close" in head.lower()
    assert len(body) == int(re.findall(rb"content-length: (\d+)", head.lower())[-1])
    # The process serves the next connection as before.
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        assert _get(conn)[:2] == (200, None)
    finally:
        conn.close()


def test_the_worker_serves_only_after_its_encoder_answers(monkeypatch):
    """The wiring ``make run``'s worker relies on: the readiness wait, heartbeating gunicorn,
    before the process's follower starts and before it serves."""
    from contexts.indexes import follower
    from contexts.retrieval import query_encoder
    from contexts.web import worker as web_worker

    Base = web_worker._UvicornWorker  # uvicorn's own worker, imported without its warning

    calls: list[str] = []
    monkeypatch.setattr(Base, "load_wsgi", lambda self: calls.append("application"))
    monkeypatch.setattr(query_encoder, "wait_until_ready",
                        lambda heartbeat: calls.append(f"ready:{heartbeat()}"))
    monkeypatch.setattr(follower, "start_in_background", lambda: calls.append("follower"))
    worker = object.__new__(web_worker.UvicornWorker)
    worker.notify = lambda: "beat"  # gunicorn's heartbeat
    worker.load_wsgi()
    assert calls == ["application", "ready:beat", "follower"]
