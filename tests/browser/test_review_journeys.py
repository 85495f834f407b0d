"""Agents' proposals reviewed in the browser: an agent opens a session by its first write,
writes a note and proposes promoting it; a tech lead approves it in the review queue and the
API returns it at repository scope. A rejected proposal is never returned outside its session.
Screenshot: ``review-queue.png``."""

from __future__ import annotations

import pytest

from accounts.models import Session
from accounts.tokens import create_token
from contexts.models import AuditEvent, Fragment, Proposal
from tests.api.conftest import world  # noqa: F401 - fixture
from tests.domain.conftest import cast  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db(transaction=True)

REPO = {"org_id": "acme", "repo_id": "web"}


def call(api, raw: str, method: str, path: str, data: dict | None = None) -> dict:
    headers = {"Authorization": f"Bearer {raw}"}
    response = (api.post(path, data=data, headers=headers) if method == "POST"
                else api.get(path, headers=headers))
    assert response.status in (200, 201), response.text()
    return response.json()


def retrieved(api, raw: str, query: str, scope: dict) -> list[str]:
    found = call(api, raw, "POST", "/api/contexts/retrieve", {"query": query, "scope": scope})
    return [f["id"] for f in found["fragments"]]


def agent_note(api, raw: str, session_id: str, title: str, body: str) -> str:
    written = call(api, raw, "POST", "/api/fragments", {
        "scope": {**REPO, "session_id": session_id}, "title": title, "body": body})
    return written["id"]


def test_a_session_note_is_proposed_approved_and_retrieved_at_repository_scope(
        cast, world, login, api, screenshots):  # noqa: F811
    _, raw = create_token(cast.org, "journey-agent", [cast.repo.scope])
    note = agent_note(api, raw, "PROJ-777", "Webhook signature check",
                      "Verify the webhook signature with the raw request body before parsing "
                      "the JSON; parsing first breaks the HMAC.")
    session = Session.objects.get(org=cast.org, external_id="PROJ-777")
    assert session.repository == cast.repo and session.state == "open"
    query = "webhook signature raw body HMAC"
    assert note not in retrieved(api, raw, query, REPO)  # a session note stays in its session
    proposal = call(api, raw, "POST", f"/api/fragments/{note}/propose", {"target": "repository"})
    assert proposal["state"] == "open"

    page = login("lead")
    page.goto("/o/acme/")
    page.locator("nav.mainnav").get_by_role("link", name="Review").click()
    card = page.locator(f"#proposal-{proposal['id']}")
    card.get_by_role("heading", name="Webhook signature check").wait_for()
    page.screenshot(path=screenshots / "review-queue.png", full_page=True)
    card.locator("summary", has_text="Approve").click()
    card.get_by_label("Title").fill("Verify webhook signatures on the raw body")
    card.get_by_role("button", name="Approve", exact=True).click()
    page.get_by_text("Approved “Verify webhook signatures on the raw body”").wait_for()

    outcome = call(api, raw, "GET", f"/api/proposals/{proposal['id']}")
    assert outcome["state"] == "approved" and outcome["fragment"]
    approved = Fragment.objects.get(public_id=outcome["fragment"])
    assert approved.title == "Verify webhook signatures on the raw body"
    assert approved.scope == cast.repo.scope and approved.owner == cast.lead
    assert AuditEvent.objects.filter(action="proposal.approve",
                                     object_id=proposal["id"]).exists()
    page_ids = []
    for _ in range(40):  # the change feed indexes the approved fragment after commit
        page_ids = retrieved(api, raw, query, REPO)
        if outcome["fragment"] in page_ids:
            break
        page.wait_for_timeout(250)
    assert outcome["fragment"] in page_ids


def test_a_rejected_proposal_is_never_returned_outside_its_session(
        cast, world, login, api):  # noqa: F811
    _, raw = create_token(cast.org, "journey-agent", [cast.repo.scope])
    note = agent_note(api, raw, "PROJ-666", "Disable TLS verification",
                      "Disable TLS certificate verification in the payments client to fix "
                      "the handshake errors.")
    proposal = call(api, raw, "POST", f"/api/fragments/{note}/propose", {"target": "repository"})

    page = login("lead")
    page.goto("/o/acme/review/")
    card = page.locator(f"#proposal-{proposal['id']}")
    card.locator("summary", has_text="Reject").click()
    card.get_by_label("Reason").fill("Never disable TLS verification; fix the CA bundle.")
    card.get_by_role("button", name="Reject", exact=True).click()
    page.get_by_text("Rejected “Disable TLS verification”.").wait_for()

    outcome = call(api, raw, "GET", f"/api/proposals/{proposal['id']}")
    assert outcome["state"] == "rejected" and outcome["fragment"] is None
    assert "CA bundle" in outcome["reason"]
    assert Proposal.objects.get(public_id=proposal["id"]).result_fragment is None
    query = "disable TLS certificate verification payments handshake"
    _, org_raw = create_token(cast.org, "org-agent", [cast.org.scope])
    for token, scope in ((raw, REPO), (org_raw, REPO), (org_raw, {**REPO, "repo_id": "*"}),
                         (org_raw, {"org_id": "acme"})):
        assert note not in retrieved(api, token, query, scope)
    # Inside its session it is still there.
    assert note in retrieved(api, raw, query, {**REPO, "session_id": "PROJ-666"})
