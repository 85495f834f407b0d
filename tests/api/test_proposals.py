"""Agents open sessions on first write, and propose fragments for review (issue 23, items 4
and 5; docs/api.md "Sessions" and "Proposals", docs/adr/0017)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import ProposalPolicy, Session
from accounts.tokens import create_token
from contexts.indexes.follower import reindex_fragments
from contexts.models import AuditEvent, Fragment, Proposal, ProposalState
from contexts.usecases import proposals as usecase
from tests.api.conftest import as_token
from tests.api.test_retrieve import URL as RETRIEVE
from tests.api.test_retrieve import ids

pytestmark = pytest.mark.django_db


def write(client, session_id, body="We found the limiter bucket is 10.", **scope):
    scope = {"org_id": "acme", "repo_id": "web", "session_id": session_id, **scope}
    return client.post("/api/fragments", {"scope": scope, "body": body, "title": "Finding"},
                       format="json")


def agent(api, cast):
    return as_token(api, cast.raw_token)


# --- item 4: sessions opened by a first write ---------------------------------------------------
def test_a_first_write_with_a_new_session_id_opens_the_session(api, cast, settings):
    settings.CONTEXTS_SESSION_IDLE_MINUTES = 60
    response = write(agent(api, cast), "PROJ-123")
    assert response.status_code == 201, response.content
    session = Session.objects.get(org=cast.org, external_id="PROJ-123")
    assert session.repository == cast.repo and session.opened_by == cast.token
    assert session.state == "open"
    assert session.expires_at - timezone.now() > dt.timedelta(minutes=59)
    assert response.json()["scope"] == session.scope.public_id
    assert AuditEvent.objects.filter(action="session.open", object_id=session.public_id,
                                     actor_token=cast.token).exists()
    again = write(agent(api, cast), "PROJ-123", body="A second note.")
    assert again.status_code == 201
    assert Session.objects.filter(org=cast.org, external_id="PROJ-123").count() == 1


def test_a_token_that_does_not_read_the_repository_opens_nothing(api, cast):
    token, raw = create_token(cast.org, "session-only", [cast.session.scope])
    response = write(as_token(api, raw), "PROJ-9")
    assert response.status_code == 403
    assert not Session.objects.filter(external_id="PROJ-9").exists()
    other = write(agent(api, cast), "PROJ-9", repo_id="billing")
    assert other.status_code == 403
    assert "PROJ-9" not in response.content.decode()


def test_people_do_not_open_sessions_through_the_api(api, cast):
    api.force_authenticate(cast.lead)
    assert write(api, "PROJ-10").status_code == 403
    assert not Session.objects.filter(external_id="PROJ-10").exists()


def test_open_sessions_per_token_are_bounded(api, cast, settings):
    settings.CONTEXTS_SESSIONS_PER_TOKEN = 2
    client = agent(api, cast)
    assert write(client, "A-1").status_code == 201
    assert write(client, "A-2").status_code == 201
    refused = write(client, "A-3")
    assert refused.status_code == 400
    assert refused.json()["error"]["field"] == "scope.session_id"
    assert "open sessions" in refused.json()["error"]["message"]
    assert not Session.objects.filter(external_id="A-3").exists()
    assert write(client, "A-1", body="still writes into an open one").status_code == 201
    Session.objects.filter(external_id="A-1").update(closed_at=timezone.now())
    assert write(client, "A-3").status_code == 201  # a closed one no longer counts


def test_a_session_expires_after_its_idle_time_and_says_so(api, cast, settings):
    settings.CONTEXTS_SESSION_IDLE_MINUTES = 30
    client = agent(api, cast)
    assert write(client, "IDLE-1").status_code == 201
    session = Session.objects.get(external_id="IDLE-1")
    Session.objects.filter(pk=session.pk).update(
        expires_at=timezone.now() - dt.timedelta(seconds=1))
    refused = write(client, "IDLE-1", body="too late")
    assert refused.status_code == 403
    assert "IDLE-1 is expired" in refused.json()["error"]["message"]
    Session.objects.filter(pk=session.pk).update(closed_at=timezone.now())
    assert "IDLE-1 is closed" in write(client, "IDLE-1").json()["error"]["message"]


def test_each_write_moves_the_idle_expiry_on(api, cast, settings):
    settings.CONTEXTS_SESSION_IDLE_MINUTES = 30
    client = agent(api, cast)
    write(client, "IDLE-2")
    soon = timezone.now() + dt.timedelta(minutes=5)
    Session.objects.filter(external_id="IDLE-2").update(expires_at=soon)
    assert write(client, "IDLE-2", body="another note").status_code == 201
    assert Session.objects.get(external_id="IDLE-2").expires_at > soon + dt.timedelta(minutes=20)


# --- item 5: proposals --------------------------------------------------------------------------
def session_fragment(api, cast, session_id="PROJ-1", body="Retry the limiter after 1s."):
    response = write(agent(api, cast), session_id, body=body)
    assert response.status_code == 201, response.content
    return Fragment.objects.get(public_id=response.json()["id"])


def propose(client, fragment, target="repository"):
    return client.post(f"/api/fragments/{fragment.public_id}/propose", {"target": target},
                       format="json")


def test_propose_promotion_then_approve_then_retrievable(api, cast, world):
    note = session_fragment(api, cast, body="The limiter bucket refills every 250 ms now.")
    response = propose(agent(api, cast), note)
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["state"] == "open" and body["target_scope"] == cast.repo.scope.public_id
    assert body["source_fragment"] == note.public_id and body["fragment"] is None
    # Nothing at repository scope until approved.
    assert not Fragment.objects.filter(scope=cast.repo.scope, body=note.body).exists()

    proposal = Proposal.objects.get(public_id=body["id"])
    approved = usecase.approve(cast.lead, proposal, title="Limiter refill")
    created = approved.result_fragment
    assert created.scope == cast.repo.scope and created.owner == cast.lead
    assert created.title == "Limiter refill"
    assert AuditEvent.objects.filter(action="proposal.approve", object_id=proposal.public_id,
                                     actor=cast.lead).exists()
    reindex_fragments([created.pk])
    found = as_token(api, cast.raw_token).post(RETRIEVE, {
        "query": "limiter bucket refills 250 ms", "scope": {"org_id": "acme",
                                                           "repo_id": "web"}}, format="json")
    assert created.public_id in ids(found)

    outcome = agent(api, cast).get(f"/api/proposals/{proposal.public_id}").json()
    assert outcome["state"] == "approved" and outcome["fragment"] == created.public_id
    listed = agent(api, cast).get("/api/proposals").json()["proposals"]
    assert [p["id"] for p in listed] == [proposal.public_id]
    assert agent(api, cast).get("/api/proposals?state=open").json()["proposals"] == []


def test_a_rejected_proposal_keeps_its_reason_and_creates_nothing(api, cast):
    note = session_fragment(api, cast)
    proposal = Proposal.objects.get(public_id=propose(agent(api, cast), note).json()["id"])
    usecase.reject(cast.lead, proposal, "too specific to one ticket")
    outcome = agent(api, cast).get(f"/api/proposals/{proposal.public_id}").json()
    assert outcome["state"] == "rejected" and outcome["reason"] == "too specific to one ticket"
    assert Fragment.objects.filter(body=note.body).count() == 1  # the session note only
    assert AuditEvent.objects.filter(action="proposal.reject", actor=cast.lead).exists()


def test_proposals_are_scope_safe(api, cast):
    note = session_fragment(api, cast)
    proposal_id = propose(agent(api, cast), note).json()["id"]
    _, other_raw = create_token(cast.org, "another-agent", [cast.repo.scope])
    _, globex_raw = create_token(cast.other_org, "globex-agent", [cast.other_org.scope])
    for raw in (other_raw, globex_raw):
        client = as_token(api, raw)
        assert client.get(f"/api/proposals/{proposal_id}").status_code == 404
        assert client.get("/api/proposals").json()["proposals"] == []
    # A fragment the token does not read cannot be proposed: 404, as a missing one.
    assert propose(as_token(api, globex_raw), note).status_code == 404
    assert APIClient().get(f"/api/proposals/{proposal_id}").status_code in (401, 403, 404)


def test_only_session_fragments_are_promoted(api, cast, world):
    refused = propose(agent(api, cast), world.repo_limiter)
    assert refused.status_code == 400 and refused.json()["error"]["field"] == "fragment_id"


def test_a_fragment_is_proposed_once_per_target(api, cast):
    note = session_fragment(api, cast)
    assert propose(agent(api, cast), note).status_code == 201
    assert propose(agent(api, cast), note).status_code == 400
    assert propose(agent(api, cast), note, "organization").status_code == 201


def new_proposal(client, body="Always pass a timeout to requests.get.", **extra):
    return client.post("/api/proposals", {"scope": {"org_id": "acme", "repo_id": "web"},
                                          "body": body, "title": "Timeouts", **extra},
                       format="json")


def test_a_new_fragment_needs_a_token_that_allows_proposals(api, cast):
    refused = new_proposal(agent(api, cast))
    assert refused.status_code == 403
    assert "may not propose" in refused.json()["error"]["message"]
    cast.token.may_propose = True
    cast.token.save(update_fields=["may_propose"])
    response = new_proposal(agent(api, cast))
    assert response.status_code == 201, response.content
    assert response.json()["kind"] == "new" and response.json()["state"] == "open"
    # Stored as the proposal's text only: no fragment anywhere until approved.
    assert not Fragment.objects.filter(body__contains="pass a timeout").exists()


def test_open_proposals_per_token_are_bounded(api, cast, settings):
    """A looping agent cannot flood the review queue: past the bound each proposal is a 400
    naming the field, hundreds of times over, and a decided one frees a place."""
    settings.CONTEXTS_PROPOSALS_PER_TOKEN = 2
    cast.token.may_propose = True
    cast.token.save(update_fields=["may_propose"])
    client = agent(api, cast)
    first = new_proposal(client, body="one")
    assert first.status_code == 201 and new_proposal(client, body="two").status_code == 201
    for attempt in range(200):
        refused = new_proposal(client, body=f"more {attempt}")
        assert refused.status_code == 400, refused.content
    assert refused.json()["error"]["field"] == "proposal"
    assert Proposal.objects.filter(proposed_by=cast.token).count() == 2
    Proposal.objects.filter(public_id=first.json()["id"]).update(state=ProposalState.REJECTED)
    assert new_proposal(client, body="three").status_code == 201


def test_a_viewer_cannot_propose_or_review(api, cast):
    note = session_fragment(api, cast)
    api.force_authenticate(cast.viewer)
    assert propose(api, note).status_code == 403
    api.force_authenticate(None)
    proposal = Proposal.objects.get(public_id=propose(agent(api, cast), note).json()["id"])
    for person in (cast.viewer, cast.teammate):
        with pytest.raises(PermissionError):
            usecase.approve(person, proposal)
    proposal.refresh_from_db()
    assert proposal.state == "open"


def test_auto_accept_for_a_trusted_token_where_the_policy_allows(api, cast, world):
    cast.token.may_propose = True
    cast.token.auto_accept = True
    cast.token.created_by = cast.lead
    cast.token.save()
    # The policy is review by default: the trusted token still waits for review.
    assert new_proposal(agent(api, cast)).json()["state"] == "open"
    cast.repo.proposal_policy = ProposalPolicy.AUTO_ACCEPT
    cast.repo.save()
    response = new_proposal(agent(api, cast), body="Log the request id with every error.")
    assert response.status_code == 201
    body = response.json()
    assert body["state"] == "approved" and body["auto_accepted"] is True
    created = Fragment.objects.get(public_id=body["fragment"])
    assert created.scope == cast.repo.scope and created.owner == cast.lead
    assert AuditEvent.objects.filter(action="proposal.auto_accept", object_id=body["id"],
                                     actor_token=cast.token).exists()
    # An untrusted token under the same policy is reviewed.
    cast.token.auto_accept = False
    cast.token.save()
    assert new_proposal(agent(api, cast), body="Another rule.").json()["state"] == "open"


def test_merge_gives_the_existing_fragment_a_new_version(api, cast, world):
    note = session_fragment(api, cast, body="The bucket size is 10, not 5.")
    proposal = Proposal.objects.get(public_id=propose(agent(api, cast), note).json()["id"])
    target = world.repo_limiter
    merged = usecase.merge(cast.lead, proposal, target.public_id,
                           body=target.body + "\n\nThe bucket size is 10.")
    target.refresh_from_db()
    assert merged.state == "merged" and merged.result_fragment == target
    assert target.version == 2 and target.body.endswith("The bucket size is 10.")
    assert AuditEvent.objects.filter(action="proposal.merge", actor=cast.lead).exists()


def test_a_proposal_is_decided_once(api, cast):
    note = session_fragment(api, cast)
    proposal = Proposal.objects.get(public_id=propose(agent(api, cast), note).json()["id"])
    usecase.reject(cast.lead, proposal, "no")
    with pytest.raises(ValueError):
        usecase.approve(cast.lead, Proposal.objects.get(pk=proposal.pk))


def test_proposed_text_is_screened_for_secrets(api, cast):
    cast.token.may_propose = True
    cast.token.save()
    key = "AKIA" + "IOSFODNN7EXAMPLE"
    response = new_proposal(agent(api, cast), body=f"Use the key {key} for the bucket.")
    assert response.status_code in (201, 400)
    assert not Proposal.objects.filter(body__contains=key).exists()




def _race(cast, session_ids: list[str]) -> list:
    """First writes of ``session_ids`` at once, each in its own thread and connection:
    (session_id, the fragment's scope id or the exception), in completion order."""
    import threading

    from django.db import connection

    from contexts.usecases.fragments import WriteFragment, write_fragment
    from contexts.usecases.retrieval import ScopeRef

    barrier = threading.Barrier(len(session_ids))
    results: list = []

    def first_write(session_id: str, n: int) -> None:
        try:
            barrier.wait()
            fragment = write_fragment(cast.token, WriteFragment(
                scope=ScopeRef(org_id="acme", repo_id="web", session_id=session_id),
                body=f"note {n}"))
            results.append((session_id, fragment.scope_id))
        except Exception as exc:  # noqa: BLE001 - collected for the assertions
            results.append((session_id, exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=first_write, args=(sid, n))
               for n, sid in enumerate(session_ids)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


@pytest.mark.django_db(transaction=True)
def test_concurrent_first_writes_with_one_new_session_id_open_one_session(cast):
    results = _race(cast, ["RACE-1"] * 4)
    assert Session.objects.filter(org=cast.org, external_id="RACE-1").count() == 1
    scopes = {scope for _, scope in results}
    assert len(results) == 4 and len(scopes) == 1 and not isinstance(scopes.pop(), Exception)
    assert Fragment.objects.filter(scope__public_id=Session.objects.get(
        external_id="RACE-1").public_id).count() == 4


@pytest.mark.django_db(transaction=True)
def test_concurrent_openings_cannot_pass_the_bound_together(cast, settings):
    settings.CONTEXTS_SESSIONS_PER_TOKEN = 2
    results = _race(cast, ["B-1", "B-2", "B-3", "B-4"])
    assert Session.objects.filter(opened_by=cast.token).count() == 2
    refused = [r for _, r in results if isinstance(r, Exception)]
    assert len(refused) == 2
    assert all(getattr(r, "field", None) == "scope.session_id" for r in refused)
