"""Length-prefixed pickle frames over a stream socket, each read or write bounded by a deadline.

The query encoder's parent and child talk through a ``socket.socketpair`` with these frames
(``contexts.retrieval.query_encoder``, ``contexts.embedding.embedder.serve_queries``). A
``multiprocessing`` ``Connection`` has no send timeout: a child that stopped reading once held a
web process's sender, and with it every later retrieval, for good. Here the parent passes a
deadline and gets :class:`FrameTimeout` instead; the child passes none and blocks (it has
nothing else to do).

No Django here: the spawned child imports this before anything is configured.
"""

from __future__ import annotations

import pickle
import select
import socket
import struct
import time

HEADER = struct.Struct("!I")
# A frame is a query (at most a few thousand characters) or its vectors (a few KB per model);
# a larger length means the stream is out of step, not a real frame.
MAX_FRAME = 64 * 1024 * 1024


class FrameTimeout(Exception):
    """The peer did not take or give a whole frame before the deadline; the stream may now be
    mid-frame, so it must not be used again."""


def _remaining(deadline: float | None) -> float | None:
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise FrameTimeout("deadline passed")
    return left


def send(sock: socket.socket, message: object, deadline: float | None = None) -> None:
    """Write ``message`` as one frame. Pickling errors are raised before anything is written."""
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    if len(payload) > MAX_FRAME:
        raise ValueError(f"frame of {len(payload)} bytes exceeds {MAX_FRAME}")
    sock.settimeout(_remaining(deadline))
    try:
        # With a timeout, sendall's bound is the whole call, not each chunk (Python >= 3.5).
        sock.sendall(HEADER.pack(len(payload)) + payload)
    except TimeoutError as exc:
        raise FrameTimeout("the peer stopped reading") from exc


def _exactly(sock: socket.socket, size: int, deadline: float | None) -> bytes:
    buffer = bytearray(size)
    view = memoryview(buffer)
    got = 0
    while got < size:
        sock.settimeout(_remaining(deadline))
        try:
            count = sock.recv_into(view[got:])
        except TimeoutError as exc:
            raise FrameTimeout("the peer stopped writing") from exc
        if count == 0:
            raise EOFError("the peer closed the stream")
        got += count
    return bytes(buffer)


def recv(sock: socket.socket, deadline: float | None = None) -> object:
    """The next frame's message; :class:`FrameTimeout` if it is not whole by ``deadline``,
    ``EOFError`` if the peer closed the stream."""
    (size,) = HEADER.unpack(_exactly(sock, HEADER.size, deadline))
    if size > MAX_FRAME:
        raise EOFError(f"frame length {size} out of step")
    payload = _exactly(sock, size, deadline)
    try:
        return pickle.loads(payload)  # noqa: S301 - our own child's frames
    except Exception as exc:  # noqa: BLE001 - whatever a garbled frame raises
        raise EOFError(f"unreadable frame: {exc!r}") from exc


def readable(sock: socket.socket) -> bool:
    """Whether a frame (or the end of the stream) is waiting to be read, without waiting."""
    poller = select.poll()  # not select(): a busy web process's descriptors may exceed 1023
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))
