"""Every page renders for a member, with the navigation and counts it promises."""

import pytest
from django.urls import reverse

from contexts.models import IngestionJob, Nudge, RetrievalTrace
from contexts.services.pins import pin_fragment
from tests.console.conftest import client_for


def test_it_sends_anonymous_users_to_the_login_page(client, cast):
    response = client.get("/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_it_logs_in_and_out(client, cast):
    response = client.post("/login/", {"username": "lead", "password": "pw-for-tests-only"})
    assert response.status_code == 302
    assert client.get("/").status_code == 200
    assert client.post("/logout/").status_code == 302
    assert client.get("/").status_code == 302


def test_home_lists_only_my_organizations(cast, notes):
    page = client_for(cast.viewer).get("/").content.decode()
    assert "Acme" in page and "Globex" not in page


def test_the_switcher_goes_to_a_readable_organization_only(cast):
    client = client_for(cast.viewer)
    assert client.get("/switch/?org=acme")["Location"] == "/o/acme/"
    assert client.get("/switch/?org=globex").status_code == 404


def test_org_overview_counts_fragments_per_scope(cast, notes):
    pin_fragment(cast.lead, notes.limiter, cast.repo.scope)
    Nudge.objects.create(fragment=notes.retry, owner=cast.lead, reasons=[])
    response = client_for(cast.viewer).get("/o/acme/")
    assert response.status_code == 200
    web = next(r for r in response.context["repositories"] if r.slug == "web")
    assert web.counts["active"] == 3 and web.counts["pins"] == 1 and web.counts["stale"] == 1
    assert response.context["org_counts"]["active"] == 1
    assert b"Globex" not in response.content.split(b"<main")[1]


@pytest.mark.parametrize("name", ["search", "ingest", "traces"])
def test_org_pages_render(cast, notes, name):
    response = client_for(cast.owner).get(reverse(f"console:{name}", args=["acme"]))
    assert response.status_code == 200


def test_fragment_detail_shows_sanitized_markdown_and_highlighted_code(cast, notes):
    client = client_for(cast.viewer)
    page = client.get(f"/fragments/{notes.limiter.public_id}/").content.decode()
    assert "<h1>Rate limiter</h1>" in page and "<strong>once per second</strong>" in page
    code = client.get(f"/fragments/{notes.retry.public_id}/").content.decode()
    assert 'class="highlight"' in code and '<span class="k">def</span>' in code


def test_fragment_markdown_cannot_inject_script(cast):
    from accounts.permissions import SYSTEM
    from contexts.services.fragments import create_fragment

    evil = create_fragment(SYSTEM, cast.repo.scope, title="evil",
                           body='<script>alert(1)</script>\n\n[x](javascript:alert(1))\n\n'
                                '```html\n<img src=x onerror=alert(1)>\n```')
    page = client_for(cast.viewer).get(f"/fragments/{evil.public_id}/").content.decode()
    body = page.split('class="prose"')[1].split("</section>")[0]
    assert "<script>" not in body and "&lt;script&gt;" in body
    assert 'href="javascript' not in body and "<img" not in body


def test_pins_board_inbox_and_job_and_trace_pages_render(cast, notes):
    pin_fragment(cast.lead, notes.limiter, cast.repo.scope)
    job = IngestionJob.objects.create(org=cast.org, scope=cast.repo.scope, source="/tmp/x",
                                      state="done", files_total=2, files_done=2,
                                      errors=[{"path": "bad.py", "reason": "syntax error"}])
    trace = RetrievalTrace.objects.create(org=cast.org, query="limiter",
                                          scope_ids=[cast.org.scope_id, cast.repo.scope_id],
                                          candidates=[{"id": notes.limiter.public_id,
                                                       "bm25_rank": 1, "dense_rank": 2,
                                                       "rrf": 0.03, "rerank": None,
                                                       "freshness": 0.9, "authority": 0.1,
                                                       "pinned": True, "final": 0.8}],
                                          returned=[{"id": notes.limiter.public_id}],
                                          versions={"lexical_index": {
                                              "mark": 41, "head": 44, "lag_seconds": 12.5,
                                              "node": "web-a"}},
                                          degraded={"lexical": "lexical_index_behind"})
    client = client_for(cast.lead)
    board = client.get(f"/scopes/{cast.repo.scope.public_id}/pins/")
    assert board.status_code == 200 and b"Rate limiter" in board.content
    assert client.get("/inbox/").status_code == 200
    job_page = client.get(f"/jobs/{job.public_id}/")
    assert job_page.status_code == 200 and b"syntax error" in job_page.content
    trace_page = client.get(f"/traces/{trace.public_id}/")
    assert trace_page.status_code == 200 and b'class="meter"' in trace_page.content
    # The index the lexical leg read, and that it was behind.
    assert b"change 41 of 44" in trace_page.content and b"12.5 s behind" in trace_page.content
    assert b"answered from an index behind the change feed" in trace_page.content
