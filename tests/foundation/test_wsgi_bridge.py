"""The ASGI-to-WSGI bridge Django is served through (``contexts.web.wsgi_bridge``), driven as an
ASGI server drives it: a scope, a ``receive`` that yields the request's messages and a ``send`` that
records the response's. The WSGI applications here answer with Django's response classes, as
Django's handler does. Served end to end (gunicorn, uvicorn, Django) by the load-test, MCP and
red-team tests."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest
from django.http import HttpResponse, StreamingHttpResponse

from contexts.web.wsgi_bridge import BUFFERED_BODY_MAX, BUFFERED_TOTAL_MAX, WSGIBridge


def scope(method: str = "POST", headers: list[tuple[bytes, bytes]] | None = None) -> dict:
    return {"type": "http", "method": method, "path": "/x", "root_path": "", "query_string": b"",
            "http_version": "1.1", "headers": headers or [], "server": ("127.0.0.1", 80),
            "client": ("127.0.0.1", 5000)}


def serve(app, request_scope: dict, body_chunks: list[bytes], *, disconnect: bool = False,
          failing_send_at: int | None = None, stalled_send_at: int | None = None,
          stall: bool = False, timeout: float = 20.0, held: int = 0) -> list[dict]:
    """Run one request through a fresh bridge; the messages sent, in order. ``stall``: the
    client sends its chunks and then nothing, never finishing its body; ``stalled_send_at``:
    it stops reading the response there; ``held``: bytes the bridge already holds."""
    sent: list[dict] = []

    async def run() -> None:
        messages = [{"type": "http.request", "body": chunk,
                     "more_body": stall or n < len(body_chunks) - 1}
                    for n, chunk in enumerate(body_chunks)]
        if disconnect:
            messages = [{"type": "http.disconnect"}]

        async def receive() -> dict:
            if messages:
                return messages.pop(0)
            await asyncio.Event().wait()  # as a server: nothing more until the client leaves
            raise AssertionError("unreachable")

        async def send(message: dict) -> None:
            if failing_send_at is not None and len(sent) == failing_send_at:
                raise OSError("client went away")
            if stalled_send_at is not None and len(sent) == stalled_send_at:
                await asyncio.Event().wait()  # as a transport whose reader stopped
            sent.append(message)

        bridge = WSGIBridge(app, workers=2, timeout=timeout)
        bridge.buffered = held
        try:
            await asyncio.wait_for(bridge(request_scope, receive, send), timeout=20)
        finally:
            bridge.executor.shutdown(wait=False)

    asyncio.run(run())
    return sent


def length_header(n: int) -> list[tuple[bytes, bytes]]:
    return [(b"content-length", str(n).encode()), (b"content-type", b"application/json")]


def echo_app(seen: dict):
    def app(environ, start_response):
        seen["thread"] = threading.get_ident()
        seen["input"] = environ["wsgi.input"]
        length = environ.get("CONTENT_LENGTH")
        seen["body"] = environ["wsgi.input"].read(int(length) if length else -1)
        response = HttpResponse(b"got %d bytes" % len(seen["body"]), status=201)
        response._resource_closers.append(
            lambda: seen.setdefault("closed_in", threading.get_ident()))
        start_response("201 Created", list(response.items()))
        return response
    return app


def test_a_small_body_is_read_before_the_app_and_the_answer_goes_out_whole():
    seen: dict = {}
    sent = serve(echo_app(seen), scope(headers=length_header(11)), [b"hello", b" ", b"world"])
    assert seen["body"] == b"hello world"
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    assert sent[0]["status"] == 201
    assert sent[1] == {"type": "http.response.body", "body": b"got 11 bytes", "more_body": False}
    # close() (where a retrieval's trace is written) ran in the thread that ran the app.
    assert seen["closed_in"] == seen["thread"]


def test_a_chunked_or_large_body_is_streamed_to_the_app_by_a2wsgi():
    for headers, chunks in (
        ([(b"transfer-encoding", b"chunked")], [b"a" * 1000, b"b" * 1000]),
        (length_header(BUFFERED_BODY_MAX + 2), [b"c" * (BUFFERED_BODY_MAX + 1), b"d"]),
    ):
        seen: dict = {}
        sent = serve(echo_app(seen), scope(headers=headers), chunks)
        assert seen["body"] == b"".join(chunks)
        # a2wsgi's own sequence: the start, the body as a chunk, then an empty last chunk.
        assert [(m["type"], m.get("more_body")) for m in sent] == [
            ("http.response.start", None), ("http.response.body", True),
            ("http.response.body", None)]
        assert sent[1]["body"] == b"got %d bytes" % len(seen["body"])


def test_a_streaming_response_arrives_in_order_with_back_pressure():
    def app(environ, start_response):
        response = StreamingHttpResponse(b"%03d;" % n for n in range(40))
        start_response("200 OK", list(response.items()))
        return response

    sent = serve(app, scope("GET"), [b""])
    bodies = [m for m in sent if m["type"] == "http.response.body"]
    assert b"".join(m["body"] for m in bodies) == b"".join(b"%03d;" % n for n in range(40))
    assert bodies[-1]["more_body"] is False and all(m["more_body"] for m in bodies[:-1])


def test_a_client_gone_before_its_body_never_reaches_the_app():
    seen: dict = {}
    assert serve(echo_app(seen), scope(headers=length_header(5)), [b"hello"],
                 disconnect=True) == []
    assert seen == {}


def test_an_error_before_the_answer_reaches_the_server():
    def app(environ, start_response):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        serve(app, scope("GET"), [b""])


def test_a_client_that_stops_reading_a_stream_does_not_hold_its_thread():
    closed = threading.Event()

    def chunks() -> Iterator[bytes]:
        yield from (b"x" * 100 for _ in range(100))  # ten times the queue

    def app(environ, start_response):
        response = StreamingHttpResponse(chunks())
        response._resource_closers.append(closed.set)
        start_response("200 OK", list(response.items()))
        return response

    with pytest.raises(OSError, match="client went away"):
        serve(app, scope("GET"), [b""], failing_send_at=3)
    assert closed.wait(5), "the response was never closed: its thread is stuck"


# --- slow and stalled clients (the red-team pass of issue 25) --------------------------------
def test_the_body_is_freed_with_its_request():
    seen: dict = {}
    serve(echo_app(seen), scope(headers=length_header(5)), [b"hello"])
    assert seen["input"].closed  # not left for the next garbage collection


def test_a_small_body_that_stalls_is_answered_408_without_a_thread():
    seen: dict = {}
    sent = serve(echo_app(seen), scope(headers=length_header(100)), [b"only part"],
                 stall=True, timeout=0.3)
    assert sent[0]["status"] == 408 and (b"connection", b"close") in sent[0]["headers"]
    assert seen == {}  # the application never ran


def test_a_stalled_upload_ends_its_body_and_frees_the_thread():
    seen: dict = {}
    sent = serve(echo_app(seen), scope(headers=[(b"transfer-encoding", b"chunked")]),
                 [b"part of an upload"], stall=True, timeout=0.3)
    assert seen["body"] == b"part of an upload"  # what came, then the end
    assert sent[0]["status"] == 201


def test_small_bodies_beyond_the_process_budget_take_a2wsgi():
    seen: dict = {}
    sent = serve(echo_app(seen), scope(headers=length_header(5)), [b"hello"],
                 held=BUFFERED_TOTAL_MAX)
    assert seen["body"] == b"hello"
    assert len(sent) == 3  # a2wsgi's sequence, see above


def test_a_reader_that_stops_reading_a_stream_frees_the_thread_after_the_timeout():
    closed = threading.Event()

    def app(environ, start_response):
        response = StreamingHttpResponse(b"x" * 100 for _ in range(100))
        response._resource_closers.append(closed.set)
        start_response("200 OK", list(response.items()))
        return response

    with pytest.raises(TimeoutError, match="stopped reading"):
        serve(app, scope("GET"), [b""], stalled_send_at=2, timeout=0.3)
    assert closed.wait(5), "the response was never closed: its thread is stuck"
