"""Stage 8 — the packed candidates as returned fragments: each read whole with its citations,
compressed for the bundle."""

from __future__ import annotations

from django.db import connection

from accounts.sql import model_columns
from contexts.compression import compress
from contexts.models import Fragment
from contexts.retrieval.rows import CandidateRows
from contexts.retrieval.types import Candidate, Citation, ComposedFragment

# The returned fragments, with their citations, in one plain query (through the ORM the
# citations alone cost ~4 ms a request); one row per source pointer, or one without. The
# columns are what callers show or trace (the rest load on access): every timestamp read costs
# ~10 µs to parse, and a bundle may hold 50 fragments.
_RETURNED = {"id", "public_id", "org_id", "scope_id", "kind", "namespace", "negative", "title",
             "heading_path", "body", "language", "symbol", "version", "chunker_version",
             "status", "last_edited_at", "verified_at"}
_FRAGMENT_FIELDS, _FRAGMENT_COLUMNS = model_columns(Fragment, "f", only=_RETURNED)
assert _FRAGMENT_FIELDS[0] == "id"  # complete() reads each row's pk from its first column
_COMPLETE_SQL = f"""
    SELECT {_FRAGMENT_COLUMNS}, d.path, r.slug, p.anchor, p.start_line, p.end_line
    FROM contexts_fragment f
    LEFT JOIN contexts_sourcepointer p ON p.fragment_id = f.id
    LEFT JOIN contexts_sourcedocument d ON d.id = p.document_id
    LEFT JOIN accounts_repository r ON r.id = d.repository_id
    WHERE f.id = ANY(%s)
"""


def complete(packed: list[Candidate], rows: CandidateRows) -> list[ComposedFragment]:
    """The packed candidates as returned fragments: model, compressed text, citations.
    Must run inside :func:`contexts.services.rls.retrieval_scope`."""
    if not packed:
        return []
    width = len(_FRAGMENT_FIELDS)
    items: dict[int, ComposedFragment] = {}
    by_pk = {candidate.fragment_id: candidate for candidate in packed}
    with connection.cursor() as cursor:
        cursor.execute(_COMPLETE_SQL, [sorted(by_pk)])
        for row in cursor.fetchall():
            pk, (path, *citation) = row[0], row[width:]
            if pk not in items:
                fragment = Fragment.from_db(connection.alias, _FRAGMENT_FIELDS, row[:width])
                items[pk] = ComposedFragment(fragment, by_pk[pk],
                                             compress(fragment.body, fragment.heading_path),
                                             rows.by_pk[pk].packed_tokens)
            if path is not None:
                items[pk].sources.append(Citation(path, *citation))
    for candidate in packed:
        if candidate.fragment_id not in items:  # deleted since it was scored
            candidate.returned, candidate.dropped = False, "deleted meanwhile"
    for item in items.values():
        item.sources.sort(key=lambda c: (c.path, c.start_line or 0))
    return [items[c.fragment_id] for c in packed if c.fragment_id in items]
