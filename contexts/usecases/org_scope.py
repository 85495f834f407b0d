"""Organization-wide scope, said out loud: ``"repo_id": "*"`` and the empty answer's ``hint``.

``"repo_id": "*"`` asks for the organization-wide fragments plus every repository of the
organization that the caller reads — what ``accounts.scopes.readable_scopes`` says, nothing
re-derived here. A token bound to one repository gets that repository (and the organization-wide
scope only if it reads it).

An answer with no fragments carries a ``hint`` when the caller reads fragments elsewhere in the
organization: how many and how to reach them. It counts only fragments of scopes the caller
reads (one COUNT, under row-level security for exactly those scopes) and names nothing the
caller did not name itself, so it reveals nothing the caller could not already retrieve. The
counts are kept per process while the organization's change feed stays where it was (below).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Collection, Mapping
from typing import Any, NamedTuple

from django.db import connection

from accounts.scopes import Readable, retrieval_scopes
from contexts.indexes import follower
from contexts.retrieval.rows import statuses, valid
from contexts.retrieval.types import RetrievalRequest
from contexts.services.rls import pg_int_array, retrieval_scope

ALL_REPOSITORIES = "*"


class Plan(NamedTuple):
    """A retrieval request with what its hint needs, computed while building it (no query)."""

    request: RetrievalRequest
    principal: Any
    readable: Readable
    scope: Mapping[str, Any]  # the scope fields as the caller typed them
    org_scope_id: int


def is_wide(scope: Mapping[str, Any]) -> bool:
    return scope.get("repo_id") == ALL_REPOSITORIES


def wide_chain(readable: Readable, org_pk: int, org_scope_id: int) -> list[int]:
    """The scopes ``"repo_id": "*"`` adds: every repository of the organization the principal
    reads (in scope id order, so pins and traces are stable), then the organization-wide scope
    if it reads that."""
    chain = sorted(readable.repositories(org_pk))
    if org_scope_id in readable:
        chain.append(org_scope_id)
    return chain


# here: in the request's scopes; wider: what "*" adds; other: readable but outside both
# (personas, sessions). One statement, run only when an answer is empty; the GIN index on
# scope_ids finds the readable rows.
_COUNT_SQL = """
    SELECT count(*) FILTER (WHERE f.scope_ids && %(here)s::int[]),
           count(*) FILTER (WHERE NOT f.scope_ids && %(here)s::int[]
                            AND f.scope_ids && %(wider)s::int[]),
           count(*) FILTER (WHERE NOT f.scope_ids && %(here)s::int[]
                            AND NOT f.scope_ids && %(wider)s::int[])
    FROM contexts_fragment f
    WHERE f.org_id = %(org)s AND f.scope_ids && %(readable)s::int[]
      AND f.status = ANY(%(statuses)s)
"""


# The counts of recent empty answers, per process. The COUNT reads every readable fragment row
# (3.9 ms a request on the demo's 2,509 fragments, linear in the organization) and agents repeat
# their questions, empty ones too. A count is reused only at the same position of the
# organization's change feed — every change to what retrieval sees advances it (ADR 0015) —
# and for at most COUNTS_TTL seconds, for what the feed does not record: an expiry passing.
COUNTS_TTL = 30.0
COUNTS_KEPT = 512
_counted: OrderedDict[tuple, tuple[float, tuple[int, int, int]]] = OrderedDict()
_counted_lock = threading.Lock()


def _counts(request: RetrievalRequest, readable: Collection[int], wider: Collection[int],
            head: int | None) -> tuple[int, int, int]:
    """``head``: the feed's head as the request already read it (None: read it here)."""
    if head is None:
        head = follower.head(request.org_id)
    key = (request.org_id, head, tuple(sorted(request.scope_ids)),
           tuple(sorted(wider)), tuple(sorted(readable)), statuses(request), request.as_of)
    now = time.monotonic()
    with _counted_lock:
        counted_at, counts = _counted.get(key, (float("-inf"), None))
    if counts is not None and now - counted_at < COUNTS_TTL:
        return counts
    counts = _count(request, readable, wider)
    with _counted_lock:
        _counted[key] = (now, counts)
        _counted.move_to_end(key)
        while len(_counted) > COUNTS_KEPT:
            _counted.popitem(last=False)
    return counts


def _count(request: RetrievalRequest, readable: Collection[int], wider: Collection[int]
           ) -> tuple[int, int, int]:
    params = {"org": request.org_id, "here": pg_int_array(request.scope_ids),
              "wider": pg_int_array(wider), "readable": pg_int_array(readable),
              "statuses": list(statuses(request))}
    # Valid as retrieval's own rule has it (contexts.retrieval.rows.retrievable).
    sql = _COUNT_SQL + " AND " + valid(request)
    params["as_of"] = request.as_of
    # Row-level security for the readable set: the backstop holds for this count too.
    with retrieval_scope(readable, iterative_scan=False), connection.cursor() as cursor:
        cursor.execute(sql, params)
        here, wider_count, other = cursor.fetchone()
    return here, wider_count, other


def _described(scope: Mapping[str, Any]) -> str:
    """The requested scope in the caller's own words (only what it named)."""
    parts = []
    if is_wide(scope):
        parts.append("any repository you can read (or organization-wide)")
    elif scope.get("repo_id"):
        parts.append(f"repository '{scope['repo_id']}'")
    if scope.get("persona_id"):
        parts.append(f"persona '{scope['persona_id']}'")
    if scope.get("session_id"):
        parts.append(f"session '{scope['session_id']}'")
    if not parts:
        return f"the organization-wide scope of '{scope['org_id']}'"
    return ", ".join(parts)


def _fragments(n: int) -> str:
    return f"{n:,} fragment you can read is" if n == 1 else f"{n:,} fragments you can read are"


class Wording(NamedTuple):
    """How to widen the scope, in the words of the surface that asked."""

    all_repositories: str
    persona_or_session: str


API_WORDING = Wording(
    all_repositories='ask with "repo_id": "*" to search its organization-wide fragments and '
                     "every repository you can read",
    persona_or_session='name one with "persona_id" or "session_id"')


def scope_hint(plan: Plan, wording: Wording = API_WORDING, head: int | None = None
               ) -> str | None:
    """For an empty answer: where the caller's readable fragments are, if outside its scope;
    None when it reads nothing else in the organization."""
    readable_here = [s for s in plan.readable
                     if plan.readable.org_of.get(s) == plan.request.org_id]
    if not readable_here:
        return None
    org_pk = plan.request.org_id
    wider_chain = wide_chain(plan.readable, org_pk, plan.org_scope_id)
    wider = retrieval_scopes(plan.principal, wider_chain, known=plan.readable)
    here, widen, other = _counts(plan.request, readable_here, wider, head)
    if not widen and not other:
        return None
    scope = plan.scope
    found = (f"nothing in {_described(scope)} matched" if here
             else f"no fragments in {_described(scope)}")
    org = scope["org_id"]
    if widen:  # never for a "*" request: what "*" adds is in its own scope
        return (f"{found}; {_fragments(widen)} elsewhere in organization '{org}' — "
                f"{wording.all_repositories}")
    return (f"{found}; {_fragments(other)} in scopes of organization '{org}' that this "
            f"request does not name (personas, sessions) — {wording.persona_or_session}")
