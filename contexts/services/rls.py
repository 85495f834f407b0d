"""The one door retrieval queries go through: row-level security for the allowed scopes.

Inside :func:`retrieval_scope` the connection runs as the ``contexts_retrieval`` role, which
PostgreSQL lets read only fragment and embedding rows whose ``scope_ids`` overlap the allowed
set — and nothing when the set is empty or unset (fail closed). The application's own filters
are the first line; this is the backstop that holds if one of them is ever wrong.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import connection, transaction

RETRIEVAL_ROLE = "contexts_retrieval"


def pg_int_array(values: Collection[int]) -> str:
    return "{" + ",".join(str(int(v)) for v in sorted(values)) + "}"


@contextmanager
def retrieval_scope(scope_ids: Collection[int], *, iterative_scan: bool = True) -> Iterator[None]:
    nested = connection.in_atomic_block
    with transaction.atomic():
        # One round trip: set_config is SET LOCAL for the role and both settings.
        settings_sql = ["set_config('role', %s, true)",
                        "set_config('app.allowed_scopes', %s, true)"]
        params = [RETRIEVAL_ROLE, pg_int_array(scope_ids)]
        if iterative_scan:
            # Filtered HNSW scans otherwise stop early and return fewer than k rows; and with
            # pgvector's default candidate list (40) a top-100 is approximate: HNSW_EF_SEARCH
            # (≥ the leg's depth) keeps it as good as an exact search (numbers in
            # docs/retrieval-quality.md).
            settings_sql.append("set_config('hnsw.iterative_scan', 'relaxed_order', true)")
            settings_sql.append("set_config('hnsw.ef_search', %s, true)")
            params.append(str(settings.HNSW_EF_SEARCH))
        with connection.cursor() as cursor:
            cursor.execute("SELECT " + ", ".join(settings_sql), params)
        try:
            yield
        finally:
            # SET LOCAL outlives a savepoint release; reset explicitly so an enclosing
            # transaction (tests, nested service calls) continues as the application role.
            # An outermost block needs no reset: its COMMIT ends the settings (the API path).
            if nested and not connection.needs_rollback:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT set_config('role', 'none', true), "
                                   "set_config('app.allowed_scopes', '', true)")
