"""Which Celery queue — which lane — a piece of work runs in.

Two lanes, each with its own worker process under ``make run`` (``manage.py runstack``):

- ``bulk``: work that takes minutes — the demo ingest, a path job of more than
  ``INGEST_INTERACTIVE_MAX_FILES`` files, a scheduled sync, re-embedding after a model upgrade,
  rebuilding an index, the nightly governance passes.
- ``interactive``: what a person waits for — "Sync now", uploads, small path jobs, the vectors
  after an edit, feedback, and every short periodic task. It is the default queue, so a task
  nobody routed lands here.

A person's click never waits behind a 45-minute ingest: the interactive worker takes it while
the bulk worker is busy. The use cases decide the lane when they queue (``contexts.usecases``);
the job reaper, re-queueing a job whose worker died, asks the same question here.
"""

from __future__ import annotations

import os
from pathlib import Path

from django.conf import settings

from contexts.ingestion import git_tree
from contexts.ingestion.sources import ingestible

INTERACTIVE = "interactive"
BULK = "bulk"
QUEUES = (INTERACTIVE, BULK)

# The worker processes a deployment runs, one per lane, and the queues each consumes. The
# interactive one also drains "celery", the queue of messages sent before the lanes existed.
# ``manage.py runstack`` starts these; ``docker/compose.yaml`` runs the same two services
# (``tests/foundation/test_deployment.py`` holds them to this).
WORKER_QUEUES: dict[str, tuple[str, ...]] = {
    BULK: (BULK,),
    INTERACTIVE: (INTERACTIVE, "celery"),
}

# The queues and the tasks that always run in the bulk lane are in settings (CELERY_TASK_QUEUES,
# CELERY_TASK_ROUTES: re-embedding, index rebuilds, the nightly governance passes); the rest
# default to the interactive lane, or are routed per call here (ingest, sync_source).


def for_job(source_kind: str, source: str) -> str:
    """An ingestion job's lane: uploads are bounded (a person's files, at most a few hundred)
    and interactive; a path is bulk once it holds more than ``INGEST_INTERACTIVE_MAX_FILES``
    ingestible files (the demo: this repository's ~500)."""
    if source_kind == "upload":
        return INTERACTIVE
    limit = settings.INGEST_INTERACTIVE_MAX_FILES
    return BULK if count_files(Path(source), stop_after=limit + 1) > limit else INTERACTIVE


def for_sync(*, by_person: bool) -> str:
    """A git sync's lane: "Sync now" (a person) is interactive; the schedule's syncs are bulk,
    since a first sync reads a whole repository and nobody is waiting for them."""
    return INTERACTIVE if by_person else BULK


def count_files(root: Path, *, stop_after: int) -> int:
    """How many ingestible files ``root`` holds, counting no further than ``stop_after``: a
    cheap upper bound (git's listing, or the directory tree with hidden folders left out)
    that never reads a file. A path that does not exist counts 0 (the job fails, quickly)."""
    try:
        root = root.resolve()
        if root.is_file():
            return 1
        if not root.is_dir():
            return 0
        listing = git_tree.list_files(root, include_untracked=False)
    except (OSError, git_tree.GitListingFailed):
        return stop_after  # unknown: the safe guess is the lane a big job belongs to
    if listing is not None:
        names = (path.decode("utf-8", "replace") for path in listing.tracked)
        return _bounded(sum(1 for name in names if ingestible(name.rsplit("/", 1)[-1])),
                        stop_after)
    found = 0
    for _directory, dirnames, filenames in os.walk(root):
        dirnames[:] = [name for name in dirnames if not name.startswith(".")]
        found += sum(1 for name in filenames if ingestible(name))
        if found >= stop_after:
            return stop_after
    return found


def _bounded(found: int, stop_after: int) -> int:
    return min(found, stop_after)
