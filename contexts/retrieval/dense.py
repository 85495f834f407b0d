"""Stage 5b — the dense leg: the query embedded once per distinct model, pgvector top-k in
each namespace's active generation, inside the row-level-security context for the scopes.

:class:`DenseLeg` starts the query's forward pass (``query_encoder``) and, once the vector is
there, runs one top-k statement per model, then reads the rows of the hits not read yet by
primary key in one more (see :func:`search`).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable

import numpy as np
from django.conf import settings
from django.db import connection

from accounts.sql import model_columns, prepared_cursor
from contexts.embedding.embedder import resolve_model
from contexts.indexes.indexing import NAMESPACES, active_generation, embedder_for
from contexts.models import EmbeddingGeneration
from contexts.models.embeddings import EMBEDDING_DIM, GenerationState
from contexts.models.fragments import FragmentStatus
from contexts.retrieval import query_encoder, vector_cache
from contexts.retrieval.legs import Collected
from contexts.retrieval.rows import STATUS_ACTIVE, CandidateRows
from contexts.retrieval.rows import statuses as returnable_statuses
from contexts.retrieval.types import RetrievalRequest
from contexts.services.rls import pg_int_array

# Passages read per fragment returned (see _TOP_K_SQL); within HNSW_EF_SEARCH for k = 100.
PASSAGES_PER_RESULT = 2
# A long fragment's similarity: head + PASSAGE_WEIGHT × (best passage − head). Chosen with the
# model alone on SciFact train and CoSQA dev (`manage.py passage_study`, nDCG@10): 0.5 gives
# 0.6768 / 0.6031, the best passage alone (1.0) 0.6752 / 0.6027, the head alone 0.6602 / 0.6031.
PASSAGE_WEIGHT = 0.5


_GENERATION_FIELDS, _GENERATION_COLUMNS = model_columns(EmbeddingGeneration, "g")
_GENERATIONS_SQL = (f"SELECT {_GENERATION_COLUMNS} FROM contexts_embeddinggeneration g "
                    "WHERE g.namespace = ANY(%s::text[]) AND g.state = %s::text")


def generations(*, create: bool = True) -> dict[str, EmbeddingGeneration]:
    """namespace → active generation, in one plain query (every retrieval reads them: 0.35 ms
    measured, 0.78 through the ORM), created from settings when missing.

    ``create=False`` (retrieval, which reads under the retrieval role and may not write): a
    missing one is the generation ingestion will create, unsaved — it has no vectors yet, so
    the dense leg finds nothing in it, which is the truth. Prepared: its plan was most of
    its database time."""
    with prepared_cursor() as cursor:
        cursor.execute(_GENERATIONS_SQL, [list(NAMESPACES), GenerationState.ACTIVE.value])
        found = [EmbeddingGeneration.from_db(connection.alias, _GENERATION_FIELDS, row)
                 for row in cursor.fetchall()]
    by_namespace = {g.namespace: g for g in found}
    missing = active_generation if create else _unsaved_generation
    return {ns: by_namespace.get(ns) or missing(ns) for ns in NAMESPACES}


def _unsaved_generation(namespace: str) -> EmbeddingGeneration:
    spec = resolve_model(settings.EMBEDDING_MODELS[namespace])
    return EmbeddingGeneration(namespace=namespace, state=GenerationState.ACTIVE,
                               model_name=spec.name, model_version=spec.version)


def _by_model(gens: dict[str, EmbeddingGeneration]
              ) -> dict[str, tuple[tuple[int, ...], EmbeddingGeneration]]:
    """model name → (its generations' ids, one of them): namespaces sharing a model share one
    forward pass and one vector search (their similarities are comparable)."""
    groups: dict[str, list[EmbeddingGeneration]] = {}
    for generation in gens.values():
        groups.setdefault(generation.model_name, []).append(generation)
    # An unsaved generation (no pk) has no vectors to search.
    return {name: (tuple(sorted(g.pk for g in group if g.pk is not None)), group[0])
            for name, group in groups.items()}


def embed_query(query: str, gens: dict[str, EmbeddingGeneration]
                ) -> dict[tuple[int, ...], np.ndarray]:
    """generation ids → query vector, computed here and now."""
    return {ids: embedder_for(generation).encode_query(query)
            for ids, generation in _by_model(gens).values()}


class QueryEmbedding:
    """The query's vectors: from the node's cache (``vector_cache``) when an earlier request
    asked the same, else being computed (``contexts.retrieval.query_encoder``) from the moment
    this is created, while the caller does other work.

    It starts with the configured models before the active generations are even read; a
    generation built with another model (mid re-embed) gets its vector when asked for.
    """

    def __init__(self, query: str, model_names: Iterable[str] | None = None) -> None:
        self.query = query
        names = model_names if model_names is not None else settings.EMBEDDING_MODELS.values()
        self._specs = list({spec.name: spec for spec in map(resolve_model, names)}.values())
        self._started = time.monotonic()
        cached = vector_cache.get(self._specs, query)
        self._pending: query_encoder.Pending | None = None
        self._computed: tuple[list[np.ndarray], float] | None = None
        if cached is not None:
            self._computed = (cached, time.monotonic())
        else:
            self._pending = query_encoder.Pending(self._specs, query)

    @property
    def source(self) -> str:
        """Where the vectors came from: ``cache`` or ``encoder`` (the trace says which)."""
        return "encoder" if self._pending is not None else "cache"

    def _vectors(self) -> tuple[list[np.ndarray], float]:
        if self._computed is None:
            assert self._pending is not None
            self._computed = self._pending.result()
            vector_cache.put(self._specs, self.query, self._computed[0])
        return self._computed

    def result(self, gens: dict[str, EmbeddingGeneration]
               ) -> tuple[dict[tuple[int, ...], np.ndarray], float]:
        """(generation ids → vector, milliseconds from start until the vectors were ready)."""
        computed, done_at = self._vectors()
        vectors = dict(zip((spec.name for spec in self._specs), computed, strict=True))
        return ({ids: vectors[name] if name in vectors
                 else embedder_for(generation).encode_query(self.query)
                 for name, (ids, generation) in _by_model(gens).items()},
                round((done_at - self._started) * 1000, 2))


def vector_literal(vector: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in vector.tolist()) + "]"


def _excluded(statuses: Collection[str]) -> list[str]:
    return [s for s in FragmentStatus.values if s not in statuses]


def distance_order(column: str, vector: str, storage: str | None = None) -> str:
    """The cosine distance the HNSW index of ``settings.EMBEDDING_STORAGE`` orders by: the
    column itself (``vector``), or its float16 cast, which is what the expression index of
    ``manage.py vector_storage --to halfvec`` holds — the planner uses an index only for the
    very expression it was built on. Only the order comes from the index: the similarities
    returned are computed on the float32 column."""
    if (storage or settings.EMBEDDING_STORAGE) == "halfvec":
        cast = f"halfvec({EMBEDDING_DIM})"
        return f"({column}::{cast}) <=> {vector}::{cast}"
    return f"{column} <=> {vector}::vector"


# Top-k of one model's generations. Fragments that may not be returned are excluded through a
# hashed NOT IN over the (few) fragments with another status, not a per-row join: joining
# every in-scope embedding to its fragment cost more than the vector search itself (measured
# on 1,334 in-scope rows under RLS: 5.6 ms joined, 2.1 ms with the exclusion list).
# A long fragment has a vector per passage (contexts.embedding.embedder.Embedder.passages) and
# scores the
# mean of its head's and its best passage's similarity (PASSAGE_WEIGHT): the index is asked for
# twice k passages (a fragment's passages tend to be neighbours), they are folded into
# fragments, and the head of a fragment found by a later passage alone is read by its key.
_TOP_K_SQL = """
    SELECT p.fragment_id,
           (1 - %(passage_weight)s) * coalesce(p.head, h.head, p.best)
           + %(passage_weight)s * p.best AS similarity
    FROM (
        SELECT fragment_id, max(similarity) AS best,
               max(similarity) FILTER (WHERE passage = 0) AS head
        FROM (
            SELECT e.fragment_id, e.passage,
                   1 - (e.embedding <=> %(vector)s::vector) AS similarity
            FROM contexts_embedding e
            WHERE e.org_id = %(org)s AND e.generation_id = ANY(%(generations)s)
              AND e.scope_ids && %(scopes)s::int[] {excluding}
            ORDER BY {order_by}
            LIMIT %(passages)s
        ) passages
        GROUP BY fragment_id
    ) p
    LEFT JOIN LATERAL (
        SELECT 1 - (e.embedding <=> %(vector)s::vector) AS head
        FROM contexts_embedding e
        WHERE p.head IS NULL AND e.org_id = %(org)s AND e.fragment_id = p.fragment_id
          AND e.generation_id = ANY(%(generations)s) AND e.passage = 0
        LIMIT 1
    ) h ON true
    ORDER BY similarity DESC, p.fragment_id
    LIMIT %(k)s
"""
_EXCLUDING_SQL = ("AND e.fragment_id NOT IN (SELECT id FROM contexts_fragment "
                  "WHERE org_id = %(org)s AND status = ANY(%(excluded)s))")


def top_k_query(org_id: int, generation_ids: tuple[int, ...], vector: np.ndarray,
                scope_ids: Collection[int], k: int,
                statuses: tuple[str, ...] = STATUS_ACTIVE,
                storage: str | None = None) -> tuple[str, dict]:
    """SQL and parameters of one model's top-``k`` ``(fragment_id, similarity)`` rows
    (:class:`DenseLeg` joins the candidates' columns to them). Must run inside
    :func:`contexts.services.rls.retrieval_scope`. ``storage`` overrides
    ``settings.EMBEDDING_STORAGE`` (``bench_retrieve``'s float32 reference)."""
    excluded = _excluded(statuses)
    sql = _TOP_K_SQL.format(excluding=_EXCLUDING_SQL if excluded else "",
                            order_by=distance_order("e.embedding", "%(vector)s", storage))
    return sql, {"vector": vector_literal(vector), "org": org_id,
                 "generations": list(generation_ids), "scopes": pg_int_array(scope_ids),
                 "excluded": excluded, "k": k, "passages": PASSAGES_PER_RESULT * k,
                 "passage_weight": PASSAGE_WEIGHT}


def search(request: RetrievalRequest, vectors: dict[tuple[int, ...], np.ndarray],
           rows: CandidateRows) -> list[tuple[int, float]]:
    """The dense hits, best first; the rows of those not in ``rows`` yet are added to it.
    Must run inside :func:`contexts.services.rls.retrieval_scope`.

    The hits' rows are a second statement, by primary key (``CandidateRows.read``, the lexical
    leg's), not joined to the top-k: under row-level security the planner cannot know how many
    fragments the scopes hold (the allowed set is a setting), guesses a few dozen, and so
    hashed every fragment of the scope to join 100 hits — 9.7 ms of PostgreSQL's CPU a
    repository retrieval on the demo's 3,212 fragments, growing with the scope, against
    ~0.8 ms for the lookup and its round trip (docs/performance.md)."""
    if not request.scope_ids or request.k_dense <= 0:
        return []
    best: dict[int, float] = {}
    with connection.cursor() as cursor:
        for generation_ids, vector in vectors.items():
            cursor.execute(*top_k_query(request.org_id, generation_ids, vector,
                                        request.scope_ids, request.k_dense,
                                        returnable_statuses(request)))
            for fragment_id, similarity in cursor.fetchall():
                # Namespaces sharing a model are one search; across models, a fragment found
                # by several keeps its best similarity.
                if similarity > best.get(fragment_id, -2.0):
                    best[fragment_id] = float(similarity)
    rows.read(pks=best)
    return sorted(best.items(), key=lambda item: -item[1])[:request.k_dense]


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)


class DenseLeg:
    """The dense leg (:class:`contexts.retrieval.legs.Leg`). ``embedding``: the query's
    vectors if a caller already started them (the API, as the request arrives)."""

    name = "dense"

    def __init__(self, embedding: QueryEmbedding | None = None) -> None:
        self.embedding = embedding

    def start(self, request: RetrievalRequest) -> PendingDense:
        embedding = self.embedding
        if embedding is None or embedding.query != request.query:
            embedding = QueryEmbedding(request.query)
        return PendingDense(request, embedding)


class PendingDense:
    def __init__(self, request: RetrievalRequest, embedding: QueryEmbedding) -> None:
        self.request = request
        self.embedding = embedding

    def collect(self, rows: CandidateRows,
                generations: dict[str, EmbeddingGeneration]) -> Collected:
        rows.read()  # rows still wanted (the pins), while the vector is still on its way
        timings: dict[str, float] = {}
        waited = time.perf_counter()
        vectors, timings["embed_query"] = self.embedding.result(generations)
        timings["embed_wait"] = _ms(waited)
        searched = time.perf_counter()
        ranked = search(self.request, vectors, rows)
        timings["dense_search"] = _ms(searched)
        timings["dense"] = round(timings["embed_query"] + timings["dense_search"], 2)
        return Collected(ranked, timings, source={"query_vector": self.embedding.source})
