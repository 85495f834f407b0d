"""Every paginated list of the console pages correctly (issue 40, item 1).

"Next →" once linked to ``??page=2`` (Django's ``{% querystring %}`` already starts with ``?``)
and every list showed its first page again; nothing followed the link. Here each list gets more
rows than a page holds, all created at the same instant (as a bulk ingest or an import writes
them), and the test follows the rendered links as a browser would: page 1, every "Next" to the
last page, then "Previous" back to the first. Every row appears exactly once, each page differs
from the one before it, and "Previous" shows the page it left.

The lists: a scope's fragments, the traces explorer, a trace's candidates that were not
returned, the owner inbox's fragments, the sessions, the sources' syncs and the ingestion jobs.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from accounts.models import Session
from accounts.permissions import SYSTEM
from contexts.console.views.common import PAGE_SIZE
from contexts.console.views.sources import SYNCS_PER_PAGE
from contexts.console.views.traces import DROPPED_PER_PAGE
from contexts.ingestion.git_sync import SYNC_RECORDED
from contexts.models import AuditEvent, Fragment, IngestionJob, RetrievalTrace
from contexts.services.fragments import create_fragment
from tests.console.conftest import client_for
from tests.domain.conftest import cast  # noqa: F401 - the console's cast of people
from tests.factories import SessionFactory

pytestmark = pytest.mark.django_db

NEXT = re.compile(r'<a href="([^"]*)"[^>]*rel="next"')
PREVIOUS = re.compile(r'<a href="([^"]*)"[^>]*rel="prev"')
SAME_INSTANT = timezone.now() - timedelta(days=1)


def _resolve(path: str, href: str) -> str:
    """A link as the browser follows it: a query string (``?page=2``) replaces the page's."""
    href = html.unescape(href)
    assert not href.startswith("??"), href
    return path.split("?")[0] + href if href.startswith("?") else href


def pages_of(client: Client, url: str, rows: Callable[[str], list[str]]) -> list[list[str]]:
    """Every page of a list from ``url`` by its "Next" links, then back to the first by its
    "Previous" links: the rows of each page, in order."""
    path = url.split("?")[0]
    pages: list[list[str]] = []
    texts: list[str] = []
    while url:
        response = client.get(url)
        assert response.status_code == 200, url
        text = response.content.decode()
        found = rows(text)
        assert found, f"no rows on {url}"
        assert not pages or found != pages[-1], f"{url} shows the page before it again"
        pages.append(found)
        texts.append(text)
        following = NEXT.search(text)
        url = _resolve(path, following[1]) if following else ""
        assert len(pages) < 10, "the Next links never end"
    assert not PREVIOUS.search(texts[0]), "the first page has a Previous link"
    for index in range(len(pages) - 1, 0, -1):
        previous = PREVIOUS.search(texts[index])
        assert previous, f"page {index + 1} has no Previous link"
        back = _resolve(path, previous[1])
        response = client.get(back)
        assert response.status_code == 200, back
        assert rows(response.content.decode()) == pages[index - 1], back
    return pages


def assert_each_row_once(pages: list[list[str]], expected: set[str], per_page: int) -> None:
    listed = [row for page in pages for row in page]
    assert len(pages) >= 2, "the list must span more than one page"
    assert len(listed) == len(set(listed)), "a row appears on two pages"
    assert set(listed) == expected
    assert all(len(page) == per_page for page in pages[:-1])


def finder(pattern: str, *, after: str = "") -> Callable[[str], list[str]]:
    compiled = re.compile(pattern)

    def rows(text: str) -> list[str]:
        if after:
            text = text[text.index(after):]
        return compiled.findall(text)

    return rows


def _fragments(scope, owner, count: int) -> list[Fragment]:
    made = [create_fragment(SYSTEM, scope, title=f"Note {i:02d}", body=f"Paged note {i}.",
                            owner=owner) for i in range(count)]
    # Written in one instant (an import, a bulk ingest): the order must still be total.
    Fragment.objects.filter(pk__in=[f.pk for f in made]).update(last_edited_at=SAME_INSTANT)
    return made


def test_a_scopes_fragments_page(cast):  # noqa: F811
    made = _fragments(cast.repo.scope, cast.teammate, PAGE_SIZE + 7)
    pages = pages_of(client_for(cast.teammate),
                     f"/scopes/{cast.repo.scope.public_id}/fragments/",
                     finder(r'<tr id="row-(frag_[\w-]+)"'))
    assert_each_row_once(pages, {f.public_id for f in made}, PAGE_SIZE)


def test_a_filtered_and_sorted_fragment_list_keeps_its_filters_on_every_page(cast):  # noqa: F811
    made = _fragments(cast.repo.scope, cast.teammate, PAGE_SIZE + 3)
    client = client_for(cast.teammate)
    url = f"/scopes/{cast.repo.scope.public_id}/fragments/?q=Paged&sort=title"
    first = client.get(url).content.decode()
    following = html.unescape(NEXT.search(first)[1])
    assert "q=Paged" in following and "sort=title" in following and "page=2" in following
    pages = pages_of(client, url, finder(r'<tr id="row-(frag_[\w-]+)"'))
    assert_each_row_once(pages, {f.public_id for f in made}, PAGE_SIZE)
    titles = {f.public_id: f.title for f in made}
    listed = [titles[pid] for page in pages for pid in page]
    assert listed == sorted(listed)


def test_the_traces_explorer(cast):  # noqa: F811
    made = [RetrievalTrace.objects.create(org=cast.org, user=cast.owner, query=f"query {i}",
                                          scope_ids=[cast.repo.scope_id],
                                          created_at=SAME_INSTANT)
            for i in range(PAGE_SIZE + 4)]
    pages = pages_of(client_for(cast.owner), "/o/acme/traces/",
                     finder(r'href="/traces/(tr_[\w-]+)/"'))
    assert_each_row_once(pages, {t.public_id for t in made}, PAGE_SIZE)


def test_a_traces_candidates_that_were_not_returned(cast):  # noqa: F811
    candidates = [{"id": f"cand-{i:02d}", "bm25_rank": i + 1, "dense_rank": i + 2, "rrf": 0.01,
                   "rerank": None, "freshness": 0.5, "authority": 0.1, "pinned": False,
                   "final": 1 - i / 100, "dropped": "over budget"}
                  for i in range(2 * DROPPED_PER_PAGE + 5)]
    trace = RetrievalTrace.objects.create(org=cast.org, user=cast.owner, query="many",
                                          scope_ids=[cast.repo.scope_id],
                                          candidates=candidates, returned=[],
                                          parameters={"budget_tokens": 100})
    pages = pages_of(client_for(cast.owner), f"/traces/{trace.public_id}/",
                     finder(r'class="mono small">(cand-\d+)<', after='id="dropped-title"'))
    assert_each_row_once(pages, {c["id"] for c in candidates}, DROPPED_PER_PAGE)
    # best first, across pages
    assert [row for page in pages for row in page] == [c["id"] for c in candidates]


def test_the_inbox_fragments_i_own(cast):  # noqa: F811
    made = _fragments(cast.repo.scope, cast.lead, PAGE_SIZE + 2)
    pages = pages_of(client_for(cast.lead), "/inbox/",
                     finder(r'<tr><td><a href="/fragments/(frag_[\w-]+)/"'))
    assert_each_row_once(pages, {f.public_id for f in made}, PAGE_SIZE)


def test_the_sessions(cast):  # noqa: F811
    made = [SessionFactory(org=cast.org, repository=cast.repo) for _ in range(PAGE_SIZE + 5)]
    Session.objects.filter(org=cast.org).update(created_at=SAME_INSTANT)
    pages = pages_of(client_for(cast.owner), "/o/acme/sessions/",
                     finder(r'<tr id="session-([\w-]+)"'))
    expected = {s.public_id for s in made} | {cast.session.public_id}
    assert_each_row_once(pages, expected, PAGE_SIZE)


def test_the_sources_syncs(cast):  # noqa: F811
    made = [AuditEvent.objects.create(org=cast.org, actor=None, action=SYNC_RECORDED,
                                      object_type="source", object_id="src_gone",
                                      after={"from": "", "to": f"{i:040x}"},
                                      created_at=SAME_INSTANT)
            for i in range(SYNCS_PER_PAGE + 6)]
    pages = pages_of(client_for(cast.lead), "/o/acme/sources/",
                     finder(r'<tr id="sync-(\d+)"'))
    assert_each_row_once(pages, {str(e.pk) for e in made}, SYNCS_PER_PAGE)


def test_the_ingestion_jobs(cast):  # noqa: F811
    made = [IngestionJob.objects.create(org=cast.org, scope=cast.repo.scope, source=f"/srv/{i}",
                                        state="done", created_by=cast.teammate,
                                        created_at=SAME_INSTANT)
            for i in range(PAGE_SIZE + 6)]
    pages = pages_of(client_for(cast.teammate), "/o/acme/ingest/",
                     finder(r'<tr id="job-(job_[\w-]+)"'))
    assert_each_row_once(pages, {j.public_id for j in made}, PAGE_SIZE)
