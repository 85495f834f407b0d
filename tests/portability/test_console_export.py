"""The Members page's Export button: an administrator downloads the archive (audited); a
member without the role is refused, and a stranger cannot tell the organization exists."""

from __future__ import annotations

import io
import tarfile

import pytest
from django.test import Client

from accounts.models import Role
from contexts.models import AuditEvent
from tests.factories import MembershipFactory, OrganizationFactory, UserFactory

pytestmark = pytest.mark.django_db


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_an_administrator_exports_from_the_members_page(small):
    client = logged_in(small.admin)
    page = client.get("/o/small/members/")
    assert page.status_code == 200
    assert b'action="/o/small/export"' in page.content and b"Export Small" in page.content
    response = client.post("/o/small/export")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/gzip"
    with tarfile.open(fileobj=io.BytesIO(b"".join(response.streaming_content))) as tar:
        assert "fragments.jsonl" in tar.getnames()
    event = AuditEvent.objects.get(org=small.org, action="org.export")
    assert event.actor == small.admin


def test_the_export_is_a_post_for_administrators_only(small):
    assert logged_in(small.admin).get("/o/small/export").status_code == 405
    assert logged_in(small.viewer).post("/o/small/export").status_code == 403
    stranger = UserFactory(username="stan")
    MembershipFactory(user=stranger, org=OrganizationFactory(slug="elsewhere"),
                      role=Role.ADMIN)
    assert logged_in(stranger).post("/o/small/export").status_code == 404
    assert not AuditEvent.objects.filter(action="org.export").exists()
