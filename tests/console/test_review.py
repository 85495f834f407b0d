"""The review queue (``/o/<slug>/review/``): permissions without an existence oracle, approve
(with an edit), reject with a reason, merge, the navigation count and the audit trail
(issue 23, item 5; docs/console.md "Review")."""

from __future__ import annotations

import pytest

from accounts.permissions import SYSTEM
from contexts.models import AuditEvent, Fragment, Proposal
from contexts.models.proposals import ProposalKind, ProposalTarget
from contexts.services.fragments import create_fragment
from tests.console.conftest import client_for

pytestmark = pytest.mark.django_db

SECRET_TITLE = "Proposed limiter finding"


@pytest.fixture
def proposal(cast) -> Proposal:
    note = create_fragment(cast.token, cast.session.scope, title=SECRET_TITLE,
                           body="The limiter bucket refills every 250 ms.",
                           kind="session-summary")
    return Proposal.objects.create(
        org=cast.org, kind=ProposalKind.PROMOTE, target=ProposalTarget.REPOSITORY,
        target_scope=cast.repo.scope, source_fragment=note, title=note.title, body=note.body,
        fragment_kind=note.kind, proposed_by=cast.token)


def url(cast, proposal=None, action=""):
    base = f"/o/{cast.org.slug}/review/"
    return f"{base}{proposal.public_id}/{action}" if proposal else base


def test_a_stranger_gets_404_and_a_viewer_or_curator_403_with_nothing_leaked(cast, proposal):
    stranger = client_for(cast.stranger)
    for response in (stranger.get(url(cast)),
                     stranger.post(url(cast, proposal, "approve")),
                     stranger.post(url(cast, proposal, "reject"), {"reason": "x"}),
                     stranger.post(url(cast, proposal, "merge"), {"into": "frag_x"})):
        assert response.status_code == 404
        assert SECRET_TITLE not in response.content.decode()
    for person in (cast.viewer, cast.teammate):
        client = client_for(person)
        for response in (client.get(url(cast)),
                         client.post(url(cast, proposal, "approve")),
                         client.post(url(cast, proposal, "reject"), {"reason": "x"})):
            assert response.status_code == 403
            assert SECRET_TITLE not in response.content.decode()
        # No Review item in their navigation.
        assert "/review/" not in client.get(f"/o/{cast.org.slug}/").content.decode()
    proposal.refresh_from_db()
    assert proposal.state == "open"


def test_the_lead_sees_the_queue_and_the_count_in_the_navigation(cast, proposal):
    client = client_for(cast.lead)
    page = client.get(url(cast))
    assert page.status_code == 200
    html = page.content.decode()
    assert SECRET_TITLE in html and proposal.public_id in html
    assert 'aria-label="1 open proposals"' in html
    assert 'aria-label="1 open proposals"' in client.get(f"/o/{cast.org.slug}/").content.decode()


def test_approve_with_an_edit_creates_the_fragment_owned_by_the_reviewer(cast, proposal):
    client = client_for(cast.lead)
    response = client.post(url(cast, proposal, "approve"),
                           {"title": "Limiter refill", "body": "Edited: refills every 250 ms."})
    assert response.status_code == 302
    proposal.refresh_from_db()
    created = proposal.result_fragment
    assert proposal.state == "approved" and proposal.decided_by == cast.lead
    assert created.scope == cast.repo.scope and created.owner == cast.lead
    assert (created.title, created.body) == ("Limiter refill", "Edited: refills every 250 ms.")
    assert AuditEvent.objects.filter(action="proposal.approve", object_id=proposal.public_id,
                                     actor=cast.lead).exists()
    assert AuditEvent.objects.filter(action="fragment.create", object_id=created.public_id
                                     ).exists()
    again = client.post(url(cast, proposal, "approve"))
    assert again.status_code == 400 and "already approved" in again.content.decode()
    assert "open proposals" not in client.get(url(cast)).content.decode()


def test_reject_needs_a_reason_and_is_audited(cast, proposal):
    client = client_for(cast.owner)
    assert client.post(url(cast, proposal, "reject"), {"reason": " "}).status_code == 400
    response = client.post(url(cast, proposal, "reject"), {"reason": "one ticket only"})
    assert response.status_code == 302
    proposal.refresh_from_db()
    assert proposal.state == "rejected" and proposal.reason == "one ticket only"
    assert proposal.result_fragment is None
    assert not Fragment.objects.filter(scope=cast.repo.scope, title=SECRET_TITLE).exists()
    assert AuditEvent.objects.filter(action="proposal.reject", object_id=proposal.public_id,
                                     actor=cast.owner).exists()
    listed = client.get(url(cast) + "?state=rejected").content.decode()
    assert "one ticket only" in listed


def test_merge_into_an_existing_fragment_of_the_target_scope(cast, proposal):
    existing = create_fragment(SYSTEM, cast.repo.scope, title="Rate limiter",
                               body="The limiter uses a token bucket.")
    elsewhere = create_fragment(SYSTEM, cast.other_repo.scope, title="Billing",
                                body="Billing retries.")
    client = client_for(cast.lead)
    wrong = client.post(url(cast, proposal, "merge"),
                        {"into": elsewhere.public_id, "body": "x"})
    assert wrong.status_code == 400 and "target scope" in wrong.content.decode()
    bad = client.post(url(cast, proposal, "merge"), {"into": "nonsense", "body": "x"})
    assert bad.status_code == 400
    response = client.post(url(cast, proposal, "merge"), {
        "into": existing.public_id,
        "body": "The limiter uses a token bucket; it refills every 250 ms."})
    assert response.status_code == 302
    existing.refresh_from_db()
    proposal.refresh_from_db()
    assert proposal.state == "merged" and proposal.result_fragment == existing
    assert existing.version == 2 and existing.body.endswith("every 250 ms.")
    assert AuditEvent.objects.filter(action="proposal.merge", object_id=proposal.public_id
                                     ).exists()
    assert AuditEvent.objects.filter(action="fragment.edit", object_id=existing.public_id
                                     ).exists()


def test_a_proposal_of_another_organization_is_a_404(cast, proposal):
    client = client_for(cast.stranger)  # admin of globex
    response = client.post(f"/o/{cast.other_org.slug}/review/{proposal.public_id}/approve")
    assert response.status_code == 404
    proposal.refresh_from_db()
    assert proposal.state == "open"


def test_administrators_set_the_proposal_policy_audited(cast, proposal):
    lead = client_for(cast.lead)
    refused = lead.post(url(cast) + "policy", {"scope_id": cast.repo.scope.public_id,
                                               "policy": "auto-accept"})
    assert refused.status_code == 403
    assert client_for(cast.viewer).post(url(cast) + "policy", {
        "scope_id": cast.repo.scope.public_id, "policy": "auto-accept"}).status_code == 403
    assert client_for(cast.stranger).post(url(cast) + "policy", {
        "scope_id": cast.repo.scope.public_id, "policy": "auto-accept"}).status_code == 404
    admin = client_for(cast.owner)
    assert admin.post(url(cast) + "policy", {"scope_id": cast.repo.scope.public_id,
                                             "policy": "sometimes"}).status_code == 400
    response = admin.post(url(cast) + "policy", {"scope_id": cast.repo.scope.public_id,
                                                 "policy": "auto-accept"})
    assert response.status_code == 302
    cast.repo.refresh_from_db()
    assert cast.repo.proposal_policy == "auto-accept"
    assert AuditEvent.objects.filter(action="proposal.policy", object_id=cast.repo.public_id,
                                     actor=cast.owner).exists()
    foreign = admin.post(url(cast) + "policy", {"scope_id": cast.other_org.scope.public_id,
                                                "policy": "auto-accept"})
    assert foreign.status_code == 404


def test_a_token_is_created_with_its_proposal_flags(cast):
    admin = client_for(cast.owner)
    response = admin.post(f"/o/{cast.org.slug}/tokens/", {
        "name": "trusted-agent", "scopes": [cast.repo.scope.public_id],
        "may_propose": "on", "auto_accept": "on"})
    assert response.status_code == 201
    token = cast.org.tokens.get(name="trusted-agent")
    assert token.may_propose and token.auto_accept
    assert "trusted" in response.content.decode()
    created = AuditEvent.objects.get(action="token.create", object_id=token.public_id)
    assert created.after["may_propose"] is True and created.after["auto_accept"] is True


def test_the_sessions_page_names_the_token_that_opened_a_session(cast):
    from contexts.usecases.fragments import WriteFragment, write_fragment
    from contexts.usecases.retrieval import ScopeRef

    write_fragment(cast.token, WriteFragment(
        scope=ScopeRef(org_id="acme", repo_id="web", session_id="PROJ-55"), body="a note"))
    html = client_for(cast.owner).get(f"/o/{cast.org.slug}/sessions/").content.decode()
    assert "PROJ-55" in html and "opened by ci-agent" in html
