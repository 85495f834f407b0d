"""Issue 23, "Finish": the trace page names its candidates and says why each was dropped, the
inbox speaks plainly and returns to itself after an edit, error pages wear the console's
layout, a favicon is served, and the pins board weighs its pins against a typical budget."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, RequestFactory

from accounts.models import Membership
from accounts.permissions import SYSTEM
from contexts.console.views.inbox import plain_reason
from contexts.console.views.pins import typical_budget
from contexts.console.views.traces import DROPPED_PER_PAGE, drop_reason
from contexts.models import Nudge, RetrievalTrace, SourceDocument, SourcePointer
from contexts.retrieval import lexical
from contexts.retrieval.trace import build_trace
from contexts.retrieval.types import (
    TRACE_COLUMNS,
    FusionConfig,
    RetrievalRequest,
    RetrievalResult,
    Weights,
)
from contexts.services.fragments import create_fragment
from contexts.services.pins import pin_fragment
from tests.console.conftest import HTMX, client_for

NAV = '<nav class="mainnav"'


# --- trace page -------------------------------------------------------------------------------
def _candidate(public_id: str, final: float, returned: bool, dropped: str = "") -> dict:
    row = dict.fromkeys(TRACE_COLUMNS)
    row.update(id=public_id, bm25_rank=1, rrf=0.01, relevance=final, freshness=0.5,
               authority=0.1, pinned=False, final=final, returned=returned, dropped=dropped)
    return row


@pytest.fixture
def big_trace(cast, notes):
    """A trace of 183 candidates: two returned, one under min_score, the rest over budget."""
    document = SourceDocument.objects.create(org=cast.org, path="docs/limits.md",
                                             content_hash="h")
    SourcePointer.objects.create(fragment=notes.retry, document=document,
                                 anchor="Rate limiter", start_line=1, end_line=9)
    SourcePointer.objects.create(fragment=notes.limiter, document=document,
                                 anchor="Rate limiter#2", start_line=10, end_line=24)
    rows = [_candidate(notes.limiter.public_id, 0.9, True),
            _candidate(notes.retry.public_id, 0.8, True),
            _candidate(notes.trap.public_id, 0.7, False, "below min_score")]
    rows += [_candidate(f"frag_{n:020x}", 0.6 - n / 1000, False, "over budget")
             for n in range(180)]
    trace = RetrievalTrace(org=cast.org, user=cast.lead, query="rate limiter bucket",
                           scope_ids=[cast.repo.scope.id, cast.org.scope.id],
                           parameters={"budget_tokens": 800, "min_score": 0.75,
                                       "not_retrievable": {"lexical": 2}},
                           returned=[{"id": notes.limiter.public_id, "tokens": 120},
                                     {"id": notes.retry.public_id, "tokens": 80}])
    trace.candidates = rows
    trace.save()
    return trace


def test_the_trace_page_names_candidates_and_says_why_they_were_dropped(cast, notes, big_trace):
    response = client_for(cast.lead).get(f"/traces/{big_trace.public_id}/")
    assert response.status_code == 200
    html = response.content.decode()
    # Titles and source paths with lines and part numbers, not bare ids.
    assert ">Rate limiter</a>" in html and ">retry()</a>" in html
    assert "docs/limits.md:10–24" in html and "part 2 of 2" in html
    assert "docs/limits.md:1–9" in html and "part 1 of 2" in html
    assert "returned, 120 tokens" in html
    # Why each was dropped, in words.
    assert "its final score 0.700 is below the request&#x27;s min_score (0.75)" in html
    assert "did not fit in the 800-token budget" in html
    assert "2 superseded or retired fragments, left out before fusion" in html
    assert "never become candidates" in html
    # The returned ones and the best dropped ones only; the rest a page or "show all" away.
    assert html.count('<tr class="inactive">') == DROPPED_PER_PAGE
    assert "Show all 181" in html and "frag_" + f"{179:020x}" not in html
    assert len(response.content) < 80_000, len(response.content)


def test_show_all_and_pages_list_the_other_candidates(cast, notes, big_trace):
    client = client_for(cast.lead)
    everything = client.get(f"/traces/{big_trace.public_id}/?all=1").content.decode()
    assert everything.count('<tr class="inactive">') == 181
    assert f"frag_{179:020x}" in everything
    last = client.get(f"/traces/{big_trace.public_id}/?page=10").content.decode()
    assert f"frag_{179:020x}" in last and "(not readable by you)" in last


def test_a_stranger_gets_no_trace_page(cast, big_trace):
    response = client_for(cast.stranger).get(f"/traces/{big_trace.public_id}/")
    assert response.status_code == 404
    assert b"rate limiter bucket" not in response.content


@pytest.mark.parametrize(("code", "expected"), [
    ("below min_score", "its final score 0.123 is below the request's min_score (0.5)"),
    ("over budget", "it did not fit in the 900-token budget after the better ones"),
    ("over max_fragments", "the answer already held max_fragments (3) fragments"),
    ("", "not returned (this trace does not record why)"),
    ("something new", "something new"),
])
def test_drop_reasons_in_words(code, expected):
    parameters = {"min_score": 0.5, "budget_tokens": 900, "max_fragments": 3}
    assert drop_reason({"dropped": code, "final": 0.1234}, parameters) == expected


class _Rows:
    def __init__(self, known: dict[str, int]) -> None:
        self.known = known

    def read(self, public_ids=()) -> None:
        pass

    def pks(self) -> dict[str, int]:
        return self.known


def test_the_lexical_leg_counts_hits_it_may_not_return(monkeypatch):
    """A superseded or retired fragment still in the index has no row: it is left out before
    fusion, and counted for the trace."""
    monkeypatch.setattr(lexical.follower, "rebuilding", lambda org_id: False)
    hits = [("frag_a", 3.0), ("frag_superseded", 2.0), ("frag_b", 1.0)]
    request = RetrievalRequest(query="q", org_id=1, scope_ids=frozenset({1}))
    collected = lexical.PendingLexical(request, hits, 1.5).collect(
        _Rows({"frag_a": 1, "frag_b": 2}), {})
    assert collected.ranked == [(1, 3.0), (2, 1.0)]
    assert collected.not_retrievable == 1


def test_the_trace_records_max_fragments_and_hits_left_out():
    request = RetrievalRequest(query="q", org_id=1, scope_ids=frozenset({1}), max_fragments=4)
    result = RetrievalResult([], {}, "none", {}, FusionConfig(), Weights(),
                             not_retrievable={"lexical": 3}, trace_id="tr_x")
    trace = build_trace(request, result, {}, None, {})
    assert trace.parameters["max_fragments"] == 4
    assert trace.parameters["not_retrievable"] == {"lexical": 3}
    clean = build_trace(request, RetrievalResult([], {}, "none", {}, FusionConfig(), Weights(),
                                                 trace_id="tr_y"), {}, None, {})
    assert "not_retrievable" not in clean.parameters


# --- inbox ------------------------------------------------------------------------------------
@pytest.fixture
def nudge(cast, notes):
    return Nudge.objects.create(fragment=notes.limiter, owner=cast.teammate, reasons=[
        {"code": "hot_unverified", "detail": (
            "42 uses (40 retrievals, 2 citations), last retrieved 2026-11-30; not edited or "
            "verified for 200 days (since 2026-05-16; prose limit 180 days)")},
        {"code": "source_changed", "detail": (
            "docs/limits.md changed 2026-11-29 10:00 after the fragment was last edited or "
            "verified (2026-05-16 09:00)")}])


def test_reasons_read_in_plain_words(cast, notes, nudge):
    html = client_for(cast.teammate).get("/inbox/").content.decode()
    assert "Agents use it often, but nobody has checked it for a while." in html
    assert ("Retrieved 40 times and cited 2 times, last on 2026-11-30. Last edited or "
            "confirmed on 2026-05-16, 200 days ago; prose fragments should be checked every "
            "180 days.") in html
    assert "A file it comes from changed after it was last checked." in html
    assert ("docs/limits.md changed on 2026-11-29; this fragment was last edited or confirmed "
            "on 2026-05-16.") in html
    assert "42 uses (40 retrievals" not in html


def test_an_unknown_reason_shape_keeps_its_text():
    reason = plain_reason({"code": "hot_unverified", "detail": "used a lot"})
    assert reason["headline"].startswith("Agents use it often") and reason["text"] == "used a lot"
    assert plain_reason({"code": "new_code"})["headline"] == "New code"


def test_the_inbox_keeps_the_organization_navigation(cast, notes, nudge):
    client = client_for(cast.teammate)  # a fresh session: no organization shown yet
    for url in ("/inbox/", "/governance/", "/governance/dedup/"):
        html = client.get(url).content.decode()
        assert NAV in html and 'href="/o/acme/search/"' in html, url


def test_edit_from_the_inbox_returns_to_the_inbox(cast, notes, nudge):
    client = client_for(cast.teammate)
    inbox = client.get("/inbox/").content.decode()
    edit_url = f"/fragments/{notes.limiter.public_id}/edit?next=/inbox/"
    assert f'href="{edit_url}"' in inbox
    editor = client.get(edit_url).content.decode()
    assert '<input type="hidden" name="next" value="/inbox/">' in editor
    response = client.post(f"/fragments/{notes.limiter.public_id}/edit",
                           {"title": "Rate limiter", "body": "Refills twice per second.",
                            "based_on_version": 1, "next": "/inbox/"}, **HTMX)
    # A full navigation back to the inbox: nothing swapped into the editor's page.
    assert response.status_code == 200 and response["HX-Redirect"] == "/inbox/"
    nudge.refresh_from_db()
    assert nudge.state == "answered" and nudge.answer == "edited"
    back = client.get("/inbox/").content.decode()
    assert "Saved version 2 of “Rate limiter”." in back


def test_edit_without_javascript_redirects_to_the_inbox(cast, notes):
    response = client_for(cast.teammate).post(
        f"/fragments/{notes.limiter.public_id}/edit",
        {"title": "Rate limiter", "body": "Refills twice.", "based_on_version": 1,
         "next": "/inbox/"})
    assert response.status_code == 302 and response["Location"] == "/inbox/"


@pytest.mark.parametrize("target", ["https://evil.example/", "//evil.example/inbox/"])
def test_an_external_next_is_refused(cast, notes, target):
    client = client_for(cast.teammate)
    editor = client.get(f"/fragments/{notes.limiter.public_id}/edit?next={target}")
    assert "evil.example" not in editor.content.decode()
    response = client.post(f"/fragments/{notes.limiter.public_id}/edit",
                           {"title": "Rate limiter", "body": "Refills twice.",
                            "based_on_version": 1, "next": target})
    assert response.status_code == 302
    assert response["Location"] == f"/fragments/{notes.limiter.public_id}/"
    htmx = client.post(f"/fragments/{notes.limiter.public_id}/edit",
                       {"title": "Rate limiter", "body": "Refills thrice.",
                        "based_on_version": 2, "next": target}, **HTMX)
    assert "evil.example" not in htmx.get("HX-Redirect", "") + htmx.content.decode()


def test_the_inline_editor_on_the_fragment_page_still_swaps_in_place(cast, notes):
    client = client_for(cast.teammate)
    inline = client.get(f"/fragments/{notes.limiter.public_id}/edit", **HTMX).content.decode()
    assert 'name="next"' not in inline
    saved = client.post(f"/fragments/{notes.limiter.public_id}/edit",
                        {"title": "Rate limiter", "body": "Refills twice.",
                         "based_on_version": 1}, **HTMX)
    assert "HX-Redirect" not in saved and b"Saved version 2" in saved.content


def test_hand_over_with_no_one_to_hand_over_to_says_so(cast, notes, nudge):
    others = Membership.objects.filter(org=cast.org).exclude(user=cast.teammate)
    get_user_model().objects.filter(pk__in=others.values("user_id")).update(is_active=False)
    client = client_for(cast.teammate)
    html = client.get("/inbox/").content.decode()
    assert "No one else in Acme to hand it over to." in html
    assert f'id="handover-{notes.limiter.public_id}"' not in html
    response = client.post(f"/inbox/{notes.limiter.public_id}/answer",
                           {"answer": "handed_over", "new_owner": ""}, **HTMX)
    assert b"There is no one else in the organization to hand it over to." in response.content
    nudge.refresh_from_db()
    assert nudge.state == "open"


def test_hand_over_lists_the_others_but_not_me(cast, notes, nudge):
    html = client_for(cast.teammate).get("/inbox/").content.decode()
    select = re.search(rf'<select id="handover-{notes.limiter.public_id}".*?</select>', html,
                       re.DOTALL).group(0)
    assert '"lead"' in select and '"teammate"' not in select


# --- error pages and favicon ------------------------------------------------------------------
def test_a_missing_page_is_styled_with_the_navigation(cast):
    response = client_for(cast.viewer).get("/no/such/page/")
    html = response.content.decode()
    assert response.status_code == 404
    assert NAV in html and "Page not found" in html and 'href="/inbox/"' in html
    assert "css/contexts.css" in html


def test_a_stranger_gets_the_styled_404_and_nothing_leaked(cast, notes):
    response = client_for(cast.stranger).get(f"/fragments/{notes.limiter.public_id}/")
    html = response.content.decode()
    assert response.status_code == 404 and NAV in html and "Page not found" in html
    assert "Rate limiter" not in html and "Fragment matches" not in html


def test_a_viewer_gets_the_styled_403_with_the_reason(cast, notes):
    response = client_for(cast.viewer).get(f"/fragments/{notes.limiter.public_id}/edit")
    html = response.content.decode()
    assert response.status_code == 403
    assert NAV in html and "You may not do that here" in html
    assert "You may not edit fragments in this scope." in html


def test_an_anonymous_404_offers_the_login(db):
    html = Client().get("/no/such/page/").content.decode()
    assert "Page not found" in html and 'href="/login/?next=/no/such/page/"' in html


def test_api_errors_keep_their_json_bodies(cast):
    response = client_for(cast.viewer).get("/api/no-such-endpoint")
    assert response.status_code == 404
    assert response.json() == {"error": {"code": "not_found", "message": "not found",
                                         "field": None}}


def test_the_500_page_is_styled_and_the_api_s_is_json(cast):
    from contexts import urls

    request = RequestFactory().get("/o/acme/")
    request.user, request.session = cast.viewer, {}
    page = urls.handler500(request)
    assert page.status_code == 500 and b"Something went wrong" in page.content
    assert NAV.encode() in page.content
    api = RequestFactory().get("/api/contexts/retrieve")
    api.user, api.session = cast.viewer, {}
    answer = urls.handler500(api)
    assert answer.status_code == 500 and answer["Content-Type"] == "application/json"


def test_the_favicon_is_served_and_linked(cast):
    response = Client().get("/favicon.ico")
    assert response.status_code == 200 and response["Content-Type"] == "image/svg+xml"
    assert response.content.startswith(b"<svg")
    html = client_for(cast.viewer).get("/inbox/").content.decode()
    assert '<link rel="icon" href="/static/favicon.svg"' in html


# --- pins board -------------------------------------------------------------------------------
def test_the_pins_board_weighs_the_pins_against_a_typical_budget(cast, notes):
    pin_fragment(cast.lead, notes.limiter, cast.repo.scope)
    html = client_for(cast.lead).get(f"/scopes/{cast.repo.scope.public_id}/pins/").content
    html = html.decode()
    assert typical_budget() == 3200
    tokens = notes.limiter.packed_tokens
    assert f"<strong>{tokens} tokens</strong> of a typical 3200-token budget" in html
    assert "The pins alone fill a typical budget" not in html


def test_the_pins_board_warns_when_the_pins_alone_fill_the_budget(cast, notes):
    long = create_fragment(SYSTEM, cast.repo.scope, title="Everything about deploys",
                           body="\n\n".join(f"Step {n}: check the dashboard, then the logs of "
                                            f"service {n} before the next one." for n in
                                            range(400)))
    assert long.packed_tokens >= 3200
    pin_fragment(cast.lead, long, cast.repo.scope)
    html = client_for(cast.lead).get(f"/scopes/{cast.repo.scope.public_id}/pins/").content
    assert b"The pins alone fill a typical budget" in html and b"(100%)" in html
