"""The one retrieval function: BM25 ∥ dense → RRF → rerank → compose, scope-safe and traced.

The REST API, the MCP tools, the console's search preview and the evaluation harness all call
:func:`retrieve`; there is no second implementation.

Scope safety: ``request.scope_ids`` comes from ``accounts.scopes.retrieval_scopes`` and is
applied inside each leg (tantivy term-set filter, pgvector ``scope_ids &&`` predicate), and
every database read runs under row-level security for exactly those scopes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import numpy as np
from django.db import connection
from django.utils import timezone

from accounts.models import ApiToken, Persona, new_public_id
from accounts.permissions import principal_user
from accounts.sql import model_columns
from contexts import usage
from contexts.compression import compress, packed_tokens
from contexts.metrics import observe_retrieval
from contexts.models import Fragment, RetrievalTrace
from contexts.models.traces import stage_table
from contexts.retrieval import adaptive, compose, dense, fuse, lexical
from contexts.retrieval.degraded import lexical_code
from contexts.retrieval.rerank import NoReranker, get_reranker
from contexts.retrieval.types import (
    TRACE_COLUMNS,
    Candidate,
    CandidateRow,
    Citation,
    ComposedFragment,
    FusionConfig,
    RetrievalRequest,
    RetrievalResult,
    Weights,
)
from contexts.services import traces
from contexts.services.rls import pg_int_array, retrieval_scope

logger = logging.getLogger(__name__)

# Legs run concurrently: the query's forward pass in the query encoder, tantivy in a worker
# thread, and the database reads (which need this thread's connection and its RLS transaction)
# in the caller's thread.
_lexical_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="lexical")


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)


def resolve_weights(request: RetrievalRequest) -> tuple[Weights, dict | None]:
    from django.conf import settings

    persona = Persona.objects.filter(pk=request.persona_id).first() if request.persona_id \
        else None
    if request.weights is not None:
        weights = request.weights
    elif persona is not None:
        weights = Weights(persona.w_r, persona.w_f, persona.w_c, persona.w_p)
    else:
        weights = Weights(**settings.DEFAULT_WEIGHTS)
    return weights, (persona.halflife_days if persona else None)


def _statuses(request: RetrievalRequest) -> tuple[str, ...]:
    if request.as_of is not None:
        return dense.STATUS_ANY
    return ("active", "superseded") if request.include_superseded else dense.STATUS_ACTIVE


def retrieve(request: RetrievalRequest, *, principal: Any = None, record_trace: bool = True,
             embedding: dense.QueryEmbedding | None = None,
             defer: Callable[[Callable[[], None]], None] | None = None,
             meanwhile: Callable[[], None] | None = None) -> RetrievalResult:
    """Retrieve, trace and count one request.

    ``embedding``: the query's embedding, already started by a caller that had other work to
    do first (the API resolves scopes meanwhile); started here otherwise. ``defer``: where to
    hand the writes the answer does not depend on (the trace row — its id is already in the
    result — the use counters and the metrics) so that they run after the response is sent;
    without it they run before this returns. ``meanwhile``: other work to run while the query
    vector is computed (the API runs earlier requests' deferred writes there).
    """
    timings: dict[str, float] = {}
    started = time.perf_counter()
    fusion = request.fusion or FusionConfig.from_settings()
    reranker = get_reranker(request.reranker)
    scope_ids = request.scope_ids
    # Both legs start before anything else. Generations are read before RLS because the first
    # call may create a generation row.
    if embedding is None and "dense" in request.legs:
        embedding = dense.QueryEmbedding(request.query)
    gens = dense.generations()

    lexical_future = None
    if "lexical" in request.legs:
        def run_lexical() -> tuple[list[tuple[str, float]], float]:
            leg_started = time.perf_counter()
            hits = lexical.search(request.org_id, request.query, scope_ids, request.k_lexical)
            return hits, _ms(leg_started)

        lexical_future = _lexical_pool.submit(run_lexical)

    weights, persona_halflives = resolve_weights(request)
    pins = _pins(request) if request.include_pins else {}

    if meanwhile is not None:
        # Outside the row-level-security transaction: the work may write.
        meanwhile()
    legs: dict[str, list[tuple[int, float]]] = {}
    degraded: dict[str, str] = {}
    with retrieval_scope(scope_ids):
        lexical_hits: list[tuple[str, float]] = []
        if lexical_future is not None:
            try:
                lexical_hits, timings["lexical"] = lexical_future.result()
            except Exception as exc:  # noqa: BLE001 - any index failure: answer from dense
                # The index is derived data (rebuild_index restores it); PostgreSQL still
                # answers, so the request is served from the dense leg and says so.
                # The details (index path, organization) are for the operator's log; the
                # caller gets a stable code (contexts/retrieval/degraded.py).
                logger.warning("lexical leg failed for org %s: %s: %s", request.org_id,
                               type(exc).__name__, exc)
                degraded["lexical"] = lexical_code(exc)
                lexical_future = None
        # Read the rows tantivy and the pins name while the query vector is still on its way.
        rows_started = time.perf_counter()
        rows = _fetch(request, set(pins), {public_id for public_id, _ in lexical_hits})
        timings["lexical_rows"] = _ms(rows_started)
        if embedding is not None and "dense" in request.legs:
            wait_started = time.perf_counter()
            vectors, timings["embed_query"] = embedding.result(gens)
            timings["embed_wait"] = _ms(wait_started)
            db_started = time.perf_counter()
            legs["dense"], dense_rows = _dense_leg(request, vectors, rows.keys())
            rows.update(dense_rows)
            timings["dense_search"] = _ms(db_started)
            timings["dense"] = round(timings["embed_query"] + timings["dense_search"], 2)
        fuse_started = time.perf_counter()
        if lexical_future is not None:
            pks = {row.public_id: pk for pk, row in rows.items()}
            legs["lexical"] = [(pks[fid], score) for fid, score in lexical_hits if fid in pks]
        # Only what this request may retrieve is fused (e.g. superseded rows a leg still holds).
        legs = {leg: [(pk, score) for pk, score in hits if pk in rows]
                for leg, hits in legs.items()}
        namespaces = {pk: row.namespace for pk, row in rows.items()}
        adaptive_choice = None
        if fusion.method == "adaptive":
            share, adaptive_choice = adaptive.choose(request.query, legs, namespaces)
            fusion = FusionConfig.convex_share(share)
        candidates = fuse.fuse(legs, fusion, namespaces)
        timings["fuse"] = _ms(fuse_started)

        rerank_started = time.perf_counter()
        if not isinstance(reranker, NoReranker):
            _rerank(reranker, request, candidates, rows)
        timings["rerank"] = _ms(rerank_started)

        compose_started = time.perf_counter()
        _count_unstored(rows)
        compose.score(candidates, rows, pins, request, weights, persona_halflives)
        packed = _complete(compose.pack(candidates, rows, request), rows)
        timings["compose"] = _ms(compose_started)
    timings["total"] = _ms(started)

    result = RetrievalResult(packed, candidates, reranker.name, timings, fusion, weights,
                             degraded=degraded, adaptive=adaptive_choice)
    writes: list[Callable[[], None]] = []
    if record_trace:
        result.trace_id = new_public_id(RetrievalTrace.PUBLIC_ID_PREFIX)

        def save_trace() -> None:
            # Built with the write: turning every candidate into JSON need not delay the answer.
            traces.write(_trace(request, result, rows, principal, gens))

        writes.append(save_trace)
    if request.count_use:
        writes.append(partial(usage.count_retrievals, [c.fragment.pk for c in packed]))
    # The metrics too: ~0.2 ms of histogram updates the answer does not depend on.
    writes.append(partial(observe_retrieval, timings, result.reranker, len(packed), degraded))
    for write in writes:
        if defer is not None:
            defer(write)
        else:
            write()
    return result


def _pins(request: RetrievalRequest) -> dict[int, int]:
    """fragment pk → order: the most specific scope's pins first, each scope in pin order."""
    rank = {scope_id: i for i, scope_id in enumerate(request.chain)}
    # Only pins of fragments this request may see: a pin of an out-of-scope fragment would
    # otherwise become a (dropped) candidate and put that fragment's id into the trace.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT p.fragment_id, p.scope_id, p.position FROM contexts_pin p "
            "JOIN contexts_fragment f ON f.id = p.fragment_id "
            "WHERE p.scope_id = ANY(%s) AND f.scope_ids && %s::int[] "
            "AND (p.expires_at IS NULL OR p.expires_at > %s)",
            [list(request.chain), pg_int_array(request.scope_ids), timezone.now()])
        rows = cursor.fetchall()
    ordered = sorted(rows, key=lambda row: (rank[row[1]], row[2]))
    pins: dict[int, int] = {}
    for fragment_id, _scope, _position in ordered:
        pins.setdefault(fragment_id, len(pins))
    return pins


# The candidates' rows are read with plain queries: building ~200 model instances through the
# ORM cost more than the vector search itself (measured: 12 ms vs 4 ms for the same rows).
_COMPUTED = {
    "pk": "f.id",
    # One float instead of two timestamps: parsing ~300 timestamps cost ~2 ms a request.
    "touched_at": "extract(epoch FROM greatest(f.last_edited_at, f.verified_at))::float8",
}
_COLUMNS = ", ".join(_COMPUTED.get(name, f"f.{name}") for name in CandidateRow._fields)


def _retrievable(request: RetrievalRequest) -> str:
    """The one rule for which fragment rows (alias ``f``) a request may return: its
    organization and scopes (row-level security draws the same line), a retrievable status,
    valid at ``as_of``. Parameters: :func:`_retrievable_params`."""
    sql = ("f.org_id = %(org)s AND f.scope_ids && %(scopes)s::int[] "
           "AND f.status = ANY(%(statuses)s)")
    if request.as_of is not None:
        sql += " AND f.valid_from <= %(as_of)s AND (f.valid_to IS NULL OR f.valid_to > %(as_of)s)"
    return sql


def _retrievable_params(request: RetrievalRequest) -> dict:
    return {"org": request.org_id, "scopes": pg_int_array(request.scope_ids),
            "statuses": list(_statuses(request)), "as_of": request.as_of}


def _fetch(request: RetrievalRequest, ids: set[int], public_ids: set[str]
           ) -> dict[int, CandidateRow]:
    """The candidates by pk (pins) or public id (tantivy hits) that this request may return."""
    if not ids and not public_ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            # Public ids become pks in a sub-select: with "id = ANY OR public_id = ANY" the
            # planner read every in-scope row and filtered (3.9 ms vs 1.2 ms measured).
            f"SELECT {_COLUMNS} FROM contexts_fragment f WHERE {_retrievable(request)} "
            "AND f.id = ANY(%(ids)s::bigint[] || ARRAY(SELECT id FROM contexts_fragment "
            "WHERE public_id = ANY(%(public_ids)s::text[])))",
            {**_retrievable_params(request), "ids": sorted(ids),
             "public_ids": sorted(public_ids)})
        return {row[0]: CandidateRow(*row) for row in cursor.fetchall()}


def _dense_leg(request: RetrievalRequest, vectors: dict[tuple[int, ...], np.ndarray],
               known: Collection[int]
               ) -> tuple[list[tuple[int, float]], dict[int, CandidateRow]]:
    """The dense hits, and in the same statement the rows of those not ``known`` yet that this
    request may return: once the query vector is there, every round trip is on the critical
    path."""
    if not request.scope_ids or request.k_dense <= 0:
        return [], {}
    best: dict[int, float] = {}
    rows: dict[int, CandidateRow] = {}
    with connection.cursor() as cursor:
        for generation_ids, vector in vectors.items():
            top_k, params = dense.top_k_query(request.org_id, generation_ids, vector,
                                              request.scope_ids, request.k_dense,
                                              _statuses(request))
            cursor.execute(
                f"WITH hits AS MATERIALIZED ({top_k}) "
                f"SELECT h.fragment_id, h.similarity, {_COLUMNS} FROM hits h "
                "LEFT JOIN contexts_fragment f ON f.id = h.fragment_id "
                f"AND NOT f.id = ANY(%(known)s) AND {_retrievable(request)}",
                {**params, **_retrievable_params(request), "known": sorted(known)})
            for fragment_id, similarity, *columns in cursor.fetchall():
                # Namespaces sharing a model are one search; across models, a fragment found
                # by several keeps its best similarity.
                if similarity > best.get(fragment_id, -2.0):
                    best[fragment_id] = float(similarity)
                if columns[0] is not None:
                    rows[fragment_id] = CandidateRow(*columns)
    return sorted(best.items(), key=lambda item: -item[1])[:request.k_dense], rows


def _bodies(pks: Collection[int]) -> dict[int, tuple[str, list[str]]]:
    """pk → (body, heading_path), for what needs the text before packing."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, body, heading_path FROM contexts_fragment WHERE id = ANY(%s)",
                       [sorted(pks)])
        return {pk: (body, heading_path) for pk, body, heading_path in cursor.fetchall()}


def _count_unstored(rows: dict[int, CandidateRow]) -> None:
    """Packing sizes come from ``packed_tokens``, stored on save; rows written around save()
    (bulk loads) have none and are counted here."""
    unstored = [pk for pk, row in rows.items() if row.packed_tokens is None]
    if unstored:
        for pk, (body, heading_path) in _bodies(unstored).items():
            rows[pk] = rows[pk]._replace(packed_tokens=packed_tokens(body, heading_path))


# The returned fragments, with their citations, in one plain query (through the ORM the
# citations alone cost ~4 ms a request); one row per source pointer, or one without. The
# columns are what callers show or trace (the rest load on access): every timestamp read costs
# ~10 µs to parse, and a bundle may hold 50 fragments.
_RETURNED = {"id", "public_id", "org_id", "scope_id", "kind", "namespace", "negative", "title",
             "heading_path", "body", "language", "symbol", "version", "chunker_version",
             "status", "last_edited_at", "verified_at"}
_FRAGMENT_FIELDS, _FRAGMENT_COLUMNS = model_columns(Fragment, "f", only=_RETURNED)
assert _FRAGMENT_FIELDS[0] == "id"  # _complete reads each row's pk from its first column
_COMPLETE_SQL = f"""
    SELECT {_FRAGMENT_COLUMNS}, d.path, r.slug, p.anchor, p.start_line, p.end_line
    FROM contexts_fragment f
    LEFT JOIN contexts_sourcepointer p ON p.fragment_id = f.id
    LEFT JOIN contexts_sourcedocument d ON d.id = p.document_id
    LEFT JOIN accounts_repository r ON r.id = d.repository_id
    WHERE f.id = ANY(%s)
"""


def _complete(packed: list[Candidate], rows: dict[int, CandidateRow]
              ) -> list[ComposedFragment]:
    """The packed candidates as returned fragments: model, compressed text, citations."""
    if not packed:
        return []
    width = len(_FRAGMENT_FIELDS)
    items: dict[int, ComposedFragment] = {}
    by_pk = {candidate.fragment_id: candidate for candidate in packed}
    with connection.cursor() as cursor:
        cursor.execute(_COMPLETE_SQL, [sorted(by_pk)])
        for row in cursor.fetchall():
            pk, (path, *citation) = row[0], row[width:]
            if pk not in items:
                fragment = Fragment.from_db(connection.alias, _FRAGMENT_FIELDS, row[:width])
                items[pk] = ComposedFragment(fragment, by_pk[pk],
                                             compress(fragment.body, fragment.heading_path),
                                             rows[pk].packed_tokens)
            if path is not None:
                items[pk].sources.append(Citation(path, *citation))
    for candidate in packed:
        if candidate.fragment_id not in items:  # deleted since it was scored
            candidate.returned, candidate.dropped = False, "deleted meanwhile"
    for item in items.values():
        item.sources.sort(key=lambda c: (c.path, c.start_line or 0))
    return [items[c.fragment_id] for c in packed if c.fragment_id in items]


def _rerank(reranker, request: RetrievalRequest, candidates, rows) -> None:
    top = sorted((c for c in candidates.values() if c.fragment_id in rows),
                 key=lambda c: -c.relevance)[:request.rerank_top]
    if not top:
        return
    bodies = _bodies([c.fragment_id for c in top])
    scores = reranker.score(request.query, [bodies[c.fragment_id][0] for c in top])
    for candidate, value in zip(top, scores, strict=True):
        candidate.rerank = round(value, 6)
        candidate.relevance = value
    floor = min(scores)
    reranked = {c.fragment_id for c in top}
    # Fragments beyond rerank_top keep their order but stay below every reranked one.
    for candidate in candidates.values():
        if candidate.fragment_id not in reranked:
            candidate.relevance *= floor


def _trace(request: RetrievalRequest, result: RetrievalResult, rows: dict[int, CandidateRow],
           principal: Any, gens: dict) -> RetrievalTrace:
    """The request's trace, not yet saved, under the public id the result already carries."""
    ids = {pk: row.public_id for pk, row in rows.items()}
    candidates = sorted(result.candidates.values(), key=lambda c: (-c.final, c.fragment_id))
    return RetrievalTrace(
        public_id=result.trace_id,
        org_id=request.org_id,
        token=principal if isinstance(principal, ApiToken) else None,
        user=principal_user(principal),
        query=request.query,
        scope_ids=sorted(request.scope_ids),
        requested_scope={"chain": list(request.chain), "persona_id": request.persona_id},
        parameters={
            "budget_tokens": request.budget_tokens, "k_lexical": request.k_lexical,
            "k_dense": request.k_dense, "rerank_top": request.rerank_top,
            "freshness_halflife_days": request.freshness_halflife_days,
            "min_score": request.min_score, "include_superseded": request.include_superseded,
            "as_of": request.as_of.isoformat() if request.as_of else None,
            "legs": list(request.legs),
            **result.fusion.as_dict(),
            "adaptive": result.adaptive,
            "weights": vars(result.weights),
        },
        reranker=result.reranker,
        # A pin of a fragment this request may not return (retired, superseded, not valid at
        # as_of) is no candidate: it is left out rather than named by its internal key.
        stage_table=stage_table(TRACE_COLUMNS, [c.trace_row(ids[c.fragment_id])
                                                for c in candidates if c.fragment_id in ids]),
        returned=[{"id": c.fragment.public_id, "version": c.fragment.version,
                   "score": round(c.candidate.final, 4), "tokens": c.tokens,
                   "symbol": c.fragment.symbol}
                  for c in result.fragments],
        versions={
            "chunker": sorted({c.fragment.chunker_version for c in result.fragments}),
            "embedding": {ns: f"{g.model_name}@{g.model_version}" for ns, g in gens.items()},
        },
        timings_ms=result.timings_ms,
        degraded=result.degraded,
    )
