"""Ingestion jobs through a real Celery worker process: progress, completion, and surviving a
worker that is SIGKILLed mid-job (acks_late + a short broker visibility timeout → redelivery).

The worker runs against the test database (committed data: ``transaction=True``) and writes the
lexical index into this test's ``tmp_path``, which the test reads back.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from accounts.permissions import SYSTEM
from contexts.celery import app
from contexts.indexes import indexing
from contexts.models import (
    Embedding,
    Fragment,
    FragmentVersion,
    IngestionJob,
    JobState,
    SourcePointer,
)
from contexts.tasks import ingest
from contexts.usecases.ingestion import create_job, enqueue
from tests.conftest import start_worker, stop_worker
from tests.factories import OrganizationFactory, RepositoryFactory

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

VISIBILITY_TIMEOUT = 5
# What the worker runs with (settings.CELERY_BROKER_TRANSPORT_OPTIONS read with the env below).
TRANSPORT_OPTIONS = {"visibility_timeout": VISIBILITY_TIMEOUT, "unacked_restore_interval": 1,
                     "unacked_restore_throttle": 1}
FILES = 60


@pytest.fixture
def start_workers(services, settings) -> Iterator[Callable[..., subprocess.Popen]]:
    """Start workers with a 5 s visibility timeout, small groups and this test's index dir;
    every worker still alive at the end is stopped."""
    env = {
        "CELERY_VISIBILITY_TIMEOUT": str(VISIBILITY_TIMEOUT),
        "CONTEXTS_INDEX_DIR": str(settings.LEXICAL_INDEX_DIR),
        "CONTEXTS_INGEST_BATCH": "8",  # a group of 8 chunks ≈ 4 files: frequent commits
    }
    started: list[subprocess.Popen] = []

    def start(name: str, concurrency: int = 1) -> subprocess.Popen:
        process = start_worker(services, name=name, concurrency=concurrency, extra_env=env)
        started.append(process)
        return process

    yield start
    for process in started:
        stop_worker(process)


def wait_for(what: str, predicate: Callable[[], object], timeout: float,
             interval: float = 0.05) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def live_members(pgid: int) -> list[int]:
    """Pids of the process group that are still running (zombies excepted), from /proc."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited while we looked
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state != "Z":
            members.append(int(stat.parent.name))
    return members


def job_state(job_id: int) -> IngestionJob:
    return IngestionJob.objects.get(pk=job_id)


def finished(job_id: int) -> IngestionJob | None:
    job = job_state(job_id)
    assert job.state != JobState.FAILED, job.errors
    return job if job.state == JobState.DONE else None


def topic(n: int, prose: Callable[..., str]) -> str:
    """≈470 words in three sections, distinct per ``n``: two fragments per file."""
    return "\n".join([f"# Topic {n}", "", f"Topic marker kestrel{n:03d}.", "",
                      prose(f"{n}-intro", 60), "", "## Part A", "", prose(f"{n}-a", 200), "",
                      "## Part B", "", prose(f"{n}-b", 200), ""])


@pytest.fixture
def corpus(tmp_path, write_tree, sources) -> Path:
    return write_tree(tmp_path / "corpus", {
        f"notes/topic-{n:02d}.md": topic(n, sources.prose) for n in range(FILES)})


def state_of(scope) -> dict:
    """What an ingestion left for ``scope``, keyed by (path, anchor) — comparable across orgs."""
    pointers = SourcePointer.objects.filter(fragment__scope=scope).select_related(
        "fragment", "document")
    fragments = Fragment.objects.filter(scope=scope)
    return {
        "bodies": {(p.document.path, p.anchor): p.fragment.body for p in pointers},
        "fragments": fragments.count(),
        "distinct_bodies": fragments.values("content_hash").distinct().count(),
        "versions": sorted(set(FragmentVersion.objects.filter(fragment__scope=scope)
                               .values_list("fragment_id", "number"))),
        "embeddings": sorted(Embedding.objects.filter(fragment_id__in=fragments.values("pk"),
                                                      passage=0)
                             .values_list("fragment_id", "fragment_version")),
        "fragment_ids": sorted(fragments.values_list("pk", flat=True)),
    }


def assert_clean(state: dict) -> None:
    """No duplicate fragments; every fragment exactly one version (1) and one head vector
    (v1)."""
    assert state["fragments"] == state["distinct_bodies"] == len(state["bodies"])
    assert state["versions"] == [(pk, 1) for pk in state["fragment_ids"]]
    assert state["embeddings"] == [(pk, 1) for pk in state["fragment_ids"]]


def test_a_queued_job_runs_to_done_in_the_worker(ingest_target, start_workers, write_tree,
                                                  tmp_path, sources):
    t = ingest_target
    root = write_tree(tmp_path / "small", {
        "docs/adr.md": sources.adr(t.owner.username), "docs/other.md": sources.other(),
        "docs/ops/restart.md": sources.restart(), "src/metrics.py": sources.python_module(),
        "pkg/limiter.go": sources.go, "src/blob.py": b"\x00\x01\x02"})
    start_workers("jobs")
    job = create_job(SYSTEM, t.repo.scope, str(root), created_by=t.creator)
    started = time.monotonic()
    enqueue(job)  # autocommit: on_commit publishes at once

    done = wait_for("the job to finish", lambda: finished(job.pk), timeout=120)
    print(f"\nsmall tree ingested by the worker in {time.monotonic() - started:.1f} s "
          "(includes loading the embedding model)")
    assert done.attempts == 1 and done.errors == []
    assert done.files_total == done.files_done == 5
    assert done.skipped == [{"path": "src/blob.py", "reason": "binary content"}]
    assert done.fragments_created == Fragment.objects.filter(scope=t.repo.scope).count() == 10
    assert done.started_at is not None and done.finished_at >= done.started_at
    assert_clean(state_of(t.repo.scope))
    index = indexing.lexical_index(t.org)
    assert index.count() == 10
    assert index.search("xylophonerollback", allowed_scope_ids=[t.repo.scope_id])


def test_a_job_survives_its_worker_being_sigkilled(ingest_target, start_workers, corpus):
    t = ingest_target
    clock = time.monotonic
    first = start_workers("doomed")
    job = create_job(SYSTEM, t.repo.scope, str(corpus), created_by=t.creator)
    # Publish with the worker's transport options (the same broker settings on both sides).
    queued = clock()
    with app.connection_for_write(transport_options=TRANSPORT_OPTIONS) as connection:
        ingest.apply_async((job.pk,), connection=connection)

    def mid_job() -> IngestionJob | None:
        current = job_state(job.pk)
        assert current.state != JobState.DONE, "the job finished before it could be killed"
        return current if current.state == JobState.RUNNING and current.files_done else None

    at_kill = wait_for("progress in the first worker", mid_job, timeout=120, interval=0.02)
    os.killpg(first.pid, signal.SIGKILL)  # main process and pool children: the machine is gone
    first.wait(timeout=10)
    killed = clock()
    wait_for("every process of the killed worker to be gone",
             lambda: not live_members(first.pid), timeout=10)
    after_kill = job_state(job.pk)
    assert after_kill.state == JobState.RUNNING and after_kill.files_done < FILES
    assert after_kill.attempts == 1

    start_workers("rescuer")
    rescuer_up = clock()
    # Deadlines, not speed checks: under `make test`'s parallel processes on two cores a worker
    # loading the model and ingesting took over 120 s (measured); correctness is what counts.
    wait_for("redelivery", lambda: job_state(job.pk).attempts == 2, timeout=600)
    redelivered = clock()
    done = wait_for("the redelivered job to finish", lambda: finished(job.pk), timeout=600)
    completed = clock()

    # The same files, uninterrupted, into a fresh organization (same worker).
    org = OrganizationFactory()
    repo = RepositoryFactory(org=org)
    reference = create_job(SYSTEM, repo.scope, str(corpus), created_by=t.creator)
    enqueue(reference)
    reference_done = wait_for("the reference job", lambda: finished(reference.pk), timeout=600)
    reference_took = clock() - completed

    print(f"\nfirst progress {at_kill.files_done}/{FILES} files at {killed - queued:.1f} s; "
          f"rescuer up {rescuer_up - killed:.1f} s after the kill; redelivered "
          f"{redelivered - killed:.1f} s after the kill; done {completed - killed:.1f} s after "
          f"the kill; uninterrupted reference run {reference_took:.1f} s")

    assert done.attempts == 2 and done.errors == [] and done.skipped == []
    assert done.files_done == done.files_total == FILES
    assert reference_done.attempts == 1 and reference_done.files_done == FILES

    interrupted, uninterrupted = state_of(t.repo.scope), state_of(repo.scope)
    assert_clean(interrupted)
    assert_clean(uninterrupted)
    assert interrupted["fragments"] == uninterrupted["fragments"] == 2 * FILES
    assert interrupted["bodies"].keys() == uninterrupted["bodies"].keys()
    assert interrupted["bodies"] == uninterrupted["bodies"]
    # The rerun skipped what the first attempt committed and created the rest.
    assert done.fragments_created + done.fragments_unchanged == 2 * FILES
    assert done.fragments_unchanged > 0
    assert done.duplicates_collapsed == reference_done.duplicates_collapsed == 0
    # The first attempt never caught the index up; the rerun reconciled every fragment.
    for org_, scope in ((t.org, t.repo.scope), (org, repo.scope)):
        index = indexing.lexical_index(org_)
        assert index.count() == 2 * FILES
        assert len(index.search("kestrel007", allowed_scope_ids=[scope.id])) == 1


def test_a_job_longer_than_the_visibility_timeout_runs_only_once(ingest_target, start_workers,
                                                                 corpus):
    t = ingest_target
    start_workers("busy", concurrency=2)
    job = create_job(SYSTEM, t.repo.scope, str(corpus), created_by=t.creator)
    with app.connection_for_write(transport_options=TRANSPORT_OPTIONS) as connection:
        ingest.apply_async((job.pk,), connection=connection)
    seen: list[tuple[int, str]] = []

    def settled() -> IngestionJob | None:
        current = job_state(job.pk)
        seen.append((current.attempts, current.state))
        return current if current.state in (JobState.DONE, JobState.FAILED) else None

    final = wait_for("the job to settle", settled, timeout=120, interval=0.1)
    took = (final.finished_at - final.started_at).total_seconds()
    print(f"\njob took {took:.1f} s against a {VISIBILITY_TIMEOUT} s visibility timeout; "
          f"(attempts, state) seen: {sorted(set(seen))}")
    assert max(attempts for attempts, _ in seen) == 1
    assert final.state == JobState.DONE and final.errors == []
