"""Ingestion page: uploads land in the uploads storage under the job's key, paths are for
administrators, running jobs poll every second and show per-file errors."""

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from contexts.models import IngestionJob, UploadBlob
from tests.console.conftest import client_for, htmx_to
from tests.factories import UserFactory


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


def test_an_upload_creates_a_job_and_saves_the_files(cast, media,
                                                     django_capture_on_commit_callbacks):
    files = [SimpleUploadedFile("notes.md", b"# Notes\n\nHello."),
             SimpleUploadedFile("retry.py", b"def retry():\n    pass\n")]
    with django_capture_on_commit_callbacks() as callbacks:
        response = client_for(cast.teammate).post(
            "/o/acme/ingest/upload", {"scope": cast.repo.scope.public_id, "files": files})
    assert response.status_code == 302
    job = IngestionJob.objects.get()
    assert job.source_kind == "upload" and job.scope == cast.repo.scope
    assert job.created_by == cast.teammate and len(callbacks) == 1  # enqueued on commit
    from contexts.models import AuditEvent

    audit = AuditEvent.objects.get(object_id=job.public_id)
    assert (audit.action, audit.actor, audit.after["scope"]) == (
        "job.create", cast.teammate, cast.repo.scope.public_id)
    assert job.source == f"{cast.org.pk}/{job.public_id}/"
    assert sorted(UploadBlob.objects.filter(org=cast.org).values_list("key", flat=True)) == [
        job.source + "notes.md", job.source + "retry.py"]
    assert not Path(media).exists()  # no node's disk holds them


def test_unsupported_files_are_refused(cast):
    response = client_for(cast.teammate).post(
        "/o/acme/ingest/upload", {"scope": cast.repo.scope.public_id,
                                  "files": [SimpleUploadedFile("x.exe", b"MZ")]})
    assert response.status_code == 400 and b"x.exe: unsupported file type" in response.content
    assert not IngestionJob.objects.exists()


def test_two_files_of_one_name_are_refused(cast):
    files = [SimpleUploadedFile("a.md", b"# A\n"), SimpleUploadedFile("a.md", b"# B\n")]
    response = client_for(cast.teammate).post(
        "/o/acme/ingest/upload", {"scope": cast.repo.scope.public_id, "files": files})
    assert response.status_code == 400 and b"a.md: two files of this name" in response.content
    assert not IngestionJob.objects.exists() and not UploadBlob.objects.exists()


def test_viewers_cannot_upload(cast):
    page = client_for(cast.viewer).get("/o/acme/ingest/").content.decode()
    assert "You may not add knowledge" in page
    response = client_for(cast.viewer).post(
        "/o/acme/ingest/upload", {"scope": cast.repo.scope.public_id,
                                  "files": [SimpleUploadedFile("a.md", b"x")]})
    assert response.status_code == 400 and not IngestionJob.objects.exists()


def test_server_paths_are_for_superusers_under_an_ingest_root(cast, tmp_path, settings):
    # The whole story, with every refusal case: tests/security/test_redteam_1_path_ingestion.py.
    settings.INGEST_ROOTS = [str(tmp_path)]
    data = {"scope": cast.repo.scope.public_id, "path": str(tmp_path)}
    assert client_for(cast.owner).post("/o/acme/ingest/path", data).status_code == 403
    assert "Register a server path" not in client_for(cast.owner).get(
        "/o/acme/ingest/").content.decode()
    root = UserFactory(username="root", is_superuser=True)
    assert client_for(root).post("/o/acme/ingest/path", data).status_code == 302
    assert IngestionJob.objects.get().source == str(tmp_path.resolve())
    missing = client_for(root).post("/o/acme/ingest/path", {**data, "path": "/no/such/dir"})
    assert missing.status_code == 400 and b"CONTEXTS_INGEST_ROOTS" in missing.content


def test_running_jobs_poll_and_finished_ones_stop(cast):
    running = IngestionJob.objects.create(org=cast.org, scope=cast.repo.scope, source="/x",
                                          state="running", files_total=4, files_done=1)
    done = IngestionJob.objects.create(org=cast.org, scope=cast.repo.scope, source="/y",
                                       state="done", files_total=2, files_done=2,
                                       errors=[{"path": "b.py", "reason": "cannot parse"}])
    client = client_for(cast.viewer)
    page = client.get("/o/acme/ingest/").content.decode()
    running_row = page.split(f'<tr id="job-{running.public_id}"')[1].split(">")[0]
    done_row = page.split(f'<tr id="job-{done.public_id}"')[1].split(">")[0]
    assert 'hx-trigger="every 1s"' in running_row and "hx-trigger" not in done_row
    assert 'value="25"' in page and "cannot parse" in page
    row = client.get(f"/jobs/{running.public_id}/", **htmx_to(f"job-{running.public_id}"))
    assert row.content.decode().startswith(f'<tr id="job-{running.public_id}"')
    progress = client.get(f"/jobs/{running.public_id}/", **htmx_to("job-progress"))
    assert progress.content.decode().startswith('<section id="job-progress"')
