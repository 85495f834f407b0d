"""BM25 with bm25s's term saturation for the top hits: tantivy fixes k1 at 1.2.

The lexical leg must score at least as well as plain BM25 (bm25s, k1 = 1.5, b = 0.75) on any
corpus, and the k1 of the two is the one difference left between them: with the same analyzer,
bm25s at k1 = 1.2 scores what the leg scores (SciFact test 0.679 against 0.678 nDCG@10), and at
1.5 0.686. tantivy's Python binding exposes neither k1 nor the postings, so the top
:data:`DEPTH` hits — the ones that decide the top ten — are re-saturated from what the index
stores for them: the text field's term counts and its length. Each matched text term's
contribution moves from its k1 = 1.2 value to its k1 = 1.5 value; the other clauses
(identifiers, definitions, paths, phrases) keep their scores.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence

import tantivy

from . import _schema as s

K1 = 1.5  # bm25s's default, and the middle of Robertson's 1.2–2.0
TANTIVY_K1 = 1.2
B = 0.75  # both
# Deep enough that the reranked top ten never come from below it (on SciFact, depth 30 and 100
# give the same top ten), shallow enough to cost ≈1 ms for a question and ≈4 ms for a pasted
# page (the top hits' stored term counts are parsed in Python).
DEPTH = 30


def encode_terms(terms: Sequence[str]) -> bytes:
    """The analyzed text's term counts as stored with the document: `term count` pairs."""
    return " ".join(f"{term} {count}" for term, count in Counter(terms).items()).encode()


def _decode_terms(stored: bytes) -> dict[str, int]:
    parts = stored.decode().split(" ")
    return dict(zip(parts[::2], map(int, parts[1::2]), strict=True)) if stored else {}


def _saturation(tf: int, length_norm: float, k1: float) -> float:
    return (k1 + 1.0) * tf / (tf + k1 * length_norm)


def resaturate(
    searcher: tantivy.Searcher,
    hits: Sequence[tuple[float, tantivy.DocAddress]],
    term_weights: Mapping[str, float],
) -> list[tuple[str, float]]:
    """`(fragment_id, score)` for `hits` (best first, tantivy's scores), the top :data:`DEPTH`
    re-scored with k1 = :data:`K1` and re-ordered. `term_weights` are the text clauses' weights
    (boost × how often the query holds the term). The hits below the depth keep their order and
    are capped at the lowest re-scored score, so the list stays sorted."""
    docs = [(searcher.doc(address), score) for score, address in hits]
    top, rest = docs[:DEPTH], docs[DEPTH:]
    idf = _idf(searcher, term_weights) if top else {}
    average = _average_length(searcher) if idf else 0.0
    rescored: list[tuple[str, float]] = []
    for doc, score in top:
        fragment_id = doc.get_first(s.FRAGMENT_ID)
        if average > 0.0:
            score += _correction(doc, term_weights, idf, average)
        rescored.append((fragment_id, score))
    rescored.sort(key=lambda hit: -hit[1])
    floor = rescored[-1][1] if rescored else 0.0
    return rescored + [(doc.get_first(s.FRAGMENT_ID), min(score, floor)) for doc, score in rest]


def _correction(doc: tantivy.Document, term_weights: Mapping[str, float],
                idf: Mapping[str, float], average: float) -> float:
    stored = doc.get_first(s.TEXT_TERMS)
    if not stored:
        return 0.0  # indexed before the field existed: keeps tantivy's score
    counts = _decode_terms(stored)
    norm = 1.0 - B + B * sum(counts.values()) / average
    delta = 0.0
    for term, weight in term_weights.items():
        tf = counts.get(term)
        if tf:
            delta += weight * idf[term] * (_saturation(tf, norm, K1)
                                           - _saturation(tf, norm, TANTIVY_K1))
    return delta


def _idf(searcher: tantivy.Searcher, terms: Mapping[str, float]) -> dict[str, float]:
    """BM25's idf as tantivy computes it (and bm25s's `lucene` method)."""
    total = searcher.num_docs
    idf = {}
    for term in terms:
        df = searcher.doc_freq(s.TEXT, term)
        if df:
            idf[term] = math.log(1.0 + (total - df + 0.5) / (df + 0.5))
    return idf


def _average_length(searcher: tantivy.Searcher) -> float:
    """The text field's average length over the index (≈0.35 ms at 100,000 documents)."""
    result = searcher.aggregate(tantivy.Query.all_query(),
                                {"length": {"avg": {"field": s.TEXT_LENGTH}}})
    value = result.get("length", {}).get("value")
    return float(value) if value else 0.0
