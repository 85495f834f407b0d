"""Red team of issue 23's console surfaces (members, personas, sessions, New fragment).

Findings, each fixed where the rule lives:

1. A NUL byte in the username of a member action's URL was a 500 (PostgreSQL refuses NUL in
   text); a name no account can have is "no such member", a 404.
2. An administrator of one organization could lock a person out of another: add an account
   that reads the other organization through a guardian grant (a guest on one repository, no
   membership there), then deactivate it — only memberships counted as "belongs elsewhere".
   Grants now count too. So could a staff account (the installation's admin site), added
   first: only a superuser switches one off now, as a superuser.
3. Deactivating an account checked the last administrator of the page's organization only: a
   superuser deactivating, from organization B's page, the last administrator of organization
   A left A without one (and two administrators of two organizations deactivating each other
   at once could do the same, each locking a different organization's admins). Every
   organization the account administers is now checked, their admins locked together.
4. The New fragment preview rendered the text as typed, secret included — the one place the
   console echoed a detected secret in a rendered answer of its own; the preview now renders
   what the door would store (placeholders), as it says it shows the fragment's page-to-be.
"""

from __future__ import annotations

import threading

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from guardian.shortcuts import assign_perm

from accounts.models import Membership, Role
from contexts.usecases import invitations
from contexts.usecases import members as members_usecase
from tests.console.conftest import HTMX, client_for, notes  # noqa: F401 - fixture
from tests.domain.conftest import cast  # noqa: F401 - fixture
from tests.factories import RepositoryFactory, UserFactory
from tests.secrets.fakes import Secrets

User = get_user_model()


def _is_active(user) -> bool:
    return User.objects.get(pk=user.pk).is_active


def _accept(person) -> None:
    """The invited person accepts their pending invitation (security issue 37)."""
    [invitation] = invitations.pending_for(person)
    invitations.accept(person, invitation.public_id)


# --- 1. NUL in a member URL ------------------------------------------------------------------
@pytest.mark.django_db
@pytest.mark.parametrize("action, data", [
    ("role", {"role": "viewer"}),
    ("repository-role", {"repository": None, "role": "viewer"}),
    ("deactivate", {}),
    ("reactivate", {}),
])
def test_a_nul_byte_in_a_member_url_is_a_404_not_a_500(cast, action, data):
    client = client_for(cast.owner)
    client.raise_request_exception = False
    if "repository" in data:
        data = {**data, "repository": cast.repo.public_id}
    response = client.post(f"/o/acme/members/view%00er/{action}", data)
    assert response.status_code == 404
    assert Membership.objects.get(user=cast.viewer, org=cast.org).role == Role.VIEWER


# --- 2. a guest of another organization ------------------------------------------------------
@pytest.mark.django_db
@pytest.mark.parametrize("grant_on", ["repository", "organization"])
def test_an_admin_cannot_deactivate_a_guest_of_another_organization(cast, grant_on):
    guest = UserFactory(username="guest")
    vault = RepositoryFactory(org=cast.other_org, slug="vault")
    target = vault if grant_on == "repository" else cast.other_org
    assign_perm(f"accounts.view_{grant_on}", guest, target)  # globex's guest, no membership
    client = client_for(cast.owner)  # acme's admin, a stranger to globex
    assert client.post("/o/acme/members/add", {"identifier": "guest",
                                               "role": "viewer"}).status_code == 302
    _accept(guest)  # an invitation, until the guest accepts (security issue 37)
    response = client.post("/o/acme/members/guest/deactivate")
    assert response.status_code == 403
    assert _is_active(guest)


@pytest.mark.django_db
def test_an_admin_cannot_reactivate_a_guest_of_another_organization(cast):
    guest = UserFactory(username="guest", is_active=False)  # deactivated by globex's side
    assign_perm("accounts.view_repository", guest,
                RepositoryFactory(org=cast.other_org, slug="vault"))
    Membership.objects.create(user=guest, org=cast.org, role=Role.VIEWER)
    response = client_for(cast.owner).post("/o/acme/members/guest/reactivate")
    assert response.status_code == 403
    assert not _is_active(guest)


@pytest.mark.django_db
def test_an_account_reaching_only_the_admin_s_organization_is_still_deactivated(cast):
    # The rule is not "never": a guest of acme's own repository is acme's to switch off.
    guest = UserFactory(username="guest")
    assign_perm("accounts.view_repository", guest, cast.repo)
    Membership.objects.create(user=guest, org=cast.org, role=Role.VIEWER)
    assert client_for(cast.owner).post("/o/acme/members/guest/deactivate").status_code == 302
    assert not _is_active(guest)


@pytest.mark.django_db
def test_an_admin_cannot_deactivate_a_staff_account_they_added(cast):
    # A staff account works the installation's admin site, every organization's: the
    # operator's, like a superuser — not an organization administrator's to switch off.
    operator = UserFactory(username="operator", is_staff=True)
    client = client_for(cast.owner)
    assert client.post("/o/acme/members/add", {"identifier": "operator",
                                               "role": "viewer"}).status_code == 302
    _accept(operator)
    assert client.post("/o/acme/members/operator/deactivate").status_code == 403
    assert _is_active(operator)
    root = User.objects.create_superuser("root", "root@example.com", "pw-for-tests-only")
    assert client_for(root).post("/o/acme/members/operator/deactivate").status_code == 302
    assert not _is_active(operator)


# --- 3. the last administrator of another organization ---------------------------------------
@pytest.mark.django_db
def test_deactivating_from_another_organization_keeps_each_organization_s_last_admin(cast):
    # owner is acme's only admin; as a viewer of globex, a superuser deactivates them there.
    Membership.objects.create(user=cast.owner, org=cast.other_org, role=Role.VIEWER)
    root = User.objects.create_superuser("root", "root@example.com", "pw-for-tests-only")
    response = client_for(root).post(f"/o/{cast.other_org.slug}/members/owner/deactivate")
    assert response.status_code == 400
    assert b"last active administrator" in response.content
    assert _is_active(cast.owner)
    assert members_usecase.active_admins(cast.org) == 1


@pytest.mark.django_db(transaction=True)
def test_two_admins_of_two_organizations_deactivating_each_other_at_once_leave_one(
        cast, monkeypatch):
    # alice and bob administer acme and globex, and nobody else does. alice deactivates bob
    # from acme's page while bob deactivates alice from globex's: before, each locked its own
    # page's admins, both counted two active admins, and both organizations were left with none.
    Membership.objects.filter(org__in=[cast.org, cast.other_org], role=Role.ADMIN).update(
        role=Role.VIEWER)
    alice, bob = UserFactory(username="alice"), UserFactory(username="bob")
    for user in (alice, bob):
        for org in (cast.org, cast.other_org):
            Membership.objects.create(user=user, org=org, role=Role.ADMIN)
    # Both requests count before either commits, when the locks let them.
    barrier = threading.Barrier(2)
    counted = members_usecase.active_admins

    def active_admins(org):
        found = counted(org)
        try:
            barrier.wait(timeout=3)
        except threading.BrokenBarrierError:
            pass  # the other request is waiting for our locks: nothing to line up with
        return found

    monkeypatch.setattr(members_usecase, "active_admins", active_admins)
    outcomes: dict[str, object] = {}

    def run(actor, slug, username) -> None:
        try:
            outcomes[username] = client_for(actor).post(
                f"/o/{slug}/members/{username}/deactivate").status_code
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(alice, "acme", "bob")),
               threading.Thread(target=run, args=(bob, cast.other_org.slug, "alice"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(outcomes.values()) == [302, 400], outcomes
    assert [_is_active(alice), _is_active(bob)].count(True) == 1
    assert counted(cast.org) == 1 and counted(cast.other_org) == 1


# --- 4. the preview and a secret --------------------------------------------------------------
@pytest.mark.django_db
@pytest.mark.parametrize("policy", ["redact", "refuse"])
@pytest.mark.parametrize("htmx", [True, False])
def test_the_preview_says_what_the_door_would_do_without_showing_the_secret(cast, notes,
                                                                             settings, policy,
                                                                             htmx):
    settings.SECRET_POLICY = policy
    keys = Secrets(2323)
    body = f"Deploy with the bot.\n\nGITHUB_TOKEN={keys.github_token}\n"
    data = {"kind": "prose", "scope": cast.repo.scope.public_id, "title": "Deploy bot",
            "body": body, "owner": "teammate", "action": "preview"}
    client = client_for(cast.teammate)
    if htmx:
        html = client.post("/o/acme/fragments/new/preview", data, **HTMX).content.decode()
        preview = html
    else:
        html = client.post("/o/acme/fragments/new", data).content.decode()
        # The form keeps the writer's own text in its textarea; the rendered preview must not.
        preview = html[html.index('id="fragment-preview"'):]
    assert "Secrets found: GitHub Token on line 3" in preview
    assert keys.github_token not in preview
    assert "[REDACTED:GitHub Token]" in preview
    assert "Deploy with the bot." in preview


@pytest.mark.django_db
def test_the_preview_of_a_negative_context_hides_the_secret_in_its_parts(cast, notes):
    keys = Secrets(2324)
    data = {"kind": "negative", "scope": cast.repo.scope.public_id, "title": "Bot token",
            "dont": f"Paste GITHUB_TOKEN={keys.github_token} into the runbook.",
            "instead": "Read it from the secret store.", "owner": "teammate"}
    html = client_for(cast.teammate).post("/o/acme/fragments/new/preview", data,
                                          **HTMX).content.decode()
    assert "<dt>Don't</dt>" in html and "Secrets found: GitHub Token" in html
    assert keys.github_token not in html


@pytest.mark.django_db
def test_the_preview_is_nobody_else_s(cast, notes):
    data = {"kind": "prose", "scope": cast.repo.scope.public_id, "title": "t",
            "body": notes.limiter.body, "owner": "owner"}
    assert Client().post("/o/acme/fragments/new/preview", data, **HTMX).status_code == 302
    no_org = client_for(UserFactory(username="loner"))
    assert no_org.post("/o/acme/fragments/new/preview", data, **HTMX).status_code == 404
    csrf = Client(enforce_csrf_checks=True)
    csrf.force_login(cast.teammate)
    assert csrf.post("/o/acme/fragments/new/preview", data, **HTMX).status_code == 403
