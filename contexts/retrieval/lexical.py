"""Stage 5a — the lexical leg: BM25 over the organization's tantivy index, scope-filtered
inside the query (a constant-score term set), so a fragment outside the scopes is never
scored.

:class:`LexicalLeg` runs tantivy as the request starts, in the request's thread, while the query
encoder's process computes the query vector; collecting it reads its hits' rows — with the
pins', in the same statement — while that vector may still be on its way.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection

from django.conf import settings

from contexts.indexes import follower
from contexts.indexes.indexing import lexical_index
from contexts.models import EmbeddingGeneration
from contexts.retrieval.degraded import (
    LEXICAL_INDEX_BEHIND,
    LEXICAL_INDEX_REBUILDING,
    lexical_code,
)
from contexts.retrieval.legs import Collected, LegUnavailable
from contexts.retrieval.rows import CandidateRows
from contexts.retrieval.types import RetrievalRequest

logger = logging.getLogger(__name__)

def search(org_id: int, query: str, scope_ids: Collection[int],
           limit: int) -> list[tuple[str, float]]:
    """Ranked ``(public_id, bm25)``; only active fragments are in the index."""
    if not scope_ids or limit <= 0:
        return []
    return lexical_index(org_id).search(query, allowed_scope_ids=scope_ids, limit=limit,
                                        field_boosts=settings.RETRIEVAL["lexical_field_boosts"])


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)


class LexicalLeg:
    """The lexical leg (:class:`contexts.retrieval.legs.Leg`)."""

    name = "lexical"

    def start(self, request: RetrievalRequest) -> PendingLexical:
        # Before the search: how far this node's index is behind the organization's change
        # feed, and whether it is being rebuilt (checked again once the search is done: a
        # rebuild may start meanwhile).
        freshness = index_freshness(request.org_id)
        rebuilding = follower.rebuilding(request.org_id)
        # Here, not in a worker thread: the dense leg started first, so the search (~3 ms)
        # already runs while the encoder process computes the query vector (~10 ms); a pool
        # of threads added a hand-off each way per request for no further overlap.
        started = time.perf_counter()
        try:
            hits = search(request.org_id, request.query, request.scope_ids, request.k_lexical)
        except Exception as exc:  # noqa: BLE001 - raised by collect(), which answers for it
            return PendingLexical(request, [], _ms(started), freshness, rebuilding=rebuilding,
                                  failure=exc)
        return PendingLexical(request, hits, _ms(started), freshness, rebuilding=rebuilding)


def index_freshness(org_id: int) -> dict | None:
    """This node's index of the organization: its mark, the feed's head and the lag."""
    if not follower.enabled():
        return None
    lag = follower.lag(org_id)
    return {"mark": lag.mark, "head": lag.head, "lag_seconds": round(lag.seconds, 3),
            "node": follower.node_name()}


class PendingLexical:
    def __init__(self, request: RetrievalRequest, hits: list[tuple[str, float]],
                 searched_ms: float, freshness: dict | None = None, *,
                 rebuilding: bool = False, failure: Exception | None = None) -> None:
        self.request = request
        self.hits = hits
        self.searched_ms = searched_ms
        self.freshness = freshness
        self.rebuilding = rebuilding
        self.failure = failure

    def _rebuilding(self) -> bool:
        """Whether a rebuild ran at any point of the search: at its start, or at its end."""
        return self.rebuilding or follower.rebuilding(self.request.org_id)

    def collect(self, rows: CandidateRows,
                generations: dict[str, EmbeddingGeneration]) -> Collected:
        if (exc := self.failure) is not None:  # any index failure: answer from dense
            # The index is derived data (rebuild_index restores it); PostgreSQL still answers,
            # so the request is served from the dense leg and says so. The details (index
            # path, organization) are for the operator's log; the caller gets a stable code.
            logger.warning("lexical leg failed for org %s: %s: %s", self.request.org_id,
                           type(exc).__name__, exc)
            # A rebuild recreating the index under the search is that rebuild, not a fault.
            raise LegUnavailable(LEXICAL_INDEX_REBUILDING if self._rebuilding()
                                 else lexical_code(exc)) from exc
        hits = self.hits
        started = time.perf_counter()
        rows.read(public_ids={public_id for public_id, _ in hits})
        timings = {"lexical": self.searched_ms, "lexical_rows": _ms(started)}
        # Hits this request may not return (e.g. superseded, still in the index) have no row.
        pks = rows.pks()
        behind = (self.freshness is not None
                  and self.freshness["lag_seconds"] > settings.INDEX_MAX_LAG)
        rebuilding = self._rebuilding()
        source = ({**self.freshness, "rebuilding": True}
                  if rebuilding and self.freshness is not None else self.freshness)
        kept = [(pks[public_id], score) for public_id, score in hits if public_id in pks]
        return Collected(kept, timings, not_retrievable=len(hits) - len(kept),
                         degraded=(LEXICAL_INDEX_REBUILDING if rebuilding
                                   else LEXICAL_INDEX_BEHIND if behind else None),
                         source=source)
