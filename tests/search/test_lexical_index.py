"""Behaviour of LexicalIndex: scope filtering, identifiers, stemming, upsert semantics."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest
import tantivy

from contexts.search import IndexSchemaMismatch, LexicalDoc, LexicalIndex, open_index
from contexts.search._saturation import resaturate

MakeDoc = Callable[..., LexicalDoc]  # the `make_doc` fixture (tests/search/conftest.py)


def _ids(results: list[tuple[str, float]]) -> list[str]:
    return [fragment_id for fragment_id, _ in results]


# -- scope filter ---------------------------------------------------------------------------------


def test_scope_filter_only_returns_allowed_scopes(index: LexicalIndex, make_doc: MakeDoc) -> None:
    index.upsert(
        [
            make_doc("frag_a", "deploy the cache worker", (1,)),
            make_doc("frag_b", "deploy the cache worker twice", (2,)),
            make_doc("frag_c", "deploy cache", (1, 3)),
            make_doc("frag_d", "deploy nothing else", (4,)),
        ]
    )
    assert set(_ids(index.search("deploy cache", [1]))) == {"frag_a", "frag_c"}
    assert set(_ids(index.search("deploy cache", [3]))) == {"frag_c"}
    assert set(_ids(index.search("deploy cache", [2, 3]))) == {"frag_b", "frag_c"}
    assert index.search("deploy cache", [99]) == []
    # Empty scopes fail closed without querying; so do ids the unsigned field cannot hold.
    assert index.search("deploy cache", []) == []
    assert index.search("deploy cache", [-1, "1", True]) == []  # type: ignore[list-item]


def test_scope_filter_randomised_is_exact(index: LexicalIndex, make_doc: MakeDoc) -> None:
    """Every doc matching the text and visible in an allowed scope is returned, and no other."""
    rng = random.Random(1234)
    scopes_of: dict[str, set[int]] = {}
    docs = []
    for i in range(300):
        scopes = tuple(rng.sample(range(30), rng.randint(1, 3)))
        scopes_of[f"frag_{i}"] = set(scopes)
        docs.append(make_doc(f"frag_{i}", f"common words w{i % 7}", scopes))
    index.upsert(docs)
    for _ in range(60):
        allowed = set(rng.sample(range(30), rng.randint(1, 6)))
        got = _ids(index.search("common", allowed, limit=1000))
        expected = {fid for fid, scopes in scopes_of.items() if scopes & allowed}
        assert len(got) == len(set(got))
        assert set(got) == expected


def test_scope_filter_does_not_change_scores(index: LexicalIndex, make_doc: MakeDoc) -> None:
    index.upsert(
        [
            make_doc("frag_a", "retry the queue with exponential backoff", (1,)),
            make_doc("frag_b", "queue retry retry retry", (2,)),
            make_doc("frag_c", "the queue is a queue of queues", (1, 2)),
            make_doc("frag_d", "unrelated text about caches", (3,)),
        ]
    )
    query = "queue retry"
    everything = dict(index.search(query, [1, 2, 3]))
    only_one = dict(index.search(query, [1]))

    # Reference: the same text query with no filter clause at all, run on tantivy directly.
    boosts = index.field_boosts
    raw, term_weights = index._text_query(query, boosts)
    searcher = index._searcher()
    unfiltered = dict(resaturate(searcher, searcher.search(raw, 100).hits, term_weights))

    assert set(only_one) == {"frag_a", "frag_c"}
    assert set(everything) == set(unfiltered) == {"frag_a", "frag_b", "frag_c"}
    for fragment_id, score in only_one.items():
        # Exact float equality: a 0-score const MUST clause adds exactly 0.0.
        assert score == everything[fragment_id] == unfiltered[fragment_id]
    assert all(score > 0 for score in unfiltered.values())


def test_kinds_filter(index: LexicalIndex, make_doc: MakeDoc) -> None:
    index.upsert(
        [
            make_doc("frag_note", "build pipeline", kind="note"),
            make_doc("frag_code", "build pipeline", kind="code"),
            make_doc("frag_adr", "build pipeline", kind="decision"),
        ]
    )
    assert set(_ids(index.search("build", [1], kinds=["code", "decision"]))) == {
        "frag_code",
        "frag_adr",
    }
    assert _ids(index.search("build", [1], kinds=["note"])) == ["frag_note"]
    assert index.search("build", [1], kinds=[]) == []
    assert _ids(index.search("build", [1], kinds="note")) == ["frag_note"]
    # The kind filter does not change scores either.
    all_kinds = dict(index.search("build", [1]))
    assert dict(index.search("build", [1], kinds=["code"]))["frag_code"] == all_kinds["frag_code"]


# -- identifiers and stemming ---------------------------------------------------------------------


@pytest.fixture
def code_index(index: LexicalIndex, make_doc: MakeDoc) -> LexicalIndex:
    """One exact doc per identifier plus distractors that share its words or prefix."""
    index.upsert(
        [
            make_doc(
                "frag_acquire",
                "Every outbound call must go through rate_limiter.acquire first.",
                title="Outbound calls",
            ),
            make_doc(
                "frag_release",
                "rate_limiter.release returns the token. The rate limiter can acquire tokens "
                "in bulk; acquire rate limits per host.",
                title="Rate limiter acquire and release",
            ),
            make_doc(
                "frag_prose",
                "Our rate limiter will acquire a lock; rate limiting acquire acquire limiter.",
                title="Rate limiter",
            ),
            make_doc("frag_reset", "Retries on ERR_CONN_RESET with jitter.", title="Retry"),
            make_doc(
                "frag_refused",
                "ERR_CONN_REFUSED is fatal; an err conn reset or a connection reset is not.",
                title="Connection errors: err conn reset",
            ),
            make_doc("frag_class", "class RateLimiter: token bucket.", title="Bucket"),
            make_doc(
                "frag_config",
                "RateLimiterConfig sets the rate. Rate limiter, rate limiter, limiter rate.",
                title="Rate limiter config",
            ),
            make_doc("frag_rust", "impl foo::bar for Baz", title="Rust impl"),
            make_doc("frag_path", "Edit a/b/c.py then run the tests", title="Where"),
            make_doc("frag_path2", "a b c py: a/b/d.py and c.py", title="Elsewhere"),
        ]
    )
    return index


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("rate_limiter.acquire", "frag_acquire"),
        ("ERR_CONN_RESET", "frag_reset"),
        ("RateLimiter", "frag_class"),
        ("ratelimiter", "frag_class"),  # lowercased: case mistakes still hit
        ("foo::bar", "frag_rust"),
        ("a/b/c.py", "frag_path"),
        ("how do I call rate_limiter.acquire?", "frag_acquire"),
    ],
)
def test_identifier_query_ranks_exact_doc_first(
    code_index: LexicalIndex, query: str, expected: str
) -> None:
    results = code_index.search(query, [1])
    assert results, query
    assert results[0][0] == expected
    # Strictly ahead, not a tie broken by insertion order.
    if len(results) > 1:
        assert results[0][1] > results[1][1]


def test_stemming_matches_inflections(index: LexicalIndex, make_doc: MakeDoc) -> None:
    index.upsert(
        [
            make_doc("frag_limits", "The API limits requests per minute."),
            make_doc("frag_title", "nothing here", title="Retried connections"),
            make_doc("frag_other", "Unrelated caching notes."),
        ]
    )
    assert _ids(index.search("limiting", [1])) == ["frag_limits"]
    assert _ids(index.search("limit", [1])) == ["frag_limits"]
    assert _ids(index.search("connection retrying", [1])) == ["frag_title"]


def test_clause_weights_are_parameters(index: LexicalIndex, make_doc: MakeDoc) -> None:
    index.upsert(
        [
            make_doc("frag_uses", "scheduler_tick() is called by the scheduler's main tick"),
            LexicalDoc("frag_defines", (1,), "code", "", "def scheduler_tick(): run the loop",
                       "scheduler_tick", symbols="scheduler_tick"),
        ]
    )
    # By default the definition (symbols clause) outranks a doc that only mentions it.
    assert _ids(index.search("scheduler_tick", [1]))[0] == "frag_defines"
    # Without the symbols clause, the doc whose text holds the words wins.
    no_symbols = index.search("scheduler_tick", [1], field_boosts={"symbols": 0.0})
    assert _ids(no_symbols)[0] == "frag_uses"
    # A zero weight removes the clause from the query.
    assert _ids(index.search("scheduler_tick", [1], field_boosts={"symbols": 0.0, "text": 0.0,
                                                                  "identifiers": 0.0})) == []
    with pytest.raises(ValueError):
        index.search("scheduler", [1], field_boosts={"title": 1.0})  # no title field any more
    with pytest.raises(ValueError):
        LexicalIndex(index.path, field_boosts={"text": -1.0})


# -- writes ---------------------------------------------------------------------------------------


def test_upsert_replaces_without_duplicates(index: LexicalIndex, make_doc: MakeDoc) -> None:
    index.upsert([make_doc("frag_a", "old text about kafka", (1,))])
    index.upsert([make_doc("frag_a", "new text about rabbitmq", (2,))])
    assert index.count() == 1
    assert index.search("kafka", [1, 2]) == []
    assert _ids(index.search("rabbitmq", [1, 2])) == ["frag_a"]
    # Scope changes take effect too: the old scope no longer sees it.
    assert index.search("rabbitmq", [1]) == []

    # Re-upserting many times never accumulates copies.
    for i in range(5):
        index.upsert([make_doc("frag_a", f"rabbitmq version {i}", (2,))])
    assert index.count() == 1
    assert _ids(index.search("rabbitmq", [2], limit=10)) == ["frag_a"]


def test_upsert_batch_last_wins_and_returns_count(index: LexicalIndex, make_doc: MakeDoc) -> None:
    written = index.upsert(
        [
            make_doc("frag_a", "first version"),
            make_doc("frag_b", "other doc"),
            make_doc("frag_a", "second version"),
        ]
    )
    assert written == 2
    assert index.count() == 2
    assert index.search("first", [1]) == []
    assert _ids(index.search("second", [1])) == ["frag_a"]
    assert index.upsert([]) == 0


def test_delete_and_clear(index: LexicalIndex, make_doc: MakeDoc) -> None:
    index.upsert([make_doc(f"frag_{i}", "shared words") for i in range(5)])
    index.delete(["frag_0", "frag_1", "frag_missing"])
    assert index.count() == 3
    assert set(_ids(index.search("shared", [1]))) == {"frag_2", "frag_3", "frag_4"}
    index.delete([])
    index.clear()
    assert index.count() == 0
    assert index.search("shared", [1]) == []


def test_bad_docs_are_rejected_before_taking_the_lock(
    index: LexicalIndex, make_doc: MakeDoc
) -> None:
    with pytest.raises(ValueError):
        index.upsert([LexicalDoc("frag_a", (-1,), "note", "", "x", "")])
    with pytest.raises(ValueError):
        index.upsert([LexicalDoc("", (1,), "note", "", "x", "")])
    assert index.count() == 0
    # The failed batch released the writer: a normal write goes through at once.
    index.lock_retries = 0
    index.upsert([make_doc("frag_ok", "fine")])
    assert index.count() == 1


def test_lone_surrogates_in_docs_do_not_fail_the_batch(
    index: LexicalIndex, make_doc: MakeDoc
) -> None:
    index.upsert([make_doc("frag_s", "broken \udcff byte then parser", title="t\ud800")])
    assert _ids(index.search("parser", [1])) == ["frag_s"]


def test_index_reopens_with_same_schema_and_rejects_other_schema(
    index_path: Path, make_doc: MakeDoc
) -> None:
    first = LexicalIndex(index_path)
    first.upsert([make_doc("frag_a", "persisted across opens")])
    assert _ids(LexicalIndex(index_path).search("persisted", [1])) == ["frag_a"]

    other = tantivy.SchemaBuilder()
    other.add_text_field("something_else")
    foreign = index_path.parent / "foreign"
    foreign.mkdir()
    tantivy.Index(other.build(), path=str(foreign))
    with pytest.raises(IndexSchemaMismatch):
        open_index(foreign)


def test_title_and_body_are_scored_as_one_field(index: LexicalIndex, make_doc: MakeDoc) -> None:
    """BM25 over title+body, as bm25s scores a document: a word counts the same in the title
    as in the body (tantivy sums per-field scores, which would count title words apart)."""
    index.upsert(
        [
            make_doc("frag_title", "runs nightly jobs", title="scheduler"),
            make_doc("frag_body", "scheduler runs nightly jobs"),
            make_doc("frag_other", "caches warm up at dawn"),
        ]
    )
    scores = dict(index.search("scheduler", [1]))
    assert set(scores) == {"frag_title", "frag_body"}
    assert scores["frag_title"] == pytest.approx(scores["frag_body"])
