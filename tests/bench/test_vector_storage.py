"""`manage.py vector_storage`: float32 → halfvec → float32 on a tiny corpus keeps the dense
leg's results, the dense SQL of each setting is the one its index serves, and the exact
reference the benchmark's recall uses agrees with the index on a corpus this small."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import override_settings

from accounts.permissions import SYSTEM
from contexts.indexes.indexing import embed_fragments
from contexts.management.commands import vector_storage
from contexts.retrieval import dense
from contexts.services.fragments import create_fragment
from contexts.services.partitions import partition_name
from contexts.services.rls import retrieval_scope
from devtools import bench_corpus
from tests.factories import OrganizationFactory

TEXTS = [
    ("Rate limiter", "The rate limiter drops requests when a burst exceeds the bucket size."),
    ("Retries", "Failed HTTP calls are retried with exponential backoff and jitter."),
    ("Tokens", "Agent tokens are scoped to a repository and expire after thirty days."),
    ("Cache", "Query vectors are cached per node by model generation and normalised text."),
    ("Fusion", "The dense and lexical legs are fused with weights chosen per query."),
    ("Brain", "Diffusion imaging measures white matter anisotropy in preterm infants."),
]
QUERIES = ["why are my requests dropped on a burst?", "how long does an agent token last",
           "white matter imaging in infants"]


@pytest.fixture
def tiny_corpus(transactional_db) -> Iterator[tuple[int, list[int]]]:
    org = OrganizationFactory()
    fragments = [create_fragment(SYSTEM, org.scope, title=title, body=body)
                 for title, body in TEXTS]
    embed_fragments(fragments)
    try:
        yield org.pk, [org.scope_id]
    finally:
        # DDL outlives the test's flush: leave the schema as the migrations made it.
        call_command("vector_storage", to="vector", drop_other=True, force=True)


def dense_top(org_id: int, scopes: list[int], query: str, *, exact: bool = False,
              storage: str | None = None) -> list[int]:
    gens = dense.generations()
    ids: list[int] = []
    for generation_ids, vector in dense.embed_query(query, gens).items():
        sql, params = dense.top_k_query(org_id, generation_ids, vector, scopes, 100,
                                        storage=storage)
        with retrieval_scope(scopes), connection.cursor() as cursor:
            if exact:
                cursor.execute("SET LOCAL enable_indexscan = off")
            cursor.execute(sql, params)
            ids += [row[0] for row in cursor.fetchall()]
    return ids


def plan(org_id: int, scopes: list[int], query: str) -> str:
    gens = dense.generations()
    generation_ids, vector = next(iter(dense.embed_query(query, gens).items()))
    sql, params = dense.top_k_query(org_id, generation_ids, vector, scopes, 100)
    with retrieval_scope(scopes), connection.cursor() as cursor:
        # Six rows: scanning them and sorting is cheaper than the graph; make the planner
        # take the index that gives the order, if the ORDER BY is its expression.
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cursor.fetchall())


def kinds(org_id: int) -> set[str]:
    return set(vector_storage.hnsw_indexes().get(partition_name(org_id), {}))


def test_round_trip_keeps_the_dense_results(tiny_corpus) -> None:
    org_id, scopes = tiny_corpus
    before = {q: dense_top(org_id, scopes, q) for q in QUERIES}
    assert all(len(ids) == len(TEXTS) for ids in before.values())
    assert kinds(org_id) == {"vector"}
    assert f"{partition_name(org_id)}_hnsw " in plan(org_id, scopes, QUERIES[0])

    call_command("vector_storage", to="halfvec")  # built beside the float32 graphs
    assert kinds(org_id) == {"vector", "halfvec"}
    with override_settings(EMBEDDING_STORAGE="halfvec"):
        assert "_hnsw_half" in plan(org_id, scopes, QUERIES[0])  # the SQL matches the index
        call_command("vector_storage", to="halfvec", drop_other=True)
        assert kinds(org_id) == {"halfvec"}
        assert {q: dense_top(org_id, scopes, q) for q in QUERIES} == before
        # A partition created now gets its halfvec graph from the partitioned index.
        newcomer = OrganizationFactory()
        assert "halfvec" in kinds(newcomer.pk)

    with pytest.raises(Exception, match="EMBEDDING_STORAGE is 'halfvec'"), \
            override_settings(EMBEDDING_STORAGE="halfvec"):
        call_command("vector_storage", to="vector", drop_other=True)
    call_command("vector_storage", to="vector", drop_other=True)
    assert kinds(org_id) == {"vector"}
    assert {q: dense_top(org_id, scopes, q) for q in QUERIES} == before
    assert f"{partition_name(org_id)}_hnsw " in plan(org_id, scopes, QUERIES[0])


def test_exact_reference_agrees_with_the_index_on_a_tiny_corpus(tiny_corpus) -> None:
    org_id, scopes = tiny_corpus
    for query in QUERIES:
        found = dense_top(org_id, scopes, query)
        truth = dense_top(org_id, scopes, query, exact=True, storage="vector")
        assert found == truth
        assert bench_corpus.recall_at(found, truth, 100) == 1.0
        assert bench_corpus.recall_at(found[:3], truth, 100) == 0.5
