"""The candidates' rows: what scoring and packing need of each fragment a leg or a pin names.

One request reads them into one :class:`CandidateRows`; each leg adds the rows of its own hits
(the lexical leg by public id, the dense leg by primary key, the pins' read along with the
first), so no row is read twice. Every read here must run inside
:func:`contexts.services.rls.retrieval_scope`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable, Mapping

from django.db import connection
from django.utils import timezone

from accounts.sql import prepared_cursor
from contexts.kernel.compression import packed_tokens
from contexts.retrieval.types import CandidateRow, RetrievalRequest
from contexts.services.rls import pg_int_array

STATUS_ACTIVE = ("active",)
STATUS_ANY = ("active", "superseded", "retired")

# Plain queries: building ~200 model instances through the ORM cost more than the vector
# search itself (measured: 12 ms vs 4 ms for the same rows).
_COMPUTED = {
    "pk": "f.id",
    # One float instead of two timestamps: parsing ~300 timestamps cost ~2 ms a request.
    "touched_at": "extract(epoch FROM greatest(f.last_edited_at, f.verified_at))::float8",
}
# The CandidateRow columns of a fragment row aliased ``f``.
COLUMNS = ", ".join(_COMPUTED.get(name, f"f.{name}") for name in CandidateRow._fields)


def statuses(request: RetrievalRequest) -> tuple[str, ...]:
    """The statuses a request may return: every one as of a past time (validity decides)."""
    if request.as_of is not None:
        return STATUS_ANY
    return ("active", "superseded") if request.include_superseded else STATUS_ACTIVE


def retrievable(request: RetrievalRequest) -> str:
    """The one rule for which fragment rows (alias ``f``) a request may return: its
    organization and scopes (row-level security draws the same line), a retrievable status,
    valid at ``as_of`` (now: not past its expiry), and current enough (:func:`current`).
    Parameters: :func:`retrievable_params`."""
    return ("f.org_id = %(org)s AND f.scope_ids && %(scopes)s::int[] "
            "AND f.status = ANY(%(statuses)s) AND " + valid(request) + current(request))


def current(request: RetrievalRequest) -> str:
    """The request's currency filters (docs/api.md), as SQL appended to the scope rule — only
    those asked for, so the usual request keeps its one prepared statement. Age is the time
    since the later of the last edit and the last verification."""
    clauses = ""
    if request.max_age_days is not None:
        clauses += " AND greatest(f.last_edited_at, f.verified_at) >= %(fresh_since)s"
    if request.verified_only:
        clauses += " AND f.verified_at IS NOT NULL"
    if request.exclude_states:
        clauses += (" AND NOT (f.source_state = ANY(%(excluded_states)s)"
                    " OR f.evidence_state = ANY(%(excluded_states)s))")
    return clauses


def valid(request: RetrievalRequest) -> str:
    """The validity part of :func:`retrievable` (parameter ``as_of``), for counts that must
    agree with it: valid at ``as_of``; without one, not past its expiry."""
    if request.as_of is not None:
        return "f.valid_from <= %(as_of)s AND (f.valid_to IS NULL OR f.valid_to > %(as_of)s)"
    # An active fragment's valid_to is its expiry (set when it was written, e.g. in the
    # console): once passed it is no longer returned. Superseded ones keep theirs.
    return "(f.valid_to IS NULL OR f.valid_to > now() OR f.status <> 'active')"


def retrievable_params(request: RetrievalRequest) -> dict:
    params = {"org": request.org_id, "scopes": pg_int_array(request.scope_ids),
              "statuses": list(statuses(request)), "as_of": request.as_of}
    if request.max_age_days is not None:
        params["fresh_since"] = timezone.now() - dt.timedelta(days=request.max_age_days)
    if request.exclude_states:
        params["excluded_states"] = list(request.exclude_states)
    return params


# Public ids become pks in a sub-select: with "id = ANY OR public_id = ANY" the planner read
# every in-scope row and filtered (3.9 ms vs 1.2 ms measured). The sub-select names the
# organization so that it probes the unique (org_id, public_id) index: by public id alone the
# planner also read the scope index for row-level security's scope test, every fragment in
# scope (0.80 → 0.56 ms a statement on the demo's 3,322; that read grows with the organization).
_BY_ID_SQL = ("SELECT {columns} FROM contexts_fragment f WHERE {retrievable} "
              "AND f.id = ANY(%(ids)s::bigint[] || ARRAY(SELECT id FROM contexts_fragment "
              "WHERE org_id = %(org)s AND public_id = ANY(%(public_ids)s::text[])))")
# By pks alone (the dense leg's hits): with an empty list of public ids in the statement above,
# PostgreSQL planned it afresh on every execution (0.29 ms, against 0.02 for its plan kept).
_BY_PK_SQL = ("SELECT {columns} FROM contexts_fragment f WHERE {retrievable} "
              "AND f.id = ANY(%(ids)s::bigint[])")
_BODIES_SQL = "SELECT id, body, heading_path FROM contexts_fragment WHERE id = ANY(%s)"
# A fragment brought by several files (the same text twice) counts as the first file's, at its
# anchor there.
_FILES_SQL = ("SELECT DISTINCT ON (fragment_id) fragment_id, document_id, anchor "
              "FROM contexts_sourcepointer WHERE fragment_id = ANY(%s::bigint[]) "
              "ORDER BY fragment_id, document_id, anchor")


class CandidateRows:
    """pk → :class:`CandidateRow` of the fragments this request may return, as read so far.

    ``wanted``: pks whose rows the request needs whatever the legs find (its pins); the next
    statement that reads rows reads them along.
    """

    def __init__(self, request: RetrievalRequest, wanted: Iterable[int] = ()) -> None:
        self.request = request
        self.by_pk: dict[int, CandidateRow] = {}
        self.wanted = set(wanted)

    def __contains__(self, pk: object) -> bool:
        return pk in self.by_pk

    def add(self, rows: Mapping[int, CandidateRow]) -> None:
        self.by_pk.update(rows)
        self.wanted.difference_update(rows)

    def read(self, public_ids: Collection[str] = (), pks: Iterable[int] = ()) -> None:
        """One statement: the rows of ``public_ids``, ``pks`` and the pks still wanted, that
        are not read yet."""
        ids = self.wanted.union(pks) - self.by_pk.keys()
        self.wanted = set()
        if not ids and not public_ids:
            return
        params = {**retrievable_params(self.request), "ids": sorted(ids)}
        if public_ids:
            params["public_ids"] = sorted(public_ids)
        sql = (_BY_ID_SQL if public_ids else _BY_PK_SQL).format(
            columns=COLUMNS, retrievable=retrievable(self.request))
        with prepared_cursor() as cursor:
            cursor.execute(sql, params)
            self.by_pk.update((row[0], CandidateRow(*row)) for row in cursor.fetchall())

    def pks(self) -> dict[str, int]:
        """public id → pk of every row read."""
        return {row.public_id: pk for pk, row in self.by_pk.items()}

    def count_unstored(self) -> None:
        """Packing sizes come from ``packed_tokens``, stored on save; rows written around
        save() (bulk loads) have none and are counted here."""
        unstored = [pk for pk, row in self.by_pk.items() if row.packed_tokens is None]
        if unstored:
            for pk, (body, heading_path) in bodies(unstored).items():
                self.by_pk[pk] = self.by_pk[pk]._replace(
                    packed_tokens=packed_tokens(body, heading_path))


def bodies(pks: Collection[int]) -> dict[int, tuple[str, list[str]]]:
    """pk → (body, heading_path), for what needs the text before packing (the reranker)."""
    with connection.cursor() as cursor:
        cursor.execute(_BODIES_SQL, [sorted(pks)])
        return {pk: (body, heading_path) for pk, body, heading_path in cursor.fetchall()}


def candidate_files(pks: Collection[int]) -> tuple[dict[int, int], dict[int, str]]:
    """pk → the file (source document) each fragment was cut from — the first, when several
    brought the same text — and pk → its anchor in that file (``Class.method``, ``module#2``);
    a fragment no file brought (written in the console, by an agent) has neither. For the
    fusion's file evidence (``fuse.convex``)."""
    with prepared_cursor() as cursor:
        cursor.execute(_FILES_SQL, [sorted(pks)])
        found = cursor.fetchall()
    return ({pk: file for pk, file, _ in found}, {pk: anchor for pk, _, anchor in found})
