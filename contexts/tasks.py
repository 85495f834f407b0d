"""Celery tasks. Each takes ids, re-reads state, is idempotent and acknowledges late, so a
worker killed mid-task is redelivered and the rerun converges on the same result.

The worker's entry points: each task calls one function of the layers below (ingestion, the
index, governance, the services). The use-case layer (``contexts.usecases``) queues the work a
request asks for once its transaction commits; the ``fragments_changed`` receiver
(``contexts.signals``) queues ``reindex`` after any change commits; beat and the tasks it runs
queue the rest.
"""

from __future__ import annotations

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from accounts.models import Organization, Repository, ScopeKind
from contexts.governance import tasks as governance_tasks  # noqa: F401 - registers them
from contexts.indexes import follower
from contexts.indexes.indexing import embed_changed
from contexts.ingestion import git_sync, lanes, target_lock
from contexts.ingestion.jobs import run_job
from contexts.models import IngestionJob, JobState, Source
from contexts.search import IndexLockBusy
from contexts.services import fragments as fragment_service
from contexts.services import job_leases, traces, uploads, usage

RETRY = {"autoretry_for": (IndexLockBusy,), "retry_backoff": 1, "retry_backoff_max": 30,
         "max_retries": 8}
# A queued job or sync whose repository another run is ingesting (the demo, a long job) goes
# back to its queue for settings.INGEST_BUSY_RETRY_SECONDS instead of waiting in the worker:
# the lane's one process stays free for the next person's upload or sync into another scope.
# Celery reads max_retries=None in retry() as "the task's default" (8 for these), not "no
# limit": a day of deferrals, then the job reaper republishes it (measured: the demo outlasted 8).
BUSY_DEFERRAL_SECONDS = 24 * 3600


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, **RETRY)
def ingest(self, job_id: int, deferred: bool = False) -> dict | None:
    queued = (IngestionJob.objects.filter(pk=job_id, state=JobState.QUEUED)
              .select_related("scope").first())
    repository = None
    if queued is not None:
        repository = (Repository.objects.filter(scope=queued.scope)
                      .values_list("pk", flat=True).first()
                      if queued.scope.kind == ScopeKind.REPO else None)
        if target_lock.is_busy(queued.org_id, repository):
            # Stamped, so the reaper sees a job that is looked after, not a lost message.
            IngestionJob.objects.filter(pk=job_id).update(heartbeat_at=timezone.now())
            raise self.retry(kwargs={"deferred": True}, **_busy_retry())
    target = "repository" if repository is not None else "organization"
    job = run_job(job_id, stood_aside=target if deferred else None)
    if job is not None:
        after_bulk_write(job.org_id, job_changed_fragments(job))
    return None if job is None else {"job": job.public_id, "state": job.state}


def _defer_while_busy(task, org_id: int, repository_id: int | None) -> None:
    """Put the message back in its queue (same lane, same task id) while another run holds
    the target's documents (``contexts.ingestion.target_lock``); it runs once they are free."""
    if target_lock.is_busy(org_id, repository_id):
        raise task.retry(**_busy_retry())


def _busy_retry() -> dict:
    pause = max(settings.INGEST_BUSY_RETRY_SECONDS, 1)
    return {"countdown": pause, "max_retries": BUSY_DEFERRAL_SECONDS // pause}


def job_changed_fragments(job: IngestionJob) -> int:
    """What a finished job wrote (0 for one that did not finish: a run still going elsewhere,
    a failure)."""
    if job.state != JobState.DONE:
        return 0
    return job.fragments_created + job.fragments_updated + job.fragments_retired


def after_bulk_write(org_id: int, changed: int) -> None:
    """A job or a sync that wrote fragments ends: the organization's authority (PageRank over
    its citation links) is queued at once, in the bulk lane, rather than left to the nightly
    pass — a fresh install's personas would rank alike until then (issue 40, item 7). Once per
    job end; recomputing is idempotent, so a redelivered job costs one more pass at most."""
    if changed:
        governance_tasks.compute_authority.delay(org_id)


def publish_ingest(job_id: int, queue: str) -> None:
    """Queue a job's run in its lane (``contexts.ingestion.lanes``)."""
    ingest.apply_async((job_id,), queue=queue)


def _publish_ingest(job_id: int) -> None:
    """The reaper's re-queue: in the lane the job was first queued in."""
    job = IngestionJob.objects.filter(pk=job_id).only("source_kind", "source").first()
    queue = lanes.BULK if job is None else lanes.for_job(job.source_kind, job.source)
    publish_ingest(job_id, queue)


@shared_task(ignore_result=True)
def reap_stale_jobs() -> dict[str, list[str]]:
    """Re-queue or fail jobs whose worker died (beat: ``jobs-reap-stale``; see
    ``contexts.services.job_leases``)."""
    return job_leases.reap_stale_jobs(publish=_publish_ingest)


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, **RETRY)
def sync_source(self, source_id: int, full: bool = False) -> dict | None:
    """Sync one git source (``contexts.ingestion.git_sync``): queued by beat when it is due
    and by a person's "sync now", with a UUID5 id per source and due time. A second delivery
    while the first runs returns at once (the source's lock); one whose worker was killed
    re-applies the same diff."""
    target = Source.objects.filter(pk=source_id).values_list("org_id", "repository_id").first()
    if target is not None:
        _defer_while_busy(self, *target)
    result = git_sync.run_sync(source_id, full=full)
    if result is not None and not result.error:
        org_id = Source.objects.filter(pk=source_id).values_list("org_id", flat=True).first()
        if org_id is not None:
            after_bulk_write(org_id, result.fragments_changed)
    return None if result is None else result.summary()


def publish_sync(source_id: int, task_id: str, full: bool = False, *,
                 queue: str = lanes.BULK) -> None:
    """Queue a sync: in the bulk lane when beat queues it, the interactive one for a person
    (``contexts.usecases.sources``)."""
    sync_source.apply_async((source_id, full), task_id=task_id, queue=queue)


@shared_task(ignore_result=True)
def enqueue_due_sources() -> int:
    """Queue a sync of every git source whose next sync is due (beat: ``sources-sync-due``)."""
    claimed = git_sync.claim_due()
    for source_id, task_id in claimed:
        publish_sync(source_id, task_id)
    return len(claimed)


@shared_task(acks_late=True, **RETRY)
def reindex(fragment_ids: list[int]) -> int:
    """After a change through the one door: the vectors (the text follows the change feed)."""
    return embed_changed(fragment_ids)


@shared_task(acks_late=True, **RETRY)
def rebuild_index(org_id: int) -> int:
    org = Organization.objects.filter(pk=org_id).first()
    return 0 if org is None else follower.rebuild(org.pk)


@shared_task(ignore_result=True)
def flush_use_counters() -> int:
    """Fold the retrievals counted in Redis into the fragments (``contexts.services.usage``)."""
    return usage.flush()


@shared_task(ignore_result=True)
def purge_old_traces() -> int:
    """Delete retrieval traces past ``TRACE_RETENTION_DAYS`` (``contexts.services.traces``)."""
    return traces.purge()


@shared_task(ignore_result=True)
def purge_uploads() -> int:
    """Delete uploads no job will read (``contexts.services.uploads``)."""
    return uploads.purge()


@shared_task(ignore_result=True)
def prune_change_feed() -> int:
    """Delete change-feed rows every node's follower has passed (``contexts.indexes.follower``)."""
    return follower.prune()


@shared_task(ignore_result=True)
def record_feedback(fragment_id: int, signal: str) -> None:
    fragment_service.count_feedback(fragment_id, signal)
