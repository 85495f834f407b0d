"""Stage 5b — the dense leg: the query embedded once per distinct model, pgvector top-k in
each namespace's active generation, inside the row-level-security context for the scopes."""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable

import numpy as np
from django.conf import settings
from django.db import connection

from accounts.sql import model_columns
from contexts.embedder import resolve_model
from contexts.indexing import NAMESPACES, active_generation, embedder_for
from contexts.models import EmbeddingGeneration
from contexts.models.embeddings import GenerationState
from contexts.models.fragments import FragmentStatus
from contexts.retrieval import query_encoder
from contexts.services.rls import pg_int_array

STATUS_ACTIVE = ("active",)
STATUS_ANY = ("active", "superseded", "retired")
# Passages read per fragment returned (see _TOP_K_SQL); within HNSW_EF_SEARCH for k = 100.
PASSAGES_PER_RESULT = 2


_GENERATION_FIELDS, _GENERATION_COLUMNS = model_columns(EmbeddingGeneration, "g")
_GENERATIONS_SQL = (f"SELECT {_GENERATION_COLUMNS} FROM contexts_embeddinggeneration g "
                    "WHERE g.namespace = ANY(%s) AND g.state = %s")


def generations() -> dict[str, EmbeddingGeneration]:
    """namespace → active generation, in one plain query (every retrieval reads them: 0.35 ms
    measured, 0.78 through the ORM), created from settings when missing."""
    with connection.cursor() as cursor:
        cursor.execute(_GENERATIONS_SQL, [list(NAMESPACES), GenerationState.ACTIVE.value])
        found = [EmbeddingGeneration.from_db(connection.alias, _GENERATION_FIELDS, row)
                 for row in cursor.fetchall()]
    by_namespace = {g.namespace: g for g in found}
    return {ns: by_namespace.get(ns) or active_generation(ns) for ns in NAMESPACES}


def _by_model(gens: dict[str, EmbeddingGeneration]
              ) -> dict[str, tuple[tuple[int, ...], EmbeddingGeneration]]:
    """model name → (its generations' ids, one of them): namespaces sharing a model share one
    forward pass and one vector search (their similarities are comparable)."""
    groups: dict[str, list[EmbeddingGeneration]] = {}
    for generation in gens.values():
        groups.setdefault(generation.model_name, []).append(generation)
    return {name: (tuple(sorted(g.pk for g in group)), group[0])
            for name, group in groups.items()}


def embed_query(query: str, gens: dict[str, EmbeddingGeneration]
                ) -> dict[tuple[int, ...], np.ndarray]:
    """generation ids → query vector, computed here and now."""
    return {ids: embedder_for(generation).encode_query(query)
            for ids, generation in _by_model(gens).values()}


class QueryEmbedding:
    """The query's vectors, being computed (``contexts.retrieval.query_encoder``) from the
    moment this is created, while the caller does other work.

    It starts with the configured models before the active generations are even read; a
    generation built with another model (mid re-embed) gets its vector when asked for.
    """

    def __init__(self, query: str, model_names: Iterable[str] | None = None) -> None:
        self.query = query
        names = model_names if model_names is not None else settings.EMBEDDING_MODELS.values()
        self._specs = list({spec.name: spec for spec in map(resolve_model, names)}.values())
        self._started = time.monotonic()
        self._pending = query_encoder.Pending(self._specs, query)

    def result(self, gens: dict[str, EmbeddingGeneration]
               ) -> tuple[dict[tuple[int, ...], np.ndarray], float]:
        """(generation ids → vector, milliseconds from start until the vectors were ready)."""
        computed, done_at = self._pending.result()
        vectors = dict(zip((spec.name for spec in self._specs), computed, strict=True))
        return ({ids: vectors[name] if name in vectors
                 else embedder_for(generation).encode_query(self.query)
                 for name, (ids, generation) in _by_model(gens).items()},
                round((done_at - self._started) * 1000, 2))


def vector_literal(vector: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in vector.tolist()) + "]"


def _excluded(statuses: Collection[str]) -> list[str]:
    return [s for s in FragmentStatus.values if s not in statuses]


# Top-k of one model's generations. Fragments that may not be returned are excluded through a
# hashed NOT IN over the (few) fragments with another status, not a per-row join: joining
# every in-scope embedding to its fragment cost more than the vector search itself (measured
# on 1,334 in-scope rows under RLS: 5.6 ms joined, 2.1 ms with the exclusion list).
# A long fragment has a vector per passage and is scored by its best one: the index is asked
# for twice k passages (a fragment's passages tend to be neighbours) and they are folded into
# fragments.
_TOP_K_SQL = """
    SELECT fragment_id, max(similarity) AS similarity FROM (
        SELECT e.fragment_id, 1 - (e.embedding <=> %(vector)s::vector) AS similarity
        FROM contexts_embedding e
        WHERE e.org_id = %(org)s AND e.generation_id = ANY(%(generations)s)
          AND e.scope_ids && %(scopes)s::int[] {excluding}
        ORDER BY e.embedding <=> %(vector)s::vector
        LIMIT %(passages)s
    ) passages
    GROUP BY fragment_id
    ORDER BY similarity DESC, fragment_id
    LIMIT %(k)s
"""
_EXCLUDING_SQL = ("AND e.fragment_id NOT IN (SELECT id FROM contexts_fragment "
                  "WHERE org_id = %(org)s AND status = ANY(%(excluded)s))")


def top_k_query(org_id: int, generation_ids: tuple[int, ...], vector: np.ndarray,
                scope_ids: Collection[int], k: int,
                statuses: tuple[str, ...] = STATUS_ACTIVE) -> tuple[str, dict]:
    """SQL and parameters of one model's top-``k`` ``(fragment_id, similarity)`` rows; the
    pipeline joins the candidates' columns to them. Must run inside
    :func:`contexts.services.rls.retrieval_scope`."""
    excluded = _excluded(statuses)
    sql = _TOP_K_SQL.format(excluding=_EXCLUDING_SQL if excluded else "")
    return sql, {"vector": vector_literal(vector), "org": org_id,
                 "generations": list(generation_ids), "scopes": pg_int_array(scope_ids),
                 "excluded": excluded, "k": k, "passages": PASSAGES_PER_RESULT * k}
