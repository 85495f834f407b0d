"""The metric functions on examples computed by hand (BEIR / pytrec_eval definitions)."""

from __future__ import annotations

import math

import pytest

from contexts.evaluation.metrics import (
    aggregate,
    mrr_at_k,
    ndcg_at_k,
    percentile,
    query_metrics,
    recall_at_k,
)


def test_ndcg_uses_the_grade_as_gain_and_a_log2_discount():
    # DCG = 0/log2(2) + 2/log2(3) + 1/log2(4) = 1.2618595 + 0.5
    # IDCG = 2/log2(2) + 1/log2(3) = 2 + 0.6309298
    ranked = ["d3", "d1", "d2"]
    qrels = {"d1": 2, "d2": 1}
    expected = (2 / math.log2(3) + 1 / 2) / (2 + 1 / math.log2(3))
    assert ndcg_at_k(ranked, qrels, 10) == pytest.approx(expected)
    assert expected == pytest.approx(0.669672, abs=1e-6)


def test_ndcg_gain_is_linear_not_exponential():
    # A grade-3 document at rank 2 behind a grade-1 one: linear gain gives
    # (1 + 3/log2 3) / (3 + 1/log2 3) = 0.796708; 2^rel-1 gain would give 0.709810.
    assert ndcg_at_k(["b", "a"], {"a": 3, "b": 1}, 10) == pytest.approx(0.796708, abs=1e-6)


def test_ndcg_cuts_at_k_and_the_ideal_ranking_too():
    qrels = {"a": 1, "b": 1, "c": 1}
    # k=2: DCG = 1 + 0 (x is not relevant); IDCG@2 = 1 + 1/log2(3)
    assert ndcg_at_k(["a", "x", "b", "c"], qrels, 2) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert ndcg_at_k(["x", "a"], qrels, 1) == 0.0
    assert ndcg_at_k(["a", "b", "c"], qrels, 10) == pytest.approx(1.0)


def test_recall_counts_only_grades_above_zero():
    qrels = {"a": 1, "b": 2, "c": 1, "z": 0}  # z is judged, and judged not relevant
    ranked = ["a", "z", "b", "x", "c"]
    assert recall_at_k(ranked, qrels, 1) == pytest.approx(1 / 3)
    assert recall_at_k(ranked, qrels, 2) == pytest.approx(1 / 3)
    assert recall_at_k(ranked, qrels, 3) == pytest.approx(2 / 3)
    assert recall_at_k(ranked, qrels, 100) == pytest.approx(1.0)


def test_mrr_is_the_reciprocal_rank_of_the_first_relevant_within_k():
    qrels = {"c": 1, "e": 1}
    assert mrr_at_k(["a", "b", "c", "d", "e"], qrels, 10) == pytest.approx(1 / 3)
    eleventh = [f"x{i}" for i in range(10)] + ["c"]
    assert mrr_at_k(eleventh, qrels, 10) == 0.0
    assert mrr_at_k(eleventh, qrels, 11) == pytest.approx(1 / 11)


def test_no_relevant_document_scores_zero_everywhere():
    assert query_metrics(["a", "b"], {"a": 0}) == {
        "ndcg@10": 0.0, "recall@10": 0.0, "recall@100": 0.0, "mrr@10": 0.0}
    assert query_metrics([], {"a": 1})["ndcg@10"] == 0.0


def test_percentile_interpolates_linearly_like_numpy():
    values = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert percentile(values, 50) == 3.0
    assert percentile(values, 95) == pytest.approx(4.8)  # numpy.percentile(values, 95)
    assert percentile([7.0], 95) == 7.0
    assert percentile([], 50) == 0.0


def test_aggregate_is_the_mean_over_queries():
    per_query = {"q1": query_metrics(["a"], {"a": 1}), "q2": query_metrics(["x", "b"], {"b": 1})}
    out = aggregate(per_query, [10.0, 30.0])
    assert out["mrr@10"] == pytest.approx((1 + 0.5) / 2)
    assert out["recall@10"] == 1.0
    assert out["ndcg@10"] == pytest.approx(round((1 + 1 / math.log2(3)) / 2, 4))
    assert out["p50_ms"] == 20.0
