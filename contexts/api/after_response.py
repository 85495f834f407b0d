"""Work a request must do but its answer need not wait for (a retrieval's trace row, use
counters, metrics): it runs in the response's ``close()``, which WSGI servers, the ASGI bridge
(``a2wsgi``, ``contexts/asgi.py``) and the test client call once the last byte is written, in the
thread that served the request and on its database connection. The test suite runs this same
path: a test reads the writes right after its request.

Bounded, so a stuck database cannot hold a worker for long:

- the one task that writes to the database, the trace, runs in a transaction of its own whose
  ``statement_timeout`` and ``lock_timeout`` are ``AFTER_RESPONSE_TIMEOUT_MS``
  (``contexts/services/traces.py``: set with the insert, in its one round trip, and gone with
  that transaction). This runner used to set both on the session before the tasks and put the
  connection's own values back after them: two more round trips on every retrieval, ~8 % of a
  web worker's request time under the 16-client load test (py-spy);
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

import logging
import time
from collections.abc import Callable, Sequence
from functools import partial

from django.conf import settings
from django.db import connection, transaction
from django.http import HttpResponseBase

logger = logging.getLogger(__name__)

# A retrieval hands over three (trace, use counters, metrics); anything near this is a bug.
MAX_TASKS = 8

Task = Callable[[], None]


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
