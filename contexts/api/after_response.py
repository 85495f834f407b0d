"""Work a request must do but its answer need not wait for (trace rows, use counters, metrics).

Two modes (``CONTEXTS_DEFERRED_WRITES``):

``next-request`` (the default) — the work is queued in the web process once the response is
built, and runs at the first of:

- the next retrieval this process serves, while that request's own thread would wait for its
  query vector (``retrieve(meanwhile=drain)``): the forward pass takes ~15 ms and the request
  is done with its own preparation well before, so the work costs that answer nothing; each
  request runs at most :data:`PER_REQUEST` queued batches, so a burst is spread over the
  requests that follow it;
- :data:`IDLE_SECONDS` after it was queued, in a flusher thread, when no retrieval came;
- a trace read that misses (``GET /api/traces/{id}``), and the process's exit.

``after-response`` — the work runs in the response's ``close()``, which WSGI servers, the ASGI
bridge and the test client call once the last byte is written. Until session 8 this was the only
mode. Its cost: a sync worker writing the trace (~2 ms) cannot take the next request, which goes
to another worker whose process, encoder child and database backend have sat idle — measured
with ``bench_retrieve`` (alternating runs), 1.49 / 1.51 against 1.39 / 1.40 for ``next-request``,
and a 3 ms sleep in ``close()`` instead of the writes cost about as much. The test suite runs in
this mode (work done when the test client's response closes, on the test's own connection and
transaction); the servers the end-to-end tests start run the default.

A failing task is logged, never raised: the answer is already out, and a retrieval that runs
another request's work must not fail because of it.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.http import HttpResponseBase

logger = logging.getLogger(__name__)

IDLE_SECONDS = 0.05  # how long queued work waits for a retrieval before the flusher runs it
PER_REQUEST = 2      # queued batches a retrieval runs while it waits for its query vector
# How long a trace read that misses waits for another process to write the row.
READ_WAIT_SECONDS = 2 * IDLE_SECONDS

Task = Callable[[], None]


def run_after_response(response: HttpResponseBase, tasks: list[Task]) -> None:
    """Run ``tasks`` after ``response`` has been sent (see the module's docstring for when)."""
    if not tasks:
        return
    if settings.DEFERRED_WRITES == "after-response":
        for task in tasks:
            response._resource_closers.append(_logged(task))
    else:
        response._resource_closers.append(lambda: _queue().add(tasks))


def drain(limit: int | None = None) -> int:
    """Run up to ``limit`` queued batches (all with None) in this thread; how many ran."""
    return _queue().drain(limit)


def drain_for_request() -> None:
    """What a retrieval runs while it waits for its query vector."""
    drain(PER_REQUEST)


def pending() -> int:
    """Batches queued in this process and not run yet."""
    return len(_queue())


def _logged(task: Task) -> Task:
    def run() -> None:
        try:
            if connection.in_atomic_block:
                # Inside a caller's transaction (a request that runs another's work): a
                # failed write must not leave that transaction aborted.
                with transaction.atomic():
                    task()
            else:
                task()
        except Exception:  # noqa: BLE001 - see the module's docstring
            logger.exception("after-response task %r failed", task)

    return run


class _Queue:
    """This process's queued batches, oldest first, and the flusher thread that runs the ones
    no retrieval picked up."""

    def __init__(self) -> None:
        self.owner = os.getpid()  # a queue does not survive a fork (nor does its thread)
        self._batches: deque[tuple[float, list[Task]]] = deque()
        self._changed = threading.Condition()
        self._flusher: threading.Thread | None = None

    def __len__(self) -> int:
        return len(self._batches)

    def add(self, tasks: list[Task]) -> None:
        with self._changed:
            self._batches.append((time.monotonic(), [_logged(task) for task in tasks]))
            if self._flusher is None:
                self._flusher = threading.Thread(target=self._flush_idle, daemon=True,
                                                 name="contexts-after-response")
                self._flusher.start()
            self._changed.notify()

    def _take(self) -> list[Task] | None:
        with self._changed:
            return self._batches.popleft()[1] if self._batches else None

    def drain(self, limit: int | None) -> int:
        ran = 0
        while limit is None or ran < limit:
            batch = self._take()
            if batch is None:
                break
            for task in batch:
                task()
            ran += 1
        return ran

    def _flush_idle(self) -> None:
        while True:
            with self._changed:
                while not self._batches:
                    self._changed.wait()
                wait = self._batches[0][0] + IDLE_SECONDS - time.monotonic()
                if wait > 0:
                    # A retrieval may take it meanwhile; look again when it is due.
                    self._changed.wait(wait)
                    continue
                batch = self._batches.popleft()[1]
            # This thread's own connection: closed when unusable or past its age, like a
            # request's.
            close_old_connections()
            for task in batch:
                task()


_current: _Queue | None = None
_current_lock = threading.Lock()


def _queue() -> _Queue:
    global _current
    with _current_lock:
        if _current is None or _current.owner != os.getpid():
            _current = _Queue()
        return _current


@atexit.register
def _drain_at_exit() -> None:
    if _current is not None and _current.owner == os.getpid():
        _current.drain(None)
