"""Writing retrieval traces, and their retention: traces older than ``TRACE_RETENTION_DAYS``
are deleted daily.

Every retrieval writes one trace (~30 KB: its candidate table is stored uncompressed, see
migration 0016), so a busy fleet writes gigabytes a day; traces are diagnostics, and replay
and the console look at recent ones. Deleted in batches, each its own transaction, so the
purge never holds long locks or one huge transaction on a table that is written every request.
"""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.db import connection
from django.utils import timezone

from accounts.sql import insert_statement, insert_values
from contexts import secret_scan
from contexts.models import RetrievalTrace

BATCH = 5000

_FIELDS, _INSERT = insert_statement(RetrievalTrace)


def _own_transaction_insert() -> str:
    """The insert as one implicit transaction (statements sent together run as one unless they
    say otherwise), so a failed insert leaves no transaction open, with its settings local to
    it: no WAL-flush wait, and ``statement_timeout`` and ``lock_timeout`` of
    ``AFTER_RESPONSE_TIMEOUT_MS`` — a trace is written after its answer is out, and a stuck
    table must not hold the worker. The settings end with the transaction: the connection
    keeps its own."""
    bound = int(settings.AFTER_RESPONSE_TIMEOUT_MS)
    return (f"SET LOCAL statement_timeout = {bound}; SET LOCAL lock_timeout = {bound}; "
            "SET LOCAL synchronous_commit TO off; " + _INSERT)


def write(trace: RetrievalTrace) -> None:
    """Insert a new trace (its ``public_id`` already set), in one round trip.

    Every retrieval writes one, after its answer is sent, while on two cores the next request
    is starting; measured alone on the real table: 2.7 ms through ``save()`` in a transaction
    of its own (four round trips, ``json.dumps`` and quoting), 1.4 ms here. A trace is
    diagnostics: its own transaction does not wait for its WAL flush, so a database crash may
    lose the last fraction of a second of traces, never anything else; and it gives up after
    ``AFTER_RESPONSE_TIMEOUT_MS``. Inside a caller's transaction it is just another insert of
    that transaction, under the caller's settings.
    """
    if not trace.public_id:
        raise ValueError("a trace is written under the public id its result already carries")
    # A query may be a pasted secret (or an error message holding one): the trace keeps it
    # redacted, as every stored text is (ADR 0016). A one-line query costs ~0.1 ms.
    findings = secret_scan.scan(trace.query)
    if findings:
        trace.query = secret_scan.redact(trace.query, findings)
    sql = _INSERT if connection.in_atomic_block else _own_transaction_insert()
    with connection.cursor() as cursor:
        cursor.execute(sql, insert_values(trace, _FIELDS, connection))


def purge(older_than_days: int | None = None, *, now: dt.datetime | None = None) -> int:
    """Delete traces created more than ``older_than_days`` ago (default: the setting; 0 or
    less keeps every trace); the number deleted."""
    days = settings.TRACE_RETENTION_DAYS if older_than_days is None else older_than_days
    if days <= 0:
        return 0
    cutoff = (now or timezone.now()) - dt.timedelta(days=days)
    deleted = 0
    while True:
        with connection.cursor() as cursor:
            cursor.execute(
                "DELETE FROM contexts_retrievaltrace WHERE id IN (SELECT id FROM "
                "contexts_retrievaltrace WHERE created_at < %s ORDER BY id LIMIT %s)",
                [cutoff, BATCH])
            deleted += cursor.rowcount
            if cursor.rowcount < BATCH:
                return deleted
