"""Governance jobs for Celery (and beat: see ``CELERY_BEAT_SCHEDULE`` in settings).

Like every task here they take ids, re-read state and are idempotent: a rerun of a scan opens no
second nudge, a rerun of a re-embed skips what is embedded, a rerun of PageRank writes the same
numbers. ``now`` may be passed as an ISO timestamp (replays, tests); otherwise the real time.
"""

from __future__ import annotations

import datetime as dt

from celery import shared_task
from django.db.models import QuerySet

from accounts.models import Organization
from contexts.governance.authority import compute_authority as compute
from contexts.governance.dedup_review import propose_duplicates as propose
from contexts.governance.identity import recheck_due
from contexts.governance.reembed import build, drop_expired_shadows, resume_building
from contexts.governance.staleness import scan
from contexts.sso import oidc


def _now(now: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(now) if now else None


def _orgs(org_id: int | None) -> QuerySet:
    orgs = Organization.objects.order_by("pk")
    return orgs.filter(pk=org_id) if org_id is not None else orgs


@shared_task(acks_late=True, reject_on_worker_lost=True)
def scan_staleness(org_id: int | None = None, now: str | None = None) -> dict:
    reports = scan(_now(now), _orgs(org_id))
    return {r.org.slug: {"stale": len(r.stale), "opened": r.nudges_opened,
                         "escalated": r.nudges_escalated} for r in reports}


@shared_task(acks_late=True, reject_on_worker_lost=True)
def propose_duplicates(org_id: int | None = None, now: str | None = None) -> dict:
    return {org.slug: propose(org, _now(now)) for org in _orgs(org_id)}


@shared_task(acks_late=True, reject_on_worker_lost=True)
def compute_authority(org_id: int | None = None) -> dict:
    return {org.slug: len(compute(org)) for org in _orgs(org_id)}


@shared_task(acks_late=True, reject_on_worker_lost=True)
def reembed_generation(generation_id: int, now: str | None = None) -> dict:
    result = build(generation_id, now=_now(now))
    return {"generation": generation_id, "state": result.generation.state,
            "total": result.total, "missing": result.missing,
            "embedded": result.embedded_now}


@shared_task(acks_late=True, reject_on_worker_lost=True)
def drop_shadow_generations(now: str | None = None) -> list[int]:
    """Daily generation housekeeping: drop shadows past their window, and re-queue any
    generation still building (its task may have been lost with a worker)."""
    for generation_id in resume_building():
        reembed_generation.delay(generation_id)
    return drop_expired_shadows(_now(now))


@shared_task(acks_late=True, reject_on_worker_lost=True)
def recheck_identities(now: str | None = None) -> dict:
    """Single sign-on: ask the provider about the people due (``OIDC_RECHECK_SECONDS``)."""
    if not oidc.enabled():
        return {"checked": 0, "deprovisioned": 0, "unavailable": 0}
    return recheck_due(_now(now))
