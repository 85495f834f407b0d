"""Ranking metrics with the standard BEIR / pytrec_eval (trec_eval) definitions.

``qrels`` maps a document id to its graded relevance (``score`` column of the qrels file);
only grades above zero count as relevant, exactly like pytrec_eval's default
``relevance_level=1``. ``ranked`` is the system's ranking, best first, without duplicates.

* nDCG@k — DCG = Σ_{i=1..k} rel_i / log2(i + 1) (gain = the grade itself, not 2^rel − 1, as in
  trec_eval's ``ndcg_cut``), divided by the DCG of the ideal ranking of all judged documents.
* Recall@k — |relevant ∩ top-k| / |relevant|.
* MRR@k — 1 / rank of the first relevant document within the top k, 0 when there is none.

Each is a per-query number; the reported value is the unweighted mean over queries.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

# The metrics a report carries, in display order; latency is not a ranking metric.
QUALITY_METRICS = ("ndcg@10", "recall@10", "recall@100", "mrr@10")
LATENCY_METRICS = ("p50_ms", "p95_ms")
ALL_METRICS = QUALITY_METRICS + LATENCY_METRICS


def _relevant(qrels: Mapping[str, int]) -> dict[str, int]:
    return {doc: grade for doc, grade in qrels.items() if grade > 0}


def dcg(grades: Iterable[float]) -> float:
    return sum(grade / math.log2(rank + 1) for rank, grade in enumerate(grades, start=1))


def ndcg_at_k(ranked: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    relevant = _relevant(qrels)
    if not relevant:
        return 0.0
    ideal = dcg(sorted(relevant.values(), reverse=True)[:k])
    return dcg(relevant.get(doc, 0) for doc in ranked[:k]) / ideal


def recall_at_k(ranked: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    relevant = _relevant(qrels)
    if not relevant:
        return 0.0
    return len(relevant.keys() & set(ranked[:k])) / len(relevant)


def mrr_at_k(ranked: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    relevant = _relevant(qrels)
    for rank, doc in enumerate(ranked[:k], start=1):
        if doc in relevant:
            return 1.0 / rank
    return 0.0


def query_metrics(ranked: Sequence[str], qrels: Mapping[str, int]) -> dict[str, float]:
    """The report's quality metrics for one query."""
    return {
        "ndcg@10": ndcg_at_k(ranked, qrels, 10),
        "recall@10": recall_at_k(ranked, qrels, 10),
        "recall@100": recall_at_k(ranked, qrels, 100),
        "mrr@10": mrr_at_k(ranked, qrels, 10),
    }


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), ``q`` in 0–100."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def aggregate(per_query: Mapping[str, Mapping[str, float]],
              latencies_ms: Sequence[float]) -> dict[str, float]:
    """Mean of each quality metric over queries, plus p50/p95 latency."""
    count = len(per_query)
    out = {name: (sum(m[name] for m in per_query.values()) / count if count else 0.0)
           for name in QUALITY_METRICS}
    out["p50_ms"] = percentile(latencies_ms, 50)
    out["p95_ms"] = percentile(latencies_ms, 95)
    return {name: round(value, 4) for name, value in out.items()}
