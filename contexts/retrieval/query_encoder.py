"""Where the query's forward pass runs: a child process (default) or a thread.

The API starts embedding the query first and resolves scopes, reads pins and waits for tantivy
meanwhile. On a thread that overlap is mostly lost: torch holds the GIL while it computes, so
the forward pass and the request's own Python take turns (measured on 2 cores: a 20 ms pass
took 30 ms beside scope resolution). A child process per web process — spawned when the web
entry point loads (``warm``) or on first use, holding its own copy of the model — runs it truly
in parallel. ``CONTEXTS_QUERY_ENCODER=thread`` keeps everything in-process (less memory, no
child).

The child is driven over one pipe, written and read by the request's own thread: no helper
thread stands between them. (A ``ProcessPoolExecutor`` hands each call to its feeder thread,
which needs the GIL while the request thread is busy resolving scopes: measured, the child
started 8.5 ms after the submit; over the pipe, 0.2 ms.)

If the child dies or stops answering, the request embeds in-process instead and the next one
spawns a new child.
"""

from __future__ import annotations

import atexit
import itertools
import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from contexts.ingestion.embed import ModelSpec, encode_query_with, resolve_model, serve_queries

logger = logging.getLogger(__name__)

MODES = ("process", "thread")
# Seconds: a child this late is treated as hung. Generous, because the first answer includes
# loading torch and the model, which took over 30 s with four children starting on two
# busy cores; a dead child is noticed at once (its pipe closes).
ANSWER_TIMEOUT = 120.0

# Embedder.encode serialises forward passes per model, so more threads would only queue.
_threads = ThreadPoolExecutor(max_workers=2, thread_name_prefix="embed-query")


def mode() -> str:
    value = settings.RETRIEVAL["query_encoder"]
    if value not in MODES:
        raise ImproperlyConfigured(f"CONTEXTS_QUERY_ENCODER must be one of {MODES}, not {value!r}")
    return value


class ChildDied(Exception):
    pass


class Child:
    """One spawned encoder process; any thread may submit, answers come back in order."""

    def __init__(self) -> None:
        # spawn, not fork: a forked child would share the parent's database connections and
        # torch's thread pools.
        context = multiprocessing.get_context("spawn")
        self._conn, child_end = context.Pipe()
        self.process = context.Process(target=serve_queries, args=(child_end,), daemon=True,
                                       name="contexts-query-encoder")
        self.process.start()
        child_end.close()
        self.owner = os.getpid()  # a child does not survive a fork of its parent
        self._tickets = itertools.count()
        self._send_lock = threading.Lock()
        # Reentrant: an abandoned Pending's __del__ may run in a thread that holds it.
        self._receive_lock = threading.RLock()
        self._answers: dict[int, tuple[object, float]] = {}
        self._unwanted: set[int] = set()
        self.broken = False

    def submit(self, specs: Sequence[ModelSpec], text: str, *, wanted: bool = True) -> int:
        with self._send_lock:
            ticket = next(self._tickets)
            if not wanted:
                self._unwanted.add(ticket)
            try:
                self._conn.send((ticket, list(specs), text))
            except (OSError, ValueError) as exc:
                self.broken = True
                raise ChildDied(str(exc)) from exc
        return ticket

    def answer(self, ticket: int) -> tuple[list[np.ndarray], float]:
        """The vectors for ``ticket`` and when the child finished them (monotonic)."""
        with self._receive_lock:  # one reader; answers for other threads are kept for them
            while ticket not in self._answers:
                try:
                    if self.broken or not self._conn.poll(ANSWER_TIMEOUT):
                        self.broken = True  # hung: the next request gets a new child
                        raise ChildDied("no answer")
                    got, payload, done_at = self._conn.recv()
                except (EOFError, OSError) as exc:
                    self.broken = True
                    raise ChildDied(str(exc)) from exc
                if got in self._unwanted:
                    self._unwanted.discard(got)
                else:
                    self._answers[got] = (payload, done_at)
            payload, done_at = self._answers.pop(ticket)
        if isinstance(payload, BaseException):
            raise payload
        return payload, done_at

    def abandon(self, ticket: int) -> None:
        """Nobody will ask for ``ticket`` (e.g. the request failed validation): drop its answer
        whether it came in already or not."""
        with self._receive_lock:
            if self._answers.pop(ticket, None) is None:
                self._unwanted.add(ticket)

    def close(self, *, wait: float = 0.0) -> None:
        """Stop the child: it exits on its own once the pipe closes; killed if it has not
        after ``wait`` seconds."""
        self.broken = True
        self._conn.close()
        self.process.join(wait)
        if self.process.is_alive():
            self.process.kill()


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
            except ChildDied:
                logger.warning("query encoder process unavailable; embedding in-process")
                self._child = None
        self._future = _threads.submit(encode_query_with, self.specs, text)
        self._future.add_done_callback(self._stamp)

    def __del__(self) -> None:
        if self._child is not None and self._ticket is not None:
            self._child.abandon(self._ticket)

    def _stamp(self, _future: Future) -> None:
        self._done_at = time.monotonic()

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
            except ChildDied:
                logger.warning("query encoder process died or hung; embedding in-process")
                return encode_query_with(self.specs, self.text), time.monotonic()
        assert self._future is not None
        vectors = self._future.result()
        return vectors, self._done_at or time.monotonic()
