"""Red-team 3, finding 1 (high): an organization admin could take over another person's
single-sign-on identity.

Before: acme's administrator created an account with globex's tech lead's e-mail address and
set its password through the set-password link shown to them. At the tech lead's first sign-in
through the identity provider, the identity was linked to that account by e-mail, so the
administrator now held globex tech-lead rights with a password of their own.

After: a first sign-in links to an existing account only when that account's owner verified
the address (``accounts.emails``): by setting the password through the link e-mailed to it —
whose signed proof the administrator's copy of the link lacks — or through the provider, or by
the operator. An address an administrator typed is unverified: the sign-in makes a new account,
and the administrator's account gets none of the person's roles. Runs against the real OpenID
Connect provider (``tests/oidc_provider``), as ``tests/sso`` does.
"""

from __future__ import annotations

import json
import re
from importlib import import_module

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.test import Client

from accounts import emails
from accounts.models import ExternalIdentity, Membership, Organization, Role, VerifiedEmail
from accounts.permissions import may
from contexts.sso import oidc
from tests.console.conftest import client_for
from tests.factories import OrganizationFactory, RepositoryFactory, UserFactory
from tests.oidc_provider.fixture import (  # noqa: F401 - oidc_provider is the fixture
    oidc_provider,
    running_provider,
)
from tests.sso.support import sign_in, sso  # noqa: F401 - sso is the fixture

pytestmark = pytest.mark.django_db
User = get_user_model()
PASSPHRASE = "a long pass phrase " + "for tests 37"


@pytest.fixture
def tenants(sso, settings) -> dict:
    """Two tenants: acme with its administrator (the attacker), globex whose tech leads come
    from the provider's group ``globex-leads``."""
    acme = OrganizationFactory(slug="acme", name="Acme")
    globex = OrganizationFactory(slug="globex", name="Globex")
    vault = RepositoryFactory(org=globex, slug="vault")
    attacker = UserFactory(username="wile")
    Membership.objects.create(user=attacker, org=acme, role=Role.ADMIN)
    settings.OIDC_GROUP_MAPPING = json.dumps({
        "globex-leads": [{"org": "globex", "role": "tech_lead"}],
        "acme-staff": [{"org": "acme", "role": "viewer"}],
    })
    oidc.reset()
    return {"acme": acme, "globex": globex, "vault": vault, "attacker": attacker}


def _signed_in(client: Client):
    user_id = client.session.get("_auth_user_id")
    return User.objects.get(pk=user_id) if user_id else None


def _create_account(admin, org: Organization, username: str, email: str) -> tuple[str, str]:
    """The administrator creates an account on the members page; returns (the link shown to
    the administrator, the link e-mailed to the address)."""
    from django.core import mail

    sent = len(mail.outbox)
    response = client_for(admin).post(f"/o/{org.slug}/members/create", {
        "username": username, "email": email, "role": "viewer"})
    assert response.status_code == 201, response.content[:300]
    shown = re.search(r'value="http://testserver(/account/set-password/[^"]+)"',
                      response.content.decode()).group(1)
    [message] = mail.outbox[sent:]
    assert message.to == [email]
    emailed = re.search(r"https?://\S+(/account/set-password/\S+)", message.body).group(1)
    return shown, emailed


def _set_password(link: str) -> None:
    client = Client()
    form = client.get(link, follow=True)
    assert b"new_password1" in form.content, "the link works"
    done = client.post(form.redirect_chain[-1][0], {"new_password1": PASSPHRASE,
                                                    "new_password2": PASSPHRASE})
    assert done.status_code == 302


def test_an_admin_created_account_does_not_receive_the_victim_s_identity(sso, tenants,
                                                                          mailoutbox):
    attacker, globex = tenants["attacker"], tenants["globex"]
    shown, _emailed = _create_account(attacker, tenants["acme"], "gina-copy",
                                      "gina@globex.test")
    _set_password(shown)  # the attacker now knows this account's password
    copy = User.objects.get(username="gina-copy")
    assert copy.check_password(PASSPHRASE) and not emails.is_verified(copy)

    sso.person("rt37-gina", email="gina@globex.test", verified=True, groups=("globex-leads",))
    client = Client()
    assert sign_in(sso, client, "rt37-gina").status_code == 302
    gina = _signed_in(client)
    assert gina is not None and gina.pk != copy.pk, "a new account, not the admin's"
    assert Membership.objects.get(user=gina, org=globex).role == Role.TECH_LEAD
    assert emails.is_verified(gina)  # the provider vouched for the address it sent
    # The administrator's account holds none of it.
    assert not ExternalIdentity.objects.filter(user=copy).exists()
    assert not Membership.objects.filter(user=copy, org=globex).exists()
    copy = User.objects.get(pk=copy.pk)
    assert not may(copy, "view", tenants["vault"].scope)
    assert not may(copy, "pin", globex.scope)
    attacker_console = Client()
    assert attacker_console.login(username="gina-copy", password=PASSPHRASE)
    assert attacker_console.get("/o/globex/").status_code == 404
    # Signing in again finds the person's own account.
    again = Client()
    sign_in(sso, again, "rt37-gina")
    assert _signed_in(again) == gina


def test_a_proof_from_another_of_the_admin_s_accounts_verifies_nothing(sso, tenants,
                                                                         mailoutbox):
    """The attacker creates a second account with their own address (so they receive its
    e-mailed link and its proof) and replays that proof on the copy's link."""
    attacker = tenants["attacker"]
    shown, _ = _create_account(attacker, tenants["acme"], "hank-copy", "hank@globex.test")
    _, own_emailed = _create_account(attacker, tenants["acme"], "wile-2", "wile@acme.test")
    proof = own_emailed.split("?proof=", 1)[1]
    _set_password(f"{shown}?proof={proof}")
    copy = User.objects.get(username="hank-copy")
    assert copy.check_password(PASSPHRASE) and not emails.is_verified(copy)
    _set_password(f"{own_emailed.split('?')[0]}?proof=forged.value:x")  # forged: nothing
    assert not emails.is_verified(User.objects.get(username="wile-2"))

    sso.person("rt37-hank", email="hank@globex.test", verified=True, groups=("globex-leads",))
    client = Client()
    sign_in(sso, client, "rt37-hank")
    assert _signed_in(client).pk != copy.pk
    assert not Membership.objects.filter(user=copy, org=tenants["globex"]).exists()


def test_an_account_whose_owner_used_the_e_mailed_link_is_linked(sso, tenants, mailoutbox):
    _, emailed = _create_account(tenants["attacker"], tenants["acme"], "ivy", "ivy@globex.test")
    _set_password(emailed)  # Ivy read her mailbox: the address is hers
    ivy = User.objects.get(username="ivy")
    assert emails.is_verified(ivy)
    assert VerifiedEmail.objects.get(user=ivy).how == emails.BY_LINK

    sso.person("rt37-ivy", email="ivy@globex.test", verified=True, groups=("globex-leads",))
    client = Client()
    sign_in(sso, client, "rt37-ivy")
    assert _signed_in(client) == ivy
    assert ExternalIdentity.objects.get(user=ivy).issuer == sso.provider.issuer
    assert Membership.objects.get(user=ivy, org=tenants["globex"]).role == Role.TECH_LEAD
    # A verification holds for the address proved: another address is unverified again.
    User.objects.filter(pk=ivy.pk).update(email="ivy@elsewhere.test")
    assert not emails.is_verified(User.objects.get(pk=ivy.pk))


def test_an_unverified_claim_on_an_admin_typed_address_makes_a_new_account(sso, tenants,
                                                                           mailoutbox):
    """Before, a provider not vouching for the address was refused outright when any account
    had it; an administrator could so lock the person out. Now the typed address counts for
    nothing and the person gets their own account."""
    _create_account(tenants["attacker"], tenants["acme"], "jo-copy", "jo@globex.test")
    sso.person("rt37-jo", email="jo@globex.test", verified=False, groups=("globex-leads",))
    client = Client()
    assert sign_in(sso, client, "rt37-jo").status_code == 302
    jo = _signed_in(client)
    assert jo.username != "jo-copy" and not emails.is_verified(jo)
    assert not Membership.objects.filter(user__username="jo-copy",
                                         org=tenants["globex"]).exists()


def test_existing_accounts_are_verified_by_the_migration_only_through_the_provider(db):
    migration = import_module("accounts.migrations.0008_verified_emails_and_invitations")
    linked = UserFactory(username="linked", email="linked@globex.test")
    ExternalIdentity.objects.create(user=linked, issuer="https://idp.test", subject="1",
                                    email="linked@globex.test", email_verified=True)
    unvouched = UserFactory(username="unvouched", email="unvouched@globex.test")
    ExternalIdentity.objects.create(user=unvouched, issuer="https://idp.test", subject="2",
                                    email="unvouched@globex.test", email_verified=False)
    moved = UserFactory(username="moved", email="moved-now@globex.test")
    ExternalIdentity.objects.create(user=moved, issuer="https://idp.test", subject="3",
                                    email="moved-then@globex.test", email_verified=True)
    local = UserFactory(username="local", email="local@globex.test")
    migration.provider_verified(apps, None)
    assert emails.is_verified(linked)
    assert not any(emails.is_verified(user) for user in (unvouched, moved, local))
