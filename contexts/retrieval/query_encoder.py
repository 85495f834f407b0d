"""Where the query's forward pass runs: a child process (default) or a thread.

The API starts embedding the query first and resolves scopes, reads pins and waits for tantivy
meanwhile. On a thread that overlap is mostly lost: torch holds the GIL while it computes, so
the forward pass and the request's own Python take turns (measured on 2 cores: a 20 ms pass
took 30 ms beside scope resolution). A child process per web process — spawned when the web
entry point loads (``warm``) or on first use, holding its own copy of the model — runs it truly
in parallel. ``CONTEXTS_QUERY_ENCODER=thread`` keeps everything in-process (less memory, no
child). Either way, queries that arrive together are encoded in one forward pass
(``contexts.embedding.batching``; ``CONTEXTS_ENCODER_MAX_BATCH``,
``CONTEXTS_ENCODER_BATCH_WAIT_MS``).

The child is driven over one socket pair, written and read by the request's own thread: no
helper thread stands between them. (A ``ProcessPoolExecutor`` hands each call to its feeder
thread, which needs the GIL while the request thread is busy resolving scopes: measured, the
child started 8.5 ms after the submit; over the pipe, 0.2 ms.)

Every send and every wait for an answer is bounded, answers nobody waits for are read and
dropped, and no more than ``IN_FLIGHT`` queries are ever unanswered (see :class:`Child`):
refused or invalid requests, whose queries are sent before they are refused, once filled the
pipe until the child stopped reading and the process hung for good (red team finding 2). If
the child dies or misses a bound, the request embeds in-process instead and the next one spawns
a new child.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import logging
import multiprocessing
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future

import numpy as np
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from contexts.embedding import frames
from contexts.embedding.batching import Batcher
from contexts.embedding.embedder import (
    ModelSpec,
    encode_queries_with,
    encode_query_with,
    resolve_model,
    serve_queries,
)

logger = logging.getLogger(__name__)

MODES = ("process", "thread")
# Seconds: a child this late with its first answer (start-up: loading torch and the model) is
# treated as hung. Loading took over 30 s with four children starting on two busy cores; a dead
# child is noticed at once (its socket closes).
LOAD_TIMEOUT = 45.0
# Seconds for each later answer (steady state): a forward pass takes ~15 ms for one query and
# well under a second for a full batch of long ones, and at most IN_FLIGHT are queued. A child
# that misses it is replaced, and the request embeds in-process meanwhile.
ANSWER_TIMEOUT = 5.0
# Seconds for a send: the socket has room for IN_FLIGHT queries, so only a child that stopped
# reading ever makes a send wait.
SEND_TIMEOUT = 2.0
# Queries sent and not yet answered, at most. A sender that would exceed it reads first, so the
# child never has more than this many answers (a few KB each) to write: well within the
# socket's buffer, which it therefore never fills. It also caps a batch from one process:
# twice the default CONTEXTS_WEB_THREADS, so every request thread's query fits. (16 did not:
# sixteen 2.5 KB queries overflow what a stopped child's socket takes, tests/security/
# test_redteam_2_encoder_pipe.py.)
IN_FLIGHT = 8


def batch_limits() -> tuple[int, float]:
    """(most queries per forward pass, seconds a batch may be held open)."""
    return (max(1, settings.RETRIEVAL["encoder_max_batch"]),
            max(0.0, settings.RETRIEVAL["encoder_batch_wait_ms"]) / 1000)


def mode() -> str:
    value = settings.RETRIEVAL["query_encoder"]
    if value not in MODES:
        raise ImproperlyConfigured(f"CONTEXTS_QUERY_ENCODER must be one of {MODES}, not {value!r}")
    return value


class ChildDied(Exception):
    pass


class Child:
    """One spawned encoder process; any thread may submit, answers come back in order.

    It is driven over a socket pair with length-prefixed frames (``contexts.embedding.frames``) so
    that nothing waits on it without a bound: a send gives up after ``SEND_TIMEOUT``, a wait for the
    next answer after ``ANSWER_TIMEOUT`` (``LOAD_TIMEOUT`` for one that may include loading torch
    and a model). A child that misses a bound is killed and marked broken; the request embeds
    in-process and the next one spawns a new child.

    Answers nobody waits for (a refused or invalid request abandons its ticket) are read and
    dropped before each send, and at most ``IN_FLIGHT`` tickets are ever unanswered: a sender
    that would exceed that reads first. So the child never has more than a few small answers to
    write, and can always write them — it never stops reading because its own writes block.
    """

    def __init__(self) -> None:
        # spawn, not fork: a forked child would share the parent's database connections and
        # torch's thread pools.
        context = multiprocessing.get_context("spawn")
        self._reader, child_end = socket.socketpair()
        # Sending and receiving threads each set their own timeouts: two socket objects.
        self._writer = self._reader.dup()
        max_batch, wait = batch_limits()
        self.process = context.Process(target=serve_queries, args=(child_end, max_batch, wait),
                                       daemon=True, name="contexts-query-encoder")
        self.process.start()
        child_end.close()
        self.owner = os.getpid()  # a child does not survive a fork of its parent
        self._tickets = itertools.count()
        self._send_lock = threading.Lock()
        # Not reentrant on purpose: an abandoned Pending's __del__ may run in a thread that is
        # mid-frame, and must then skip reading rather than read inside that frame.
        self._receive_lock = threading.Lock()
        self._answers: dict[int, tuple[object, float]] = {}
        self._unwanted: set[int] = set()
        # Tickets given up by their requests; appended without a lock (from __del__), settled
        # by whoever reads next.
        self._abandoned: deque[int] = deque()
        self._sent = 0       # under the send lock; also the next ticket's number
        self._received = 0   # under the receive lock; also the next answer's ticket
        # Models the child has been asked for, and the last ticket that asks for a new one:
        # answers up to it may include loading a model, and get LOAD_TIMEOUT.
        self._models: set[ModelSpec] = set()
        self._loading_through = -1
        self.broken = False

    def in_flight(self) -> int:
        """Tickets sent whose answer has not been read off the socket."""
        return self._sent - self._received

    def _answer_timeout(self) -> float:
        """The bound on the wait for the next answer (answers come in ticket order)."""
        return LOAD_TIMEOUT if self._received <= self._loading_through else ANSWER_TIMEOUT

    def _fail(self, why: object) -> ChildDied:
        """Give up on this child: a stream that timed out may be mid-frame, so it is never used
        again. Killed here (it may be stopped, or stuck); the next request spawns a new one."""
        self.broken = True
        with contextlib.suppress(OSError):
            self.process.kill()
        return ChildDied(str(why))

    def submit(self, specs: Sequence[ModelSpec], text: str, *, wanted: bool = True) -> int:
        with self._send_lock:
            if self.broken:
                raise ChildDied("broken")
            self._make_room()
            ticket = next(self._tickets)
            if not wanted:
                self._abandoned.append(ticket)
            if not self._models.issuperset(specs):
                self._models.update(specs)
                self._loading_through = ticket
            self._sent += 1
            try:
                frames.send(self._writer, (ticket, list(specs), text),
                            time.monotonic() + SEND_TIMEOUT)
            except (frames.FrameTimeout, OSError, ValueError) as exc:
                raise self._fail(exc) from exc
        return ticket

    def _make_room(self) -> None:
        """Called holding the send lock: read what answers are waiting (nobody else may), and
        if ``IN_FLIGHT`` tickets are unanswered, wait (bounded) for the oldest."""
        full = self.in_flight() >= IN_FLIGHT
        if not full and not frames.readable(self._reader):
            return  # the common case: one poll, nothing to read
        if not self._receive_lock.acquire(timeout=self._answer_timeout() if full else 0):
            if full:
                raise ChildDied("the encoder is busy")  # its reader will give up in time
            return  # another thread is reading, and drains as it goes
        try:
            self._drain()
            while self.in_flight() >= IN_FLIGHT:
                self._receive_one(time.monotonic() + self._answer_timeout())
        except (frames.FrameTimeout, EOFError, OSError, ValueError) as exc:
            raise self._fail(exc) from exc
        finally:
            self._receive_lock.release()

    def _drain(self) -> None:
        """Holding the receive lock: read every answer that is already there."""
        while not self.broken and frames.readable(self._reader):
            # A frame that has started arrives whole at once (the child writes it in one go).
            self._receive_one(time.monotonic() + ANSWER_TIMEOUT)

    def _receive_one(self, deadline: float) -> None:
        """Holding the receive lock: read the next answer and keep it, unless it is
        unwanted."""
        if self.broken:
            raise EOFError("broken")
        got, payload, done_at = frames.recv(self._reader, deadline)
        self._received += 1
        self._settle()
        if got in self._unwanted:
            self._unwanted.discard(got)
        else:
            self._answers[got] = (payload, done_at)

    def _settle(self) -> None:
        while self._abandoned:
            ticket = self._abandoned.popleft()
            if self._answers.pop(ticket, None) is None:
                self._unwanted.add(ticket)

    def answer(self, ticket: int) -> tuple[list[np.ndarray], float]:
        """The vectors for ``ticket`` and when the child finished them (monotonic)."""
        while ticket not in self._answers:  # answers for other threads are kept for them
            if not self._receive_lock.acquire(timeout=self._answer_timeout()):
                raise ChildDied("another reader is stuck")  # it gives up on the child
            try:
                if ticket not in self._answers:
                    self._receive_one(time.monotonic() + self._answer_timeout())
            except (frames.FrameTimeout, EOFError, OSError, ValueError) as exc:
                raise self._fail(exc) from exc
            finally:
                self._receive_lock.release()
        payload, done_at = self._answers.pop(ticket)
        if isinstance(payload, BaseException):
            raise payload
        return payload, done_at

    def abandon(self, ticket: int) -> None:
        """Nobody will ask for ``ticket`` (e.g. the request was refused): drop its answer whether
        it came in already or not, and read what is waiting if no one else is reading."""
        self._abandoned.append(ticket)
        if self.broken or not self._receive_lock.acquire(blocking=False):
            return  # a reader (maybe this very thread, mid-frame) settles it
        try:
            self._settle()
            self._drain()
        except (frames.FrameTimeout, EOFError, OSError, ValueError) as exc:
            self._fail(exc)
        finally:
            self._receive_lock.release()

    def close(self, *, wait: float = 0.0) -> None:
        """Stop the child: it exits on its own once the socket closes; killed if it has not
        after ``wait`` seconds."""
        self.broken = True
        with contextlib.suppress(OSError):
            self._reader.shutdown(socket.SHUT_RDWR)  # also wakes a thread waiting to read
        self.process.join(wait)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(1.0)
        # Closed under their locks: a thread still using a socket must not find its
        # descriptor number reused by another file.
        for sock, lock in ((self._reader, self._receive_lock), (self._writer, self._send_lock)):
            if lock.acquire(timeout=1.0):
                sock.close()
                lock.release()


_child: Child | None = None
_child_lock = threading.Lock()


def child() -> Child:
    """This process's encoder child, spawned if there is none (or only a dead or inherited
    one)."""
    global _child
    with _child_lock:
        if _child is None or _child.broken or _child.owner != os.getpid():
            if _child is not None and _child.owner == os.getpid():
                _child.close()
            _child = Child()
        return _child


@atexit.register
def _close_at_exit() -> None:
    # Let the child finish its loop and exit cleanly instead of being terminated along with
    # this process (which leaves its semaphores to the resource tracker's warnings).
    if _child is not None and _child.owner == os.getpid():
        _child.close(wait=2.0)


def discard() -> None:
    """Stop this process's child (tests, shutdown); the next submit spawns a new one."""
    global _child
    with _child_lock:
        if _child is not None and _child.owner == os.getpid():
            _child.close()
        _child = None


def warm() -> None:
    """Start the child and load its models now (a few seconds, in the background) rather than
    on the first request. Called by the WSGI and ASGI entry points."""
    if mode() == "process":
        specs = [resolve_model(name) for name in set(settings.EMBEDDING_MODELS.values())]
        child().submit(specs, "", wanted=False)


def wait_until_ready(heartbeat: Callable[[], None], timeout: float = LOAD_TIMEOUT) -> bool:
    """Block until this process's child has its models loaded and answers (``process`` mode;
    other modes are ready at once), calling ``heartbeat`` about every second meanwhile; False
    (logged) if it has not within ``timeout`` seconds or died, and requests then fall back as
    they would anyway.

    Why a web process waits before it serves (``contexts.web.worker``): a question the
    query-vector cache does not know waits for the child, and while the child loads its
    model (5–10 s of CPU on two busy cores) such questions take the process's few request
    threads one by one until every request of the process, cached or not, queues behind them —
    the stalls of 2–5 s ``manage.py loadtest`` saw after the cache had made its priming
    requests stop waiting for the encoder. A process that is not serving yet takes no
    connections: the others serve them.
    """
    if mode() != "process":
        return True
    specs = [resolve_model(name) for name in set(settings.EMBEDDING_MODELS.values())]
    outcome: list[BaseException | None] = []

    def ask() -> None:
        try:
            encoder = child()
            encoder.answer(encoder.submit(specs, ""))
            outcome.append(None)
        except ChildDied as exc:
            outcome.append(exc)

    asking = threading.Thread(target=ask, name="contexts-encoder-ready", daemon=True)
    asking.start()
    deadline = time.monotonic() + timeout
    while asking.is_alive() and time.monotonic() < deadline:
        heartbeat()
        asking.join(min(1.0, max(0.0, deadline - time.monotonic())))
    if outcome == [None]:
        return True
    why = outcome[0] if outcome else f"no answer within {timeout:g} s"
    logger.warning("query encoder not ready (%s); serving anyway, embedding in-process "
                   "until it is", why)
    return False


_batcher: Batcher | None = None
_batcher_owner = 0  # a batcher's thread does not survive a fork
_batcher_lock = threading.Lock()


def in_process() -> Batcher:
    """This process's own batching encoder (the ``thread`` mode, and the fallback when the
    child is unavailable)."""
    global _batcher, _batcher_owner
    with _batcher_lock:
        if _batcher is None or _batcher_owner != os.getpid():
            max_batch, wait = batch_limits()
            _batcher = Batcher(encode_queries_with, max_batch=max_batch, wait=wait,
                               name="contexts-embed-query")
            _batcher_owner = os.getpid()
        return _batcher


class Pending:
    """A query being embedded; :meth:`result` waits for the vectors."""

    def __init__(self, specs: Sequence[ModelSpec], text: str) -> None:
        self.specs, self.text = list(specs), text
        self._child: Child | None = None
        self._ticket: int | None = None
        self._future: Future | None = None
        self._done_at: float | None = None
        self._result: tuple[list[np.ndarray], float] | None = None
        if mode() == "process":
            try:
                self._child = child()
                self._ticket = self._child.submit(self.specs, text)
                return
            except ChildDied as exc:
                logger.warning("query encoder process unavailable (%s); embedding in-process",
                               exc)
                self._child = None
        self._future = Future()
        in_process().submit(tuple(self.specs), text, self._settle)

    def __del__(self) -> None:
        if self._child is not None and self._ticket is not None:
            self._child.abandon(self._ticket)

    def _settle(self, result: object) -> None:
        self._done_at = time.monotonic()
        if isinstance(result, BaseException):
            self._future.set_exception(result)
        else:
            self._future.set_result(result)

    def result(self) -> tuple[list[np.ndarray], float]:
        """One vector per spec, and when they were ready (``time.monotonic()``)."""
        if self._result is None:
            self._result = self._wait()
        return self._result

    def _wait(self) -> tuple[list[np.ndarray], float]:
        if self._child is not None and self._ticket is not None:
            ticket, self._ticket = self._ticket, None  # answered: nothing to abandon
            try:
                return self._child.answer(ticket)
            except ChildDied as exc:
                logger.warning("query encoder process died or hung (%s); embedding in-process",
                               exc)
                return encode_query_with(self.specs, self.text), time.monotonic()
        assert self._future is not None
        vectors = self._future.result()
        return vectors, self._done_at or time.monotonic()
