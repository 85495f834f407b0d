"""Hostile user queries never raise, and identifier extraction."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contexts.search import LexicalDoc, LexicalIndex, identifiers_from_text

MakeDoc = Callable[..., LexicalDoc]  # the `make_doc` fixture (tests/search/conftest.py)

WEIRD_QUERIES = [
    '"',
    '""',
    "(",
    ")",
    "((a)",
    "AND OR",
    "AND",
    "NOT",
    "NOT cache",
    "-cache",
    "+cache -cache",
    "title:",
    "body:cache",
    "nofield:cache",
    "scope:1",
    "scope:[0 TO 99999]",
    "fragment_id:frag_a",
    "a:b:c",
    "foo::",
    "::",
    "[",
    "{",
    "}",
    "\\",
    "^",
    "~",
    "*",
    "?",
    "cache^",
    "cache^-1",
    "cache^1e39",
    "cache^340282366920938463463374607431768211456",
    "cache~99",
    '"cache worker"~1000000',
    "/regex.*/",
    "IN [a b",
    "title:>5",
    "",
    "   ",
    "\n\t",
    "\x00",
    "\x00cache\x00",
    "\ud800",
    "cache \udcff worker",
    "x" * 5000,
    "cache " * 1000,
    "rate_limiter.acquire " * 400,
    "日本語のキャッシュ",
    "Ünïcödé café naïve",
    "🙂 cache 🙂",
    "\u202e\u200bcache",
]


@pytest.fixture
def populated(index: LexicalIndex, make_doc: MakeDoc) -> LexicalIndex:
    index.upsert(
        [
            make_doc("frag_a", "the cache worker evicts entries", (1,)),
            make_doc("frag_b", "rate_limiter.acquire guards the cache", (1, 2)),
            make_doc("frag_c", "café naïve Ünïcödé 日本語のキャッシュ", (2,)),
        ]
    )
    return index


def _check(results: list[tuple[str, float]], limit: int = 100) -> None:
    assert isinstance(results, list)
    assert len(results) <= limit
    assert len({fid for fid, _ in results}) == len(results)
    for fragment_id, score in results:
        assert isinstance(fragment_id, str)
        assert math.isfinite(score)


@pytest.mark.parametrize("query", WEIRD_QUERIES, ids=lambda q: repr(q[:24]))
def test_weird_queries_never_raise(populated: LexicalIndex, query: str) -> None:
    results = populated.search(query, [1, 2])
    _check(results)
    # Whatever the syntax did, scope 1 never sees the scope-2-only doc.
    assert "frag_c" not in {fid for fid, _ in populated.search(query, [1])}


def test_blank_query_returns_nothing(populated: LexicalIndex) -> None:
    assert populated.search("", [1, 2]) == []
    assert populated.search("  \n", [1, 2]) == []


def test_broken_syntax_keeps_the_users_words(populated: LexicalIndex) -> None:
    # The lenient parser alone would drop `cache` here (it reads `foo:` as an unknown field).
    assert "frag_a" in {fid for fid, _ in populated.search("foo::bar worker", [1])}
    # An overflowing boost is re-run as plain terms instead of returning inf scores.
    results = populated.search("worker^340282366920938463463374607431768211456", [1])
    assert [fid for fid, _ in results] == ["frag_a"]
    _check(results)


def test_unicode_query_matches(populated: LexicalIndex) -> None:
    assert [fid for fid, _ in populated.search("café", [2])] == ["frag_c"]


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(query=st.text(max_size=200))
def test_fuzzed_queries_never_raise(populated: LexicalIndex, query: str) -> None:
    _check(populated.search(query, [1, 2], limit=5), limit=5)


@pytest.fixture(scope="module")
def soup_index(tmp_path_factory: pytest.TempPathFactory, make_doc: MakeDoc) -> LexicalIndex:
    # Module-scoped: one index for all hypothesis examples, building one each would dominate.
    index = LexicalIndex(tmp_path_factory.mktemp("soup") / "lexical")
    index.upsert([make_doc("frag_a", "title body cache x and or not")])
    return index


@settings(max_examples=150, deadline=None)
@given(query=st.text(alphabet='()[]{}"^~*:+-!\\/<>=ANDORNT title body cache x', max_size=60))
def test_fuzzed_syntax_soup_never_raises(soup_index: LexicalIndex, query: str) -> None:
    _check(soup_index.search(query, [1], limit=10), limit=10)


# -- identifiers_from_text ------------------------------------------------------------------------


def test_identifiers_from_text_picks_identifier_shapes() -> None:
    text = (
        "Call rate_limiter.acquire() before retrying; on ERR_CONN_RESET the RateLimiter in "
        "a/b/c.py backs off. See std::collections::HashMap, os.path.join, getUserName, "
        "HTTPServer, utf8Decode and __init__. Version 1.2.3 costs 3.14, e.g. nothing. Hello "
        "World: APIs, URLs and 3D."
    )
    found = identifiers_from_text(text).split()
    for expected in [
        "rate_limiter.acquire",
        "ERR_CONN_RESET",
        "RateLimiter",
        "a/b/c.py",
        "std::collections::HashMap",
        "os.path.join",
        "getUserName",
        "HTTPServer",
        "__init__",
        "utf8Decode",
    ]:
        assert expected in found, expected
    rejected_words = ["Call", "before", "Hello", "World", "Version", "APIs", "URLs", "3D"]
    for rejected in [*rejected_words, "1.2.3", "3.14", "e.g"]:
        assert rejected not in found, rejected
    # Sentence punctuation is not part of the identifier.
    assert identifiers_from_text("then call foo.bar.") == "foo.bar"


def test_identifiers_from_text_dedupes_and_reads_code_spans() -> None:
    assert identifiers_from_text("use `acquire` then acquire and snake_case snake_case") == (
        "acquire snake_case"
    )
    assert identifiers_from_text("") == ""
    assert identifiers_from_text("plain English words only.") == ""


def test_extracted_identifiers_are_single_index_terms(
    index: LexicalIndex, make_doc: MakeDoc
) -> None:
    text = "handle ERR_CONN_RESET in net/retry.go via pkg::retry::Policy and RateLimiter"
    index.upsert([make_doc("frag_a", "x", identifiers=identifiers_from_text(text))])
    for identifier in identifiers_from_text(text).split():
        hits = index.search(identifier, [1], field_boosts={"text": 0.0, "phrases": 0.0})
        assert [fid for fid, _ in hits] == ["frag_a"], identifier
