"""Packing: pins first, greedy by score into the budget, each fragment once, sized by the
stored packed token counts."""

from __future__ import annotations

from contexts.retrieval.compose import pack
from contexts.retrieval.types import Candidate, CandidateRow, RetrievalRequest


def row(pk: int, tokens: int) -> CandidateRow:
    return CandidateRow(pk=pk, public_id=f"frag_{pk}", kind="prose", namespace="prose",
                        packed_tokens=tokens, touched_at=0.0, authority=0.0)


def test_pins_first_then_greedy_by_score_within_the_budget() -> None:
    rows = {pk: row(pk, tokens) for pk, tokens in [(1, 30), (2, 500), (3, 30), (4, 60)]}
    candidates = {pk: Candidate(pk, final=1.0 - pk / 10) for pk in rows}
    candidates[4].pinned, candidates[4].pin_order = True, 0
    request = RetrievalRequest(query="q", org_id=1, scope_ids=frozenset({1}), budget_tokens=100)

    packed = pack(candidates, rows, request)

    assert [c.fragment_id for c in packed] == [4, 1]
    assert all(c.returned for c in packed)
    assert candidates[2].dropped == candidates[3].dropped == "over budget"
    assert not candidates[2].returned


def test_min_score_and_max_fragments_cut_but_pins_stay() -> None:
    rows = {pk: row(pk, 10) for pk in (1, 2, 3, 4)}
    candidates = {pk: Candidate(pk, final=1.0 - pk / 10) for pk in rows}
    candidates[4].pinned, candidates[4].pin_order = True, 0  # below min_score, pinned
    request = RetrievalRequest(query="q", org_id=1, scope_ids=frozenset({1}), min_score=0.75,
                               max_fragments=2)
    assert [c.fragment_id for c in pack(candidates, rows, request)] == [4, 1]
    assert candidates[2].dropped == "over max_fragments"
    assert candidates[3].dropped == "below min_score"
