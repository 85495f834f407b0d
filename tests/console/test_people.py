"""Members, personas and sessions pages: a stranger gets 404s and a viewer 403s on every
management page and action, with nothing leaked; invitations, roles (organization and
repository), deactivation handing open nudges to the tech leads, the last administrator kept,
personas with their weights and half-lives, sessions closed and expired."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from accounts import emails
from accounts.models import Membership, Persona, Role, Session
from accounts.permissions import may
from contexts.governance import nudges
from contexts.models import AuditEvent, Nudge
from contexts.models.governance import NudgeState
from contexts.usecases import members as members_usecase
from tests.console.conftest import client_for
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db
User = get_user_model()


def management_gets(cast) -> list[str]:
    return ["/o/acme/members/", "/o/acme/personas/new",
            f"/o/acme/personas/{cast.persona.public_id}/edit"]


def management_posts(cast) -> list[tuple[str, dict]]:
    session = cast.session.public_id
    return [
        ("/o/acme/members/add", {"identifier": "newbie", "role": "admin"}),
        ("/o/acme/members/create", {"username": "mallory", "email": "m@example.com",
                                    "role": "admin"}),
        ("/o/acme/members/viewer/role", {"role": "admin"}),
        ("/o/acme/members/teammate/role", {"role": "viewer"}),
        ("/o/acme/members/viewer/repository-role",
         {"repository": cast.repo.public_id, "role": "admin"}),
        ("/o/acme/members/teammate/deactivate", {}),
        ("/o/acme/members/teammate/reactivate", {}),
        ("/o/acme/personas/new", {"name": "Evil", "slug": "evil", "w_r": 1, "w_f": 0,
                                  "w_c": 0, "w_p": 0}),
        (f"/o/acme/personas/{cast.persona.public_id}/edit",
         {"name": "Evil", "slug": "sre", "w_r": 1, "w_f": 0, "w_c": 0, "w_p": 0}),
        (f"/o/acme/sessions/{session}/close", {}),
        (f"/o/acme/sessions/{session}/expire", {"expires_at": ""}),
    ]


def _unchanged(cast) -> None:
    assert not User.objects.filter(username="mallory").exists()
    assert dict(Membership.objects.filter(org=cast.org).values_list("user__username", "role")) \
        == {"owner": "admin", "lead": "tech_lead", "teammate": "curator", "viewer": "viewer"}
    assert User.objects.get(username="teammate").is_active
    assert not Persona.objects.filter(slug="evil").exists()
    persona = Persona.objects.get(pk=cast.persona.pk)
    assert persona.name == cast.persona.name and persona.w_r == 0.7
    session = Session.objects.get(pk=cast.session.pk)
    assert session.closed_at is None and session.expires_at is None
    assert not may(User.objects.get(username="viewer"), "administer", cast.repo.scope)
    assert not AuditEvent.objects.filter(action__startswith="member.").exists()


@pytest.fixture
def newbie(db):
    return UserFactory(username="newbie", email="newbie@example.com")


# --- permissions ---------------------------------------------------------------------------
def test_a_stranger_gets_404_on_every_page_and_action_and_nothing_changes(cast, newbie):
    client = client_for(cast.stranger)  # an admin, of globex
    for url in [*management_gets(cast), "/o/acme/personas/", "/o/acme/sessions/",
                "/o/acme/personas/?query=x&a=" + cast.persona.public_id]:
        response = client.get(url)
        assert response.status_code == 404, url
        assert b"iss_2026" not in response.content and b"teammate" not in response.content
    for url, data in management_posts(cast):
        assert client.post(url, data).status_code == 404, url
    _unchanged(cast)


def test_a_viewer_gets_403_on_management_and_changes_nothing(cast, newbie):
    client = client_for(cast.viewer)
    for url in management_gets(cast):
        response = client.get(url)
        assert response.status_code == 403, url
        assert b"teammate@example.com" not in response.content
    for url, data in management_posts(cast):
        assert client.post(url, data).status_code == 403, url
    _unchanged(cast)


@pytest.mark.parametrize("who", ["teammate", "lead"])
def test_curators_and_tech_leads_do_not_manage_people_either(cast, who):
    client = client_for(getattr(cast, who))
    assert client.get("/o/acme/members/").status_code == 403
    assert client.post("/o/acme/members/viewer/role", {"role": "admin"}).status_code == 403
    assert Membership.objects.get(user=cast.viewer).role == Role.VIEWER


def test_a_viewer_reads_personas_and_sessions_without_the_actions(cast):
    client = client_for(cast.viewer)
    personas = client.get("/o/acme/personas/")
    assert personas.status_code == 200 and b"sre" in personas.content
    assert b"New persona" not in personas.content and b"/edit" not in personas.content
    sessions = client.get("/o/acme/sessions/")
    assert sessions.status_code == 200 and b"iss_2026-03-19-A91" in sessions.content
    assert b"/close" not in sessions.content
    # … and no navigation to pages they may not use.
    assert b"/o/acme/members/" not in client.get("/o/acme/").content


def test_admins_see_the_pages_in_the_navigation(cast):
    page = client_for(cast.owner).get("/o/acme/").content.decode()
    for url in ("/o/acme/members/", "/o/acme/personas/", "/o/acme/sessions/"):
        assert url in page


def test_every_post_needs_its_csrf_token(cast):
    client = Client(enforce_csrf_checks=True)
    client.force_login(cast.owner)
    for url, data in management_posts(cast):
        assert client.post(url, data).status_code == 403, url
    _unchanged(cast)


# --- members -------------------------------------------------------------------------------
def test_the_member_list_shows_people_roles_and_repository_roles(cast):
    members_usecase.set_repository_role(cast.owner, members_usecase.SetRepositoryRole(
        cast.org, "viewer", cast.repo, Role.CURATOR))
    response = client_for(cast.owner).get("/o/acme/members/")
    assert response.status_code == 200
    page = response.content.decode()
    for name in ("owner", "lead", "teammate", "viewer", "teammate@example.com"):
        assert name in page
    assert "stranger" not in page  # globex's admin
    assert "web: curator" in page
    assert response["Cache-Control"] == "no-store"


def _accept_on_home_page(person) -> None:
    client = client_for(person)
    page = client.get("/").content.decode()
    invitation = re.search(r'action="(/invitations/[^"]+/answer)"', page)
    assert invitation, "the invitation is on the person's home page"
    assert client.post(invitation.group(1), {"answer": "accept"}).status_code == 302


def test_invite_an_existing_user_by_username_or_email(cast, newbie):
    client = client_for(cast.owner)
    response = client.post("/o/acme/members/add", {"identifier": "newbie", "role": "viewer"},
                           follow=True)
    assert response.redirect_chain[0][1] == 302
    assert "An invitation was sent to “newbie” if such an account exists" in \
        response.content.decode()
    # Not a member until they accept.
    assert not Membership.objects.filter(user=newbie, org=cast.org).exists()
    assert not may(newbie, "view", cast.repo.scope)
    event = AuditEvent.objects.get(action="member.invite")
    assert (event.actor, event.org, event.after["role"]) == (cast.owner, cast.org, "viewer")
    _accept_on_home_page(newbie)
    membership = Membership.objects.get(user=newbie, org=cast.org)
    assert membership.role == Role.VIEWER and membership.hand_role == Role.VIEWER
    assert may(newbie, "view", cast.repo.scope) and not may(newbie, "curate", cast.repo.scope)
    assert AuditEvent.objects.get(action="member.accept").actor == newbie

    # By e-mail: only an address its owner verified reaches the account.
    other = UserFactory(username="other", email="Other@Example.com")
    emails.mark_verified(other, emails.BY_LINK)
    client.post("/o/acme/members/add", {"identifier": "other@example.com", "role": "curator"})
    _accept_on_home_page(other)
    assert Membership.objects.get(user=other, org=cast.org).role == Role.CURATOR


@pytest.mark.parametrize("identifier, message", [
    ("teammate", "already a member"),
    ("teammate@example.com", "already a member"),
    ("", "This field is required"),
])
def test_an_invitation_that_cannot_be_made_says_why_on_the_field(cast, identifier, message):
    response = client_for(cast.owner).post("/o/acme/members/add",
                                           {"identifier": identifier, "role": "viewer"})
    assert response.status_code == 400
    assert message in response.context["add_form"].errors["identifier"][0]


def test_create_an_account_shows_a_set_password_link_once(cast, mailoutbox):
    client = client_for(cast.owner)
    response = client.post("/o/acme/members/create",
                           {"username": "carol", "email": "carol@example.com",
                            "role": "curator"})
    assert response.status_code == 201
    assert response["Cache-Control"] == "no-store"
    carol = User.objects.get(username="carol")
    assert not carol.has_usable_password()
    assert Membership.objects.get(user=carol, org=cast.org).role == Role.CURATOR
    link = re.search(r'value="(http://testserver(/account/set-password/[^"]+))"',
                     response.content.decode())
    assert link, "the link is on the page"
    [message] = mailoutbox
    assert message.to == ["carol@example.com"] and link.group(2) in message.body
    # The page is not showing it again.
    assert link.group(2).encode() not in client.get("/o/acme/members/").content
    # The new person sets a password through the link, which then stops working.
    anonymous = Client()
    form = anonymous.get(link.group(2), follow=True)
    assert form.status_code == 200 and b"new_password1" in form.content
    done = anonymous.post(form.redirect_chain[-1][0], {
        "new_password1": "a long pass phrase 42", "new_password2": "a long pass phrase 42"})
    assert done.status_code == 302
    carol.refresh_from_db()
    assert carol.check_password("a long pass phrase 42")
    again = Client().get(link.group(2), follow=True)
    assert b"not valid" in again.content
    assert AuditEvent.objects.filter(action="member.create", org=cast.org).count() == 1


def test_a_taken_username_is_a_field_error(cast):
    response = client_for(cast.owner).post("/o/acme/members/create", {
        "username": "Teammate", "email": "x@example.com", "role": "viewer"})
    assert response.status_code == 400
    assert "taken" in response.context["create_form"].errors["username"][0]


def test_change_an_organization_role(cast):
    response = client_for(cast.owner).post("/o/acme/members/viewer/role", {"role": "curator"})
    assert response.status_code == 302
    assert Membership.objects.get(user=cast.viewer, org=cast.org).role == Role.CURATOR
    assert may(cast.viewer, "curate", cast.other_repo.scope)
    event = AuditEvent.objects.get(action="member.role")
    assert (event.before["role"], event.after["role"]) == ("viewer", "curator")


def test_a_repository_role_goes_through_guardian_and_may_sees_it(cast):
    client = client_for(cast.owner)
    response = client.post("/o/acme/members/viewer/repository-role",
                           {"repository": cast.repo.public_id, "role": "curator"})
    assert response.status_code == 302
    viewer = User.objects.get(pk=cast.viewer.pk)
    assert may(viewer, "curate", cast.repo.scope)
    assert may(viewer, "curate", cast.session.scope)  # a session of that repository
    assert not may(viewer, "curate", cast.other_repo.scope)
    assert not may(viewer, "pin", cast.repo.scope)
    assert members_usecase.repository_role(viewer, cast.repo) == Role.CURATOR
    # Taken away again.
    client.post("/o/acme/members/viewer/repository-role",
                {"repository": cast.repo.public_id, "role": ""})
    viewer = User.objects.get(pk=cast.viewer.pk)
    assert not may(viewer, "curate", cast.repo.scope)
    assert members_usecase.repository_role(viewer, cast.repo) == ""
    assert AuditEvent.objects.filter(action="member.repository_role").count() == 2


def test_a_repository_of_another_organization_is_not_offered(cast):
    from tests.factories import RepositoryFactory

    theirs = RepositoryFactory(org=cast.other_org, slug="vault")
    response = client_for(cast.owner).post("/o/acme/members/viewer/repository-role",
                                           {"repository": theirs.public_id, "role": "admin"})
    assert response.status_code == 400
    assert not may(User.objects.get(pk=cast.viewer.pk), "view", theirs.scope)


def test_deactivating_a_member_hands_their_open_nudges_to_the_tech_leads(cast, notes,
                                                                          mailoutbox):
    nudge = Nudge.objects.create(fragment=notes.limiter, owner=cast.teammate,
                                 reasons=[{"code": "stale", "detail": "old"}])
    response = client_for(cast.owner).post("/o/acme/members/teammate/deactivate")
    assert response.status_code == 302
    teammate = User.objects.get(pk=cast.teammate.pk)
    assert not teammate.is_active
    nudge.refresh_from_db()
    assert nudge.state == NudgeState.ESCALATED and nudge.escalated_at is not None
    assert nudge in nudges.inbox(cast.lead)
    assert {m.to[0] for m in mailoutbox} == {cast.owner.email, cast.lead.email}
    # Signed out for good: the account reads nothing now.
    assert client_for(teammate).get("/o/acme/").status_code in (302, 404)
    event = AuditEvent.objects.get(action="member.deactivate")
    assert event.after["nudges_escalated"] == [nudge.public_id]
    # Listed as deactivated, and reactivated from there.
    page = client_for(cast.owner).get("/o/acme/members/").content.decode()
    assert "deactivated" in page and "Reactivate" in page
    client_for(cast.owner).post("/o/acme/members/teammate/reactivate")
    assert User.objects.get(pk=cast.teammate.pk).is_active


def test_the_last_admin_cannot_be_demoted_or_deactivated(cast):
    client = client_for(cast.owner)
    response = client.post("/o/acme/members/owner/role", {"role": "viewer"})
    assert response.status_code == 400 and b"at least one active administrator" in \
        response.content
    assert Membership.objects.get(user=cast.owner, org=cast.org).role == Role.ADMIN
    # With a second admin, one of them may step down; the other is then the last one.
    Membership.objects.filter(user=cast.lead, org=cast.org).update(role=Role.ADMIN)
    lead = client_for(cast.lead)
    assert lead.post("/o/acme/members/owner/role", {"role": "tech_lead"}).status_code == 302
    assert client.post("/o/acme/members/lead/role", {"role": "viewer"}).status_code == 403
    response = lead.post("/o/acme/members/lead/role", {"role": "viewer"})
    assert response.status_code == 400
    assert Membership.objects.get(user=cast.lead, org=cast.org).role == Role.ADMIN


def test_an_admin_cannot_deactivate_themselves_or_an_admin_who_is_the_last(cast):
    client = client_for(cast.owner)
    response = client.post("/o/acme/members/owner/deactivate")
    assert response.status_code == 400 and b"your own account" in response.content
    assert User.objects.get(pk=cast.owner.pk).is_active
    # The last active admin (owner) deactivated by a superuser: refused too.
    root = User.objects.create_superuser("root", "root@example.com", "pw-for-tests-only")
    response = client_for(root).post("/o/acme/members/owner/deactivate")
    assert response.status_code == 400
    assert User.objects.get(pk=cast.owner.pk).is_active


def test_someone_who_also_belongs_elsewhere_is_deactivated_only_by_a_superuser(cast):
    Membership.objects.create(user=cast.teammate, org=cast.other_org, role=Role.VIEWER)
    response = client_for(cast.owner).post("/o/acme/members/teammate/deactivate")
    assert response.status_code == 403
    assert User.objects.get(pk=cast.teammate.pk).is_active


def test_members_of_another_organization_are_not_found(cast):
    client = client_for(cast.owner)
    assert client.post("/o/acme/members/stranger/deactivate").status_code == 404
    assert client.post("/o/acme/members/stranger/role", {"role": "viewer"}).status_code == 404
    assert User.objects.get(pk=cast.stranger.pk).is_active


# --- personas ------------------------------------------------------------------------------
PERSONA = {"name": "Backend SRE", "slug": "backend-sre", "description": "on call",
           "w_r": "0.5", "w_f": "0.3", "w_c": "0.15", "w_p": "0.05",
           "halflife_default": "30", "halflife_runbook": "14"}


def test_create_a_persona_with_weights_and_half_lives(cast):
    response = client_for(cast.owner).post("/o/acme/personas/new", PERSONA)
    assert response.status_code == 302
    persona = Persona.objects.get(org=cast.org, slug="backend-sre")
    assert (persona.w_r, persona.w_f, persona.w_c, persona.w_p) == (0.5, 0.3, 0.15, 0.05)
    assert persona.halflife_days == {"default": 30.0, "runbook": 14.0}
    assert persona.scope.label == "acme/persona:backend-sre"
    assert AuditEvent.objects.filter(action="persona.create", org=cast.org).count() == 1
    assert b"backend-sre" in client_for(cast.viewer).get("/o/acme/personas/").content


@pytest.mark.parametrize("field, value, message", [
    ("w_f", "-0.2", "greater than or equal to 0"),
    ("w_c", "abc", "Enter a number"),
    ("w_r", "1000", "less than or equal to 100"),
    ("halflife_policy", "0", "greater than or equal to 0.01"),
])
def test_a_bad_weight_is_a_form_error_naming_the_field(cast, field, value, message):
    response = client_for(cast.owner).post("/o/acme/personas/new", {**PERSONA, field: value})
    assert response.status_code == 400
    assert message in response.context["form"].errors[field][0]
    assert field.encode() in response.content and b"Not saved" in response.content
    assert not Persona.objects.filter(slug="backend-sre").exists()


def test_all_weights_zero_is_refused_on_a_field(cast):
    data = {**PERSONA, "w_r": "0", "w_f": "0", "w_c": "0", "w_p": "0"}
    response = client_for(cast.owner).post("/o/acme/personas/new", data)
    assert response.status_code == 400
    assert "at least one weight" in response.context["form"].errors["w_r"][0]


def test_edit_a_persona_and_a_taken_slug(cast):
    client = client_for(cast.owner)
    url = f"/o/acme/personas/{cast.persona.public_id}/edit"
    form = client.get(url)
    assert form.status_code == 200 and form.context["form"].initial["w_r"] == 0.7
    response = client.post(url, {**PERSONA, "slug": "sre", "w_f": "0.6"})
    assert response.status_code == 302
    persona = Persona.objects.get(pk=cast.persona.pk)
    assert (persona.name, persona.w_f) == ("Backend SRE", 0.6)
    event = AuditEvent.objects.get(action="persona.update")
    assert (event.before["w_f"], event.after["w_f"]) == (0.15, 0.6)
    client.post("/o/acme/personas/new", {**PERSONA, "slug": "writer"})
    taken = client.post(url, {**PERSONA, "slug": "writer"})
    assert taken.status_code == 400
    assert "another persona" in taken.context["form"].errors["slug"][0]


def test_a_persona_of_another_organization_is_not_found(cast):
    from tests.factories import PersonaFactory

    theirs = PersonaFactory(org=cast.other_org, slug="spy")
    assert client_for(cast.owner).get(f"/o/acme/personas/{theirs.public_id}/edit") \
        .status_code == 404
    compare = client_for(cast.owner).get(
        "/o/acme/personas/", {"query": "x", "a": theirs.public_id, "b": theirs.public_id})
    assert compare.status_code == 200 and compare.context["sides"] is None


def test_compare_two_personas_side_by_side(cast, world):
    from tests.factories import PersonaFactory

    PersonaFactory(org=cast.org, slug="fresh", name="fresh", w_r=0.1, w_f=0.9, w_c=0, w_p=0)
    fresh = Persona.objects.get(slug="fresh")
    response = client_for(cast.viewer).get("/o/acme/personas/", {
        "query": "why does the rate limiter drop requests", "a": cast.persona.public_id,
        "b": fresh.public_id, "repo": "*"})
    assert response.status_code == 200
    a, b = response.context["sides"]
    assert (a["persona"], b["persona"]) == (cast.persona, fresh)
    assert a["weights"].w_r == 0.7 and b["weights"].w_f == 0.9
    assert a["items"] and b["items"]
    assert {i["fragment"].org_id for i in a["items"] + b["items"]} == {cast.org.pk}
    assert b'id="persona-compare"' in response.content


# --- sessions ------------------------------------------------------------------------------
def test_the_session_list_shows_repository_dates_and_state(cast):
    from accounts.permissions import SYSTEM
    from contexts.services.fragments import create_fragment

    create_fragment(SYSTEM, cast.session.scope, title="note", body="A session note.",
                    kind="session-summary")
    closed = Session.objects.create(org=cast.org, external_id="iss-closed",
                                    closed_at=timezone.now())
    Session.objects.create(org=cast.org, external_id="iss-expired",
                           expires_at=timezone.now() - dt.timedelta(hours=1))
    client = client_for(cast.owner)
    response = client.get("/o/acme/sessions/")
    assert response.status_code == 200
    rows = {row["session"].external_id: row["session"] for row in response.context["rows"]}
    assert rows["iss_2026-03-19-A91"].last_write is not None
    assert rows["iss_2026-03-19-A91"].state == "open"
    assert (rows["iss-closed"].state, rows["iss-expired"].state) == ("closed", "expired")
    page = response.content.decode()
    assert "web" in page and "iss-expired" in page
    only_closed = client.get("/o/acme/sessions/", {"state": "closed"})
    assert [r["session"].pk for r in only_closed.context["rows"]] == [closed.pk]


def test_close_and_expire_a_session(cast):
    client = client_for(cast.owner)
    other = Session.objects.create(org=cast.org, external_id="iss-2")
    assert client.post(f"/o/acme/sessions/{cast.session.public_id}/close").status_code == 302
    session = Session.objects.get(pk=cast.session.pk)
    assert session.state == "closed" and session.closed_at is not None
    later = (timezone.localtime() + dt.timedelta(days=2)).strftime("%Y-%m-%dT%H:%M")
    client.post(f"/o/acme/sessions/{other.public_id}/expire", {"expires_at": later})
    other.refresh_from_db()
    assert other.state == "open" and other.expires_at > timezone.now()
    client.post(f"/o/acme/sessions/{other.public_id}/expire", {"expires_at": ""})
    other.refresh_from_db()
    assert other.state == "expired"
    assert list(AuditEvent.objects.filter(org=cast.org, action__startswith="session.")
                .values_list("action", flat=True).order_by("pk")) == [
        "session.close", "session.expire", "session.expire"]
    # A closed session is not expired afterwards.
    response = client.post(f"/o/acme/sessions/{cast.session.public_id}/expire",
                           {"expires_at": ""})
    assert response.status_code == 400


def test_a_session_of_another_organization_is_not_found(cast):
    theirs = Session.objects.create(org=cast.other_org, external_id="globex-1")
    client = client_for(cast.owner)
    assert client.post(f"/o/acme/sessions/{theirs.public_id}/close").status_code == 404
    assert Session.objects.get(pk=theirs.pk).closed_at is None
    assert b"globex-1" not in client.get("/o/acme/sessions/").content


@pytest.mark.parametrize("end", ["close", "expire"])
def test_an_agent_cannot_write_into_a_closed_or_expired_session(cast, end):
    from rest_framework.test import APIClient

    from contexts.models import Fragment

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {cast.raw_token}")
    scope = {"org_id": "acme", "repo_id": "web", "session_id": cast.session.external_id}
    assert api.post("/api/fragments", {"scope": scope, "body": "before"},
                    format="json").status_code == 201
    client_for(cast.owner).post(f"/o/acme/sessions/{cast.session.public_id}/{end}")
    refused = api.post("/api/fragments", {"scope": scope, "body": "after"}, format="json")
    assert refused.status_code == 403
    assert not may(cast.teammate, "curate", cast.session.scope)  # people neither
    assert may(cast.owner, "administer", cast.session.scope)
    assert list(Fragment.objects.filter(scope=cast.session.scope)
                .values_list("body", flat=True)) == ["before"]
