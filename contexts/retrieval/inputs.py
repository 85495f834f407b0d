"""What a request reads before its legs are collected: the active embedding generations, the
compose weights (the persona's, unless the request brings its own) and the pins.

Read inside the row-level-security block like every other read of a retrieval, while the
legs still work: the retrieval role may read the generations (no text), a persona's weights
and half-lives (a column grant, migration 0021: not its name or description) and the pins of
fragments it may see (migration 0013).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.conf import settings
from django.db import connection
from django.utils import timezone

from accounts.sql import prepared_cursor
from contexts.models import EmbeddingGeneration
from contexts.retrieval import dense
from contexts.retrieval.types import RetrievalRequest, Weights
from contexts.services.rls import pg_int_array


@dataclass(frozen=True)
class Inputs:
    generations: dict[str, EmbeddingGeneration]   # namespace → active generation
    weights: Weights
    halflives: dict | None                         # the persona's per-kind half-lives
    pins: dict[int, int]                           # fragment pk → pin order


def read(request: RetrievalRequest) -> Inputs:
    """Must run inside :func:`contexts.services.rls.retrieval_scope`."""
    weights, halflives = resolve_weights(request)
    return Inputs(dense.generations(create=False), weights, halflives,
                  pins(request) if request.include_pins else {})


# Only the columns granted to the retrieval role (migration 0021).
_PERSONA_SQL = "SELECT w_r, w_f, w_c, w_p, halflife_days FROM accounts_persona WHERE id = %s"


def resolve_weights(request: RetrievalRequest) -> tuple[Weights, dict | None]:
    """The compose weights — the request's, else its persona's, else the defaults, with a
    curator's typed ones (``weight_overrides``) over them — and the persona's half-lives."""
    persona = None
    if request.persona_id is not None:
        with connection.cursor() as cursor:
            cursor.execute(_PERSONA_SQL, [request.persona_id])
            persona = cursor.fetchone()
    if request.weights is not None:
        weights = request.weights
    elif persona is not None:
        weights = Weights(*persona[:4])
    else:
        weights = Weights(**settings.DEFAULT_WEIGHTS)
    if request.weight_overrides:
        weights = Weights(**{**vars(weights), **dict(request.weight_overrides)})
    # jsonb arrives as text (Django's psycopg loader leaves decoding to JSONField).
    return weights, (json.loads(persona[4]) if persona is not None else None)


# Only pins of fragments this request may see: a pin of an out-of-scope fragment would
# otherwise become a (dropped) candidate and put that fragment's id into the trace.
_PINS_SQL = ("SELECT p.fragment_id, p.scope_id, p.position FROM contexts_pin p "
             "JOIN contexts_fragment f ON f.id = p.fragment_id "
             "WHERE p.scope_id = ANY(%s) AND f.scope_ids && %s::int[] "
             "AND (p.expires_at IS NULL OR p.expires_at > %s)")


def pins(request: RetrievalRequest) -> dict[int, int]:
    """fragment pk → order: the most specific scope's pins first, each scope in pin order."""
    if not request.chain:
        return {}
    rank = {scope_id: i for i, scope_id in enumerate(request.chain)}
    with prepared_cursor() as cursor:
        cursor.execute(_PINS_SQL, [list(request.chain), pg_int_array(request.scope_ids),
                                   timezone.now()])
        found = cursor.fetchall()
    ordered = sorted(found, key=lambda row: (rank[row[1]], row[2]))
    order: dict[int, int] = {}
    for fragment_id, _scope, _position in ordered:
        order.setdefault(fragment_id, len(order))
    return order
