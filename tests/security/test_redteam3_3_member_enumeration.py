"""Red-team 3, finding 3 (medium): account enumeration and adding people without consent.

Before: an organization administrator looked up any account of the installation by username
or e-mail ("no account has this …" or "added"), added it to their organization without its
owner's consent, and then read its username and e-mail on the members page and in exports; and
an account they created with another tenant's address blocked that person's first sign-in.

After: "add" is an invitation the person accepts or declines on their home page; only
accepting makes the membership (with the invited role). The administrator's answer, members
page and export read the same whether the identifier names an account outside their
organizations or nothing: a pending invitation shows only what they typed, never the account's
username or e-mail. An e-mail address reaches only an account whose owner verified it, and an
address an administrator typed into a new account neither reaches nor blocks anyone.
"""

from __future__ import annotations

import json
import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from accounts import emails
from accounts.models import Invitation, InvitationState, Membership, Role
from accounts.permissions import may
from contexts.models import AuditEvent
from contexts.portability.export import export_files
from contexts.sso import oidc
from tests.console.conftest import client_for
from tests.domain.conftest import cast  # noqa: F401 - fixture
from tests.factories import UserFactory
from tests.oidc_provider.fixture import (  # noqa: F401 - oidc_provider is the fixture
    oidc_provider,
    running_provider,
)
from tests.sso.support import sign_in, sso  # noqa: F401 - sso is the fixture

pytestmark = pytest.mark.django_db
User = get_user_model()


@pytest.fixture
def gina(cast):
    """globex's tech lead: an account acme's administrator (cast.owner) has no business with.
    She proved her address by the e-mailed set-password link."""
    person = UserFactory(username="gina", email="gina@globex.test")
    emails.mark_verified(person, emails.BY_LINK)
    Membership.objects.create(user=person, org=cast.other_org, role=Role.TECH_LEAD)
    return person


def _invite(client: Client, identifier: str, role: str = "tech_lead"):
    return client.post("/o/acme/members/add", {"identifier": identifier, "role": role},
                       follow=True)


def _answer_shape(response, identifier: str) -> tuple:
    """What the administrator sees of one "add": status, where it leads, the messages and the
    invitation's row — with what they typed and the row's id taken out."""
    page = response.content.decode()
    [row] = re.findall(r'<tr id="invitation-[^"]+">.*?</tr>', page, re.S)
    messages = [str(m) for m in response.context["messages"]]

    def neutral(text: str) -> str:
        text = text.replace(identifier, "<typed>")
        text = re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "", text)
        return re.sub(r"inv_[0-9a-z]{14}", "<id>", re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d", "", text))

    return (response.redirect_chain, response.status_code, [neutral(m) for m in messages],
            neutral(row))


def test_inviting_an_account_outside_the_organization_reads_like_inviting_nobody(cast, gina):
    answers = []
    for identifier in ("gina@globex.test", "ghost@globex.test", "gina", "ghost"):
        client = client_for(cast.owner)
        response = _invite(client, identifier)
        answers.append(_answer_shape(response, identifier))
        Invitation.objects.filter(org=cast.org).update(state=InvitationState.WITHDRAWN)
    assert answers[0] == answers[1] and answers[2] == answers[3]
    assert answers[0][1] == 200 and answers[0][0][0][1] == 302
    assert "if such an account exists" in answers[0][2][0]
    # Nothing in the answer, the page or the audit names the account: only what was typed.
    page = client_for(cast.owner).get("/o/acme/members/").content.decode()
    assert "globex" not in page.replace("gina@globex.test", "").replace("ghost@globex.test", "")
    for event in AuditEvent.objects.filter(org=cast.org, action="member.invite"):
        assert set(event.after) == {"invitation", "identifier", "role"}
        assert event.object_type == "invitation"
    # A deactivated account reads the same too.
    UserFactory(username="gone", is_active=False)
    assert _answer_shape(_invite(client_for(cast.owner), "gone"), "gone") == answers[3]


def test_no_membership_and_nothing_shown_until_the_person_accepts(cast, gina):
    admin = client_for(cast.owner)
    _invite(admin, "gina")
    assert not Membership.objects.filter(user=gina, org=cast.org).exists()
    assert not may(gina, "view", cast.repo.scope)
    page = admin.get("/o/acme/members/").content.decode()
    assert "gina@globex.test" not in page
    assert 'id="member-gina"' not in page
    files = export_files(cast.org)
    # Only what the administrator typed ("gina", in the invitation's audit event) is there.
    assert not any(b"gina@globex.test" in content for content in files.values())
    assert b"gina" not in files["users.jsonl"] + files["memberships.jsonl"]

    # Gina sees it on her home page, and accepts: then she is a member, with the role.
    home = client_for(gina).get("/").content.decode()
    assert "Acme</strong> invites you as tech lead" in home
    [invitation] = Invitation.objects.filter(user=gina)
    answer = client_for(gina).post(f"/invitations/{invitation.public_id}/answer",
                                   {"answer": "accept"})
    assert answer.status_code == 302 and answer["Location"] == "/o/acme/"
    membership = Membership.objects.get(user=gina, org=cast.org)
    assert (membership.role, membership.hand_role) == (Role.TECH_LEAD, Role.TECH_LEAD)
    assert may(gina, "pin", cast.repo.scope)
    accepted = AuditEvent.objects.get(org=cast.org, action="member.accept")
    assert accepted.actor == gina and accepted.after["role"] == "tech_lead"
    # A member now: the page and the export show her.
    assert "gina@globex.test" in admin.get("/o/acme/members/").content.decode()
    assert b"gina@globex.test" in export_files(cast.org)["users.jsonl"]
    # The invitation is spent: answering it again is a 404.
    assert client_for(gina).post(f"/invitations/{invitation.public_id}/answer",
                                 {"answer": "accept"}).status_code == 404


def test_declining_leaves_no_membership_and_names_nobody(cast, gina):
    _invite(client_for(cast.owner), "gina@globex.test", role="admin")
    [invitation] = Invitation.objects.filter(user=gina)
    response = client_for(gina).post(f"/invitations/{invitation.public_id}/answer",
                                     {"answer": "decline"})
    assert response.status_code == 302
    assert not Membership.objects.filter(user=gina, org=cast.org).exists()
    invitation.refresh_from_db()
    assert invitation.state == InvitationState.DECLINED and invitation.answered_at
    declined = AuditEvent.objects.get(org=cast.org, action="member.decline")
    assert declined.actor is None and "gina" not in json.dumps(declined.after).replace(
        "gina@globex.test", "")
    files = export_files(cast.org)
    assert b"gina" not in files["users.jsonl"] + files["memberships.jsonl"]
    assert "invites you" not in client_for(gina).get("/").content.decode()


def test_nobody_else_may_answer_or_withdraw_an_invitation(cast, gina):
    _invite(client_for(cast.owner), "gina")
    [invitation] = Invitation.objects.filter(user=gina)
    url = f"/invitations/{invitation.public_id}/answer"
    for other in (cast.owner, cast.stranger, cast.viewer):
        assert client_for(other).post(url, {"answer": "accept"}).status_code == 404
    assert client_for(gina).post(url, {"answer": "maybe"}).status_code == 400
    withdraw = f"/o/acme/members/invitations/{invitation.public_id}/withdraw"
    assert client_for(cast.viewer).post(withdraw).status_code == 403
    assert client_for(cast.stranger).post(withdraw).status_code == 404
    assert not Membership.objects.filter(user=gina, org=cast.org).exists()
    # Its own administrator withdraws it; Gina's answer then finds nothing.
    assert client_for(cast.owner).post(withdraw).status_code == 302
    assert client_for(gina).post(url, {"answer": "accept"}).status_code == 404
    assert not Membership.objects.filter(user=gina, org=cast.org).exists()


def test_an_admin_typed_address_does_not_divert_an_invitation(cast):
    """globex's administrator creates an account with Lena's address; acme's administrator
    then invites "lena@initech.test": it reaches Lena, never the copy."""
    lena = UserFactory(username="lena", email="lena@initech.test")
    emails.mark_verified(lena, emails.BY_LINK)
    created = client_for(cast.stranger).post("/o/globex/members/create", {
        "username": "lena-copy", "email": "LENA@initech.test", "role": "viewer"})
    assert created.status_code == 201  # allowed, and says nothing about Lena
    copy = User.objects.get(username="lena-copy")
    assert not emails.is_verified(copy)
    _invite(client_for(cast.owner), "lena@initech.test")
    assert Invitation.objects.get(identifier="lena@initech.test").user == lena
    assert not Invitation.objects.filter(user=copy).exists()
    assert client_for(copy).get("/").content.decode().count("invites you") == 0
    # An address nobody verified names nobody: the invitation goes to no account at all.
    UserFactory(username="hal", email="hal@globex.test")
    _invite(client_for(cast.owner), "hal@globex.test")
    assert Invitation.objects.get(identifier="hal@globex.test").user is None


def test_an_admin_typed_address_does_not_block_the_owner_s_first_sign_in(cast, sso, settings):
    """Two administrators each type Kim's address into an account; Kim's first sign-in
    through the provider still works, on an account of her own."""
    settings.OIDC_GROUP_MAPPING = json.dumps({"globex-leads": [{"org": "globex",
                                                                "role": "tech_lead"}]})
    oidc.reset()
    for admin, org, username in ((cast.owner, "acme", "kim-a"), (cast.stranger, "globex",
                                                                  "kim-b")):
        assert client_for(admin).post(f"/o/{org}/members/create", {
            "username": username, "email": "kim@globex.test",
            "role": "viewer"}).status_code == 201
    sso.person("rt37-kim", email="kim@globex.test", verified=True, groups=("globex-leads",))
    client = Client()
    response = sign_in(sso, client, "rt37-kim")
    assert response.status_code == 302 and response["Location"] == "/"
    kim = User.objects.get(pk=client.session["_auth_user_id"])
    assert kim.username not in ("kim-a", "kim-b")
    assert Membership.objects.get(user=kim, org=cast.other_org).role == Role.TECH_LEAD
    assert not Membership.objects.filter(user__username__in=["kim-a", "kim-b"],
                                         role=Role.TECH_LEAD).exists()
