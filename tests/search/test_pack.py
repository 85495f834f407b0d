"""Packing: pins first, greedy by score into the budget, each fragment once; only the packed
rows become model instances."""

from __future__ import annotations

import datetime as dt

from contexts.retrieval.compose import pack
from contexts.retrieval.types import Candidate, CandidateRow, RetrievalRequest

NOW = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)


def row(pk: int, tokens: int, packed_tokens: int | None = None) -> CandidateRow:
    return CandidateRow(pk=pk, public_id=f"frag_{pk}", org_id=1, scope_id=1, kind="prose",
                        namespace="prose", negative=False, title="", heading_path=[],
                        body=" ".join(["word"] * tokens), symbol="", version=1,
                        token_count=tokens, packed_tokens=packed_tokens, status="active",
                        last_edited_at=NOW,
                        verified_at=None, authority=0.0, chunker_version="t", language="en")


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


def test_the_stored_packed_count_is_used_and_a_missing_one_is_counted() -> None:
    # Row 1 claims 80 packed tokens (as stored on save); row 2 has none stored (a bulk load)
    # and is counted: " word" × 30 is 30 cl100k tokens.
    rows = {1: row(1, 30, packed_tokens=80), 2: row(2, 30)}
    candidates = {pk: Candidate(pk, final=1.0 - pk / 10) for pk in rows}
    request = RetrievalRequest(query="q", org_id=1, scope_ids=frozenset({1}), budget_tokens=100)

    packed = pack(candidates, rows, request, lambda r: r)

    assert [(item.fragment.pk, item.tokens) for item in packed] == [(1, 80)]
    assert candidates[2].dropped == "over budget"  # 80 + 30 > 100
    request = RetrievalRequest(query="q", org_id=1, scope_ids=frozenset({1}), budget_tokens=200)
    candidates = {pk: Candidate(pk, final=1.0 - pk / 10) for pk in rows}
    assert [item.tokens for item in pack(candidates, rows, request, lambda r: r)] == [80, 30]
