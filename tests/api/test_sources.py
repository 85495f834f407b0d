"""POST /api/sources and GET /api/jobs/{id}."""

from django.core.files.uploadedfile import SimpleUploadedFile

from accounts.tokens import create_token
from contexts.ingestion.jobs import run_job
from contexts.models import IngestionJob, UploadBlob
from tests.api.conftest import as_token


def test_an_upload_becomes_a_job_whose_progress_is_readable(api, cast, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.LEXICAL_INDEX_DIR = tmp_path / "index"
    api.force_authenticate(cast.teammate)
    note = SimpleUploadedFile("limits.md", b"# Limits\n\nThe bucket holds ten tokens.\n")
    response = api.post("/api/sources", {"org_id": "acme", "repo_id": "web", "files": [note]},
                        format="multipart")
    assert response.status_code == 202, response.json()
    job = IngestionJob.objects.get(public_id=response.json()["id"])
    # In the uploads storage under the job's key, not on this node's disk.
    assert job.source == f"{job.org_id}/{job.public_id}/"
    blob = UploadBlob.objects.get(org=job.org)
    assert blob.key == job.source + "limits.md" and bytes(blob.content).startswith(b"# Limits")
    assert not (tmp_path / "media").exists()
    run_job(job.pk)  # what the worker does
    progress = api.get(f"/api/jobs/{job.public_id}").json()
    assert progress["state"] == "done" and progress["fragments_created"] == 1
    assert not UploadBlob.objects.exists()  # a finished job's uploads are deleted
    _, other = create_token(cast.other_org, "x", [cast.other_org.scope])
    api.force_authenticate(None)
    assert as_token(api, other).get(f"/api/jobs/{job.public_id}").status_code == 404


def test_uploads_are_validated_and_need_curate(api, cast, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    api.force_authenticate(cast.teammate)
    binary = SimpleUploadedFile("tool.exe", b"\x00\x01")
    bad = api.post("/api/sources", {"org_id": "acme", "files": [binary]}, format="multipart")
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "files"
    api.force_authenticate(cast.viewer)
    note = SimpleUploadedFile("a.md", b"# A\n\ntext\n")
    assert api.post("/api/sources", {"org_id": "acme", "files": [note]},
                    format="multipart").status_code == 403


def test_two_files_of_one_name_are_refused(api, cast):
    api.force_authenticate(cast.teammate)
    files = [SimpleUploadedFile("a.md", b"# A\n\none\n"), SimpleUploadedFile("a.md", b"# A\n")]
    response = api.post("/api/sources", {"org_id": "acme", "files": files}, format="multipart")
    assert response.status_code == 400 and response.json()["error"]["field"] == "files"
    assert "a.md: two files of this name" in response.json()["error"]["message"]
    assert not IngestionJob.objects.exists() and not UploadBlob.objects.exists()
