"""Stage 7 — compose: blend the signals, put pins first, cut at ``min_score``, pack greedily
into the token budget with deliberately dumb compression.

The final score is on a documented 0–1 scale::

    final = (w_r·relevance + w_f·freshness + w_c·authority + w_p·pinned) / (w_r+w_f+w_c+w_p)

relevance — fused (or reranked) relevance, 1 for a fragment every leg ranked first;
freshness — ``exp(-age_days / half_life)`` with age since the last edit or verification;
authority — PageRank over the citation graph, normalised to 0–1; pinned — 1 or 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from django.conf import settings
from django.utils import timezone

from contexts.retrieval.types import (
    Candidate,
    CandidateRow,
    RetrievalRequest,
    Weights,
)


def halflife_days(fragment: CandidateRow, request: RetrievalRequest,
                  persona_halflives: dict | None) -> float:
    if request.freshness_halflife_days:
        return float(request.freshness_halflife_days)
    for table in (persona_halflives or {}, settings.FRESHNESS_HALFLIFE_DAYS):
        if fragment.kind in table:
            return float(table[fragment.kind])
        if "default" in table:
            return float(table["default"])
    return 90.0


def freshness(touched_at: float, now: float, half_life: float) -> float:
    """``exp(-age_days / half_life)``; times in epoch seconds."""
    age_days = max(0.0, (now - touched_at) / 86400)
    return math.exp(-age_days / max(half_life, 1e-6))


def score(candidates: dict[int, Candidate], rows: dict[int, CandidateRow],
          pins: dict[int, int], request: RetrievalRequest, weights: Weights,
          persona_halflives: dict | None) -> None:
    """Fill freshness, authority, pin and final score of every candidate in place."""
    now = (request.as_of or timezone.now()).timestamp()
    for fragment_id in pins:
        candidates.setdefault(fragment_id, Candidate(fragment_id))
    # ~200 candidates a request, after the query vector is in: the half-life is looked up
    # once per kind and the weights once, not per candidate.
    halflives: dict[str, float] = {}
    w_r, w_f, w_c, w_p, total = (weights.w_r, weights.w_f, weights.w_c, weights.w_p,
                                 weights.total)
    for candidate in candidates.values():
        fragment = rows.get(candidate.fragment_id)
        if fragment is None:
            candidate.dropped = "not visible or not retrievable"
            continue
        half_life = halflives.get(fragment.kind)
        if half_life is None:
            half_life = halflives[fragment.kind] = halflife_days(fragment, request,
                                                                 persona_halflives)
        candidate.freshness = freshness(fragment.touched_at, now, half_life)
        candidate.authority = max(0.0, min(1.0, fragment.authority))
        pin_order = pins.get(candidate.fragment_id)
        candidate.pinned = pin_order is not None
        candidate.pin_order = pin_order
        candidate.final = (w_r * candidate.relevance + w_f * candidate.freshness
                           + w_c * candidate.authority
                           + w_p * (1.0 if candidate.pinned else 0.0)) / total


def pack(candidates: dict[int, Candidate], rows: dict[int, CandidateRow],
         request: RetrievalRequest) -> list[Candidate]:
    """Pins first (in pin order), then by final score; greedy into the budget; each once.
    Sizes are the rows' stored ``packed_tokens`` (every row has one here; see
    ``rows.CandidateRows.count_unstored``). Marks and returns the candidates that fit."""
    ordered: Iterable[Candidate] = sorted(
        (c for c in candidates.values() if c.fragment_id in rows),
        key=lambda c: (not c.pinned, c.pin_order if c.pinned else 0, -c.final, c.fragment_id),
    )
    used = 0
    packed: list[Candidate] = []
    for candidate in ordered:
        if not candidate.pinned and candidate.final < request.min_score:
            candidate.dropped = "below min_score"
            continue
        if request.max_fragments is not None and len(packed) >= request.max_fragments:
            candidate.dropped = "over max_fragments"
            continue
        tokens = rows[candidate.fragment_id].packed_tokens
        if used + tokens > request.budget_tokens:
            candidate.dropped = "over budget"
            continue
        used += tokens
        candidate.returned = True
        packed.append(candidate)
    return packed
