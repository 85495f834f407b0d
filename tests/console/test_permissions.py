"""Restriction at the source: strangers get 404s (never data), viewers cannot change anything,
and every POST needs its CSRF token."""

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from contexts.console.querysets import Visible
from contexts.models import IngestionJob, Pin, RetrievalTrace
from contexts.services.pins import pin_fragment
from tests.console.conftest import HTMX, client_for


@pytest.fixture
def acme_objects(cast, notes):
    job = IngestionJob.objects.create(org=cast.org, scope=cast.repo.scope, source="/srv/docs")
    trace = RetrievalTrace.objects.create(org=cast.org, query="secret acme query",
                                          scope_ids=[cast.org.scope_id, cast.repo.scope_id])
    pin_fragment(cast.lead, notes.limiter, cast.repo.scope)
    return {"job": job, "trace": trace}


def stranger_urls(cast, notes, objects) -> list[str]:
    fid = notes.limiter.public_id
    return [
        f"/fragments/{fid}/", f"/fragments/{fid}/edit", f"/fragments/{fid}/diff?a=1&b=1",
        f"/scopes/{cast.repo.scope.public_id}/fragments/",
        f"/scopes/{cast.org.scope.public_id}/fragments/",
        f"/scopes/{cast.repo.scope.public_id}/pins/",
        f"/traces/{objects['trace'].public_id}/", f"/jobs/{objects['job'].public_id}/",
        "/o/acme/", "/o/acme/search/?query=limiter", "/o/acme/ingest/", "/o/acme/traces/",
        "/o/acme/tokens/",
    ]


def test_it_404s_every_page_of_another_organization(cast, notes, acme_objects):
    client = client_for(cast.stranger)
    for url in stranger_urls(cast, notes, acme_objects):
        response = client.get(url)
        assert response.status_code == 404, url
        assert b"Rate limiter" not in response.content and b"secret acme" not in response.content


def test_it_404s_the_stranger_s_writes_and_changes_nothing(cast, notes, acme_objects):
    client = client_for(cast.stranger)
    fid = notes.limiter.public_id
    scope = cast.repo.scope.public_id
    posts = [
        (f"/fragments/{fid}/edit", {"body": "pwned", "based_on_version": 1}),
        (f"/fragments/{fid}/retire", {}), (f"/fragments/{fid}/negative", {"value": "1"}),
        (f"/fragments/{fid}/pin", {"scope": scope}), (f"/fragments/{fid}/unpin", {}),
        (f"/fragments/{fid}/supersede", {"replacement": notes.secret.public_id}),
        (f"/fragments/{fid}/owner", {"owner": "stranger"}),
        (f"/scopes/{scope}/pins/{fid}/move", {"direction": "down"}),
        (f"/scopes/{scope}/pins/{fid}/remove", {}),
        (f"/inbox/{fid}/answer", {"answer": "retired"}),
        ("/o/acme/ingest/path", {"scope": scope, "path": "/tmp"}),
        ("/o/acme/tokens/", {"name": "x", "scopes": [scope]}),
    ]
    for url, data in posts:
        assert client.post(url, data).status_code == 404, url
    notes.limiter.refresh_from_db()
    assert notes.limiter.body.startswith("# Rate limiter") and notes.limiter.status == "active"
    assert Pin.objects.filter(fragment=notes.limiter).count() == 1


def test_a_stranger_cannot_pin_their_fragment_into_our_scope(cast, notes):
    response = client_for(cast.stranger).post(f"/fragments/{notes.secret.public_id}/pin",
                                              {"scope": cast.repo.scope.public_id})
    assert response.status_code == 404
    assert not Pin.objects.exists()


def test_a_viewer_reads_but_cannot_edit_or_pin(cast, notes):
    client = client_for(cast.viewer)
    fid = notes.limiter.public_id
    assert client.get(f"/fragments/{fid}/").status_code == 200
    assert client.get(f"/fragments/{fid}/edit").status_code == 403
    edit = client.post(f"/fragments/{fid}/edit", {"body": "changed", "based_on_version": 1})
    assert edit.status_code == 403
    pin = client.post(f"/fragments/{fid}/pin", {"scope": cast.repo.scope.public_id}, **HTMX)
    assert pin.status_code == 403
    assert client.post(f"/fragments/{fid}/retire").status_code == 403
    notes.limiter.refresh_from_db()
    assert notes.limiter.version == 1 and notes.limiter.status == "active"
    assert not Pin.objects.exists()


def test_a_viewer_sees_no_action_buttons(cast, notes):
    page = client_for(cast.viewer).get(
        f"/scopes/{cast.repo.scope.public_id}/fragments/").content.decode()
    assert "Rate limiter" in page
    fid = notes.limiter.public_id
    for action in ("retire", "pin", "unpin", "negative"):
        assert f"/fragments/{fid}/{action}" not in page
    detail = client_for(cast.viewer).get(f"/fragments/{notes.limiter.public_id}/").content
    assert b"/edit" not in detail


def test_a_curator_edits_but_cannot_pin(cast, notes):
    client = client_for(cast.teammate)
    fid = notes.limiter.public_id
    assert client.get(f"/fragments/{fid}/edit").status_code == 200
    response = client.post(f"/fragments/{fid}/pin", {"scope": cast.repo.scope.public_id})
    assert response.status_code == 403


def test_only_administrators_see_tokens(cast):
    assert client_for(cast.lead).get("/o/acme/tokens/").status_code == 403
    assert client_for(cast.owner).get("/o/acme/tokens/").status_code == 200
    # The organization's tokens page exactly (a lead's overview links her personal tokens).
    assert b'href="/o/acme/tokens/"' not in client_for(cast.lead).get("/o/acme/").content
    assert b'href="/o/acme/tokens/"' in client_for(cast.owner).get("/o/acme/").content


def test_traces_are_listed_only_when_every_scope_is_readable(cast, notes):
    mine = RetrievalTrace.objects.create(org=cast.org, query="visible",
                                         scope_ids=[cast.repo.scope_id])
    theirs = RetrievalTrace.objects.create(org=cast.other_org, query="hidden globex",
                                           scope_ids=[cast.other_org.scope_id])
    page = client_for(cast.viewer).get("/o/acme/traces/").content.decode()
    assert mine.public_id in page and theirs.public_id not in page


def test_csrf_is_enforced_on_every_post(cast, notes):
    client = Client(enforce_csrf_checks=True)
    client.force_login(cast.lead)
    fid = notes.limiter.public_id
    url = f"/fragments/{fid}/pin"
    data = {"scope": cast.repo.scope.public_id}
    assert client.post(url, data, **HTMX).status_code == 403
    assert not Pin.objects.exists()
    # The page carries the token for htmx (hx-headers on <body>) and for plain forms.
    page = client.get(f"/scopes/{cast.repo.scope.public_id}/fragments/")
    token = client.cookies["csrftoken"].value
    assert '"X-CSRFToken"' in page.content.decode()
    response = client.post(url, data, HTTP_X_CSRFTOKEN=token, **HTMX)
    assert response.status_code == 200
    assert Pin.objects.filter(fragment=notes.limiter, scope=cast.repo.scope).exists()


@pytest.mark.parametrize("path", ["edit", "retire", "negative", "supersede", "owner"])
def test_csrf_is_enforced_on_fragment_changes(cast, notes, path):
    client = Client(enforce_csrf_checks=True)
    client.force_login(cast.owner)
    response = client.post(f"/fragments/{notes.limiter.public_id}/{path}",
                           {"body": "x", "based_on_version": 1})
    assert response.status_code == 403
    notes.limiter.refresh_from_db()
    assert notes.limiter.version == 1 and notes.limiter.status == "active"


def test_a_pages_permission_checks_reuse_the_readable_scopes_it_read(cast):
    """A page asks ``Visible.may`` for its navigation and rows; each answer must come from the
    readable scopes the request already read, not from reading the scope graph again."""
    seen = Visible(cast.lead)
    assert cast.repo.scope.id in seen.scope_ids
    with CaptureQueriesContext(connection) as queries:
        seen.may("pin", cast.repo.scope)
        seen.may("administer", cast.org.scope)
    assert not [q for q in queries.captured_queries if "WITH orgs AS" in q["sql"]]


def test_a_page_reads_the_users_scopes_and_organizations_once(cast):
    """An error page and the inbox show the navigation of the organization the user last saw:
    its switcher, the organization and the Review item (whether the user reviews there, and
    how many proposals wait) all come from one read of the user's readable scopes (the scope
    graph) and one list of their organizations."""
    client = Client()
    client.force_login(cast.lead)
    for path in ("/fragments/frag_nothing/", "/inbox/"):
        with CaptureQueriesContext(connection) as queries:
            response = client.get(path)
        assert response.status_code in (200, 404), (path, response.status_code)
        assert cast.org.name.encode() in response.content, path
        sql = [q["sql"] for q in queries.captured_queries]
        assert len([q for q in sql if "WITH orgs AS" in q]) == 1, path
        listed = [q for q in sql if q.startswith('SELECT "accounts_organization"."id"')
                  and 'ORDER BY "accounts_organization"."slug"' in q]
        assert len(listed) == 1, path
