"""An upload job's files in the ``uploads`` storage (``STORAGES["uploads"]``; PostgreSQL unless
configured otherwise): where they are put, read back and deleted. Jobs carry a key prefix,
never a path on some node's disk (issue 21).

Keys: ``<org id>/<job public id>/<file name>``; the job's ``source`` is the prefix
``<org id>/<job public id>/``.

Lifetime: the worker deletes a job's uploads as soon as the job finishes, done or failed — a
finished job is never run again (``run_job`` claims only queued or running jobs), and the
fragments hold what was ingested. A worker that dies mid-job leaves them for the redelivery.
The hourly sweep (:func:`purge`) deletes what is left: uploads of finished jobs (a worker that
died between finishing and deleting), of jobs that no longer exist, and of jobs not finished
``UPLOAD_RETENTION_HOURS`` after they were created.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta
from pathlib import Path, PurePosixPath
from typing import Any

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import Storage, storages
from django.utils import timezone

from contexts.models import IngestionJob, JobState

logger = logging.getLogger(__name__)
STORAGE_ALIAS = "uploads"
FINISHED = (JobState.DONE, JobState.FAILED)
# A blob whose job row is not visible yet may belong to a transaction still in flight (with a
# backend outside the database, the files are written before the job commits): spare it a while.
ORPHAN_GRACE = timedelta(hours=1)


def storage() -> Storage:
    return storages[STORAGE_ALIAS]


def prefix(job: IngestionJob) -> str:
    """The key prefix of a job's uploads, and the job's ``source``."""
    return f"{job.org_id}/{job.public_id}/"


def file_name(name: str) -> str:
    """The last segment of an uploaded file's name, whichever separator the client used."""
    return PurePosixPath(name.replace("\\", "/")).name


def store(job: IngestionJob, files: Iterable[Any]) -> str:
    """Write uploaded files (each with a ``name`` and ``chunks()``) under the job's prefix;
    returns the prefix. The caller has checked the names, sizes and count."""
    where = storage()
    for upload in files:
        where.save(prefix(job) + file_name(upload.name), upload)
    return prefix(job)


def read(job: IngestionJob) -> Iterator[tuple[str, bytes]]:
    """(file name, content) of each of the job's uploads, in name order."""
    where = storage()
    for name in sorted(where.listdir(prefix(job))[1]):
        with where.open(prefix(job) + name, "rb") as blob:
            yield name, blob.read()


def discard(job: IngestionJob) -> int:
    """Delete the job's uploads; how many there were. Never raises: the sweep retries."""
    try:
        return _delete_under(prefix(job))
    except Exception:
        logger.exception("job %s: uploads not deleted (the hourly sweep will)", job.public_id)
        return 0


def purge() -> int:
    """The sweep (Celery beat, hourly): delete uploads no job will read; how many files."""
    where = storage()
    now = timezone.now()
    deleted = 0
    for org in where.listdir("")[0]:
        for public_id in where.listdir(org)[0]:
            folder = f"{org}/{public_id}/"
            job = IngestionJob.objects.filter(public_id=public_id).only(
                "state", "created_at", "org_id").first()
            if job is None:
                stale = _older_than(where, folder, now - ORPHAN_GRACE)
            else:
                stale = (job.state in FINISHED or str(job.org_id) != org or job.created_at <
                         now - timedelta(hours=settings.UPLOAD_RETENTION_HOURS))
            if stale:
                deleted += _delete_under(folder)
    return deleted


def adopt_legacy_folder(org_id: int, public_id: str, source: str) -> str | None:
    """Before issue 21 an upload job's files were kept in ``MEDIA_ROOT/uploads/<job>/`` on the
    node that took them. Copy them from there — when this node has them — into the uploads
    storage; returns the job's new source (its key prefix), else None. Called once, by
    migration 0023, for the upload jobs not yet finished; only the folder the old code would
    have written is read, whatever the row says."""
    folder = Path(settings.MEDIA_ROOT) / "uploads" / public_id
    if Path(source) != folder or not folder.is_dir():
        return None
    where = storage()
    base = f"{org_id}/{public_id}/"
    for file in sorted(folder.iterdir()):
        if (file.is_symlink() or not file.is_file()
                or file.stat().st_size > settings.INGEST_MAX_FILE_BYTES):
            continue  # the old code wrote neither links nor oversized files
        where.save(base + file.name, ContentFile(file.read_bytes()))
    return base


def _delete_under(folder: str) -> int:
    where = storage()
    names = where.listdir(folder)[1]
    for name in names:
        where.delete(folder + name)
    return len(names)


def _older_than(where: Storage, folder: str, cutoff: datetime) -> bool:
    try:
        return all(where.get_modified_time(folder + name) < cutoff
                   for name in where.listdir(folder)[1])
    except NotImplementedError:  # a backend that keeps no times: the retention period decides
        return False
