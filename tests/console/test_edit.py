"""Editing with optimistic concurrency: a stale edit shows both texts and loses neither."""

from contexts.models import AuditEvent, FragmentVersion
from contexts.services.fragments import edit_fragment
from tests.console.conftest import HTMX, client_for, htmx_to


def edit(client, fragment, body, based_on, **extra):
    return client.post(f"/fragments/{fragment.public_id}/edit",
                       {"title": fragment.title, "body": body, "based_on_version": based_on,
                        "reason": "test"}, **extra)


def test_the_edit_form_is_a_partial_for_htmx_and_a_page_without_it(cast, notes):
    client = client_for(cast.teammate)
    url = f"/fragments/{notes.limiter.public_id}/edit"
    partial = client.get(url, **htmx_to("fragment-content")).content.decode()
    assert partial.lstrip().startswith('<section id="fragment-content"')
    assert 'name="based_on_version" value="1"' in partial
    page = client.get(url).content.decode()
    assert page.startswith("<!doctype html>") and "<textarea" in page


def test_an_edit_writes_a_new_version_and_shows_the_diff(cast, notes):
    client = client_for(cast.teammate)
    response = edit(client, notes.limiter, "# Rate limiter\n\nThe bucket refills twice.", 1,
                    **HTMX)
    assert response.status_code == 200
    html = response.content.decode()
    assert "Saved version 2" in html and 'hx-swap-oob="true"' in html
    assert '<span class="del">-The bucket refills **once per second**.</span>' in html
    assert '<span class="add">+The bucket refills twice.</span>' in html
    notes.limiter.refresh_from_db()
    assert notes.limiter.version == 2
    assert FragmentVersion.objects.filter(fragment=notes.limiter).count() == 2
    assert AuditEvent.objects.filter(object_id=notes.limiter.public_id,
                                     action="fragment.edit").exists()


def test_without_javascript_an_edit_redirects_to_the_fragment(cast, notes):
    response = edit(client_for(cast.teammate), notes.limiter, "new text", 1)
    assert response.status_code == 302
    assert response["Location"] == f"/fragments/{notes.limiter.public_id}/"


def test_a_stale_edit_shows_both_texts_and_keeps_mine(cast, notes):
    # Someone else saves version 2 while I am still editing version 1.
    edit_fragment(cast.lead, notes.limiter, based_on_version=1, body="Theirs: refills at 10/s.")
    mine = "Mine: the bucket holds 10 tokens."
    response = edit(client_for(cast.teammate), notes.limiter, mine, 1)
    assert response.status_code == 409
    html = response.content.decode()
    assert 'id="conflict-current"' in html and "Theirs: refills at 10/s." in html
    assert f'<pre id="conflict-yours" class="text" tabindex="0">{mine}</pre>' in html
    # My text stays in the editor; the next save is based on the version I have now seen.
    assert f">\n{mine}</textarea>" in html
    assert 'name="based_on_version" value="2"' in html
    notes.limiter.refresh_from_db()
    assert notes.limiter.version == 2 and notes.limiter.body == "Theirs: refills at 10/s."


def test_a_stale_htmx_edit_is_swapped_in_place_and_can_be_saved_again(cast, notes):
    client = client_for(cast.teammate)
    edit_fragment(cast.lead, notes.limiter, based_on_version=1, body="Theirs.")
    conflict = edit(client, notes.limiter, "Mine.", 1, **HTMX)
    assert conflict.status_code == 200  # htmx swaps 2xx answers only
    assert b"Someone else saved version 2" in conflict.content
    saved = edit(client, notes.limiter, "Theirs. Mine.", 2, **HTMX)
    assert b"Saved version 3" in saved.content
    notes.limiter.refresh_from_db()
    assert notes.limiter.body == "Theirs. Mine."
    bodies = list(FragmentVersion.objects.filter(fragment=notes.limiter)
                  .order_by("number").values_list("body", flat=True))
    assert bodies[1:] == ["Theirs.", "Theirs. Mine."]


def test_an_empty_body_is_refused_with_the_form(cast, notes):
    response = edit(client_for(cast.teammate), notes.limiter, "", 1)
    assert response.status_code == 400 and b"This field is required" in response.content
    notes.limiter.refresh_from_db()
    assert notes.limiter.version == 1


def test_any_two_versions_can_be_compared(cast, notes):
    for number, body in enumerate(["two", "three"], start=1):
        edit_fragment(cast.lead, notes.limiter, based_on_version=number, body=body)
    client = client_for(cast.viewer)
    url = f"/fragments/{notes.limiter.public_id}/diff?a=1&b=3"
    partial = client.get(url, **htmx_to("diff")).content.decode()
    assert partial.startswith('<div id="diff"')
    assert "Changes from v1 to v3" in partial and '<span class="add">+three</span>' in partial
    assert client.get(url).content.decode().startswith("<!doctype html>")


def test_supersede_by_public_id_and_reassign_owner(cast, notes):
    client = client_for(cast.teammate)
    fid = notes.limiter.public_id
    response = client.post(f"/fragments/{fid}/supersede",
                           {"replacement": notes.trap.public_id, "reason": "merged"})
    assert response.status_code == 302
    notes.limiter.refresh_from_db()
    assert notes.limiter.status == "superseded"
    assert notes.limiter.superseded_by_id == notes.trap.pk
    client.post(f"/fragments/{notes.trap.public_id}/owner", {"owner": "viewer"})
    notes.trap.refresh_from_db()
    assert notes.trap.owner == cast.viewer


def test_supersede_refuses_a_replacement_i_cannot_read(cast, notes):
    client = client_for(cast.teammate)
    response = client.post(f"/fragments/{notes.limiter.public_id}/supersede",
                           {"replacement": notes.secret.public_id}, follow=True)
    assert b"Replacement: no fragment with that id that you can read" in response.content
    notes.limiter.refresh_from_db()
    assert notes.limiter.status == "active"


def test_supersede_over_htmx_navigates(cast, notes):
    response = client_for(cast.teammate).post(
        f"/fragments/{notes.limiter.public_id}/supersede",
        {"replacement": notes.trap.public_id}, **HTMX)
    assert response["HX-Redirect"] == f"/fragments/{notes.limiter.public_id}/"


def test_reassigning_to_a_non_member_is_refused(cast, notes):
    client_for(cast.teammate).post(f"/fragments/{notes.limiter.public_id}/owner",
                                   {"owner": "stranger"})
    notes.limiter.refresh_from_db()
    assert notes.limiter.owner == cast.teammate
