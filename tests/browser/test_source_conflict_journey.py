"""A curated fragment meets its file's next change, in the browser (issue 38, must show).

A real git repository (``git init`` under ``tmp_path``) with ``.github/CODEOWNERS`` naming Ada
for ``docs/``, followed as a git source and synced through the real pipeline into real
PostgreSQL. Lin, a tech lead, edits the limits fragment in the console; an upstream commit
changes the same line; the sync keeps Lin's text and asks the owner. Ada — the owner
CODEOWNERS names — opens her inbox, opens the conflict (base, upstream and curated side by
side), edits the merge and saves it: the fragment shows the merged text, state ``merged``.
The Sources page lists the sync that caused it, its commit range, with the conflicted fragment
linked (Lin, the tech lead, reads it: sources are for tech leads and administrators).
Screenshots: ``conflict.png``, ``sources-syncs.png``.
"""

from __future__ import annotations

import pytest

from accounts.models import Role
from contexts.ingestion.git_sync import run_sync
from contexts.models import (
    AuditEvent,
    Fragment,
    FragmentSourceState,
    FragmentVersion,
    Nudge,
    SourcePointer,
)
from contexts.models.governance import NudgeAnswer, NudgeKind, NudgeState
from tests.connectors.conftest import git_identity, git_repo, world  # noqa: F401 - fixtures
from tests.factories import MembershipFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PATH = "docs/limits.md"
LIMITS = ("# Limits\n\n"
          "Each key gets 100 requests a minute.\n\n"
          "Bursts of 20 requests are allowed.\n\n"
          "Exceeding the limit returns HTTP 429.\n")
BURSTS = "Bursts of 20 requests are allowed."
CURATED = "Bursts of 20 requests are allowed; internal callers are exempt."
UPSTREAM = "Bursts of 10 requests are allowed."
MERGED = "Bursts of 10 requests are allowed; internal callers are exempt."


def sync(source):
    result = run_sync(source.pk, wait=True)
    assert result is not None and not result.error, result and result.error
    return result


def test_a_conflict_is_answered_in_the_console_and_the_sync_that_caused_it_is_listed(
        world, git_repo, login, screenshots):  # noqa: F811
    ada, lin = UserFactory(username="ada"), UserFactory(username="lin")
    MembershipFactory(user=ada, org=world.org, role=Role.CURATOR)
    MembershipFactory(user=lin, org=world.org, role=Role.TECH_LEAD)
    first = git_repo.commit("limits", {PATH: LIMITS, ".github/CODEOWNERS": "docs/ @ada\n"})
    source = world.source(git_repo, "limiter")
    sync(source)
    fragment = SourcePointer.objects.get(document__repository=source.repository,
                                         document__path=PATH).fragment
    assert fragment.owner == ada  # from CODEOWNERS, not whoever ran the sync
    fid = fragment.public_id

    # Lin, a tech lead, edits the fragment in the console.
    page = lead = login("lin")
    page.goto(f"/fragments/{fid}/")
    page.get_by_role("link", name="Edit", exact=True).click()
    body = page.get_by_label("Body")
    body.fill(body.input_value().replace(BURSTS, CURATED))
    page.get_by_label("Why (optional)").fill("internal callers")
    page.get_by_role("button", name="Save", exact=True).click()
    page.locator("#fragment-content").get_by_text(CURATED).wait_for()
    edited = Fragment.objects.get(pk=fragment.pk)
    assert CURATED in edited.body
    assert FragmentVersion.objects.get(fragment=edited, number=edited.version).editor == lin

    # Upstream changes the same line; the sync keeps Lin's text and asks the owner.
    change = git_repo.commit("fewer bursts", {PATH: LIMITS.replace(BURSTS, UPSTREAM)})
    sync(source)
    kept = Fragment.objects.get(pk=fragment.pk)
    assert kept.source_state == FragmentSourceState.CONFLICT and CURATED in kept.body
    nudge = Nudge.objects.get(fragment=kept, kind=NudgeKind.SOURCE_CONFLICT)
    assert nudge.owner == ada and nudge.state == NudgeState.OPEN

    # Ada opens her inbox, then the conflict: base, upstream and curated side by side.
    page = login("ada")
    page.goto("/inbox/")
    row = page.locator(f"#nudge-{fid}-source_conflict")
    row.get_by_role("link", name="Resolve: keep mine, take upstream or edit the merge").click()
    page.wait_for_url(f"**/inbox/{fid}/conflict")
    for element, text in (("#conflict-base", BURSTS), ("#conflict-upstream", UPSTREAM),
                          ("#conflict-curated", CURATED)):
        assert text in page.locator(element).inner_text()
    assert page.locator("#conflict-base").is_visible()
    assert page.locator("#conflict-curated").is_visible()
    assert change[:12] in page.content()
    merge = page.locator("#merge-text")
    assert "<<<<<<< curated" in merge.input_value()  # the attempt, markers around the overlap
    page.screenshot(path=screenshots / "conflict.png", full_page=True)

    # She edits the merge: the upstream number and Lin's exemption.
    merge.fill(LIMITS.replace(BURSTS, MERGED).strip())
    page.get_by_role("button", name="Save the merge").click()
    page.wait_for_url(f"**/fragments/{fid}/")
    page.locator("#fragment-content").get_by_text(MERGED).wait_for()
    assert page.locator("#source-state").inner_text().startswith("Against its source: merged")
    resolved = Fragment.objects.get(pk=fragment.pk)
    assert MERGED in resolved.body and resolved.source_state == FragmentSourceState.MERGED
    nudge.refresh_from_db()
    assert (nudge.state, nudge.answer, nudge.answered_by) == (
        NudgeState.ANSWERED, NudgeAnswer.EDITED_MERGE, ada)
    assert AuditEvent.objects.filter(action="fragment.source_resolved", object_id=fid,
                                     actor=ada).exists()

    # The Sources page (a tech lead's) shows the sync that caused it: its commit range, the
    # file it modified, the conflicted fragment linked.
    page = lead
    page.goto(f"/o/{world.org.slug}/sources/#syncs")
    newest = page.locator("#syncs tbody tr").first
    assert newest.locator(".commit-range").inner_text() == f"{first[:12]}..{change[:12]}"
    conflicted = newest.locator("details.sync-fragments.sync-conflicted")
    conflicted.locator("summary").click()
    assert conflicted.locator(".sync-count").inner_text() == "1"
    newest.locator("details.sync-files.sync-modified summary").click()
    assert PATH in newest.locator("details.sync-files.sync-modified").inner_text()
    link = conflicted.get_by_role("link", name=fid)
    link.wait_for()
    page.locator("#syncs").screenshot(path=screenshots / "sources-syncs.png")
    link.click()
    page.wait_for_url(f"**/fragments/{fid}/")
    page.locator("#fragment-content").get_by_text(MERGED).wait_for()
