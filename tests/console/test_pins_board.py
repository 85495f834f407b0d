"""Pins board: order, up/down, drag reorder, expiry, unpin."""

import datetime as dt

from django.utils import timezone

from contexts.models import Pin
from contexts.services.pins import pin_fragment
from tests.console.conftest import HTMX, client_for, htmx_to


def order(scope) -> list[str]:
    return list(Pin.objects.filter(scope=scope).order_by("position")
                .values_list("fragment__title", flat=True))


def pin_all(cast, notes):
    for fragment in (notes.limiter, notes.retry, notes.trap):
        pin_fragment(cast.lead, fragment, cast.repo.scope)


def test_up_and_down_reorder_and_swap_the_board(cast, notes):
    pin_all(cast, notes)
    client = client_for(cast.lead)
    base = f"/scopes/{cast.repo.scope.public_id}/pins"
    response = client.post(f"{base}/{notes.trap.public_id}/move", {"direction": "up"}, **HTMX)
    assert response.content.decode().startswith('<section id="pins-board"')
    assert order(cast.repo.scope) == ["Rate limiter", "Do not cache tokens", "retry()"]
    client.post(f"{base}/{notes.limiter.public_id}/move", {"direction": "down"})
    assert order(cast.repo.scope) == ["Do not cache tokens", "Rate limiter", "retry()"]


def test_drag_order_is_saved(cast, notes):
    pin_all(cast, notes)
    ids = [notes.retry.public_id, notes.trap.public_id, notes.limiter.public_id]
    client = client_for(cast.lead)
    url = f"/scopes/{cast.repo.scope.public_id}/pins/reorder"
    assert client.post(url, {"order": ",".join(ids)}, **htmx_to("pins-board")).status_code == 200
    assert order(cast.repo.scope) == ["retry()", "Do not cache tokens", "Rate limiter"]
    assert client.post(url, {"order": ids[0]}).status_code == 400


def test_expiry_and_unpin(cast, notes):
    pin_all(cast, notes)
    client = client_for(cast.lead)
    base = f"/scopes/{cast.repo.scope.public_id}/pins/{notes.retry.public_id}"
    client.post(f"{base}/expiry", {f"{notes.retry.public_id}-expires_at": "2030-01-02T03:04"})
    pin = Pin.objects.get(fragment=notes.retry)
    assert pin.expires_at == dt.datetime(2030, 1, 2, 3, 4, tzinfo=dt.UTC)
    Pin.objects.filter(pk=pin.pk).update(expires_at=timezone.now() - dt.timedelta(days=1))
    board = client.get(f"/scopes/{cast.repo.scope.public_id}/pins/").content.decode()
    assert "expired" in board
    client.post(f"{base}/remove")
    assert order(cast.repo.scope) == ["Rate limiter", "Do not cache tokens"]


def test_a_curator_sees_the_board_but_cannot_reorder(cast, notes):
    pin_all(cast, notes)
    client = client_for(cast.teammate)
    page = client.get(f"/scopes/{cast.repo.scope.public_id}/pins/").content.decode()
    assert "Rate limiter" in page and "/move" not in page and 'draggable="true"' not in page
    url = f"/scopes/{cast.repo.scope.public_id}/pins/{notes.trap.public_id}/move"
    assert client.post(url, {"direction": "up"}).status_code == 403


def test_a_repository_reader_is_not_told_of_pins_on_the_organization_scope(cast, notes):
    """Found by the generated leak suite: a fragment of a readable repository, pinned on the
    organization's own scope, must not show up in the counts of a user who cannot read that
    scope (it would reveal an object of a scope hidden from them)."""
    from guardian.shortcuts import assign_perm

    pin_fragment(cast.lead, notes.limiter, cast.org.scope)
    pin_fragment(cast.lead, notes.retry, cast.repo.scope)
    assign_perm("accounts.view_repository", cast.stranger, cast.repo)
    page = client_for(cast.stranger).get("/o/acme/")
    assert page.status_code == 200
    assert page.context["org_counts"]["pins"] == 0
    [repo] = [r for r in page.context["repositories"] if r.pk == cast.repo.pk]
    assert repo.counts["pins"] == 1
    lead_page = client_for(cast.lead).get("/o/acme/")
    assert lead_page.context["org_counts"]["pins"] == 1
