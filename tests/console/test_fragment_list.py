"""Fragment list per scope: filters, sort, pages, and inline row actions."""

import pytest

from accounts.permissions import SYSTEM
from contexts.models import AuditEvent, Change, Nudge, Pin
from contexts.services.fragments import create_fragment, retire_fragment
from contexts.services.pins import pin_fragment
from tests.console.conftest import HTMX, client_for, htmx_to


def titles(client, scope, query: str = "") -> list[str]:
    response = client.get(f"/scopes/{scope.public_id}/fragments/?{query}")
    assert response.status_code == 200
    return [f.title for f in response.context["page"]]


@pytest.fixture
def viewer(cast):
    return client_for(cast.viewer)


def test_it_lists_the_scope_s_active_fragments(cast, notes, viewer):
    assert sorted(titles(viewer, cast.repo.scope)) == ["Do not cache tokens", "Rate limiter",
                                                        "retry()"]
    assert titles(viewer, cast.org.scope) == ["Deploy policy"]


@pytest.mark.parametrize(("query", "expected"), [
    ("kind=code", ["retry()"]),
    ("kind=negative", ["Do not cache tokens"]),
    ("negative=yes", ["Do not cache tokens"]),
    ("negative=no", ["Rate limiter", "retry()"]),
    ("owner=teammate", ["Rate limiter"]),
    ("owner=-", ["Do not cache tokens"]),
    ("language=python", ["retry()"]),
    ("q=limit", ["Rate limiter"]),
    ("sort=title", ["Do not cache tokens", "Rate limiter", "retry()"]),
])
def test_filters_and_sort(cast, notes, viewer, query, expected):
    got = titles(viewer, cast.repo.scope, query)
    assert (got if "sort=" in query else sorted(got)) == expected


def test_stale_pinned_and_status_filters(cast, notes, viewer):
    Nudge.objects.create(fragment=notes.retry, owner=cast.lead, reasons=[])
    pin_fragment(cast.lead, notes.trap, cast.repo.scope)
    retire_fragment(cast.lead, notes.limiter)
    assert titles(viewer, cast.repo.scope, "stale=yes") == ["retry()"]
    assert titles(viewer, cast.repo.scope, "pinned=yes") == ["Do not cache tokens"]
    assert titles(viewer, cast.repo.scope, "status=retired") == ["Rate limiter"]
    assert len(titles(viewer, cast.repo.scope, "status=all")) == 3
    assert "Rate limiter" not in titles(viewer, cast.repo.scope)


def test_unknown_filter_values_are_ignored_not_errors(cast, notes, viewer):
    assert len(titles(viewer, cast.repo.scope, "kind=bogus&owner=nobody-here&sort=x")) == 3


def test_pages_of_25(cast, viewer):
    for i in range(30):
        create_fragment(SYSTEM, cast.other_repo.scope, title=f"note {i:02d}", body=f"body {i}")
    first = titles(viewer, cast.other_repo.scope, "sort=title")
    second = titles(viewer, cast.other_repo.scope, "sort=title&page=2")
    assert len(first) == 25 and len(second) == 5 and first[0] == "note 00"


def test_htmx_filtering_returns_only_the_table(cast, notes, viewer):
    response = viewer.get(f"/scopes/{cast.repo.scope.public_id}/fragments/?kind=code",
                          **htmx_to("fragment-table"))
    html = response.content.decode()
    assert html.startswith('<div id="fragment-table">') and "retry()" in html
    assert "Rate limiter" not in html


def test_pin_and_unpin_swap_the_row(cast, notes):
    client = client_for(cast.lead)
    fid = notes.limiter.public_id
    scope = cast.repo.scope.public_id
    pinned = client.post(f"/fragments/{fid}/pin", {"scope": scope}, **HTMX).content.decode()
    assert pinned.lstrip().startswith(f'<tr id="row-{fid}"')
    assert '<span class="badge pinned">pinned</span>' in pinned and ">Unpin<" in pinned
    assert Pin.objects.filter(fragment=notes.limiter, scope=cast.repo.scope).exists()
    unpinned = client.post(f"/fragments/{fid}/unpin", {"scope": scope}, **HTMX).content.decode()
    assert ">Pin<" in unpinned and not Pin.objects.exists()


def test_retire_and_mark_negative_swap_the_row_and_ask_first(cast, notes):
    client = client_for(cast.teammate)
    fid = notes.limiter.public_id
    page = client.get(f"/scopes/{cast.repo.scope.public_id}/fragments/").content.decode()
    assert 'hx-confirm="Retire “Rate limiter”' in page
    assert 'hx-confirm="Mark “Rate limiter” as negative' in page
    negative = client.post(f"/fragments/{fid}/negative",
                           {"scope": cast.repo.scope.public_id, "value": "1"}, **HTMX)
    assert b'<span class="badge negative">negative</span>' in negative.content
    retired = client.post(f"/fragments/{fid}/retire", {"scope": cast.repo.scope.public_id},
                          **HTMX)
    assert b'<span class="badge status">retired</span>' in retired.content
    notes.limiter.refresh_from_db()
    assert notes.limiter.negative and notes.limiter.status == "retired"


def test_row_actions_without_javascript_redirect_back(cast, notes):
    client = client_for(cast.teammate)
    back = f"/scopes/{cast.repo.scope.public_id}/fragments/?kind=prose"
    response = client.post(f"/fragments/{notes.limiter.public_id}/retire", {"next": back})
    assert response.status_code == 302 and response["Location"] == back
    evil = client.post(f"/fragments/{notes.trap.public_id}/retire",
                       {"next": "https://evil.example/"})
    assert evil["Location"] == f"/fragments/{notes.trap.public_id}/"


def test_a_retired_fragment_is_restored_from_its_page(cast, notes):
    """Restore: the page of a retired fragment offers it (and asks first), the fragment is
    active again, the audit trail says who and why, and the change feed carries it."""
    client = client_for(cast.teammate)
    fid = notes.limiter.public_id
    client.post(f"/fragments/{fid}/retire", {"partial": "content"}, **HTMX)
    page = client.get(f"/fragments/{fid}/").content.decode()
    assert 'name="reason"' in page.split("fragment-restore")[-1] and ">Retire<" not in page
    # without a reason: refused, naming the field, and nothing restored
    refused = client.post(f"/fragments/{fid}/restore", {"partial": "content"}, **HTMX)
    assert refused.status_code == 400 and b"reason" in refused.content
    notes.limiter.refresh_from_db()
    assert notes.limiter.status == "retired"
    restored = client.post(f"/fragments/{fid}/restore",
                           {"partial": "content", "reason": "still true"}, **HTMX)
    assert restored.status_code == 200 and ">Retire<" in restored.content.decode()
    notes.limiter.refresh_from_db()
    assert notes.limiter.status == "active" and notes.limiter.valid_to is None
    event = AuditEvent.objects.filter(action="fragment.restore").get()
    assert event.after["reason"] == "still true" and event.before["status"] == "retired"
    kinds = list(Change.objects.filter(public_id=fid).order_by("seq")
                 .values_list("kind", flat=True))
    assert kinds[-2:] == ["retire", "restore"]


def test_a_viewer_cannot_restore(cast, notes):
    fid = notes.limiter.public_id
    client_for(cast.teammate).post(f"/fragments/{fid}/retire")
    assert client_for(cast.viewer).post(f"/fragments/{fid}/restore").status_code == 403
    assert client_for(cast.stranger).post(f"/fragments/{fid}/restore").status_code == 404
    notes.limiter.refresh_from_db()
    assert notes.limiter.status == "retired"
