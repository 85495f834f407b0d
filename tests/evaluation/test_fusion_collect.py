"""The fusion fit's collection (``devtools.fusion_fit.collect``) through the real pipeline: each
lexical share is scored with the kind discounts and the file evidence the query gets, so a fit
sees the fusion that retrieval will run."""

from __future__ import annotations

import pytest

from contexts.retrieval import adaptive
from devtools import fusion_fit


@pytest.mark.django_db(transaction=True)
def test_each_share_is_scored_with_the_querys_discounts(make_dataset, index_dir, monkeypatch):
    data = make_dataset(split="dev")
    scored: list[tuple[float, float, float, str]] = []
    fused_order = fusion_fit._fused_order

    unfiled: list[int] = []

    def recording(legs, share, namespaces, tests, places, discounts):
        scored.append(discounts)
        files, anchors = places
        unfiled.extend(pk for hits in legs.values() for pk, _ in hits
                       if pk not in files or not anchors.get(pk))
        return fused_order(legs, share, namespaces, tests, places, discounts)

    monkeypatch.setattr(fusion_fit, "_fused_order", recording)
    found = fusion_fit.collect(str(data), "dev", log=lambda _line: None)
    assert found.ndcg.shape == found.mrr.shape == (5, len(fusion_fit.GRID))
    # Every candidate's file and anchor are known, read as retrieval reads them (under
    # row-level security).
    assert scored and not unfiled
    # Every query is a question in words, not a task, and none asks about tests.
    assert set(scored) == {(adaptive.QUESTION_PROSE_DISCOUNT, adaptive.TEST_DISCOUNT,
                            adaptive.FILE_EVIDENCE, "every")}
