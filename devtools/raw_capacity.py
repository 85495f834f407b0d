"""The raw capacity of this machine for a stream of retrievals: the batched query encoder, tantivy
and pgvector driven in-process at a given concurrency, with no HTTP, authentication, scope
resolution, fusion or traces — what ``manage.py loadtest`` divides its throughput by.

The same parts as the server, sized the same way: one encoder child per web worker (each
batching what its callers send together, ``contexts.embedding.batching``), callers spread over them
as the server's clients are spread over its workers; each caller thread has its own database
connection. Scopes are resolved once per distinct scope before the clock starts. The same
query-vector cache as the endpoint's (``contexts.retrieval.vector_cache``, the node's Redis),
when it is on: a question the cache holds skips the encoder here as it does there, so a stream
that repeats questions is cheaper on both sides of the ratio alike; hits are counted.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from django.conf import settings
from django.db import connection

from accounts.models import Organization
from contexts.embedding.embedder import resolve_model
from contexts.indexes.indexing import lexical_index
from contexts.retrieval import dense, query_encoder, vector_cache
from contexts.services.rls import retrieval_scope
from contexts.usecases import retrieval
from devtools.cpu_use import Meter
from devtools.loadtest import Ask, LoadResult

DEPTH = 100  # each leg's candidates, as the endpoint's default k_lexical / k_dense


def _scope_ids(principal: Any, ask: Ask) -> tuple[int, ...]:
    command = retrieval.Retrieve(query=ask.query, scope=retrieval.ScopeRef(**ask.scope),
                                 budget_tokens=ask.budget_tokens, k_lexical=DEPTH,
                                 k_dense=DEPTH, rerank_top=0)
    return tuple(sorted(retrieval.plan(principal, command).request.scope_ids))


class _Parts:
    """One retrieval's raw parts; shared by the caller threads."""

    def __init__(self, organization: Organization, workers: int) -> None:
        self.org_id = organization.pk
        names = settings.EMBEDDING_MODELS.values()
        self.specs = list({spec.name: spec for spec in map(resolve_model, names)}.values())
        self.generations = [ids for ids, _generation in
                            dense._by_model(dense.generations()).values() if ids]
        self.index = lexical_index(organization)
        self.encoders = [query_encoder.Child() for _ in range(workers)]
        for encoder in self.encoders:  # started and loaded before the clock
            encoder.answer(encoder.submit(self.specs, "warm up"))

    def run(self, caller: int, text: str, scope_ids: Sequence[int]) -> bool:
        """One retrieval's raw parts; whether its query vectors came from the cache."""
        vectors = vector_cache.get(self.specs, text)
        hit = vectors is not None
        if vectors is None:  # as dense.QueryEmbedding: encode, then remember for the node
            encoder = self.encoders[caller % len(self.encoders)]
            vectors, _done_at = encoder.answer(encoder.submit(self.specs, text))
            vector_cache.put(self.specs, text, vectors)
        self.index.search(text, allowed_scope_ids=scope_ids, limit=DEPTH)
        # The endpoint's own top-k statement under its search settings (hnsw.ef_search,
        # iterative scan), not a bare ORDER BY … LIMIT at pgvector's defaults: that one asks
        # the graph for less (ef_search 40, one row per passage) and is not the search whose
        # results the endpoint returns.
        with retrieval_scope(scope_ids), connection.cursor() as cursor:
            for generation_ids, vector in zip(self.generations, vectors, strict=False):
                cursor.execute(*dense.top_k_query(self.org_id, generation_ids, vector,
                                                  scope_ids, DEPTH))
                cursor.fetchall()
        return hit

    def close(self) -> None:
        for encoder in self.encoders:
            encoder.close(wait=2.0)


def measure(principal: Any, organization: Organization, next_ask: Callable[[], Ask],
            scopes: Sequence[dict[str, str]], *, clients: int, workers: int, duration: float,
            warmup: float, meter: Meter | None = None) -> LoadResult:
    """``clients`` closed-loop caller threads for ``warmup`` + ``duration`` seconds, asking what
    ``next_ask`` gives (the endpoint's stream, replayed) in ``scopes``, as ``principal`` (a
    load-test client's token) would be given them. ``meter``: reads the measured seconds' CPU
    use."""
    resolved = {_key(scope): _scope_ids(principal, Ask("scopes", scope)) for scope in scopes}
    parts = _Parts(organization, workers)
    result = LoadResult(seconds=duration)
    lock = threading.Lock()
    begin = time.monotonic() + warmup
    end = begin + duration
    if meter is not None:
        meter.window(begin, end)

    def caller(n: int) -> None:
        try:
            while (now := time.monotonic()) < end:
                ask = next_ask()
                started = time.perf_counter()
                outcome, hit = "200", False
                try:
                    hit = parts.run(n, ask.query, resolved[_key(ask.scope)])
                except Exception as exc:  # noqa: BLE001 - counted and reported, like HTTP's
                    outcome = type(exc).__name__
                    if not result.first_error:
                        result.first_error = f"{outcome}: {exc}"[:300]
                ms = (time.perf_counter() - started) * 1000
                if now < begin:
                    continue
                with lock:
                    result.statuses[outcome] += 1
                    result.completed_at.append(time.monotonic() - begin)
                    result.latencies_ms.append(ms)
                    if vector_cache.slots():
                        result.cache_lookups += 1
                        result.cache_hits += hit
        finally:
            connection.close()  # this thread's own

    threads = [threading.Thread(target=caller, args=(n,), daemon=True) for n in range(clients)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if meter is not None:  # read while the encoders still run: they end with close()
            result.cpu_seconds = meter.seconds()
    finally:
        parts.close()
    return result


def _key(scope: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(scope.items()))
