"""Uploads are not paths (issue 21, item 4): files uploaded through the REST API of this
process (the web node) are ingested by a real Celery worker process started with a different
``CONTEXTS_VAR_DIR`` — the two share no directory — and no upload is left on any disk, nor in
the uploads table once the job is done.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from contexts.models import Fragment, IngestionJob, JobState, UploadBlob
from tests.conftest import start_worker, stop_worker

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def files_containing(roots: Iterable[Path], marker: bytes) -> list[Path]:
    found = []
    for root in roots:
        for path in root.rglob("*"):
            try:
                if path.is_file() and not path.is_symlink() and marker in path.read_bytes():
                    found.append(path)
            except OSError:
                continue  # a socket, or removed while we looked
    return found


def test_a_worker_with_its_own_var_dir_ingests_an_upload(services, settings, ingest_target,
                                                         tmp_path, tmp_path_factory, sources):
    t = ingest_target
    web_media = tmp_path / "web-media"
    settings.MEDIA_ROOT = web_media  # where uploads used to go: must stay empty
    worker_var = tmp_path_factory.mktemp("worker-var")
    worker_index = tmp_path_factory.mktemp("worker-index")
    assert worker_var != Path(settings.VAR_DIR)
    worker = start_worker(services, name="no-shared-disk", extra_env={
        "CONTEXTS_VAR_DIR": str(worker_var), "CONTEXTS_INDEX_DIR": str(worker_index)})
    try:
        marker = f"quokka{secrets.token_hex(4)}"
        files = [
            SimpleUploadedFile("deploy.md", f"# Deploy\n\nThe {marker} rollout waits for the "
                               "canary.\n\n## Rollback\n\nRoll back within ten minutes.\n"
                               .encode()),
            SimpleUploadedFile("metrics.py", sources.python_module().encode()),
            SimpleUploadedFile("blob.md", b"\x00\x01\x02 not text"),
        ]
        api = APIClient()
        api.force_authenticate(t.creator)
        response = api.post("/api/sources", {"org_id": t.org.slug, "repo_id": t.repo.slug,
                                             "files": files}, format="multipart")
        assert response.status_code == 202, response.json()
        job = IngestionJob.objects.get(public_id=response.json()["id"])
        # The job names its files by storage key; the web node's disk holds none of them.
        assert job.source == f"{t.org.pk}/{job.public_id}/" and not job.source.startswith("/")
        assert UploadBlob.objects.filter(org=t.org).count() == 3
        assert not web_media.exists()

        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            job.refresh_from_db()
            if job.state in (JobState.DONE, JobState.FAILED):
                break
            time.sleep(0.1)
        assert job.state == JobState.DONE, (job.state, job.errors)
        progress = api.get(f"/api/jobs/{job.public_id}").json()
    finally:
        stop_worker(worker)

    assert progress["state"] == "done" and progress["errors"] == []
    assert progress["files_total"] == progress["files_done"] == 2
    assert progress["skipped"] == [{"path": "blob.md", "reason": "binary content"}]
    fragments = Fragment.objects.filter(scope=t.repo.scope)
    assert progress["fragments_created"] == fragments.count() > 0
    assert fragments.filter(body__contains=marker).exists()
    assert {p for f in fragments for p in f.sources.values_list("document__path", flat=True)} \
        == {"deploy.md", "metrics.py"}
    # Deleted once the job finished; and never written to either node's disk.
    assert not UploadBlob.objects.exists()
    assert files_containing([web_media, Path(settings.VAR_DIR), worker_var],
                            marker.encode()) == []
    assert any(worker_var.iterdir())  # the worker did use its own var dir (its secret key)
