"""Running an ingestion job on a worker: the ``ingest`` Celery task is a thin wrapper around
:func:`run_job`. Submitting one (checks, the job row, its uploads, queueing it) is the use case
``contexts.usecases.ingestion``."""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from pathlib import Path

from django.conf import settings
from django.db import DatabaseError, connection
from django.utils import timezone

from accounts.models import Repository
from contexts.ingestion import owners, server_paths
from contexts.ingestion.archives import looks_like_zip
from contexts.ingestion.doc_exports import from_uploads_with_archives
from contexts.ingestion.git_tree import GitListingFailed
from contexts.ingestion.pipeline import Ingestor, Stats, Target
from contexts.ingestion.policy import PolicyError
from contexts.ingestion.sources import Skipped, SourceFile, walk
from contexts.models import Fragment, IngestionJob, JobState
from contexts.models.jobs import FRAGMENT_IDS_KEPT
from contexts.services import db_retry, job_leases, uploads
from contexts.services.job_leases import JOB_LOCK_SPACE

logger = logging.getLogger(__name__)
PROGRESS_EVERY_SECONDS = 0.5
# How often a running job says how far it got in the worker's log: a first ingest of a large
# repository takes minutes, and the log is where an operator watching `make run` looks.
LOG_EVERY_SECONDS = 30.0


def _target(job: IngestionJob) -> Target:
    scope = job.scope
    repository = None
    if scope.kind == "repo":
        repository = Repository.objects.get(scope=scope)
    return Target(org=job.org, scope=scope, repository=repository, context=job.context,
                  default_owner=job.owner or job.created_by, job=job, origin=origin(job),
                  owners=_owners(job, scope, repository))


def _owners(job: IngestionJob, scope, repository: Repository | None) -> owners.OwnerChain:
    """Who owns the job's files (contexts/ingestion/owners.py): a folder's CODEOWNERS and git
    history (of its work tree), then front matter and the scope's tech lead — for an upload,
    front matter and the tech lead."""
    fallback = job.owner or job.created_by
    root = Path(job.source)
    if job.source_kind == "upload" or not root.is_dir():
        return owners.OwnerChain(job.org, scope, repository, fallback=fallback)
    return owners.OwnerChain(job.org, scope, repository,
                             codeowners=owners.worktree_codeowners(root),
                             history=owners.worktree_history(root), fallback=fallback)


def origin(job: IngestionJob) -> str:
    """The source a path job reads — its root, resolved (``path:<root>``), so that two jobs of
    the same folder are one source. An upload job's files each name theirs (``_files``)."""
    if job.source_kind == "upload":
        return ""
    return f"path:{Path(job.source).resolve()}"


def run_job(job_id: int, *, stood_aside: str | None = None) -> IngestionJob | None:
    """Run (or, after a crash, re-run) a job to completion. Safe to call twice.

    ``stood_aside``: the job went back to its queue while another run held its target (its
    ``"repository"`` or ``"organization"``); the finished job says how long, in the write that
    finishes it, so nobody reads it done without the note.

    A session-level advisory lock makes one run at a time: a redelivered message for a job
    that is still running elsewhere returns at once; if that worker dies, its connection —
    and the lock — go with it, and the redelivery takes over.

    A transient database error (PostgreSQL restarted, the connection lost: ``db_retry``)
    does not fail the job: the broken connection is closed, the database waited for with a
    growing pause, and the job runs again from the start under a new lock — the files it
    already ingested cost a hash comparison each (ADR 0004), so it resumes where it stopped.
    The waiting is bounded by ``JOB_DATABASE_RETRY_SECONDS``; past it the job fails, saying
    so. Any other error fails the job as permanent.
    """
    backoff = db_retry.Backoff(settings.JOB_DATABASE_RETRY_SECONDS)
    while True:
        try:
            job = _run_job_once(job_id, resumed=bool(backoff.errors), stood_aside=stood_aside)
        except Exception as exc:
            if not db_retry.is_transient(exc):
                raise
            backoff.errors.append(db_retry.describe(exc))
            logger.warning("ingestion job %s: transient database error (%s); retrying",
                           job_id, backoff.errors[-1])
            if db_retry.wait_for_database(backoff):
                continue
            _gave_up(job_id, backoff)
            raise
        if backoff.errors and job is not None and job.state == JobState.DONE:
            _note_resumed(job, backoff)
        return job


def _run_job_once(job_id: int, *, resumed: bool, stood_aside: str | None = None
                  ) -> IngestionJob | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [JOB_LOCK_SPACE, job_id])
        if not cursor.fetchone()[0]:
            logger.info("job %s is running elsewhere; not starting it twice", job_id)
            return IngestionJob.objects.filter(pk=job_id).first()
    try:
        if job_leases.give_up_if_exhausted(job_id):  # its worker died JOB_MAX_ATTEMPTS times
            return IngestionJob.objects.filter(pk=job_id).first()
        # The lease: job_leases.reap_stale_jobs re-queues a RUNNING job whose heartbeat stops.
        with job_leases.heartbeat(job_id):
            return _run_job_locked(job_id, resumed=resumed, stood_aside=stood_aside)
    finally:
        _unlock_job(job_id)


def _unlock_job(job_id: int) -> None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [JOB_LOCK_SPACE, job_id])
    except DatabaseError:
        # The connection died under the run, and the lock with it: nothing to release, and
        # the run's own error (not this one) is what the caller must see.
        db_retry.drop_connection()


def _note_resumed(job: IngestionJob, backoff: db_retry.Backoff) -> None:
    """Say on the job that it met transient database errors and resumed: a warning, since
    every file was ingested."""
    note = {"path": "", "kind": "transient", "reason": (
        f"retried {len(backoff.errors)} time(s) after transient database errors "
        f"({backoff.errors[-1]}), waiting {backoff.waited:.1f} s in all; resumed where it "
        "stopped — files ingested before the interruption count as unchanged")}
    IngestionJob.objects.filter(pk=job.pk).update(warnings=[*job.warnings, note])
    job.warnings = [*job.warnings, note]


def _gave_up(job_id: int, backoff: db_retry.Backoff) -> None:
    """The database stayed away longer than the retry budget: fail the job saying so, if the
    database takes the write; if not, the lease reaper finds the job once it is back."""
    reason = (f"transient: the database stayed unavailable; gave up after {len(backoff.errors)}"
              f" interruption(s) and {backoff.waited:.0f} s of retries "
              f"(JOB_DATABASE_RETRY_SECONDS): {backoff.errors[-1]}. Run the job again once "
              "PostgreSQL is back — files already ingested are skipped")
    logger.error("ingestion job %s failed: %s", job_id, reason)
    try:
        job = IngestionJob.objects.filter(pk=job_id).first()
        if job is not None and job.state in (JobState.QUEUED, JobState.RUNNING):
            IngestionJob.objects.filter(pk=job_id).update(
                state=JobState.FAILED, finished_at=timezone.now(),
                errors=[*job.errors, {"path": "", "kind": "transient", "reason": reason}])
    except DatabaseError as exc:
        logger.error("ingestion job %s: could not record the failure: %s", job_id, exc)
        db_retry.drop_connection()


def _waited_note(job: IngestionJob, target: str) -> dict:
    """How long a job stood aside for another run into its ``target`` (queued to started), as
    a run that waited for the lock itself says it (``pipeline.Ingestor._waited``)."""
    seconds = (job.started_at - job.created_at).total_seconds()
    return {"path": "", "reason": f"waited {seconds:.1f} s for another ingestion into the same "
                                  f"{target} to finish (back in its queue meanwhile)"}


def _run_job_locked(job_id: int, *, resumed: bool = False, stood_aside: str | None = None
                    ) -> IngestionJob | None:
    claimed = IngestionJob.objects.filter(
        pk=job_id, state__in=[JobState.QUEUED, JobState.RUNNING]
    ).update(state=JobState.RUNNING, started_at=timezone.now())
    job = IngestionJob.objects.filter(pk=job_id).first()
    if job is None or not claimed:
        return job  # gone, or already finished by an earlier delivery
    if not resumed:  # resuming after a database outage is the same attempt, not a new one
        IngestionJob.objects.filter(pk=job_id).update(attempts=job.attempts + 1)
    last_update = last_log = time.monotonic()

    def progress(stats: Stats, force: bool = False) -> None:
        nonlocal last_update, last_log
        now = time.monotonic()
        if force or now - last_update >= PROGRESS_EVERY_SECONDS:
            last_update = now
            IngestionJob.objects.filter(pk=job_id).update(**_counters(stats))
        if now - last_log >= LOG_EVERY_SECONDS:
            last_log = now
            logger.info("ingestion job %s: %d files done, %d fragments created, %d updated",
                        job.public_id, stats.files_done, stats.created, stats.updated)

    try:
        _check_source(job)
        files = _files(job)
        IngestionJob.objects.filter(pk=job_id).update(
            files_total=sum(1 for f in files if not hasattr(f, "reason")))
        # A folder's walk, or an upload's files and archives, is the whole of what each of
        # those sources holds now: its documents it no longer yields are retired (its own
        # only, pipeline._prune). A single file named by path is not a folder's walk.
        ingestor = Ingestor(_target(job), batch_chunks=settings.INGEST_EMBED_BATCH_CHUNKS,
                            on_progress=progress,
                            prune_missing=(job.source_kind == "upload"
                                           or Path(job.source).is_dir()))
        stats = ingestor.run(files)
    except (PolicyError, GitListingFailed) as exc:
        # The source's own rules are wrong (a bad .contexts.toml, a work tree git cannot list):
        # the job says which file and line, nothing crashed, and no file was read.
        IngestionJob.objects.filter(pk=job_id).update(
            state=JobState.FAILED, finished_at=timezone.now(), errors=[*job.errors, {
                "path": getattr(exc, "path", ""),
                "reason": str(getattr(exc, "reason", exc)).replace(job.source, "<source>")}])
        _finished(job)
        job.refresh_from_db()
        return job
    except Exception as exc:
        if db_retry.is_transient(exc):
            raise  # not a failure of the job: run_job waits for the database and resumes
        logger.exception("ingestion job %s failed", job.public_id)
        # The job's server path is for superusers' eyes; the reason must not carry it either.
        reason = f"permanent: {type(exc).__name__}: {exc}".replace(job.source, "<source>")
        IngestionJob.objects.filter(pk=job_id).update(
            state=JobState.FAILED, finished_at=timezone.now(),
            errors=[*job.errors, {"path": "", "kind": "permanent", "reason": reason}])
        _finished(job)
        raise
    if stood_aside:
        stats.warnings.append(_waited_note(job, stood_aside))
    IngestionJob.objects.filter(pk=job_id).update(
        state=JobState.DONE, finished_at=timezone.now(), fragment_ids=_fragment_ids(stats),
        **_counters(stats))
    _finished(job)
    job.refresh_from_db()
    job.stats = stats  # for callers that report chunk statistics
    return job


class UploadsMissing(Exception):
    """An upload job whose files are not in the uploads storage (any more)."""


def _files(job: IngestionJob) -> list[SourceFile | Skipped]:
    """What the job ingests. An upload job's files come from the uploads storage by key, so
    any worker runs it, whichever node took the upload; a path job walks this node's disk."""
    limit = settings.INGEST_MAX_FILE_BYTES
    if job.source_kind != "upload":
        return list(walk(Path(job.source), max_bytes=limit,
                         include_untracked=job.include_untracked))
    # An uploaded zip (a documentation export) is expanded into its pages here. Each file and
    # archive is a source of its own (``upload:<name>``, ``archive:<name>``): uploading the
    # same name again replaces what it brought, a different one never retires another's.
    files = [replace(item, origin=f"{'archive' if looks_like_zip(name) else 'upload'}:{name}")
             if isinstance(item, SourceFile) else item
             for name, raw in uploads.read(job)
             for item in from_uploads_with_archives([(name, raw)], max_bytes=limit)]
    if not files:
        raise UploadsMissing(
            "the job's uploaded files are gone (uploads of a job not finished within "
            f"{settings.UPLOAD_RETENTION_HOURS} h are deleted); upload them again")
    return files


def _finished(job: IngestionJob) -> None:
    """A finished job never runs again: its uploads have served (``contexts.services.uploads``
    says when else they go)."""
    if job.source_kind == "upload":
        uploads.discard(job)


def _check_source(job: IngestionJob) -> None:
    """Again at run time, whatever wrote the row: an upload reads its own uploads only, a path
    never the instance's own data."""
    if job.source_kind == "upload":
        if job.source != uploads.prefix(job):
            raise server_paths.PathRefused(
                "an upload job reads only its own uploads" + (
                    " (this one was uploaded to a node's disk before uploads moved to the "
                    "uploads storage: upload the files again)"
                    if job.source.startswith("/") else ""))
    elif server_paths.is_protected(Path(job.source)):
        raise server_paths.PathRefused(server_paths.PROTECTED)


def _fragment_ids(stats: Stats) -> dict[str, list[str]]:
    """The public ids of what the job created and updated, each once, in the order written
    (at most ``FRAGMENT_IDS_KEPT`` of each; a bulk ingest's counters say how many in all)."""
    wanted = {kind: list(dict.fromkeys(pk for pk in pks if pk is not None))[:FRAGMENT_IDS_KEPT]
              for kind, pks in (("created", stats.created_ids), ("updated", stats.updated_ids))}
    public = dict(Fragment.objects.filter(pk__in=[pk for pks in wanted.values() for pk in pks])
                  .values_list("pk", "public_id"))
    return {kind: [public[pk] for pk in pks if pk in public] for kind, pks in wanted.items()}


def _counters(stats: Stats) -> dict:
    return {
        "files_done": stats.files_done,
        "fragments_created": stats.created,
        "fragments_updated": stats.updated,
        "fragments_unchanged": stats.unchanged,
        "fragments_retired": stats.retired,
        "duplicates_collapsed": stats.duplicates,
        "errors": stats.errors,
        "skipped": stats.skipped,
        "warnings": stats.warnings,
    }
