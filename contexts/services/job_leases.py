"""Leases on ingestion jobs: a job whose worker or message is gone is found and re-queued, or
failed with a reason — never left "running" (or "queued") forever.

Two signals say a job's worker is alive: the session advisory lock :func:`run_job` holds
while it runs (PostgreSQL drops it when the worker's connection closes, i.e. when the process
dies), and ``heartbeat_at``, which a thread in the worker renews every
``JOB_HEARTBEAT_SECONDS``. :func:`reap_stale_jobs` (Celery beat, every 30 s) re-queues a
RUNNING job only when both are gone: the heartbeat is older than ``JOB_LEASE_SECONDS`` *and*
it can take the lock itself — so a worker that is slow but alive is never doubled. A QUEUED job
older than ``JOB_QUEUED_LEASE_SECONDS`` is published again only when the broker holds no
message for it (Redis lost it, or publishing failed). Re-running is safe: ingestion is
idempotent (ADR 0004) and ``run_job`` runs a job once at a time.

A job started ``JOB_MAX_ATTEMPTS`` times (each crash of its worker counts one) is marked failed
instead of re-queued: a file that kills the worker every time must not loop forever.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, connection, connections
from django.db.models import Q
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from contexts.celery import app
from contexts.models import IngestionJob, JobState

logger = logging.getLogger(__name__)
INGEST_TASK = "contexts.tasks.ingest"
JOB_LOCK_SPACE = 7301  # advisory-lock namespace for ingestion jobs (held by run_job)


@contextmanager
def heartbeat(job_id: int, every: float | None = None) -> Iterator[None]:
    """Renew the job's heartbeat from a thread while the body runs.

    A thread, not the progress callback: walking a large tree or embedding one large file can
    take longer than the lease without any progress to report, and the lease is about the
    process being alive, not about speed.
    """
    interval = settings.JOB_HEARTBEAT_SECONDS if every is None else every
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(interval):
                try:
                    IngestionJob.objects.filter(pk=job_id, state=JobState.RUNNING).update(
                        heartbeat_at=timezone.now())
                except DatabaseError as exc:  # the database is down: the lock says the rest
                    logger.warning("job %s: heartbeat not written: %s", job_id, exc)
        finally:
            connections.close_all()  # this thread's own connection

    thread = threading.Thread(target=beat, name=f"job-{job_id}-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=interval + 10)


def give_up_if_exhausted(job_id: int) -> bool:
    """Mark the job failed if it was already started ``JOB_MAX_ATTEMPTS`` times; True if so.

    Called by ``run_job`` under the job's lock, before it starts another attempt: a
    redelivered message must not restart a job whose worker keeps dying."""
    job = IngestionJob.objects.filter(
        pk=job_id, state__in=[JobState.QUEUED, JobState.RUNNING]).first()
    if job is None or job.attempts < settings.JOB_MAX_ATTEMPTS:
        return False
    _fail(job)
    return True


def reap_stale_jobs(publish: Callable[[int], None]) -> dict[str, list[str]]:
    """Re-queue or fail jobs whose worker or message is gone; returns their public ids.
    ``publish(job_id)`` sends a job's ingest message again (``contexts.tasks`` passes its
    ``ingest`` task's: the lease sits below the tasks and does not import them)."""
    now = timezone.now()
    report: dict[str, list[str]] = {"requeued": [], "failed": [], "republished": []}
    # GREATEST skips NULLs in PostgreSQL: the later of the last beat and this attempt's start.
    running = IngestionJob.objects.annotate(beat=Greatest("heartbeat_at", "started_at")).filter(
        Q(beat__lt=now - timedelta(seconds=settings.JOB_LEASE_SECONDS)) | Q(beat__isnull=True),
        state=JobState.RUNNING)
    for job_id in running.values_list("pk", flat=True):
        outcome = _reap_running(job_id, publish)
        if outcome:
            report[outcome[0]].append(outcome[1])
    queued = IngestionJob.objects.annotate(since=Coalesce("heartbeat_at", "created_at")).filter(
        since__lt=now - timedelta(seconds=settings.JOB_QUEUED_LEASE_SECONDS),
        state=JobState.QUEUED)
    queued_ids = list(queued.values_list("pk", flat=True))
    if queued_ids:
        try:
            pending = pending_job_ids()
        except Exception as exc:  # broker down: nothing can be published anyway
            logger.warning("job reaper: cannot read the broker's queue: %s", exc)
            pending = set(queued_ids)
        for job_id in sorted(set(queued_ids) - pending):
            IngestionJob.objects.filter(pk=job_id, state=JobState.QUEUED).update(
                heartbeat_at=timezone.now())
            publish(job_id)
            report["republished"].append(_public_id(job_id))
            logger.warning("job %s was queued with no message in the broker; published again",
                           _public_id(job_id))
    return report


def _reap_running(job_id: int, publish: Callable[[int], None]) -> tuple[str, str] | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [JOB_LOCK_SPACE, job_id])
        if not cursor.fetchone()[0]:
            return None  # a live worker holds it: slow, not dead
    try:
        # Re-read under the lock: the worker may have finished between the query and now.
        job = IngestionJob.objects.filter(pk=job_id, state=JobState.RUNNING).first()
        if job is None:
            return None
        if job.attempts >= settings.JOB_MAX_ATTEMPTS:
            _fail(job)
            return "failed", job.public_id
        IngestionJob.objects.filter(pk=job_id).update(state=JobState.QUEUED,
                                                      heartbeat_at=timezone.now())
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [JOB_LOCK_SPACE, job_id])
    # Published after the unlock: a worker taking the message while we still held the lock
    # would think the job runs elsewhere and drop it.
    publish(job_id)
    logger.warning("job %s lost its worker (last heartbeat %s, attempt %s); re-queued",
                   job.public_id, job.heartbeat_at or job.started_at, job.attempts)
    return "requeued", job.public_id


def _fail(job: IngestionJob) -> None:
    reason = (f"the worker running this job stopped {job.attempts} times before it finished "
              "(killed, out of memory, or its machine lost); not retried again — see 'A worker "
              "died' in docs/operations.md")
    logger.error("job %s failed: %s", job.public_id, reason)
    IngestionJob.objects.filter(pk=job.pk).update(
        state=JobState.FAILED, finished_at=timezone.now(),
        errors=[*job.errors, {"path": "", "reason": reason}])


def _public_id(job_id: int) -> str:
    return IngestionJob.objects.filter(pk=job_id).values_list("public_id", flat=True).first() or ""


def pending_job_ids() -> set[int]:
    """Job ids with an ingest message in the broker: waiting in the queue, or delivered to a
    worker and not yet acknowledged (Redis transport: the queue lists and the ``unacked``
    hash, whose entries come back to the queue after the visibility timeout)."""
    with app.connection_for_read() as conn:
        channel = conn.default_channel
        client = channel.client
        messages = []
        for queue in _queue_names():  # every lane (contexts/ingestion/lanes.py)
            for priority in channel.priority_steps:
                queued = client.lrange(channel._q_for_pri(queue, priority), 0, -1)
                messages.extend(_loads(entry) for entry in queued)
        for entry in client.hvals(channel.unacked_key):  # [message, exchange, routing key]
            loaded = _loads(entry)
            messages.append(loaded[0] if isinstance(loaded, list) and loaded else None)
    ids = set()
    for message in messages:
        try:
            if message["headers"]["task"] != INGEST_TASK:
                continue
            body = message["body"]
            if message["properties"].get("body_encoding") == "base64":
                body = base64.b64decode(body)
            ids.add(int(json.loads(body)[0][0]))
        except (ValueError, KeyError, IndexError, TypeError):
            continue  # not a message we wrote
    return ids


def _queue_names() -> list[str]:
    """The queues a job's message may wait in: the configured lanes and the default one."""
    names = [queue.name for queue in (app.conf.task_queues or ())]
    default = app.conf.task_default_queue
    return names if default in names else [*names, default]


def _loads(entry: bytes) -> object:
    try:
        return json.loads(entry)
    except ValueError:
        return None
