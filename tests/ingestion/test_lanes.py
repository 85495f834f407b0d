"""Two lanes (issue 40, item 3; contexts/ingestion/lanes.py): "Sync now", uploads and small jobs
run in the interactive queue, the demo ingest, large path jobs, scheduled syncs and the long
governance passes in the bulk queue — each with its own worker under ``make run`` — so a
person's click never waits behind a bulk ingest. The use cases decide the lane when they queue;
these tests read where each message landed in the real broker, and run a real worker that
consumes the interactive lane only while the bulk lane holds a long job."""

import base64
import json
import time
from pathlib import Path

import pytest
import redis
from django.conf import settings as django_settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from accounts.models import Organization
from accounts.permissions import SYSTEM
from contexts.celery import app
from contexts.ingestion import lanes
from contexts.models import IngestionJob, JobState
from contexts.services import job_leases
from contexts.tasks import _publish_ingest, enqueue_due_sources
from contexts.usecases import ingestion
from contexts.usecases import sources as source_usecases
from tests.conftest import start_worker, stop_worker
from tests.connectors.conftest import git_repo, world  # noqa: F401 - fixtures
from tests.domain.conftest import cast  # noqa: F401 - fixture

ROOT = Path(__file__).resolve().parents[2]


def queued(queue: str) -> list[tuple[str, list]]:
    """(task, args) of every message waiting in ``queue`` in the test's broker."""
    client = redis.Redis.from_url(django_settings.CELERY_BROKER_URL)
    try:
        found = []
        for entry in client.lrange(queue, 0, -1):
            message = json.loads(entry)
            body = json.loads(base64.b64decode(message["body"]))
            found.append((message["headers"]["task"], body[0]))
        return found
    finally:
        client.close()


def landed(task: str, args_head, before: dict[str, list]) -> list[str]:
    """The lanes a message for ``task`` with first argument ``args_head`` was added to."""
    return [queue for queue in lanes.QUEUES
            if sum(1 for t, a in queued(queue) if t == task and a[:1] == [args_head])
            > sum(1 for t, a in before[queue] if t == task and a[:1] == [args_head])]


def snapshot() -> dict[str, list]:
    return {queue: queued(queue) for queue in lanes.QUEUES}


def files(root: Path, count: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (root / f"note-{i}.md").write_text(f"# Note {i}\n\nword{i}\n")
    return root


@pytest.mark.django_db(transaction=True)
def test_each_kind_of_work_lands_in_its_lane(cast, tmp_path, settings):  # noqa: F811
    settings.INGEST_INTERACTIVE_MAX_FILES = 3
    before = snapshot()
    small = ingestion.submit(SYSTEM, ingestion.SubmitSource(
        scope=cast.repo.scope, path=str(files(tmp_path / "small", 3))))
    large = ingestion.submit(SYSTEM, ingestion.SubmitSource(
        scope=cast.repo.scope, path=str(files(tmp_path / "large", 4))))
    upload = ingestion.submit(SYSTEM, ingestion.SubmitSource(
        scope=cast.repo.scope,
        files=[SimpleUploadedFile(f"u{i}.md", b"# U\n\nupload\n") for i in range(5)]))
    assert landed("contexts.tasks.ingest", small.pk, before) == ["interactive"]
    assert landed("contexts.tasks.ingest", large.pk, before) == ["bulk"]
    assert landed("contexts.tasks.ingest", upload.pk, before) == ["interactive"]


@pytest.mark.django_db(transaction=True)
def test_the_demo_ingest_is_bulk(settings, tmp_path):
    settings.LEXICAL_INDEX_DIR = tmp_path / "index"
    before = snapshot()
    call_command("bootstrap", "--admin", "lanes-admin", stdout=open("/dev/null", "w"))  # noqa: SIM115
    job = IngestionJob.objects.get(org=Organization.objects.get(slug="demo"))
    assert landed("contexts.tasks.ingest", job.pk, before) == ["bulk"]
    # And when the reaper publishes it again (its worker died), in the same lane.
    again = snapshot()
    _publish_ingest(job.pk)
    assert landed("contexts.tasks.ingest", job.pk, again) == ["bulk"]
    assert job.pk in job_leases.pending_job_ids()  # the reaper sees messages in every lane


@pytest.mark.django_db(transaction=True)
def test_sync_now_is_interactive_and_the_schedules_syncs_are_bulk(world, git_repo):  # noqa: F811
    git_repo.commit("first", {"docs/a.md": "# A\n\nalpha\n"})
    source = world.source(git_repo, "web")
    before = snapshot()
    source_usecases.sync_source(SYSTEM, source_usecases.SyncSource(source=source.public_id))
    assert landed("contexts.tasks.sync_source", source.pk, before) == ["interactive"]
    before = snapshot()
    assert enqueue_due_sources.apply().get() == 1  # beat's task: the source is due
    assert landed("contexts.tasks.sync_source", source.pk, before) == ["bulk"]


def test_static_routes_send_long_tasks_to_bulk_and_the_rest_to_interactive():
    route = app.amqp.router.route
    for task in ("contexts.tasks.rebuild_index", "contexts.governance.tasks.reembed_generation",
                 "contexts.governance.tasks.compute_authority",
                 "contexts.governance.tasks.scan_staleness",
                 "contexts.governance.tasks.propose_duplicates"):
        assert route({}, task)["queue"].name == "bulk", task
    for task in ("contexts.tasks.reindex", "contexts.tasks.record_feedback",
                 "contexts.tasks.reap_stale_jobs", "contexts.tasks.enqueue_due_sources",
                 "contexts.ping"):
        assert route({}, task)["queue"].name == "interactive", task
    # A worker started without --queues consumes both lanes (tests, a plain `celery worker`).
    assert {queue.name for queue in app.conf.task_queues} == {"interactive", "bulk"}


def test_a_path_is_counted_without_reading_it_and_no_further_than_asked(tmp_path):
    root = files(tmp_path / "tree", 7)
    (root / ".hidden").mkdir()
    files(root / ".hidden", 5)
    (root / "image.png").write_bytes(b"\x89PNG")
    assert lanes.count_files(root, stop_after=100) == 7   # hidden folders and non-text left out
    assert lanes.count_files(root, stop_after=3) == 3
    assert lanes.count_files(root / "note-1.md", stop_after=3) == 1
    assert lanes.count_files(tmp_path / "missing", stop_after=3) == 0
    # This repository, through git's listing: the demo is well over the interactive bound.
    assert lanes.count_files(ROOT, stop_after=51) == 51


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_an_upload_runs_while_the_bulk_lane_holds_a_long_job(cast, tmp_path, settings,  # noqa: F811
                                                            services):
    """The interactive worker (as runstack starts it) takes an upload at once although a long
    path job was queued before it; that job waits for the bulk worker, untouched."""
    settings.INGEST_INTERACTIVE_MAX_FILES = 3
    bulk = ingestion.submit(SYSTEM, ingestion.SubmitSource(
        scope=cast.repo.scope, path=str(files(tmp_path / "large", 40))))
    upload = ingestion.submit(SYSTEM, ingestion.SubmitSource(
        scope=cast.other_repo.scope,
        files=[SimpleUploadedFile("runbook.md", b"# Runbook\n\nRestart the frobnicator.\n")]))
    worker = start_worker(services, name="interactive", queues="interactive,celery")
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            upload.refresh_from_db()
            if upload.state in (JobState.DONE, JobState.FAILED):
                break
            time.sleep(0.3)
        assert upload.state == JobState.DONE, upload.errors
        assert upload.fragments_created == 1
        bulk.refresh_from_db()
        assert (bulk.state, bulk.files_done) == (JobState.QUEUED, 0)
        assert [bulk.pk] in [args[:1] for task, args in queued("bulk")
                             if task == "contexts.tasks.ingest"]
    finally:
        stop_worker(worker)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_an_upload_into_a_busy_repository_steps_aside_for_the_next_one(cast, services):  # noqa: F811
    """An upload into the repository the demo is ingesting must wait for it (one run per
    document set, contexts/ingestion/target_lock.py) — but not in the interactive worker's only
    process: it goes back to its queue, and an upload into another scope behind it runs."""
    from django.db import connection

    from contexts.ingestion.target_lock import lock_key

    key = lock_key(cast.org.pk, cast.repo.pk)
    with connection.cursor() as cursor:  # the demo's run holds the repository's documents
        cursor.execute("SELECT pg_advisory_lock(%s, %s)", list(key))
    worker = None
    try:
        into_busy = ingestion.submit(SYSTEM, ingestion.SubmitSource(
            scope=cast.repo.scope, files=[SimpleUploadedFile("a.md", b"# A\n\nalpha one\n")]))
        elsewhere = ingestion.submit(SYSTEM, ingestion.SubmitSource(
            scope=cast.org.scope, files=[SimpleUploadedFile("b.md", b"# B\n\nbeta two\n")]))
        worker = start_worker(services, name="busy", queues="interactive,celery",
                              extra_env={"CONTEXTS_INGEST_BUSY_RETRY_SECONDS": "1"})
        assert _wait_state(elsewhere, 240) == JobState.DONE
        into_busy.refresh_from_db()
        assert into_busy.state == JobState.QUEUED   # stepped aside, not holding the worker
        # More deferrals than Celery's default retry limit (8): a long run outlasts it.
        log = services.root / "worker-busy.log"
        deadline = time.monotonic() + 300  # generous: a shared 2-core machine
        while log.read_text().count("retry: Retry in 1s") < 10:
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        assert "MaxRetriesExceeded" not in log.read_text()
        with connection.cursor() as cursor:         # the long run ends
            cursor.execute("SELECT pg_advisory_unlock(%s, %s)", list(key))
        assert _wait_state(into_busy, 240) == JobState.DONE, into_busy.warnings
        assert into_busy.fragments_created == 1
        assert any("for another ingestion into the same repository to finish" in w["reason"]
                   for w in into_busy.warnings)   # it says it stood aside, and how long
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock_all()")
        if worker is not None:
            stop_worker(worker)


def _wait_state(job: IngestionJob, seconds: float) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if job.state in (JobState.DONE, JobState.FAILED):
            break
        time.sleep(0.3)
    return job.state
