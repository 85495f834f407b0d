"""Prometheus metrics at ``/metrics``: per-stage retrieval latency and counters.

Restricted to the operator (``contexts.web.restricted``, applied in ``contexts.urls``): scrape
with the metrics token.

With several web processes (gunicorn workers), set ``PROMETHEUS_MULTIPROC_DIR`` (``make run``
does) so every process's samples are aggregated.
"""

from __future__ import annotations

import os

from django.http import HttpRequest, HttpResponse
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.registry import Collector

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)

RETRIEVE_STAGE_SECONDS = Histogram(
    "contexts_retrieve_stage_seconds", "Latency of each retrieval stage", ["stage"],
    buckets=LATENCY_BUCKETS)
RETRIEVALS = Counter("contexts_retrievals_total", "Retrievals served", ["reranker"])
RETRIEVED_FRAGMENTS = Counter("contexts_retrieved_fragments_total",
                              "Fragments returned by retrievals")

DEGRADED_RETRIEVALS = Counter("contexts_retrievals_degraded_total",
                              "Retrievals served without a leg that failed", ["leg"])


def observe_retrieval(timings_ms: dict[str, float], reranker: str, returned: int,
                      degraded: dict[str, str] | None = None) -> None:
    for stage, ms in timings_ms.items():
        RETRIEVE_STAGE_SECONDS.labels(stage=stage).observe(ms / 1000)
    for leg in degraded or ():
        DEGRADED_RETRIEVALS.labels(leg=leg).inc()
    RETRIEVALS.labels(reranker=reranker.split(":", 1)[0]).inc()
    RETRIEVED_FRAGMENTS.inc(returned)


# Collectors that read their values when scraped (e.g. this node's index lag, from the database
# and the index directory): registered by the modules that know the values (contexts.apps).
_scrape_collectors: list[Collector] = []


def add_scrape_collector(collector: Collector) -> None:
    if collector not in _scrape_collectors:
        _scrape_collectors.append(collector)


def metrics_view(request: HttpRequest) -> HttpResponse:
    registry = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.MultiProcessCollector(registry)
        payload = b""
    else:
        payload = generate_latest(REGISTRY)
    for collector in _scrape_collectors:
        registry.register(collector)
    payload += generate_latest(registry)
    return HttpResponse(payload, content_type=CONTENT_TYPE_LATEST)
