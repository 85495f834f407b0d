"""Celery tasks. Each takes ids, re-reads state, is idempotent and acknowledges late, so a
worker killed mid-task is redelivered and the rerun converges on the same result."""

from __future__ import annotations

from celery import shared_task

from contexts.search import IndexLockBusy

RETRY = {"autoretry_for": (IndexLockBusy,), "retry_backoff": 1, "retry_backoff_max": 30,
         "max_retries": 8}


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, **RETRY)
def ingest(self, job_id: int) -> dict | None:
    from contexts.services.jobs import run_job

    job = run_job(job_id)
    return None if job is None else {"job": job.public_id, "state": job.state}


@shared_task(ignore_result=True)
def reap_stale_jobs() -> dict[str, list[str]]:
    """Re-queue or fail jobs whose worker died (beat: ``jobs-reap-stale``; see
    ``contexts.services.job_leases``)."""
    from contexts.services.job_leases import reap_stale_jobs as reap

    return reap()


@shared_task(acks_late=True, **RETRY)
def reindex(fragment_ids: list[int]) -> int:
    from contexts.indexing import reindex_fragments

    reindex_fragments(fragment_ids)
    return len(fragment_ids)


@shared_task(acks_late=True, **RETRY)
def rebuild_index(org_id: int) -> int:
    from accounts.models import Organization
    from contexts.indexing import rebuild_lexical_index

    org = Organization.objects.filter(pk=org_id).first()
    return 0 if org is None else rebuild_lexical_index(org)


@shared_task(ignore_result=True)
def flush_use_counters() -> int:
    """Fold the retrievals counted in Redis into the fragments (``contexts.usage``)."""
    from contexts import usage

    return usage.flush()


@shared_task(ignore_result=True)
def purge_old_traces() -> int:
    """Delete retrieval traces past ``TRACE_RETENTION_DAYS`` (``contexts.services.traces``)."""
    from contexts.services import traces

    return traces.purge()


@shared_task(ignore_result=True)
def record_feedback(fragment_id: int, signal: str) -> None:
    from django.db.models import F

    from contexts.models import Fragment

    field = {"helped": "helped_count", "hurt": "hurt_count", "cited": "cited_count"}[signal]
    Fragment.objects.filter(pk=fragment_id).update(**{field: F(field) + 1})


from contexts.governance import tasks as governance_tasks  # noqa: E402,F401 - registers them
