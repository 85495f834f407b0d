"""Appending to the change feed (ADR 0015): the one way a change reaches the lexical indexes.

Called by the one door (``contexts.services.fragments.notify_changed``) and by the repair
paths (``contexts.indexes.follower.reindex_fragments``), always inside the transaction that makes
the change, so a change is in the feed exactly when it is committed.
"""

from __future__ import annotations

from collections.abc import Mapping

from django.db import connection, transaction
from django.dispatch import Signal

from contexts.models import Fragment
from contexts.models.changes import Change, ChangeKind

# Sent after commit with the organizations whose feed grew, so that a process on a node that
# keeps an index can apply its own changes at once (read-your-writes; ``contexts.signals``).
changes_committed = Signal()


def append(changes: Mapping[int, str]) -> dict[int, int]:
    """Append one row per fragment (pk → :class:`ChangeKind`); returns org id → last sequence.

    The head row's lock is held until the transaction ends, so each organization's sequence
    is gapless and committed in order (see :class:`~contexts.models.changes.ChangeHead`)."""
    if not changes:
        return {}
    with transaction.atomic():  # the head and its rows together, even in autocommit
        return _append(changes)


def _append(changes: Mapping[int, str]) -> dict[int, int]:
    rows = Fragment.objects.filter(pk__in=list(changes)).values_list("pk", "org_id", "public_id")
    by_org: dict[int, list[tuple[int, str]]] = {}
    for pk, org_id, public_id in rows:
        by_org.setdefault(org_id, []).append((pk, public_id))
    heads: dict[int, int] = {}
    # In org order: two transactions appending for the same organizations lock them in one order.
    for org_id in sorted(by_org):
        group = sorted(by_org[org_id])
        last = _advance_head(org_id, len(group))
        first = last - len(group) + 1
        Change.objects.bulk_create([
            Change(org_id=org_id, seq=first + i, fragment_id=pk, public_id=public_id,
                   kind=ChangeKind(changes[pk]))
            for i, (pk, public_id) in enumerate(group)
        ])
        heads[org_id] = last
    orgs = sorted(heads)
    transaction.on_commit(lambda: changes_committed.send(sender=Change, org_ids=orgs))
    return heads


def _advance_head(org_id: int, count: int) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO contexts_change_head (org_id, seq) VALUES (%s, %s) "
            "ON CONFLICT (org_id) DO UPDATE SET seq = contexts_change_head.seq + EXCLUDED.seq "
            "RETURNING seq",
            [org_id, count],
        )
        return cursor.fetchone()[0]
