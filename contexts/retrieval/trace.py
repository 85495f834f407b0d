"""What a retrieval records of itself: the trace row, built after the answer (deferred with
the other writes, ADR 0010) under the public id the result already carries."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from accounts.models import ApiToken
from accounts.permissions import principal_user
from contexts.models import EmbeddingGeneration, RetrievalTrace
from contexts.models.traces import stage_table
from contexts.retrieval.types import (
    TRACE_COLUMNS,
    CandidateRow,
    RetrievalRequest,
    RetrievalResult,
)


def build_trace(request: RetrievalRequest, result: RetrievalResult,
                rows: Mapping[int, CandidateRow], principal: Any,
                generations: dict[str, EmbeddingGeneration]) -> RetrievalTrace:
    """The request's trace, not yet saved. ``rows``: every candidate row the request read."""
    public_ids = {pk: row.public_id for pk, row in rows.items()}
    candidates = sorted(result.candidates.values(), key=lambda c: (-c.final, c.fragment_id))
    return RetrievalTrace(
        public_id=result.trace_id,
        org_id=request.org_id,
        token=principal if isinstance(principal, ApiToken) else None,
        user=principal_user(principal),
        query=request.query,
        scope_ids=sorted(request.scope_ids),
        requested_scope={"chain": list(request.chain), "persona_id": request.persona_id},
        parameters={
            "budget_tokens": request.budget_tokens, "k_lexical": request.k_lexical,
            "k_dense": request.k_dense, "rerank_top": request.rerank_top,
            "freshness_halflife_days": request.freshness_halflife_days,
            "min_score": request.min_score, "max_fragments": request.max_fragments,
            "include_superseded": request.include_superseded,
            "as_of": request.as_of.isoformat() if request.as_of else None,
            "legs": list(request.legs),
            # How current the answer had to be (max_age_days, verified_only, exclude_states).
            **request.currency_filters(),
            **result.fusion.as_dict(),
            "adaptive": result.adaptive,
            "weights": vars(result.weights),
            # Why fewer candidates than hits: superseded or retired hits, left out unnamed.
            **({"not_retrievable": result.not_retrievable} if result.not_retrievable else {}),
        },
        reranker=result.reranker,
        # A pin of a fragment this request may not return (retired, superseded, not valid at
        # as_of) is no candidate: it is left out rather than named by its internal key.
        stage_table=stage_table(TRACE_COLUMNS, [c.trace_row(public_ids[c.fragment_id])
                                                for c in candidates
                                                if c.fragment_id in public_ids]),
        returned=[{"id": c.fragment.public_id, "version": c.fragment.version,
                   "score": round(c.candidate.final, 4), "tokens": c.tokens,
                   "symbol": c.fragment.symbol}
                  for c in result.fragments],
        versions={
            "chunker": sorted({c.fragment.chunker_version for c in result.fragments}),
            "embedding": {ns: f"{g.model_name}@{g.model_version}"
                          for ns, g in generations.items()},
            **({"lexical_index": result.sources["lexical"]} if "lexical" in result.sources
               else {}),
            # "cache" when the node had this query's vector (contexts/retrieval/vector_cache.py)
            **({"query_vector": result.sources["dense"]["query_vector"]}
               if "dense" in result.sources else {}),
        },
        timings_ms=result.timings_ms,
        degraded=result.degraded,
    )
