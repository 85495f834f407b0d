"""Work a request must do but its answer need not wait for (a retrieval's trace row, use
counters, metrics): it runs in the response's ``close()``, which WSGI servers, the ASGI bridge
(``a2wsgi``, ``contexts/asgi.py``) and the test client call once the last byte is written, in the
thread that served the request and on its database connection. The test suite runs this same
path: a test reads the writes right after its request.

Bounded, so a stuck database cannot hold a worker for long:

- every statement the tasks run has ``statement_timeout`` and ``lock_timeout`` of
  ``AFTER_RESPONSE_TIMEOUT_MS`` (the connection's own values are put back afterwards);
- once that much time has gone by, the tasks not yet started are skipped (logged), so one
  response holds its worker at most about twice the bound (the last statement started in time
  may use its own full timeout);
- at most :data:`MAX_TASKS` tasks per response (a retrieval hands over three); more is a bug
  upstream, and the extra ones are dropped (logged) rather than run.

A failing task is logged, never raised: the answer is already out.

What this replaced (issue 25): a mode that queued the work and ran it while the process's next
retrieval waited for its query vector (ADR 0010, superseded).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from functools import partial

from django.conf import settings
from django.db import connection, transaction
from django.http import HttpResponseBase

logger = logging.getLogger(__name__)

# A retrieval hands over three (trace, use counters, metrics); anything near this is a bug.
MAX_TASKS = 8

Task = Callable[[], None]

# Reads the connection's own values before setting the bound (MATERIALIZED: read first, not
# after the set_config calls beside them).
_BOUND = """
    WITH old AS MATERIALIZED (
        SELECT current_setting('statement_timeout') AS statement_timeout,
               current_setting('lock_timeout') AS lock_timeout)
    SELECT old.statement_timeout, old.lock_timeout,
           set_config('statement_timeout', %s, false), set_config('lock_timeout', %s, false)
    FROM old
"""
_RESTORE = ("SELECT set_config('statement_timeout', %s, false), "
            "set_config('lock_timeout', %s, false)")


def run_after_response(response: HttpResponseBase, tasks: Sequence[Task]) -> None:
    """Run ``tasks``, in order, once ``response`` has been sent (bounded; see the module)."""
    if not tasks:
        return
    if len(tasks) > MAX_TASKS:
        logger.error("after-response: %d tasks handed over, at most %d run; %d dropped",
                     len(tasks), MAX_TASKS, len(tasks) - MAX_TASKS)
        tasks = tasks[:MAX_TASKS]
    response._resource_closers.append(partial(run_tasks, tuple(tasks)))


def run_tasks(tasks: Sequence[Task]) -> None:
    """Run ``tasks`` within the bound, logging the failures; never raises."""
    timeout_ms = settings.AFTER_RESPONSE_TIMEOUT_MS
    deadline = time.monotonic() + timeout_ms / 1000
    with _statement_bound(timeout_ms):
        for n, task in enumerate(tasks):
            if time.monotonic() >= deadline:
                logger.error("after-response: past the %d ms bound, %d task(s) skipped: %r",
                             timeout_ms, len(tasks) - n, list(tasks[n:]))
                return
            _run_logged(task)


def _run_logged(task: Task) -> None:
    try:
        if connection.in_atomic_block:
            # Inside a caller's transaction (a test's): a failed write must not leave that
            # transaction aborted, nor the bound's restore after it refused.
            with transaction.atomic():
                task()
        else:
            task()
    except Exception:  # noqa: BLE001 - see the module's docstring
        logger.exception("after-response task %r failed", task)


@contextlib.contextmanager
def _statement_bound(timeout_ms: int) -> Iterator[None]:
    """``statement_timeout`` and ``lock_timeout`` of ``timeout_ms`` on this thread's connection
    while the block runs, then the connection's own values again. Session-level (not ``SET
    LOCAL``): the tasks keep their own transactions (the trace's is one round trip)."""
    bound = f"{int(timeout_ms)}ms"
    try:
        with connection.cursor() as cursor:
            cursor.execute(_BOUND, [bound, bound])
            old_statement, old_lock = cursor.fetchone()[:2]
    except Exception:  # noqa: BLE001 - the database is unreachable: the tasks fail fast too
        logger.exception("after-response: could not bound the statements; running unbounded")
        yield
        return
    try:
        yield
    finally:
        try:
            with connection.cursor() as cursor:
                cursor.execute(_RESTORE, [old_statement, old_lock])
        except Exception:  # noqa: BLE001 - logged; the connection must not keep the bound
            logger.exception("after-response: could not restore the statement timeouts")
            if not connection.in_atomic_block:
                # A pooled connection with a short timeout would fail the next request's
                # statements: drop it, the next request opens a new one.
                connection.close()
