"""A fresh repository filled and curated in a real browser (issue 40, "Must show": every journey
of the console once more, as a newcomer would; the people half is
``tests/browser/test_first_day.py``).

The administrator opens the empty repository, follows its "Upload files" link, uploads a
Markdown file; the job runs (the ingest task, in this process, through the real pipeline); the
job page links the fragments it made. She searches the repository, writes a fragment, pins,
unpins and pins it again, gives the pin an expiry and unpins it on the pins board (asked
first), edits it and compares two versions, marks it negative (asked first),
verifies it, hands it to the tech lead, retires it (asked first) and restores it (saying why),
then supersedes it and follows the fragment's link to its supersession chain. An agent's
proposal is merged into the uploaded fragment on the Review page; a near-duplicate pair is
merged on the Governance dedup page; a nudge is answered through its e-mailed link; a session
is expired, a persona edited, the organization exported, and the traces and secrets pages
read.
"""

from __future__ import annotations

import pytest

from accounts.models import Persona, Session
from accounts.tokens import create_token
from contexts import tasks
from contexts.governance import nudges
from contexts.models import (
    DedupCandidate,
    Fragment,
    FragmentStatus,
    IngestionJob,
    Nudge,
    Proposal,
)
from contexts.services.fragments import create_fragment
from tests.domain.conftest import cast  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db(transaction=True)

RUNBOOK = b"""# Retry policy

Retries back off exponentially with full jitter, starting at 100 ms and doubling up to 30 s.
Give up after five attempts and surface the error to the caller.
"""


def _accept_next_dialog(page, expected: str) -> None:
    """Accept the next confirmation, checking that it asks what it should."""
    def accept(dialog):
        assert expected in dialog.message, dialog.message
        dialog.accept()
    page.once("dialog", accept)


def test_a_fresh_repository_is_filled_by_an_upload_and_curated(cast, login, api,  # noqa: F811
                                                                 screenshots):
    repo_scope = cast.repo.scope
    page = login("owner")
    page.goto(f"/scopes/{repo_scope.public_id}/fragments/")
    page.get_by_text("Nothing in acme/web yet.").wait_for()
    page.get_by_role("link", name="Upload files").click()

    page.get_by_label("Into scope").select_option(label="repository: acme/web")
    page.get_by_label("Files", exact=True).set_input_files(files=[
        {"name": "retries.md", "mimeType": "text/markdown", "buffer": RUNBOOK}])
    page.get_by_role("button", name="Upload and ingest").click()
    job = IngestionJob.objects.get(org=cast.org, source_kind="upload")
    row = page.locator(f"#job-{job.public_id}")
    row.wait_for()
    tasks.ingest.apply(args=[job.pk])  # what the interactive worker does with the upload
    row.get_by_role("link", name=job.public_id).click()
    page.locator(".job-fragments").get_by_role("link", name="Retry policy").click()
    page.get_by_role("heading", name="Retry policy").first.wait_for()
    uploaded = Fragment.objects.get(scope=repo_scope, title="Retry policy")

    page.get_by_role("link", name="Search", exact=True).click()
    page.get_by_label("Query").fill("how many retry attempts before giving up")
    page.get_by_label("Repository").select_option(label="web")
    page.get_by_role("button", name="Search", exact=True).click()
    page.locator("li.result").get_by_text("Retry policy").first.wait_for()

    # Write one, pin it, unpin it on the board.
    page.goto("/o/acme/")
    page.get_by_role("link", name="New fragment").click()
    page.get_by_label("Scope").select_option(label="repository: acme/web")
    page.get_by_label("Title").fill("Deploy freeze")
    page.get_by_label("Body").fill("No deploys on Fridays after 15:00; hotfixes go through the "
                                   "on-call lead.")
    page.get_by_role("button", name="Save").click()
    page.get_by_role("heading", name="Deploy freeze").first.wait_for()
    written = Fragment.objects.get(scope=repo_scope, title="Deploy freeze")
    page.get_by_role("button", name="Pin here Deploy freeze in acme/web").click()
    page.get_by_text("pinned in acme/web").wait_for()
    page.get_by_role("button", name="Unpin Deploy freeze").click()
    page.get_by_role("button", name="Pin here Deploy freeze in acme/web").click()
    page.get_by_text("pinned in acme/web").wait_for()
    page.reload()
    page.locator("section", has=page.get_by_role("heading", name="Pins")) \
        .get_by_role("link", name="acme/web").click()
    board = page.locator("#pins-board")
    board.get_by_label("Expiry of Deploy freeze").fill("2031-01-31T12:00")
    board.get_by_role("button", name="Set").click()
    page.locator("#pins-board").get_by_text("2031-01-31 12:00").wait_for()
    _accept_next_dialog(page, "Unpin “Deploy freeze”?")
    page.locator("#pins-board").get_by_role("button", name="Unpin Deploy freeze").click()
    page.get_by_text("Nothing is pinned here.").wait_for()

    # Edit, mark negative, verify, hand over, retire, restore.
    page.goto(f"/fragments/{written.public_id}/")
    page.get_by_role("link", name="Edit", exact=True).click()
    page.get_by_label("Body").fill("No deploys on Fridays after 14:00; hotfixes go through the "
                                   "on-call lead.")
    page.get_by_role("button", name="Save").click()
    page.get_by_text("Saved version 2.").wait_for()
    page.get_by_label("Compare").select_option("v2")
    page.get_by_label("with").select_option("v1")
    page.get_by_role("button", name="Show diff").click()
    page.locator("#diff").get_by_text("Changes from v2 to v1").wait_for()
    _accept_next_dialog(page, "Mark this fragment as negative context")
    page.get_by_role("button", name="Mark negative").click()
    page.get_by_role("button", name="Unmark negative").wait_for()
    page.get_by_role("button", name="Verify").click()
    page.locator("#verified").get_by_text("by owner").wait_for()
    page.get_by_label("New owner").select_option("lead")
    page.get_by_role("button", name="Reassign").click()
    page.get_by_text("Owner is now lead.").wait_for()
    _accept_next_dialog(page, "Retire this fragment?")
    page.get_by_role("button", name="Retire").click()
    page.get_by_text("Restore…").click()
    page.get_by_label("Why restore it?").fill("retired by mistake")
    page.get_by_role("button", name="Restore", exact=True).click()
    page.get_by_role("button", name="Retire").wait_for()
    written.refresh_from_db()
    assert (written.status, written.negative, written.owner) == (
        FragmentStatus.ACTIVE, True, cast.lead)
    assert written.verified_by == cast.owner

    # Supersede it by the uploaded runbook; its page links the supersession chain.
    supersede = page.locator("section", has=page.get_by_role("heading", name="Supersede"))
    supersede.get_by_label("Replacement fragment id").fill(uploaded.public_id)
    _accept_next_dialog(page, "Supersede this fragment?")
    supersede.get_by_role("button", name="Supersede").click()
    page.get_by_text(f"Superseded by {uploaded.public_id}.").wait_for()
    page.get_by_role("link", name="supersession chain").click()
    page.get_by_role("heading", name="Supersession chain").wait_for()
    assert page.locator(".gv-chain li").count() == 2
    page.screenshot(path=screenshots / "first-day-chain.png", full_page=True)


def test_proposals_duplicates_nudges_sessions_and_personas_on_a_first_day(
        cast, login, api, screenshots):  # noqa: F811
    runbook = create_fragment(cast.owner, cast.repo.scope, title="Retry policy",
                              body=RUNBOOK.decode(), kind="runbook", owner=cast.owner)
    twin = create_fragment(cast.owner, cast.repo.scope, title="Retry policy (copy)",
                           body=RUNBOOK.decode(), kind="runbook", owner=cast.owner)
    a, b = sorted((runbook, twin), key=lambda f: f.pk)
    DedupCandidate.objects.create(org=cast.org, fragment_a=a, fragment_b=b, distance=0)

    # An agent proposes a fragment; the administrator merges it into the runbook.
    _, raw = create_token(cast.org, "first-agent", [cast.repo.scope], may_propose=True)
    answer = api.post("/api/proposals", headers={"Authorization": f"Bearer {raw}"}, data={
        "scope": {"org_id": "acme", "repo_id": "web"}, "title": "Retry budget",
        "body": "Stop retrying once 10% of a minute's requests are retries."})
    assert answer.status == 201, answer.text()
    proposal_id = answer.json()["id"]

    page = login("owner")
    page.goto("/o/acme/")
    page.locator("nav.mainnav").get_by_role("link", name="Review").click()
    card = page.locator(f"#proposal-{proposal_id}")
    card.locator("summary", has_text="Merge").click()
    card.get_by_label("Into fragment").fill(runbook.public_id)
    card.get_by_label("Merged body").fill(RUNBOOK.decode() + "\nStop retrying once 10% of a "
                                          "minute's requests are retries.\n")
    card.get_by_role("button", name="Merge", exact=True).click()
    # The message names both sides: what was proposed and what it went into.
    page.get_by_text("Merged the proposal “Retry budget” into “Retry policy”.").wait_for()
    assert Proposal.objects.get(public_id=proposal_id).state == "merged"

    # Near-duplicates: from the governance dashboard to the merge.
    page.get_by_role("link", name="Governance").click()
    page.get_by_role("link", name="Review near-duplicates").click()
    page.get_by_role("button", name="Merge, keep A").click()
    page.get_by_text(f"{b.public_id} merged into {a.public_id}.").wait_for()
    assert Fragment.objects.get(pk=b.pk).status != FragmentStatus.ACTIVE
    page.get_by_text("Nothing to review.").wait_for()
    page.goto("/governance/")
    page.get_by_role("link", name="Secrets found").click()
    page.get_by_text("No secrets found.").wait_for()

    # A nudge answered through its e-mailed link, no login needed.
    nudge = Nudge.objects.create(fragment=a, owner=cast.owner, reasons=[
        {"code": "hot", "detail": "retrieved 37 times in 30 days"}])
    link = page.context.browser.new_context(base_url=page.url.split("/governance")[0])
    anonymous = link.new_page()
    anonymous.goto(f"/governance/nudges/{nudges.signed_token(nudge, cast.owner)}/"
                   "still-accurate")
    anonymous.get_by_role("button", name="Yes, it is still accurate").click()
    anonymous.locator("[data-state='answered']").wait_for()
    link.close()
    nudge.refresh_from_db()
    assert nudge.state == "answered"

    # Sessions, personas, traces, export.
    page.goto("/o/acme/")
    page.locator("nav.mainnav").get_by_role("link", name="Sessions").click()
    row = page.locator("tr", has_text=cast.session.external_id)
    row.locator("summary", has_text="Expire").click()
    row.get_by_role("button", name="Set expiry").click()
    page.locator("tr", has_text=cast.session.external_id).get_by_text("expired").wait_for()
    assert Session.objects.get(pk=cast.session.pk).state == "expired"

    page.locator("nav.mainnav").get_by_role("link", name="Personas").click()
    page.get_by_role("link", name=f"Edit {cast.persona.slug}").click()
    page.get_by_label("Description").fill("Site reliability: runbooks first.")
    page.get_by_role("button", name="Save persona").click()
    page.get_by_role("heading", name="Personas").first.wait_for()
    assert Persona.objects.get(pk=cast.persona.pk).description == \
        "Site reliability: runbooks first."

    page.locator("nav.mainnav").get_by_role("link", name="Traces").click()
    page.get_by_role("heading", name="Traces").wait_for()
    page.locator("nav.mainnav").get_by_role("link", name="Members").click()
    with page.expect_download() as download:
        page.get_by_role("button", name="Export Acme").click()
    assert download.value.suggested_filename.endswith(".tar.gz")
