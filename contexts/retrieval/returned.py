"""Stage 8 — the packed candidates as returned fragments: each read whole with its citations,
compressed for the bundle."""

from __future__ import annotations

from django.db import connection

from accounts.sql import model_columns, prepared_cursor
from contexts.kernel.compression import compress
from contexts.models import Fragment, document_origin, written_origin
from contexts.models.sources_git import permalink
from contexts.retrieval.rows import CandidateRows
from contexts.retrieval.types import Candidate, Citation, ComposedFragment, Written

# The returned fragments, with their citations, in one plain query (through the ORM the
# citations alone cost ~4 ms a request); one row per source pointer, or one without. The
# columns are what callers show or trace (the rest load on access): every timestamp read costs
# ~10 µs to parse, and a bundle may hold 50 fragments.
_RETURNED = {"id", "public_id", "org_id", "scope_id", "kind", "namespace", "negative", "title",
             "heading_path", "body", "language", "symbol", "version", "chunker_version",
             "status", "last_edited_at", "verified_at", "source_state", "evidence_state"}
_FRAGMENT_FIELDS, _FRAGMENT_COLUMNS = model_columns(Fragment, "f", only=_RETURNED)
assert _FRAGMENT_FIELDS[0] == "id"  # complete() reads each row's pk from its first column
# A document read from a git source carries the commit it was read at, and what brought it
# (``origin``: a git source, an archive, a folder or upload). What the fragment cites (its
# evidence, issue 38) comes as two counts — references, and those changed or missing — in the
# same statement: no second round trip, no JSON to parse. A fragment no file brought says where
# it was written (issue 40): its scope (a session's), the proposal it was approved from, and
# who wrote its first version when — joined only on the row without a source pointer, each an
# index probe, under row-level security like the fragment (migration 0037). By organization
# and pk, the unique index of the two: by pk alone the planner also read the scope index for
# row-level security's scope test — every fragment in scope, growing with the organization —
# to intersect it with ten pks (0.63 → 0.42 ms a statement on the demo's 3,322).
_COMPLETE_SQL = f"""
    SELECT {_FRAGMENT_COLUMNS}, jsonb_array_length(f.evidence),
           (SELECT count(*) FROM jsonb_array_elements(f.evidence) e
             WHERE e->>'state' <> 'current'),
           d.path, r.slug, p.anchor, p.start_line, p.end_line,
           d.source_commit, d.repository_id, d.origin,
           s.kind, s.public_id, v.created_at, u.username,
           CASE WHEN p.id IS NULL THEN
               (SELECT pr.public_id FROM contexts_proposal pr
                 WHERE pr.result_fragment_id = f.id
                 ORDER BY pr.decided_at DESC NULLS LAST LIMIT 1) END
    FROM contexts_fragment f
    LEFT JOIN contexts_sourcepointer p ON p.fragment_id = f.id
    LEFT JOIN contexts_sourcedocument d ON d.id = p.document_id
    LEFT JOIN accounts_repository r ON r.id = d.repository_id
    LEFT JOIN accounts_scope s ON p.id IS NULL AND s.id = f.scope_id
    LEFT JOIN contexts_fragmentversion v
           ON p.id IS NULL AND v.org_id = f.org_id AND v.fragment_id = f.id AND v.number = 1
    LEFT JOIN auth_user u ON u.id = v.editor_id
    WHERE f.org_id = %s AND f.id = ANY(%s)
"""
# The permalink templates of the git sources those documents came from (one source per
# repository), asked only when a citation has a commit: a join in the statement above cost
# every retrieval ~0.6 ms (planning, and the source's row-level check per citation row) for
# what only git sources' citations use.
_TEMPLATES_SQL = """
    SELECT repository_id, web_url_template FROM contexts_source
    WHERE repository_id = ANY(%s) AND web_url_template <> ''
"""


def complete(packed: list[Candidate], rows: CandidateRows) -> list[ComposedFragment]:
    """The packed candidates as returned fragments: model, compressed text, citations.
    Must run inside :func:`contexts.services.rls.retrieval_scope`."""
    if not packed:
        return []
    width = len(_FRAGMENT_FIELDS)
    items: dict[int, ComposedFragment] = {}
    by_pk = {candidate.fragment_id: candidate for candidate in packed}
    # (fragment, (path, slug, anchor, start, end, commit), repository, document origin)
    cited: list[tuple[int, tuple, int | None, str]] = []
    with prepared_cursor() as cursor:
        cursor.execute(_COMPLETE_SQL, [rows.request.org_id, sorted(by_pk)])
        for row in cursor.fetchall():
            pk = row[0]
            (refs, changed, path, slug, anchor, start, end, commit, repository_id, origin,
             scope_kind, scope_id, written_at, written_by, proposal_id) = row[width:]
            if pk not in items:
                fragment = Fragment.from_db(connection.alias, _FRAGMENT_FIELDS, row[:width])
                items[pk] = ComposedFragment(fragment, by_pk[pk],
                                             compress(fragment.body, fragment.heading_path),
                                             rows.by_pk[pk].packed_tokens,
                                             cited=(refs or 0, changed or 0))
            if path is not None:
                cited.append((pk, (path, slug, anchor, start, end, commit), repository_id,
                              origin or ""))
            elif scope_kind is not None and not items[pk].fragment.source_state:
                kind = written_origin(scope_kind, proposal_id)
                items[pk].written = Written(
                    kind, written_by, written_at,
                    session_id=scope_id if kind == "session" else None,
                    proposal_id=proposal_id)
        templates = {}
        from_sources = {repository for _, citation, repository, _ in cited if citation[-1]}
        if from_sources:
            cursor.execute(_TEMPLATES_SQL, [sorted(from_sources)])
            templates = dict(cursor.fetchall())
    for pk, (path, slug, anchor, start, end, commit), repository, origin in cited:
        items[pk].sources.append(Citation(
            path, slug, anchor, start, end, commit=commit,
            url=permalink(templates.get(repository), commit, path, start, end),
            kind=document_origin(origin, commit)))
    for candidate in packed:
        if candidate.fragment_id not in items:  # deleted since it was scored
            candidate.returned, candidate.dropped = False, "deleted meanwhile"
    for item in items.values():
        item.sources.sort(key=lambda c: (c.path, c.start_line or 0))
    return [items[c.fragment_id] for c in packed if c.fragment_id in items]
