"""Stage 5a — the lexical leg: BM25 over the organization's tantivy index, scope-filtered
inside the query (a constant-score term set), so a fragment outside the scopes is never
scored."""

from __future__ import annotations

from collections.abc import Collection

from django.conf import settings

from contexts.indexing import lexical_index


def search(org_id: int, query: str, scope_ids: Collection[int],
           limit: int) -> list[tuple[str, float]]:
    """Ranked ``(public_id, bm25)``; only active fragments are in the index."""
    if not scope_ids or limit <= 0:
        return []
    return lexical_index(org_id).search(query, allowed_scope_ids=scope_ids, limit=limit,
                                        field_boosts=settings.RETRIEVAL["lexical_field_boosts"])
