"""Through a real Celery worker: beat's task claims a due source and queues its sync with a
UUID5 id; the worker runs it, and the row shows the state."""

from __future__ import annotations

import time

import pytest

from contexts.ingestion.git_sync import task_id
from contexts.models import Source, SourceState
from contexts.tasks import enqueue_due_sources

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_beat_queues_a_due_source_and_a_worker_syncs_it(git_repo, world, helpers,
                                                         celery_worker):
    git_repo.commit("first", {"docs/a.md": "# A\n\nalphaword " + helpers.prose("a") + "\n"})
    source = world.source(git_repo, "web")
    due = Source.objects.get(pk=source.pk).next_sync_at
    assert enqueue_due_sources.apply().get() == 1  # beat's task, run here; the sync queued
    row = Source.objects.get(pk=source.pk)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and row.last_commit != git_repo.commits[-1]:
        time.sleep(0.3)
        row = Source.objects.get(pk=source.pk)
    assert (row.state, row.last_commit, row.files_count) == (SourceState.IDLE,
                                                             git_repo.commits[-1], 1)
    from celery.result import AsyncResult

    result = AsyncResult(task_id(source.public_id, due)).get(timeout=30)
    assert result["commit"] == git_repo.commits[-1] and result["added"] == 1
    assert enqueue_due_sources.apply().get() == 0  # not due again before its interval
