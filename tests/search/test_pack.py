"""Packing: pins first, greedy by score into the budget, each fragment once; only the packed
rows become model instances."""

from __future__ import annotations

import datetime as dt

from contexts.retrieval.compose import pack
from contexts.retrieval.types import Candidate, CandidateRow, RetrievalRequest

NOW = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)


def row(pk: int, tokens: int) -> CandidateRow:
    return CandidateRow(pk=pk, public_id=f"frag_{pk}", org_id=1, scope_id=1, kind="prose",
                        namespace="prose", negative=False, title="", heading_path=[],
                        symbol="", version=1, token_count=tokens + 5, packed_tokens=tokens,
                        status="active", touched_at=NOW.timestamp(), authority=0.0,
                        chunker_version="t", language="en")


def test_pins_first_then_greedy_by_score_within_the_budget() -> None:
    rows = {pk: row(pk, tokens) for pk, tokens in [(1, 30), (2, 500), (3, 30), (4, 60)]}
    candidates = {pk: Candidate(pk, final=1.0 - pk / 10) for pk in rows}
    candidates[4].pinned, candidates[4].pin_order = True, 0
    made: list[int] = []

    def as_model(r: CandidateRow) -> CandidateRow:
        made.append(r.pk)
        return r

    request = RetrievalRequest(query="q", org_id=1, scope_ids=frozenset({1}), budget_tokens=100)
    packed = pack(candidates, rows, request, as_model)

    assert [item.fragment.pk for item in packed] == [4, 1]
    assert made == [4, 1]  # only what is returned
    assert candidates[2].dropped == candidates[3].dropped == "over budget"
    assert sum(item.tokens for item in packed) <= 100

