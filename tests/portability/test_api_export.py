"""``GET /api/orgs/{org}/export``: an administrator gets the archive; a member without the
role is refused (403), another organization's administrator learns nothing (404, as for no
such organization); each export is audited and the calls are throttled."""

from __future__ import annotations

import io
import json
import tarfile

import pytest
from rest_framework.test import APIClient

from accounts.models import Role
from contexts.api.portability import ExportRateThrottle
from contexts.models import AuditEvent
from tests.factories import MembershipFactory, OrganizationFactory, UserFactory

pytestmark = pytest.mark.django_db


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def body(response) -> bytes:
    return b"".join(response.streaming_content)


def test_an_administrator_gets_the_archive_and_the_export_is_audited(small):
    for ref in (small.org.slug, small.org.public_id):
        response = client_for(small.admin).get(f"/api/orgs/{ref}/export")
        assert response.status_code == 200
        assert response["Content-Type"] == "application/gzip"
        assert 'attachment; filename="small-' in response["Content-Disposition"]
        with tarfile.open(fileobj=io.BytesIO(body(response)), mode="r:gz") as tar:
            manifest = json.load(tar.extractfile("manifest.json"))
            fragments = tar.extractfile("fragments.jsonl").read().decode()
        assert manifest["organization"]["public_id"] == small.org.public_id
        assert "Cache keys carry the tenant id first." in fragments
    events = AuditEvent.objects.filter(org=small.org, action="org.export")
    assert events.count() == 2
    assert {e.actor for e in events} == {small.admin}


def test_a_member_without_the_admin_role_is_refused(small):
    response = client_for(small.viewer).get("/api/orgs/small/export")
    assert response.status_code == 403
    assert "admin role" in response.json()["error"]["message"]
    assert not AuditEvent.objects.filter(action="org.export").exists()


def test_another_organizations_admin_cannot_tell_it_exists(small):
    other = OrganizationFactory(slug="other")
    stranger = UserFactory(username="olga")
    MembershipFactory(user=stranger, org=other, role=Role.ADMIN)
    client = client_for(stranger)
    hidden = client.get("/api/orgs/small/export")
    missing = client.get("/api/orgs/no-such-org/export")
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json() == missing.json()
    assert client.get(f"/api/orgs/{small.org.public_id}/export").status_code == 404
    assert client.get("/api/orgs/other/export").status_code == 200  # its own


def test_an_anonymous_caller_is_refused(small):
    assert APIClient().get("/api/orgs/small/export").status_code == 401


def test_exports_are_throttled_per_caller(small, settings, monkeypatch):
    settings.EXPORT_RATE = "2/hour"
    # One fixed instant: the three calls fall in one window whenever the test runs.
    monkeypatch.setattr(ExportRateThrottle, "timer", lambda self: 1_800_000_000.0)
    client = client_for(small.admin)
    statuses = [client.get("/api/orgs/small/export").status_code for _ in range(3)]
    assert statuses == [200, 200, 429]
    assert AuditEvent.objects.filter(org=small.org, action="org.export").count() == 2
    other = client_for(small.viewer)  # another caller's bucket is its own (and refused: 403)
    assert other.get("/api/orgs/small/export").status_code == 403
