"""Telling fragments apart in lists: source path with lines, "part 2 of 3" for the parts of one
section, the enclosing heading or definition — in one query for the page — and the list's text
filter (title, body or source path)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.permissions import SYSTEM
from contexts.console.identity import identities
from contexts.models import SourceDocument, SourcePointer
from contexts.services.fragments import create_fragment
from contexts.services.pins import pin_fragment
from tests.console.conftest import client_for, htmx_to, world  # noqa: F401 - fixture


@pytest.fixture
def section(cast):
    """Three parts of one section of docs/performance.md, and a function of limiter.py."""
    web = cast.repo.scope
    doc = SourceDocument.objects.create(org=cast.org, repository=cast.repo,
                                        path="docs/performance.md", content_hash="a")
    code = SourceDocument.objects.create(org=cast.org, repository=cast.repo,
                                         path="web/limiter.py", content_hash="b")
    parts = []
    for number, (start, end) in enumerate([(10, 40), (41, 80), (81, 95)], start=1):
        fragment = create_fragment(
            SYSTEM, web, title="Retrieval latency and sizing",
            heading_path=["Performance", "Retrieval latency and sizing"],
            body=f"Part {number} of the latency notes: p95 stays under {number * 100} ms.")
        anchor = "retrieval-latency-and-sizing" + ("" if number == 1 else f"#{number}")
        SourcePointer.objects.create(document=doc, fragment=fragment, anchor=anchor,
                                     start_line=start, end_line=end)
        parts.append(fragment)
    other = create_fragment(SYSTEM, web, title="Summary", heading_path=["Performance"],
                            body="The summary of the performance page.")
    SourcePointer.objects.create(document=doc, fragment=other, anchor="performance",
                                 start_line=1, end_line=9)
    function = create_fragment(SYSTEM, web, title="refill", kind="code", language="python",
                               symbol="TokenBucket.refill",
                               body="def refill(self):\n    self.tokens = self.capacity\n")
    SourcePointer.objects.create(document=code, fragment=function, anchor="TokenBucket.refill",
                                 start_line=12, end_line=13)
    return parts, other, function


def test_parts_paths_lines_and_headings(cast, section):
    parts, other, function = section
    found = identities([*parts, other, function])
    assert [(found[f.pk].part, found[f.pk].parts) for f in parts] == [(1, 3), (2, 3), (3, 3)]
    assert found[parts[1].pk].path == "docs/performance.md"
    assert found[parts[1].pk].lines == "41–80"
    assert found[parts[1].pk].heading == "Performance › Retrieval latency and sizing"
    assert (found[other.pk].part, found[other.pk].parts) == (1, 1)
    assert found[function.pk].heading == "TokenBucket.refill"
    assert found[function.pk].repository == "web"


def test_one_query_whatever_the_number_of_rows(cast, section):
    parts, other, function = section
    with CaptureQueriesContext(connection) as one:
        identities(parts[:1])
    with CaptureQueriesContext(connection) as many:
        identities([*parts, other, function])
    assert len(one) == len(many) == 1


def test_the_list_shows_each_fragment_s_identity(cast, section):
    html = client_for(cast.viewer).get(
        f"/scopes/{cast.repo.scope.public_id}/fragments/").content.decode()
    assert '<span class="mono source">web:docs/performance.md:41–80</span>' in html
    assert "· part 2 of 3" in html and "· part 3 of 3" in html
    assert "· in Performance › Retrieval latency and sizing" in html
    assert "web:web/limiter.py:12–13" in html and "· in TokenBucket.refill" in html


def test_the_row_swapped_after_an_action_keeps_its_identity(cast, section):
    part = section[0][1]
    response = client_for(cast.lead).post(f"/fragments/{part.public_id}/pin",
                                          {"scope": cast.repo.scope.public_id},
                                          **htmx_to(f"row-{part.public_id}"))
    assert "· part 2 of 3" in response.content.decode()


@pytest.mark.parametrize(("query", "expected"), [
    ("latency notes: p95 stays under 200", ["Retrieval latency and sizing"]),  # body
    ("limiter.py", ["refill"]),                                                # source path
    ("SUMMARY", ["Summary"]),                                                  # title
    ("nowhere at all", []),
])
def test_the_text_filter_reads_title_body_and_path(cast, section, query, expected):
    response = client_for(cast.viewer).get(
        f"/scopes/{cast.repo.scope.public_id}/fragments/", {"q": query},
        **htmx_to("fragment-table"))
    html = response.content.decode()
    titles = [t for t in ("Retrieval latency and sizing", "refill", "Summary") if
              f">{t}</a>" in html]
    assert titles == expected


def test_search_results_show_each_fragment_s_identity(cast, world):  # noqa: F811
    doc = SourceDocument.objects.create(org=cast.org, repository=cast.repo,
                                        path="docs/limiter.md", content_hash="c")
    SourcePointer.objects.create(document=doc, fragment=world.repo_limiter, anchor="limiter",
                                 start_line=3, end_line=9)
    html = client_for(cast.lead).get(
        "/o/acme/search/?query=why+does+the+rate+limiter+drop+requests"
        f"&repo={cast.repo.public_id}").content.decode()
    assert '<span class="mono source">web:docs/limiter.md:3–9</span>' in html


def test_the_pins_board_shows_each_pin_s_identity(cast, section):
    for part in section[0][1:]:
        pin_fragment(cast.lead, part, cast.repo.scope)
    html = client_for(cast.viewer).get(
        f"/scopes/{cast.repo.scope.public_id}/pins/").content.decode()
    assert "web:docs/performance.md:41–80" in html and "· part 3 of 3" in html
