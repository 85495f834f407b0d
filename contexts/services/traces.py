"""Trace retention: retrieval traces older than ``TRACE_RETENTION_DAYS`` are deleted daily.

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

BATCH = 5000


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
