"""`make run` prints its address only once the server answers (issue 40, item 3): runstack polls
``/readyz`` until it answers 200 and says meanwhile what it waits for. Here the waiting function
meets a real local HTTP server going through a start-up: a socket that accepts nothing (gunicorn
listening while its workers load the query encoder), nothing listening, a 503, then 200. Each
stage is moved on by the function's own report of the previous one: no sleeps, no timing."""

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from contexts.management.commands.runstack import wait_until_serving


class _Server:
    """A real HTTP server on ``port``: 503 until ``ready``, then 200."""

    def __init__(self, port: int) -> None:
        self.ready = False
        self.requests = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                owner.requests += 1
                self.send_response(200 if owner.ready else 503)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def listening() -> Iterator[socket.socket]:
    """A socket that listens and never accepts: connections wait in its backlog."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    yield sock
    sock.close()


def test_it_waits_through_a_start_up_and_says_why_at_each_stage(listening):
    port = listening.getsockname()[1]
    servers: list[_Server] = []
    said: list[str] = []

    def on_wait(reason: str) -> None:
        said.append(reason)
        if len(said) == 1:      # accepted, no answer: the workers are loading the encoder
            listening.close()   # ... gunicorn restarts: nothing listens for a moment
        elif len(said) == 2:
            servers.append(_Server(port))   # it listens, and is not ready yet
        elif len(said) == 3:
            servers[0].ready = True

    try:
        ready = wait_until_serving(f"http://127.0.0.1:{port}/readyz", alive=lambda: True,
                                   on_wait=on_wait, timeout=60, request_timeout=0.3,
                                   sleep=lambda seconds: None)
        assert ready is True
        assert said == ["the web processes are loading the query encoder",
                        "the web server is starting (nothing listens yet)",
                        "/readyz answers 503 (the database or this node's search index is "
                        "not ready yet)"]
        assert servers[0].requests == 2   # the 503, then the 200 it returned on
    finally:
        for server in servers:
            server.close()


def test_the_same_reason_is_said_once_not_at_every_poll():
    server = _Server(0)
    port = server.httpd.server_address[1]
    said: list[str] = []

    def sleep(seconds: float) -> None:  # the fifth poll finds it ready
        if server.requests == 4:
            server.ready = True

    try:
        assert wait_until_serving(f"http://127.0.0.1:{port}/readyz", alive=lambda: True,
                                  on_wait=said.append, timeout=60, sleep=sleep)
        assert server.requests == 5 and len(said) == 1 and said[0].startswith("/readyz answers")
    finally:
        server.close()


def test_it_gives_up_when_web_dies_or_the_time_is_out():
    server = _Server(0)
    port = server.httpd.server_address[1]
    try:
        url = f"http://127.0.0.1:{port}/readyz"
        assert not wait_until_serving(url, alive=lambda: False, on_wait=lambda r: None,
                                      timeout=60, sleep=lambda s: None)
        assert server.requests == 0   # a dead web process is not polled
        said: list[str] = []
        assert not wait_until_serving(url, alive=lambda: True, on_wait=said.append,
                                      timeout=0, sleep=lambda s: None)
        assert server.requests == 1 and len(said) == 1
    finally:
        server.close()
