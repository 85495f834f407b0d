"""Single sign-on against a real OpenID Connect provider in its own process
(``tests.oidc_provider``): accounts from claims, groups as roles, removal at the provider,
refused ID tokens, and the state and nonce checks. The browser journey is
``tests/browser/test_sso_browser.py``."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from cryptography.fernet import Fernet
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.test import Client
from django.utils import timezone

from accounts import emails
from accounts.models import ExternalIdentity, Membership, Organization, Role
from accounts.permissions import SYSTEM, may
from accounts.tokens import create_token
from contexts.governance import identity
from contexts.governance.tasks import recheck_identities
from contexts.models import AuditEvent, Nudge, Pin
from contexts.models.governance import NudgeState
from contexts.services.fragments import create_fragment
from contexts.sso import oidc
from contexts.usecases import members
from tests.factories import OrganizationFactory, RepositoryFactory, UserFactory
from tests.oidc_provider.fixture import (  # noqa: F401 - oidc_provider is the fixture
    oidc_provider,
    running_provider,
)
from tests.sso.support import (  # noqa: F401 - sso is the fixture
    PASSWORD,
    configure,
    provider_round_trip,
    sign_in,
    sso,
    start,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def acme(db) -> Organization:
    org = OrganizationFactory(slug="acme", name="Acme")
    RepositoryFactory(org=org, slug="payments")
    return org


def _console_as(org: Organization, role: Role) -> tuple[Any, Client]:
    """A local account with ``role`` in ``org`` (granted by hand), and a console signed in."""
    user = UserFactory()
    Membership.objects.create(user=user, org=org, role=role)
    page = Client()
    page.force_login(user)
    return user, page


def _signed_in_user(client: Client):
    user_id = client.session.get("_auth_user_id")
    return get_user_model().objects.get(pk=user_id) if user_id else None


def _actions(org: Organization) -> list[str]:
    return list(AuditEvent.objects.filter(org=org).order_by("pk").values_list("action",
                                                                             flat=True))


def test_a_first_sign_in_creates_the_account_from_the_claims(sso, acme):
    subject = sso.person("alice", name="Alice Liddell", groups=("acme-leads",))
    client = Client()
    response = sign_in(sso, client, "alice")
    assert response.status_code == 302 and response["Location"] == "/"
    user = _signed_in_user(client)
    assert user is not None and user.username == "alice"
    assert (user.email, user.first_name, user.last_name) == ("alice@acme.test", "Alice",
                                                             "Liddell")
    assert not user.has_usable_password()
    linked = ExternalIdentity.objects.get(user=user)
    assert (linked.issuer, linked.subject) == (sso.provider.issuer, subject)
    assert linked.email_verified and linked.groups == ["acme-leads"]
    assert linked.sealed_refresh_token and "alice" not in linked.sealed_refresh_token
    membership = Membership.objects.get(user=user, org=acme)
    assert (membership.role, membership.mapped_role, membership.hand_role) == (
        Role.TECH_LEAD, Role.TECH_LEAD, None)
    assert {"sso.role", "sso.login"} <= set(_actions(acme))
    # Signed in: the console answers, and a second sign-in finds the same account.
    assert client.get("/").status_code == 200
    sign_in(sso, Client(), "alice")
    assert get_user_model().objects.filter(username__startswith="alice").count() == 1


def test_a_group_mapped_to_tech_lead_can_pin(sso, acme):
    sso.person("tina", groups=("acme-leads",))
    client = Client()
    sign_in(sso, client, "tina")
    user = _signed_in_user(client)
    fragment = create_fragment(SYSTEM, acme.scope, title="Deploy policy", kind="policy",
                               body="Deploys go out on Tuesdays only.")
    assert may(user, "pin", acme.scope)
    response = client.post(f"/fragments/{fragment.public_id}/pin",
                           {"scope": acme.scope.public_id})
    assert response.status_code in (200, 302), response.content[:300]
    assert Pin.objects.filter(fragment=fragment, scope=acme.scope).exists()


def test_a_viewer_group_cannot_pin(sso, acme):
    sso.person("vic", groups=("acme-staff",))
    client = Client()
    sign_in(sso, client, "vic")
    user = _signed_in_user(client)
    assert may(user, "view", acme.scope) and not may(user, "pin", acme.scope)


def test_a_repository_grant_comes_through_a_group(sso, acme):
    sso.person("rita", groups=("payments-curators",))
    client = Client()
    sign_in(sso, client, "rita")
    user = _signed_in_user(client)
    payments = acme.repositories.get(slug="payments")
    assert may(user, "curate", payments.scope) and not may(user, "curate", acme.scope)
    assert identity.mapped_repository_roles(user) == {payments.pk: Role.CURATOR}


def test_a_group_removed_at_the_provider_takes_the_role_within_the_interval(sso, acme,
                                                                             settings):
    settings.OIDC_RECHECK_SECONDS = 600
    settings.OIDC_RECHECK_TICK_SECONDS = 150
    sso.person("gus", groups=("acme-leads",))
    client = Client()
    sign_in(sso, client, "gus")
    user = _signed_in_user(client)
    fragment = create_fragment(SYSTEM, acme.scope, title="Runbook", kind="runbook",
                               body="Restart the worker.", owner=user)
    nudge = Nudge.objects.create(org=acme, fragment=fragment, owner=user,
                                 reasons=[{"code": "age", "detail": "old"}])
    sso.person("gus", groups=())  # removed from every group at the provider
    # Early in the interval nobody asks the provider yet.
    soon = timezone.now() + dt.timedelta(seconds=300)
    assert recheck_identities.apply(kwargs={"now": soon.isoformat()}).get()["checked"] == 0
    assert may(user, "pin", acme.scope)
    # At the last beat tick inside the interval, the provider is asked.
    later = timezone.now() + dt.timedelta(seconds=600 - 150 + 1)
    result = recheck_identities.apply(kwargs={"now": later.isoformat()}).get()
    assert result == {"checked": 1, "deprovisioned": 1, "unavailable": 0}
    user.refresh_from_db()
    assert not user.is_active
    assert not Membership.objects.filter(user=user, org=acme).exists()
    assert not may(user, "view", acme.scope)
    nudge.refresh_from_db()
    assert nudge.state == NudgeState.ESCALATED  # the fragment went to the tech leads
    # The session ended: the next request is sent to the login page.
    response = client.get("/")
    assert response.status_code == 302 and "/login/" in response["Location"]
    assert "sso.deprovision" in _actions(acme)


def test_a_person_deactivated_at_the_provider_is_deprovisioned(sso, acme):
    sso.person("dan", groups=("acme-leads",))
    client = Client()
    sign_in(sso, client, "dan")
    user = _signed_in_user(client)
    sso.person("dan", groups=("acme-leads",), active=False)
    identity.recheck_due(timezone.now() + dt.timedelta(days=1))
    user.refresh_from_db()
    assert not user.is_active
    assert ExternalIdentity.objects.get(user=user).deprovisioned_at is not None
    # Back at the provider (and in a group): the next sign-in restores the account.
    sso.person("dan", groups=("acme-staff",))
    sign_in(sso, Client(), "dan")
    user.refresh_from_db()
    assert user.is_active and Membership.objects.get(user=user, org=acme).role == Role.VIEWER


def test_a_mapping_change_never_removes_a_hand_granted_role(sso, acme):
    admin, page = _console_as(acme, Role.ADMIN)
    sso.person("hank", groups=("acme-staff",))
    client = Client()
    sign_in(sso, client, "hank")
    user = _signed_in_user(client)
    members.set_role(admin, members.SetRole(org=acme, username="hank", role=Role.CURATOR))
    sso.person("hank", groups=())
    identity.recheck_due(timezone.now() + dt.timedelta(days=1))
    membership = Membership.objects.get(user=user, org=acme)
    assert (membership.role, membership.hand_role, membership.mapped_role) == (
        Role.CURATOR, Role.CURATOR, None)
    user.refresh_from_db()
    assert user.is_active  # a role given by hand keeps the account
    # … and it stays under watch: the provider is asked about it again next time.
    linked = ExternalIdentity.objects.get(user=user)
    assert linked.deprovisioned_at is None and linked.sealed_refresh_token
    # The members page shows where each role came from.
    html = page.get("/o/acme/members/").content.decode()
    assert "by hand: curator" in html


def test_an_unverified_email_does_not_take_over_a_local_account(sso, acme):
    local = UserFactory(username="bob", email="bob@acme.test")
    emails.mark_verified(local, emails.BY_LINK)  # bob proved the address his (issue 37)
    Membership.objects.create(user=local, org=acme, role=Role.ADMIN)
    sso.person("bob-at-idp", email="bob@acme.test", verified=False, groups=("acme-leads",))
    client = Client()
    response = sign_in(sso, client, "bob-at-idp")
    assert response.status_code == 403
    assert "has not verified the address" in response.content.decode()
    assert _signed_in_user(client) is None
    assert not ExternalIdentity.objects.filter(user=local).exists()
    assert "sso.login_failed" in _actions(acme)
    # Verified, the same address links to the local account (no second account).
    sso.person("bob-at-idp", email="bob@acme.test", verified=True, groups=("acme-leads",))
    sign_in(sso, client, "bob-at-idp")
    assert _signed_in_user(client) == local
    assert Membership.objects.get(user=local, org=acme).hand_role == Role.ADMIN


@pytest.mark.parametrize(("mode", "why"), [
    ("bad_signature", "signature does not verify"),
    ("wrong_audience", "issued for another application"),
    ("expired", "it has expired"),
])
def test_a_tampered_id_token_is_refused_with_a_clear_page(sso, acme, mode, why):
    sso.person("tom", groups=("acme-leads",))
    sso.provider.tamper(mode)
    client = Client()
    response = sign_in(sso, client, "tom")
    assert response.status_code == 403
    page = response.content.decode()
    assert "Sign-in refused" in page and why in page, page
    assert _signed_in_user(client) is None
    assert not get_user_model().objects.filter(username="tom").exists()
    assert "sso.login_failed" in _actions(acme)


def test_the_state_is_checked(sso, acme):
    sso.person("sam", groups=("acme-leads",))
    started = Client()
    callback = provider_round_trip(sso, start(started), "sam")
    other_browser = Client()
    other_browser.get("/login/sso/")  # a sign-in of its own, with another state
    response = other_browser.get(callback)
    assert response.status_code == 403 and "state does not match" in response.content.decode()
    assert _signed_in_user(other_browser) is None
    # Anyone can send a callback with a made-up state: it writes no audit event.
    before = AuditEvent.objects.count()
    for n in range(20):
        assert Client().get(f"/login/sso/callback/?code=x&state=forged-{n}").status_code == 403
    assert AuditEvent.objects.count() == before


def test_hostile_callbacks_are_refused_cleanly_and_sign_nobody_in(sso, acme):
    sso.person("sam", groups=("acme-leads",))
    client = Client()
    callback = urlsplit(provider_round_trip(sso, start(client), "sam"))
    real = parse_qs(callback.query)
    code, state = real["code"][0], real["state"][0]
    before = AuditEvent.objects.count()
    hostile = [
        {"code": code, "state": state + "\x00"},          # NUL byte in the state
        {"code": "x\x00y", "state": "s\x00"},             # NUL bytes in both
        {"code": "x" * 20_000, "state": "s" * 20_000},    # oversized
        {"code": code},                                    # no state
        {"error": "access_denied", "state": "\x00"},      # the provider's error, mangled
    ]
    for query in hostile * 20:  # over and over, on one client: no 500, nothing left behind
        response = client.get("/login/sso/callback/", query)
        assert response.status_code in (400, 403), (query.keys(), response.status_code)
        assert _signed_in_user(client) is None
    assert AuditEvent.objects.count() == before  # anyone can send these: no audit event
    # This browser's own sign-in answered without a code: refused, said, audited once.
    response = client.get("/login/sso/callback/", {"state": state})
    assert response.status_code == 403
    assert "carried no authorization code" in response.content.decode()
    assert _actions(acme) == ["sso.login_failed"]
    assert client.get("/login/sso/callback/", {"state": state}).status_code == 403
    assert _actions(acme) == ["sso.login_failed"]  # that sign-in is over
    assert not get_user_model().objects.filter(username__startswith="sam").exists()


def test_the_nonce_is_checked(sso, acme):
    sso.person("nina", groups=("acme-leads",))
    client = Client()
    callback = provider_round_trip(sso, start(client), "nina")
    session = client.session
    key = next(k for k in session.keys() if k.startswith("_state_"))
    stored = session[key]
    stored["data"]["nonce"] = "not-the-nonce-the-provider-signed"
    session[key] = stored
    session.save()
    response = client.get(callback)
    assert response.status_code == 403
    assert "nonce" in response.content.decode()
    assert _signed_in_user(client) is None


def test_someone_in_no_mapped_group_gets_no_account(sso, acme):
    sso.person("nobody", groups=("some-other-team",))
    client = Client()
    response = sign_in(sso, client, "nobody")
    assert response.status_code == 403 and "not in any group" in response.content.decode()
    assert not get_user_model().objects.filter(username="nobody").exists()


def test_allowed_domains_are_enforced(sso, acme, settings):
    settings.OIDC_ALLOWED_DOMAINS = ["example.org"]
    sso.person("eve", groups=("acme-leads",))
    response = sign_in(sso, Client(), "eve")
    assert response.status_code == 403 and "domain" in response.content.decode()


def test_the_login_page_offers_the_provider_and_can_switch_passwords_off(sso, acme,
                                                                         settings):
    page = Client().get("/login/").content.decode()
    assert 'id="sso-login"' in page and 'name="password"' in page
    settings.LOCAL_LOGIN_ENABLED = False
    page = Client().get("/login/").content.decode()
    assert 'id="sso-login"' in page and 'name="password"' not in page
    user = UserFactory()
    response = Client().post("/login/", {"username": user.username,
                                         "password": "pw-for-tests-only"})
    # Refused like a wrong password (tests/security/test_redteam3_7_password_login_off.py).
    assert response.status_code == 200 and "_auth_user_id" not in response.wsgi_request.session
    assert "Password login is switched off" in response.content.decode()
    # The operator's accounts keep their password (single sign-on never links them).
    operator = UserFactory(is_staff=True, is_superuser=True)
    assert 'name="password"' in Client().get("/login/?operator").content.decode()
    response = Client().post("/login/?operator", {"username": operator.username,
                                                  "password": "pw-for-tests-only"})
    assert response.status_code == 302


def test_an_admin_revokes_the_tokens_a_departed_person_minted(sso, acme):
    admin, page = _console_as(acme, Role.ADMIN)
    sso.person("mia", groups=("acme-leads",))
    client = Client()
    sign_in(sso, client, "mia")
    mia = _signed_in_user(client)
    minted = [create_token(acme, f"agent-{n}", [acme.scope], created_by=mia)[0]
              for n in range(2)]
    kept, _ = create_token(acme, "admin's", [acme.scope], created_by=admin)
    assert "Revoke 2 tokens" in page.get("/o/acme/members/").content.decode()
    response = page.post("/o/acme/members/mia/revoke-tokens")
    assert response.status_code == 302
    for token in minted:
        token.refresh_from_db()
        assert token.revoked_at is not None
    kept.refresh_from_db()
    assert kept.revoked_at is None
    assert "member.tokens_revoked" in _actions(acme)
    # Only administrators may.
    assert Client().post("/o/acme/members/mia/revoke-tokens").status_code == 302  # to login
    assert client.post("/o/acme/members/mia/revoke-tokens").status_code == 403


def test_the_group_mapping_is_checked_and_says_where(settings):
    settings.OIDC_GROUP_MAPPING = json.dumps({"g": [{"org": "acme", "role": "owner"}]})
    oidc.reset()
    with pytest.raises(ImproperlyConfigured, match=r"OIDC_GROUP_MAPPING\['g'\]\[0\].*role"):
        oidc.group_mapping()
    settings.OIDC_GROUP_MAPPING = "{not json"
    oidc.reset()
    with pytest.raises(ImproperlyConfigured, match="not JSON"):
        oidc.group_mapping()
    oidc.reset()


def test_the_redirect_asks_for_a_code_with_pkce_state_and_nonce(sso, acme, settings):
    settings.OIDC_AUTHORIZE_PARAMS = "access_type=offline&prompt=consent"
    oidc.reset()
    url = start(Client())
    query = parse_qs(urlsplit(url).query)
    assert url.startswith(sso.provider.issuer)
    assert query["response_type"] == ["code"] and query["client_id"] == [sso.client_id]
    assert query["code_challenge_method"] == ["S256"] and len(query["code_challenge"][0]) >= 43
    assert query["state"][0] and query["nonce"][0]
    assert query["access_type"] == ["offline"] and query["prompt"] == ["consent"]


def test_organization_admins_see_sign_ins_and_role_changes(sso, acme):
    _admin, page = _console_as(acme, Role.ADMIN)
    sso.person("ivy", groups=("acme-leads",))
    sign_in(sso, Client(), "ivy")
    sso.provider.tamper("expired")
    sign_in(sso, Client(), "ivy")
    sso.provider.tamper("none")
    html = page.get("/o/acme/members/").content.decode()
    for action in ("sso.login", "sso.role", "sso.login_failed"):
        assert f"<code>{action}</code>" in html, action
    assert "it has expired" in html
    # A curator (not an administrator) does not see them.
    _curator, viewer = _console_as(acme, Role.CURATOR)
    assert viewer.get("/o/acme/members/").status_code == 403


def test_an_operator_account_is_never_linked_by_e_mail(sso, acme):
    root = UserFactory(username="root", email="root@acme.test", is_superuser=True,
                       is_staff=True)
    sso.person("root-at-idp", email="root@acme.test", verified=True, groups=("acme-leads",))
    client = Client()
    response = sign_in(sso, client, "root-at-idp")
    assert response.status_code == 403 and "operator account" in response.content.decode()
    assert _signed_in_user(client) is None
    assert not ExternalIdentity.objects.filter(user=root).exists()


def test_a_refresh_token_that_does_not_open_is_dropped_not_read_as_a_refusal(sso, acme):
    sso.person("kim", groups=("acme-leads",))
    client = Client()
    sign_in(sso, client, "kim")
    user = _signed_in_user(client)
    # As after a SECRET_KEY rotation: sealed under another key.
    other = Fernet(Fernet.generate_key()).encrypt(b"a refresh token").decode()
    ExternalIdentity.objects.filter(user=user).update(sealed_refresh_token=other)
    result = identity.recheck_due(timezone.now() + dt.timedelta(days=1))
    assert result == {"checked": 0, "deprovisioned": 0, "unavailable": 1}
    user.refresh_from_db()
    assert user.is_active and may(user, "pin", acme.scope)
    assert ExternalIdentity.objects.get(user=user).sealed_refresh_token == ""


def test_a_group_mapped_only_to_a_missing_organization_makes_no_account(sso, acme, settings):
    settings.OIDC_GROUP_MAPPING = json.dumps({"ghost-team": [{"org": "ghost", "role": "admin"}]})
    oidc.reset()
    sso.person("gina", groups=("ghost-team",))
    response = sign_in(sso, Client(), "gina")
    assert response.status_code == 403 and "not in any group" in response.content.decode()
    assert not get_user_model().objects.filter(username="gina").exists()


def test_groups_the_provider_does_not_state_are_kept(settings):
    settings.OIDC_GROUPS_CLAIM = "groups"
    assert oidc.states_groups({"sub": "1", "groups": []})
    assert not oidc.states_groups({"sub": "1"})  # e.g. Entra ID's userinfo


def test_a_provider_that_stops_answering_gets_a_clear_page(settings, acme, tmp_path):
    with running_provider(tmp_path) as provider:
        own = configure(settings, provider, ("http://testserver/login/sso/callback/",))
        own.person("pat", groups=("acme-leads",))
        client = Client()
        callback = provider_round_trip(own, start(client), "pat")
    # The provider is gone before the console exchanges the code.
    response = client.get(callback)
    assert response.status_code == 403
    assert "cannot be reached" in response.content.decode()
    assert _signed_in_user(client) is None
    oidc.reset()


def test_memberships_from_before_sso_become_hand_grants(sso, acme):
    """Migration 0007: a membership written before the two grants existed was given by hand,
    so the mapping never deletes it."""
    from importlib import import_module

    from django.apps import apps

    migration = import_module("accounts.migrations.0007_hand_roles_of_existing_memberships")
    old = UserFactory(username="olga", email="olga@acme.test")
    emails.mark_verified(old, emails.BY_OPERATOR)  # linked only through an owner's address
    Membership.objects.create(user=old, org=acme, role=Role.CURATOR)
    Membership.objects.filter(user=old).update(hand_role=None)  # as stored before 0006
    migration.forwards(apps, None)
    assert Membership.objects.get(user=old).hand_role == Role.CURATOR
    # Linked through the provider and then in no mapped group: the hand grant stays.
    sso.person("olga-idp", email="olga@acme.test", groups=("acme-leads",))
    sign_in(sso, Client(), "olga-idp")
    sso.person("olga-idp", email="olga@acme.test", groups=())
    identity.recheck_due(timezone.now() + dt.timedelta(days=1))
    membership = Membership.objects.get(user=old, org=acme)
    assert (membership.role, membership.hand_role, membership.mapped_role) == (
        Role.CURATOR, Role.CURATOR, None)
