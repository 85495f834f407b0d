"""One ingestion run at a time per set of source documents.

A source document is identified by (organization, repository, path) — the
``one_document_per_path`` constraint — and a new fragment by UUID5(scope, path, anchor). Two
runs into the same repository (two jobs on two workers; the first-start demo ingestion and
``manage.py ingest`` of the same tree from another checkout) would both plan a path as new,
both embed it, and the second to commit would fail on those constraints, file after file.

So :meth:`~contexts.ingestion.pipeline.Ingestor.run` holds a session-level advisory lock on
the target's document set for the whole run: the repository, or, for documents outside any
repository (organization, persona and session scopes share them), the organization. The
second run waits *before* it reads anything, then plans against what the first committed: an
identical tree is all hash skips (no chunking, no embedding), a different one is an ordinary
re-ingestion. Like the job lock, PostgreSQL releases it when a dead worker's connection goes.
Why a whole-run lock and not one per file group: the run's near-duplicate index and its
pruning and citation passes read the whole target, so interleaved runs would not add up to
the result of one (docs/operations.md, "Two ingestions into one repository").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.db import DatabaseError, connection

from contexts.services.job_leases import JOB_LOCK_SPACE

logger = logging.getLogger(__name__)
# Advisory-lock namespaces (beside JOB_LOCK_SPACE = 7301): the key's second half is the id.
REPOSITORY_DOCUMENTS_LOCK_SPACE = 7302
ORGANIZATION_DOCUMENTS_LOCK_SPACE = 7303
SOURCE_LOCK_SPACE = 7304  # one sync at a time per git source (its mirror, its commit)
POLL_SECONDS = (0.1, 2.0)  # first and longest pause between attempts while another run holds it
STILL_WAITING_EVERY_SECONDS = 60.0


def lock_key(org_id: int, repository_id: int | None) -> tuple[int, int]:
    """The advisory lock of a document set: ``(namespace, id)``, both int4 as PostgreSQL's
    two-key form wants them (an id past 2³¹ folds onto another's key: it would only ever
    serialise two unrelated runs)."""
    if repository_id is not None:
        return REPOSITORY_DOCUMENTS_LOCK_SPACE, repository_id % 2**31
    return ORGANIZATION_DOCUMENTS_LOCK_SPACE, org_id % 2**31


@contextmanager
def one_run_per_target(org_id: int, repository_id: int | None,
                       on_wait: Callable[[float], None] | None = None) -> Iterator[None]:
    """Hold the document set's lock for the body; wait for it first if another run has it.

    Polls rather than blocking in PostgreSQL: a ``statement_timeout`` an operator sets must not
    fail a job that is merely queued behind another, and the wait is logged with the job that
    holds the lock. ``on_wait(seconds)`` is called once the lock is taken after a wait.
    """
    key = lock_key(org_id, repository_id)
    started = time.monotonic()
    attempts, next_log = 0, started
    while not _try_lock(key):
        attempts += 1
        now = time.monotonic()
        if now >= next_log:
            logger.info("ingestion into %s waits for %s, which is ingesting into it",
                        _describe(org_id, repository_id), _holder(key))
            next_log = now + STILL_WAITING_EVERY_SECONDS
        time.sleep(min(POLL_SECONDS[0] * 2 ** (attempts - 1), POLL_SECONDS[1]))
    if attempts and on_wait is not None:
        on_wait(time.monotonic() - started)
    try:
        yield
    finally:
        _unlock(key)


@contextmanager
def one_sync_per_source(source_id: int, *, wait: bool) -> Iterator[bool]:
    """Hold a git source's lock for the body (``contexts.ingestion.git_sync``): True when held;
    False at once when another sync has it and ``wait`` is off (a second delivery of the same
    task, beat's and a person's at once), else after waiting for it. Its documents' lock is
    taken inside, by the ingestion run."""
    key = SOURCE_LOCK_SPACE, source_id % 2**31
    attempts = 0
    while not _try_lock(key):
        if not wait:
            yield False
            return
        attempts += 1
        time.sleep(min(POLL_SECONDS[0] * 2 ** (attempts - 1), POLL_SECONDS[1]))
    try:
        yield True
    finally:
        _unlock(key)


def is_busy(org_id: int, repository_id: int | None) -> bool:
    """Whether another run holds the document set's lock now (read from ``pg_locks``, without
    taking it). A worker asks before it starts a queued job or sync, and puts it back in its
    queue for a while instead of waiting here with the lane's only process (tasks.py)."""
    key = lock_key(org_id, repository_id)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND classid = %s AND objid = %s AND objsubid = 2"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))",
            list(key))
        return bool(cursor.fetchone()[0])


def _try_lock(key: tuple[int, int]) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", list(key))
        return bool(cursor.fetchone()[0])


def _unlock(key: tuple[int, int]) -> None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s, %s)", list(key))
    except DatabaseError:
        # The connection broke (or its transaction aborted) under the run. A session lock must
        # not outlive the run on a connection a worker keeps for its next task: closing the
        # connection releases it — unless a caller's transaction still needs the connection.
        logger.warning("could not release the ingestion lock %s; closing the connection", key)
        if not connection.in_atomic_block:
            connection.close()


def _holder(key: tuple[int, int]) -> str:
    """Which job holds the lock, for the log: the job lock held by the same backend."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT job.objid FROM pg_locks target JOIN pg_locks job ON job.pid = target.pid"
            " AND job.locktype = 'advisory' AND job.classid = %s AND job.granted"
            " AND job.database = target.database"
            " WHERE target.locktype = 'advisory' AND target.classid = %s"
            " AND target.objid = %s AND target.granted"
            " AND target.database = (SELECT oid FROM pg_database"
            " WHERE datname = current_database()) LIMIT 1",
            [JOB_LOCK_SPACE, *key])
        row = cursor.fetchone()
    return f"job #{row[0]}" if row else "another run"


def _describe(org_id: int, repository_id: int | None) -> str:
    return (f"repository #{repository_id}" if repository_id is not None
            else f"organization #{org_id} (outside repositories)")
