"""Work that must happen for a request but need not delay its answer (trace rows, counters)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.http import HttpResponseBase

logger = logging.getLogger(__name__)


def run_after_response(response: HttpResponseBase, tasks: list[Callable[[], None]]) -> None:
    """Run ``tasks`` once ``response`` has been sent.

    Django calls a response's resource closers from ``close()``, which WSGI servers, Django's
    ASGI handler (in the view's thread, so on the same database connection) and the test
    client call after the last byte is written — so the client is not kept waiting. A failing
    task is logged, never raised: the answer is already out.
    """
    for task in tasks:
        response._resource_closers.append(_logged(task))


def _logged(task: Callable[[], None]) -> Callable[[], None]:
    def run() -> None:
        try:
            task()
        except Exception:  # noqa: BLE001 - see run_after_response
            logger.exception("after-response task %r failed", task)

    return run
