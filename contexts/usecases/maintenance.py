"""The operator's maintenance runs from the command line: authority (PageRank over citation
links), the staleness scan, near-duplicate proposals, a node's lexical indexes rebuilt from
PostgreSQL, and the database's backup and restore."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from pathlib import Path

from accounts.models import Organization
from contexts.governance import authority, dedup_review, staleness
from contexts.indexes import follower
from contexts.stack import backup
from contexts.stack.backup import BackupError

__all__ = ["BackupError", "back_up", "catch_up_indexes", "compute_authority",
           "propose_duplicates", "rebuild_index", "restore_backup", "scan_staleness"]


def compute_authority(org: Organization) -> dict[int, float]:
    return authority.compute_authority(org)


def scan_staleness(now: dt.datetime | None, orgs: Iterable[Organization] | None, *,
                   nudge: bool = True) -> list[staleness.ScanReport]:
    return staleness.scan(now, orgs, nudge=nudge)


def propose_duplicates(org: Organization, now: dt.datetime | None = None) -> dict[str, int]:
    return dedup_review.propose_duplicates(org, now)


def rebuild_index(org: Organization) -> int:
    """This node's lexical index of ``org`` recreated from PostgreSQL; the fragments indexed."""
    return follower.rebuild(org.pk)


def catch_up_indexes() -> list[int]:
    """Every organization's index on this node caught up, rebuilding those missing, unreadable
    or of an outdated schema; the organizations rebuilt."""
    return follower.catch_up_all()


def back_up(file: Path) -> Path:
    """A ``pg_dump`` of the database to ``file`` (:class:`BackupError` names what failed)."""
    return backup.backup(file)


def restore_backup(file: Path) -> dict[str, int]:
    """``file`` restored into the empty database, then every organization's index rebuilt from
    it (the index is derived data): organization slug → fragments indexed."""
    backup.restore(file)
    return {org.slug: rebuild_index(org) for org in Organization.objects.order_by("slug")}
