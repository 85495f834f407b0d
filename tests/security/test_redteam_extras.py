"""What the red-team pass noted in passing: a misleading refusal from ``POST /api/sources``, an
upload named ``..`` that created an empty job, and a full traceback logged for every console 403.
(MCP's security headers are covered with finding 6.)"""

from __future__ import annotations

import logging

import pytest
from rest_framework.test import APIClient

from contexts.models import IngestionJob
from contexts.usecases.ingestion import CURATE_REFUSED
from tests.console.conftest import client_for
from tests.domain.conftest import cast  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db
BOUNDARY = "----contexts-test"


def multipart(fields: dict[str, str], filename: str) -> bytes:
    parts = [f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'
             for name, value in fields.items()]
    parts.append(f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="files"; '
                 f'filename="{filename}"\r\nContent-Type: text/markdown\r\n\r\n# x\r\n')
    return ("".join(parts) + f"--{BOUNDARY}--\r\n").encode()


CONTENT_TYPE = f"multipart/form-data; boundary={BOUNDARY}"


def test_a_readable_scope_without_write_right_says_so(cast, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    api = APIClient()
    api.force_authenticate(cast.viewer)
    response = api.generic("POST", "/api/sources", multipart(
        {"org_id": "acme", "repo_id": "web"}, "a.md"), content_type=CONTENT_TYPE)
    assert response.status_code == 403
    assert response.json()["error"]["message"] == CURATE_REFUSED
    assert "not found" not in response.json()["error"]["message"]


@pytest.mark.parametrize("name", ["..", ".", "a/..", ""])
def test_an_upload_without_a_usable_name_creates_no_job(cast, settings, tmp_path, name):
    settings.MEDIA_ROOT = tmp_path
    api = APIClient()
    api.force_authenticate(cast.teammate)
    response = api.generic("POST", "/api/sources", multipart(
        {"org_id": "acme", "repo_id": "web"}, name), content_type=CONTENT_TYPE)
    assert response.status_code == 400 and response.json()["error"]["field"].startswith("files")
    console = client_for(cast.teammate).generic(
        "POST", "/o/acme/ingest/upload",
        multipart({"scope": cast.repo.scope.public_id}, name), content_type=CONTENT_TYPE)
    assert console.status_code == 400
    assert not IngestionJob.objects.exists()


def test_a_console_refusal_logs_one_line_without_a_traceback(cast, caplog):
    # settings.LOGGING's filter on the django.request logger strips the traceback before any
    # handler (caplog's included) sees the record.
    with caplog.at_level(logging.WARNING, logger="django.request"):
        response = client_for(cast.viewer).post(
            "/o/acme/ingest/path", {"scope": cast.repo.scope.public_id, "path": "/tmp"})
    assert response.status_code == 403
    [record] = [r for r in caplog.records if r.name == "django.request"]
    assert record.exc_info is None and "Forbidden" in record.getMessage()
