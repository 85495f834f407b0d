"""Django's WSGI application served inside the ASGI server, with one thread hop per request.

``a2wsgi`` (ADR 0008) hands every message between its WSGI thread and the event loop through
``asyncio.run_coroutine_threadsafe``, each a task, a future and a wait on a loop that is busy
with every other connection: the request body, the response's start, each body chunk and the
final empty chunk — four round trips for an API answer. Profiled under ``manage.py loadtest``
(py-spy, samples holding the GIL), half of a web process's Python time was in its event loop,
most of it these hand-overs. Here, for the requests that make up the traffic:

- a body announced by ``Content-Length`` of at most :data:`BUFFERED_BODY_MAX` bytes is read in
  the loop before a thread is taken (a slow sender no longer holds one either);
- the application runs in the thread pool; a response that is not streaming is handed to the
  loop whole (start and body in one ``call_soon_threadsafe``, no wait), and the response's
  ``close()`` — where a retrieval's trace is written (``contexts.api.after_response``) — then
  runs in the same thread, as under any WSGI server;
- a streaming response is sent chunk by chunk with back-pressure, as ``a2wsgi`` does.

Anything else (a chunked or larger body: uploads) goes to ``a2wsgi`` itself, on the same
threads. ``CONTEXTS_WEB_THREADS`` bounds the requests that run at once either way.

Bounded against slow or stalled clients (red-team pass of issue 25), by ``timeout``
(``CONTEXTS_REQUEST_BODY_TIMEOUT``, 30 s):

- a small body must arrive whole within it, or the request is answered 408 without a thread;
  at most :data:`BUFFERED_TOTAL_MAX` bytes of small bodies are held at once per process (the
  rest take ``a2wsgi``'s path), and a body is freed with its request, not at the next garbage
  collection (Django's request objects sit in reference cycles);
- an upload's reads through ``a2wsgi`` each wait at most that long, then the body ends there
  (Django refuses the truncated form), so stalled uploads cannot hold the threads;
- a streaming response whose reader stops is abandoned after that long, freeing its thread.
"""

from __future__ import annotations

import asyncio
import contextvars
import io
from collections.abc import Callable, Iterable
from typing import Any

from a2wsgi import WSGIMiddleware
from a2wsgi.wsgi import build_environ
from django.http import HttpResponseBase

# API and form bodies (a retrieval's is a few KiB); uploads are larger and stream.
BUFFERED_BODY_MAX = 256 * 1024
BUFFERED_TOTAL_MAX = 32 * 1024 * 1024  # small bodies held at once, per process
_STREAM_QUEUE = 10  # chunks of a streaming response in flight, as a2wsgi's send queue

Message = dict[str, Any]


def _small_body(scope: dict) -> int | None:
    """The length of a request body known to be at most :data:`BUFFERED_BODY_MAX` (0 when
    there is none), or None: chunked, longer, or a length that is not a number."""
    length = 0
    for name, value in scope.get("headers", ()):
        if name == b"transfer-encoding":
            return None
        if name == b"content-length":
            length = int(value) if value.isdigit() else -1
    return length if 0 <= length <= BUFFERED_BODY_MAX else None


async def _read_body(receive: Callable) -> bytes | None:
    """The request body, or None if the client went away first."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _idle_bounded(receive: Callable, timeout: float) -> Callable:
    """``receive`` whose every wait ends after ``timeout`` seconds, as the client leaving."""
    async def bounded() -> dict:
        try:
            return await asyncio.wait_for(receive(), timeout)
        except TimeoutError:
            return {"type": "http.disconnect"}
    return bounded


async def _request_timeout(send: Callable) -> None:
    await send({"type": "http.response.start", "status": 408,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": b"request body timed out\n"})


class WSGIBridge:
    def __init__(self, app: Callable, workers: int, timeout: float = 30.0) -> None:
        self.app = app
        self.timeout = timeout
        self.fallback = WSGIMiddleware(app, workers=workers)
        self.executor = self.fallback.executor  # one pool: the thread bound holds for both
        self.buffered = 0  # bytes of small bodies held now (the loop's thread only)

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":  # a2wsgi answers anything else as it always did
            await self.fallback(scope, receive, send)
            return
        length = _small_body(scope)
        if length is None or self.buffered + length > BUFFERED_TOTAL_MAX:
            await self.fallback(scope, _idle_bounded(receive, self.timeout), send)
            return
        self.buffered += length
        try:
            try:
                body = await asyncio.wait_for(_read_body(receive), self.timeout)
            except TimeoutError:
                await _request_timeout(send)
                return
            if body is None:
                return
            await _Exchange(self, scope, body, send).run()
        finally:
            self.buffered -= length


class _Exchange:
    """One request: the application in a thread, its messages to the loop's ``send``."""

    def __init__(self, bridge: WSGIBridge, scope: dict, body: bytes, send: Callable) -> None:
        self.bridge = bridge
        self.loop = asyncio.get_running_loop()
        self.environ = build_environ(scope, io.BytesIO(body))  # type: ignore[arg-type]
        self.send = send
        # Bounded for a streaming response's chunks; a whole answer is three items.
        self.queue: asyncio.Queue[Message | None] = asyncio.Queue(_STREAM_QUEUE)
        self.start: Message | None = None
        self.started = False

    async def run(self) -> None:
        sender = self.loop.create_task(self._sender())
        try:
            context = contextvars.copy_context()
            await self.loop.run_in_executor(self.bridge.executor, context.run, self._wsgi)
        except BaseException:
            sender.cancel()  # whatever a broken stream left unsent is dropped
            await asyncio.gather(sender, return_exceptions=True)
            raise
        await sender

    async def _sender(self) -> None:
        error: Exception | None = None
        while (message := await self.queue.get()) is not None:
            if error is None:
                try:
                    await self.send(message)
                except Exception as exc:  # noqa: BLE001 - raised once the thread is done
                    # Keep draining: a streaming response's thread may be waiting for room.
                    error = exc
        if error is not None:
            raise error

    # --- in the thread --------------------------------------------------------------------
    def _start_response(self, status: str, headers: list[tuple[str, str]],
                        exc_info: Any = None) -> Callable[[bytes], None]:
        if exc_info is not None and self.started:
            raise exc_info[1].with_traceback(exc_info[2])
        self.start = {"type": "http.response.start", "status": int(status.split(" ", 1)[0]),
                      "headers": [(name.strip().encode("latin1").lower(),
                                   value.strip().encode("latin1")) for name, value in headers]}
        return self._write

    def _write(self, chunk: bytes) -> None:  # WSGI's legacy write(): sent as a chunk
        self._put_waiting(self._body(chunk, more=True))

    def _wsgi(self) -> None:
        iterable: Iterable[bytes] = self.bridge.app(self.environ, self._start_response)
        try:
            if isinstance(iterable, HttpResponseBase) and not iterable.streaming:
                answer = self._body(b"".join(iterable), more=False)
                self.loop.call_soon_threadsafe(self._put_all, [self._take_start(), answer, None])
                return
            for chunk in iterable:
                self._put_waiting(self._body(chunk, more=True))
            self._put_waiting(self._body(b"", more=False))
            self._put_waiting(None)
        finally:
            getattr(iterable, "close", lambda: None)()
            self.environ["wsgi.input"].close()  # the body, freed now (see the module)

    def _take_start(self) -> Message:
        if self.start is None:
            raise RuntimeError("the WSGI application returned before start_response()")
        self.started = True
        return self.start

    @staticmethod
    def _body(chunk: bytes, *, more: bool) -> Message:
        return {"type": "http.response.body", "body": bytes(chunk), "more_body": more}

    def _put_all(self, messages: list[Message | None]) -> None:  # in the loop
        for message in messages:
            self.queue.put_nowait(message)

    def _put_waiting(self, message: Message | None) -> None:
        """A streaming response's next message, waiting while the queue is full — at most the
        bridge's timeout: a reader that stopped reading must not keep the thread."""
        if not self.started and message is not None:
            self._put_waiting(self._take_start())
        put = asyncio.run_coroutine_threadsafe(self.queue.put(message), self.loop)
        try:
            put.result(timeout=self.bridge.timeout)
        except TimeoutError:
            put.cancel()
            raise TimeoutError("the client stopped reading the response") from None
