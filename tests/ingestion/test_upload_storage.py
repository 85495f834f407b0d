"""The uploads storage (``STORAGES["uploads"]``, a table by default) and when uploads go: at the
end of their job, or by the hourly sweep (``contexts.services.uploads``)."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from importlib import import_module

import pytest
from django.apps import apps as django_apps
from django.core.exceptions import SuspiciousFileOperation
from django.core.files.base import ContentFile
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction
from django.utils import timezone

from accounts.permissions import SYSTEM
from contexts.ingestion.jobs import run_job
from contexts.models import IngestionJob, JobState, UploadBlob
from contexts.services import uploads
from contexts.services.upload_storage import DatabaseStorage
from contexts.usecases.ingestion import SubmitSource, submit

pytestmark = pytest.mark.django_db


def test_the_database_storage_keeps_bytes_by_key_and_organization(ingest_target):
    org = ingest_target.org
    storage = uploads.storage()
    assert isinstance(storage, DatabaseStorage)
    raw = b"# Notes\n\n\xc3\xa9t\xc3\xa9\n"
    name = storage.save(f"{org.pk}/job_1/notes.md", ContentFile(raw))
    assert name == f"{org.pk}/job_1/notes.md"
    blob = UploadBlob.objects.get()
    assert (blob.org_id, blob.size, blob.sha256) == (org.pk, len(raw),
                                                     hashlib.sha256(raw).hexdigest())
    assert storage.exists(name) and storage.size(name) == len(raw)
    with storage.open(name) as opened:
        assert opened.read() == raw
    assert storage.listdir("") == ([str(org.pk)], [])
    assert storage.listdir(f"{org.pk}/job_1") == ([], ["notes.md"])
    assert storage.get_created_time(name) <= timezone.now()
    # Another organization's id in the name is another row: names cannot reach across.
    assert not storage.exists(f"{org.pk + 1}/job_1/notes.md")
    for bad in ("notes.md", "../1/x.md", "/1/x.md"):
        with pytest.raises(SuspiciousFileOperation):
            storage.save(bad, ContentFile(b"x"))
    storage.delete(name)
    assert not storage.exists(name) and not UploadBlob.objects.exists()
    with pytest.raises(FileNotFoundError):
        storage.open(name)


def test_uploads_roll_back_with_their_job(ingest_target):
    t = ingest_target
    with pytest.raises(RuntimeError), transaction.atomic():
        submit(SYSTEM, SubmitSource(scope=t.repo.scope, files=[
            SimpleUploadedFile("a.md", b"# A\n\ntext\n")]), queue=False)
        assert UploadBlob.objects.count() == 1
        raise RuntimeError("the request failed after storing")
    assert not UploadBlob.objects.exists() and not IngestionJob.objects.exists()


def upload_job(t, *names: str) -> IngestionJob:
    return submit(SYSTEM, SubmitSource(scope=t.repo.scope, files=[
        SimpleUploadedFile(name, f"# {name}\n\nabout {name}\n".encode()) for name in names]),
        queue=False)


def test_a_job_whose_uploads_are_gone_fails_saying_so(ingest_target):
    job = upload_job(ingest_target, "a.md")
    UploadBlob.objects.all().delete()
    with pytest.raises(Exception, match="uploaded files are gone"):
        run_job(job.pk)
    job.refresh_from_db()
    assert job.state == JobState.FAILED and "upload them again" in job.errors[-1]["reason"]


def test_a_failed_job_leaves_no_uploads(ingest_target, monkeypatch):
    job = upload_job(ingest_target, "a.md")

    def broken(*args, **kwargs):
        raise RuntimeError("the embedder is broken")

    monkeypatch.setattr("contexts.ingestion.jobs.Ingestor.run", broken)
    with pytest.raises(RuntimeError):
        run_job(job.pk)
    assert IngestionJob.objects.get(pk=job.pk).state == JobState.FAILED
    assert not UploadBlob.objects.exists()  # a failed job never runs again


def test_the_sweep_deletes_what_no_job_will_read(ingest_target, settings):
    t = ingest_target
    settings.UPLOAD_RETENTION_HOURS = 24
    waiting, finished, expired = (upload_job(t, f"{n}.md") for n in ("w", "f", "e"))
    IngestionJob.objects.filter(pk=finished.pk).update(state=JobState.DONE)
    IngestionJob.objects.filter(pk=expired.pk).update(
        created_at=timezone.now() - timedelta(hours=25))
    storage = uploads.storage()
    # A job that no longer exists: spared for an hour (its transaction may be in flight).
    storage.save(f"{t.org.pk}/job_gone/fresh.md", ContentFile(b"x"))
    storage.save(f"{t.org.pk}/job_old/old.md", ContentFile(b"x"))
    UploadBlob.objects.filter(key__endswith="old.md").update(
        created_at=timezone.now() - timedelta(hours=2))
    assert uploads.purge() == 3
    # A set: the waiting job's key holds its random public id, which sorts before or after
    # "job_gone" by chance.
    assert set(UploadBlob.objects.values_list("key", flat=True)) == {
        f"{t.org.pk}/job_gone/fresh.md", waiting.source + "w.md"}


def test_an_upgrade_moves_unfinished_jobs_uploads_off_the_disk(ingest_target, settings,
                                                               tmp_path):
    """Migration 0023: a job queued before uploads moved runs from the storage afterwards."""
    t = ingest_target
    settings.MEDIA_ROOT = tmp_path / "media"
    legacy = IngestionJob.objects.create(org=t.org, scope=t.repo.scope, source_kind="upload",
                                         created_by=t.creator, source="")
    folder = tmp_path / "media" / "uploads" / legacy.public_id
    folder.mkdir(parents=True)
    (folder / "notes.md").write_text("# Notes\n\nThe legacy upload.\n")
    (folder / "link.md").symlink_to(tmp_path / "elsewhere.md")
    (tmp_path / "elsewhere.md").write_text("# Not an upload\n")
    IngestionJob.objects.filter(pk=legacy.pk).update(source=str(folder))
    # A row naming some other folder is not read, whatever it holds.
    tampered = IngestionJob.objects.create(org=t.org, scope=t.repo.scope, source_kind="upload",
                                           source=str(tmp_path))
    done = IngestionJob.objects.create(org=t.org, scope=t.repo.scope, source_kind="upload",
                                       source=str(folder), state=JobState.DONE)
    migration = import_module("contexts.migrations.0023_legacy_uploads_into_storage")
    migration.adopt(django_apps, None)

    legacy.refresh_from_db()
    assert legacy.source == uploads.prefix(legacy)
    assert list(UploadBlob.objects.values_list("key", flat=True)) == [legacy.source + "notes.md"]
    assert IngestionJob.objects.get(pk=tampered.pk).source == str(tmp_path)
    assert IngestionJob.objects.get(pk=done.pk).source == str(folder)
    job = run_job(legacy.pk)
    assert job.state == JobState.DONE and job.files_done == 1 and job.errors == []
    with pytest.raises(Exception, match="upload the files again"):
        run_job(tampered.pk)
