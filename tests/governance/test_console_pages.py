"""The governance pages are console pages: the console's layout and navigation, its visibility
rule (``Visible``), and permission checks computed once per page, not once per row."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from guardian.shortcuts import assign_perm

from contexts.models import DedupCandidate
from tests.factories import UserFactory
from tests.governance.conftest import NOW, make

pytestmark = pytest.mark.django_db


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def propose(scope, count: int, start: int = 0) -> list[DedupCandidate]:
    made = []
    for i in range(start, start + count):
        a = make(scope, f"Pair {i} A", f"Rotate the credentials, variant {i} one.")
        b = make(scope, f"Pair {i} B", f"Rotate the credentials, variant {i} two.")
        made.append(DedupCandidate.objects.create(org_id=scope.org_id, fragment_a=a,
                                                  fragment_b=b, distance=5, proposed_at=NOW))
    return made


def page_queries(client: Client, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return len(queries)


def test_the_dedup_page_checks_permissions_per_scope_not_per_proposal(cast):
    client = client_for(cast.teammate)
    propose(cast.repo.scope, 1)
    client.get("/governance/dedup/")  # the session's first request also writes it
    one = page_queries(client, "/governance/dedup/")
    propose(cast.repo.scope, 5, start=1)
    six = page_queries(client, "/governance/dedup/")
    assert six == one
    html = client.get("/governance/dedup/").content.decode()
    assert html.count("data-candidate=") == 6


def test_dedup_needs_both_fragments_readable_and_curated(cast):
    [same] = propose(cast.repo.scope, 1)
    [across] = propose(cast.other_repo.scope, 1, start=1)
    across.fragment_b = make(cast.repo.scope, "Elsewhere", "Rotate in the other repository.")
    across.save()
    # Curates the repository "web" only (a guardian grant, not a membership of acme).
    guest = UserFactory(username="guest")
    assign_perm("accounts.view_repository", guest, cast.repo)
    assign_perm("accounts.curate_repository", guest, cast.repo)
    html = client_for(guest).get("/governance/dedup/").content.decode()
    assert f'data-candidate="{across.pk}"' not in html  # A is in "billing": not readable
    assert f'data-candidate="{same.pk}"' not in html    # not a curator of the organization
    html = client_for(cast.teammate).get("/governance/dedup/").content.decode()
    assert f'data-candidate="{same.pk}"' in html and f'data-candidate="{across.pk}"' in html


def test_the_dashboard_lists_only_fragments_the_viewer_may_read(cast):
    visible = make(cast.repo.scope, "Orphan in web", "Nobody owns this one.", owner=None)
    hidden = make(cast.other_repo.scope, "Orphan in billing", "Nor this one.", owner=None)
    guest = UserFactory(username="guest")
    assign_perm("accounts.view_repository", guest, cast.repo)
    html = client_for(guest).get("/governance/").content.decode()
    assert "acme" in html and visible.public_id in html and hidden.public_id not in html
    html = client_for(cast.viewer).get("/governance/").content.decode()
    assert visible.public_id in html and hidden.public_id in html


@pytest.mark.parametrize("url", ["/governance/", "/governance/dedup/"])
def test_governance_pages_use_the_console_layout(cast, url):
    html = client_for(cast.teammate).get(url).content.decode()
    assert '<nav class="mainnav"' in html and 'href="/inbox/"' in html
    assert 'aria-current="page">Governance<' in html
    assert "/static/css/contexts.css" in html and "<style" not in html


def test_the_chain_page_finds_fragments_as_the_console_does(cast):
    fragment = make(cast.repo.scope, "Limits", "Ten tokens.")
    outsider = client_for(cast.stranger)
    assert outsider.get(f"/governance/fragments/{fragment.public_id}/chain").status_code == 404
    page = client_for(cast.viewer).get(f"/governance/fragments/{fragment.public_id}/chain")
    assert page.status_code == 200 and '<nav class="mainnav"' in page.content.decode()
