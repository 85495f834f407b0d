"""The operator's maintenance runs from the command line: authority (PageRank over citation
links), the staleness scan and near-duplicate proposals."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from accounts.models import Organization
from contexts.governance import authority, dedup_review, staleness


def compute_authority(org: Organization) -> dict[int, float]:
    return authority.compute_authority(org)


def scan_staleness(now: dt.datetime | None, orgs: Iterable[Organization] | None, *,
                   nudge: bool = True) -> list[staleness.ScanReport]:
    return staleness.scan(now, orgs, nudge=nudge)


def propose_duplicates(org: Organization, now: dt.datetime | None = None) -> dict[str, int]:
    return dedup_review.propose_duplicates(org, now)

