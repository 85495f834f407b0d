"""What a web process does once its application is loaded, before its first request.

Both entry points (``contexts.wsgi``, ``contexts.asgi``) call :func:`prepare`.
"""

from __future__ import annotations

import gc

from django.conf import settings

from contexts.retrieval import query_encoder

# gunicorn's worker class for ``contexts.asgi`` wherever it is served (runstack, the Docker
# image, loadtest/bench): it decides which proxies' forwarded headers count (finding 7).
ASGI_WORKER_CLASS = "contexts.web.worker.UvicornWorker"


def prepare() -> None:
    query_encoder.warm()
    tune_gc(settings.GC_THRESHOLD)


def tune_gc(threshold: int) -> None:
    """Freeze what loading the application allocated and collect the young generation every
    ``threshold`` allocations instead of Python's 700 (0: leave Python's defaults).

    A retrieval allocates thousands of container objects (candidates, rows, dicts), so at 700
    the collector ran in every request — measured with ``bench_retrieve``: once per request,
    0.85 ms mean, mostly in fusion, on the path after the query vector. And each of its full
    collections walked the hundreds of thousands of objects Django and the libraries created
    at import, which live as long as the process; frozen, they are never scanned again. With
    20,000 a collection ran in under 1% of requests (0.03 ms mean). Memory is not at stake:
    objects without reference cycles are freed as soon as they are unreachable either way.
    """
    if threshold <= 0:
        return
    gc.collect()
    gc.freeze()
    _young, *older = gc.get_threshold()
    gc.set_threshold(threshold, *older)
