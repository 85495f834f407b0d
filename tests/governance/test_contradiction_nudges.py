"""A contradiction nudge explains itself: the plain-language reason and both passages side by
side — in the inbox, on the page of the e-mailed link, on the fragment's page and in the
e-mail."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from contexts.governance.nudges import signed_token
from contexts.governance.staleness import scan
from contexts.models import Nudge
from tests.governance.conftest import NOW, days_ago, make, point

pytestmark = pytest.mark.django_db

OLD = ("Backups are kept for 35 days; monthly snapshots are kept for 1 year.\n"
       "Restores are tested on the first Tuesday of every month.")
NEW = ("Backups are kept for 14 days; monthly snapshots are kept for 1 year.\n"
       "Restores are tested on the first Tuesday of every month.")


@pytest.fixture
def contradicted(cast, mailoutbox):
    """An older chunk of a runbook section, a newer chunk of it that changed the retention, and
    the scan's nudge to the older one's owner."""
    older = make(cast.repo.scope, "Retention", OLD, owner=cast.teammate, edited=days_ago(60),
                 heading_path=["Backups", "Retention"])
    newer = make(cast.repo.scope, "Retention (restores)", NEW, owner=cast.lead,
                 edited=days_ago(3), heading_path=["Backups", "Retention"])
    for fragment, anchor in ((older, "retention-1"), (newer, "retention-2")):
        point(fragment, "runbooks/backups.md", changed=days_ago(90), anchor=anchor)
    scan(NOW, [cast.org])
    return older, newer, Nudge.objects.get(fragment=older)


def side_by_side(html: str) -> list[tuple[str, str]]:
    return re.findall(r'<div class="side-by-side gv-passages">.*?<blockquote>(.*?)</blockquote>'
                      r'.*?<blockquote>(.*?)</blockquote>', html, re.DOTALL)


def test_the_reason_names_the_lineage_the_change_and_both_passages(contradicted):
    older, newer, nudge = contradicted
    [reason] = nudge.reasons
    assert reason["code"] == "contradicted" and reason["other"] == newer.public_id
    assert reason["summary"] == (
        f"A newer fragment in the same section (runbooks/backups.md › Backups › Retention), "
        f"{newer.public_id} “Retention (restores)” (edited {days_ago(3).date()}), says "
        "something else: a number changed (35 → 14).")
    assert reason["passages"] == [{
        "older": "Backups are kept for 35 days;", "newer": "Backups are kept for 14 days;",
        "what": "a number changed (35 → 14)"}]


def test_the_inbox_shows_both_passages_side_by_side(cast, contradicted):
    older, newer, _ = contradicted
    client = Client()
    client.force_login(cast.teammate)
    html = client.get("/inbox/").content.decode()
    assert side_by_side(html) == [("Backups are kept for 35 days;",
                                   "Backups are kept for 14 days;")]
    assert "a number changed (35 → 14)" in html
    assert f'href="/fragments/{newer.public_id}' in html or newer.public_id in html
    # The fragment's own page lists its nudge the same way.
    page = client.get(f"/fragments/{older.public_id}/").content.decode()
    assert side_by_side(page)


def test_the_emailed_link_page_and_the_email_show_both_passages(cast, contradicted,
                                                                mailoutbox):
    _, _, nudge = contradicted
    token = signed_token(nudge, cast.teammate)
    html = Client().get(f"/governance/nudges/{token}/still-accurate").content.decode()
    assert side_by_side(html) == [("Backups are kept for 35 days;",
                                   "Backups are kept for 14 days;")]
    [email] = mailoutbox
    assert "This one says:   “Backups are kept for 35 days;”" in email.body
    assert "The newer says:  “Backups are kept for 14 days;”" in email.body
