"""The console's Organizations page, for superusers (issue 40, item 2; docs/console.md
"Organizations"): create an organization with its first administrator (a new account's
set-password link shown once) and a repository in it, through the use case the operator's
commands use. Nobody else sees the page or its navigation item (404)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from accounts.models import Membership, Organization, Repository, Role
from contexts.models import AuditEvent
from tests.console.conftest import client_for
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def root(db):
    return UserFactory(username="root", is_superuser=True, is_staff=True)


def test_a_superuser_creates_an_organization_and_a_repository(root, settings, tmp_path):
    settings.LEXICAL_INDEX_DIR = tmp_path / "index"
    client = client_for(root)
    page = client.get("/organizations/")
    assert page.status_code == 200
    assert 'href="/organizations/"' in page.content.decode()  # in the navigation
    created = client.post("/organizations/create", {
        "org-slug": "acme", "org-name": "Acme Corp", "org-admin": "ada",
        "org-email": "ada@example.com"})
    assert created.status_code == 201
    assert created["Cache-Control"] == "no-store"
    html = created.content.decode()
    assert "/account/set-password/" in html and "Acme Corp" in html
    org = Organization.objects.get(slug="acme")
    ada = get_user_model().objects.get(username="ada")
    assert Membership.objects.get(org=org, user=ada).role == Role.ADMIN
    assert AuditEvent.objects.filter(action="org.create", org=org, actor=root).exists()

    response = client.post("/organizations/repositories/create", {
        "repo-org": "acme", "repo-slug": "web", "repo-name": "Web app"})
    assert response.status_code == 302
    assert Repository.objects.get(org=org, slug="web").name == "Web app"
    assert AuditEvent.objects.filter(action="repository.create", org=org, actor=root).exists()
    listing = client.get("/organizations/").content.decode()
    assert 'id="org-acme"' in listing and "ada" in listing


def test_bad_input_is_a_400_naming_the_field(root):
    client = client_for(root)
    Organization.objects.create(slug="acme", name="Acme")
    taken = client.post("/organizations/create", {
        "org-slug": "acme", "org-name": "Again", "org-admin": "ada",
        "org-email": "ada@example.com"})
    assert taken.status_code == 400
    assert "exists already" in taken.content.decode()
    no_email = client.post("/organizations/create", {
        "org-slug": "fresh", "org-name": "Fresh", "org-admin": "ada"})
    assert no_email.status_code == 400
    assert "enter a valid e-mail address" in no_email.content.decode()
    bad_repo = client.post("/organizations/repositories/create", {
        "repo-org": "acme", "repo-slug": "Not A Slug"})
    assert bad_repo.status_code == 400
    assert Organization.objects.count() == 1 and not Repository.objects.exists()
    assert not get_user_model().objects.filter(username="ada").exists()


def test_nobody_else_sees_the_page(cast):
    for person in (cast.owner, cast.lead, cast.viewer):
        client = client_for(person)
        assert client.get("/organizations/").status_code == 404
        assert client.post("/organizations/create", {
            "org-slug": "mine", "org-name": "Mine", "org-admin": person.username}
        ).status_code == 404
        assert client.post("/organizations/repositories/create", {
            "repo-org": cast.org.slug, "repo-slug": "sneaky"}).status_code == 404
        assert "/organizations/" not in client.get(f"/o/{cast.org.slug}/").content.decode()
    assert not Organization.objects.filter(slug="mine").exists()
    assert not Repository.objects.filter(slug="sneaky").exists()
