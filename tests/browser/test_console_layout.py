"""The console's layout in a real browser (issue 40, item 8).

At 375 px (a phone) no list page scrolls sideways: the pins, members and fragment lists were
wider than the screen. At 1280 px (a laptop) an administrator's navigation — every item, a
superuser's Organizations too — sits on one row (it wrapped to three), measured by the items'
boxes; the item marked current is the page's own. The repository select of search and personas
shows its whole text. Screenshots: ``members-375.png``, ``nav-1280.png``, ``tokens.png`` (with
the MCP configuration) and ``fragments-page-2.png`` (a list's second page, reached by "Next").
"""

from __future__ import annotations

import pytest

from accounts.models import Repository
from accounts.permissions import SYSTEM
from contexts.models import Fragment, IngestionJob, RetrievalTrace
from contexts.services.fragments import create_fragment
from contexts.services.pins import pin_fragment
from tests.api.conftest import world  # noqa: F401 - fixture
from tests.domain.conftest import cast  # noqa: F401 - fixture
from tests.factories import MembershipFactory, SessionFactory, UserFactory

pytestmark = pytest.mark.django_db(transaction=True)

PHONE = {"width": 375, "height": 812}
LAPTOP = {"width": 1280, "height": 900}
LONG = "a-rather-long-identifier-that-does-not-wrap-" * 3


@pytest.fixture
def crowded(cast, world):  # noqa: F811
    """Enough of everything that every list has long rows and a second page."""
    cast.owner.is_superuser = True  # the widest navigation: Organizations too
    cast.owner.save(update_fields=["is_superuser"])
    Repository.objects.create(org=cast.org, slug="payments-gateway-service",
                              name="Payments gateway service (the long-named one)")
    made = [create_fragment(SYSTEM, cast.repo.scope, title=f"Note {i:02d} about {LONG}",
                            body=f"Paged note {i}: {LONG}", owner=cast.owner,
                            tags=["runbook", "deploys"]) for i in range(30)]
    for fragment in made[:3]:
        pin_fragment(cast.owner, fragment, cast.repo.scope, reason=f"pinned because {LONG}")
    for i in range(4):
        person = UserFactory(username=f"person-with-a-long-name-{i}")
        MembershipFactory(user=person, org=cast.org)
    for i in range(3):
        SessionFactory(org=cast.org, repository=cast.repo, external_id=f"iss_{LONG[:60]}{i}")
        IngestionJob.objects.create(org=cast.org, scope=cast.repo.scope, source=f"/srv/{LONG}",
                                    state="done", created_by=cast.owner,
                                    errors=[{"path": f"src/{LONG}.py", "reason": "syntax"}])
        RetrievalTrace.objects.create(org=cast.org, user=cast.owner, query=f"why {LONG}",
                                      scope_ids=[cast.repo.scope_id])
    return made


def list_pages(cast) -> dict[str, str]:  # noqa: F811
    scope = cast.repo.scope.public_id
    return {
        "overview": "/o/acme/", "fragments": f"/scopes/{scope}/fragments/",
        "pins": f"/scopes/{scope}/pins/", "members": "/o/acme/members/",
        "search": "/o/acme/search/", "ingest": "/o/acme/ingest/", "traces": "/o/acme/traces/",
        "tokens": "/o/acme/tokens/", "personas": "/o/acme/personas/",
        "review": "/o/acme/review/", "sources": "/o/acme/sources/",
        "sessions": "/o/acme/sessions/", "inbox": "/inbox/", "governance": "/governance/",
        "organizations": "/organizations/",
    }


def sideways(page) -> int:
    """How many pixels the page scrolls sideways (0: it fits the screen)."""
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


def culprits(page) -> list[str]:
    """The elements that stick out on the right while their parent does not (what to fix)."""
    return page.evaluate("""() => {
        const edge = window.innerWidth, out = [];
        for (const el of document.querySelectorAll('body *')) {
            const right = el.getBoundingClientRect().right, parent = el.parentElement;
            if (right > edge + 1 && (parent === document.body
                    || parent.getBoundingClientRect().right <= edge + 1
                    || getComputedStyle(parent).overflowX === 'visible'
                       && !el.closest('.table-wrap, pre'))) {
                const name = `${el.tagName.toLowerCase()}.${el.className}#${el.id}`;
                out.push(`${name}: ${Math.round(right)}`);
            }
        }
        return out.slice(0, 6);
    }""")


def test_no_list_page_scrolls_sideways_on_a_phone(cast, crowded, login, screenshots):  # noqa: F811
    page = login("owner", viewport=PHONE)
    wide = {}
    for name, url in list_pages(cast).items():
        page.goto(url)
        if sideways(page) > 0:
            wide[name] = (sideways(page), culprits(page))
        if name == "members":
            page.screenshot(path=screenshots / "members-375.png", full_page=True)
    assert wide == {}, "\n".join(f"{k}: {v}" for k, v in wide.items())


def nav_rows(page) -> list[float]:
    """The distinct tops of the navigation's items (one row: one top)."""
    return page.evaluate("""() => [...new Set([...document.querySelectorAll('.mainnav li')]
        .map((li) => Math.round(li.getBoundingClientRect().top)))]""")


def bar_rows(page) -> int:
    """How many rows the top bar takes: the brand, switcher and account row, and the
    navigation's rows under it (they wrapped to four before)."""
    return page.evaluate("""() => {
        const middle = (el) => {
            const r = el.getBoundingClientRect();
            return Math.round((r.top + r.bottom) / 2 / 8);
        };
        const rows = new Set(['.topbar .brand', '.topbar .switcher', '.topbar .logout']
            .map((s) => document.querySelector(s)).filter(Boolean).map(middle));
        document.querySelectorAll('.mainnav li').forEach((li) => rows.add(middle(li)));
        return rows.size;
    }""")


def test_an_administrators_navigation_is_one_row_on_a_laptop(cast, crowded, login,  # noqa: F811
                                                              screenshots):
    page = login("owner", viewport=LAPTOP)
    expected_current = {"overview": "Overview", "fragments": "Overview", "pins": "Overview",
                        "members": "Members", "search": "Search", "ingest": "Ingest",
                        "traces": "Traces", "tokens": "Tokens", "personas": "Personas",
                        "review": "Review", "sources": "Sources", "sessions": "Sessions",
                        "inbox": "Inbox", "governance": "Governance",
                        "organizations": "Organizations"}
    for name, url in list_pages(cast).items():
        page.goto(url)
        assert page.locator(".mainnav li").count() == 13, name
        assert len(nav_rows(page)) == 1, (name, nav_rows(page))
        assert bar_rows(page) == 2, name
        # the navigation and the account stay in the top bar's width
        assert sideways(page) == 0, name
        current = page.locator('.mainnav a[aria-current="page"]')
        assert current.count() == 1, name
        assert current.inner_text().split()[0] == expected_current[name], name
        if name == "overview":
            page.screenshot(path=screenshots / "nav-1280.png",
                            clip={"x": 0, "y": 0, "width": 1280, "height": 220})
    page.goto(f"/fragments/{crowded[0].public_id}/")
    assert page.locator('.mainnav a[aria-current="page"]').count() == 0


def test_the_repository_select_shows_its_whole_text(cast, crowded, login):  # noqa: F811
    """Every option of the repository select fits it ("all repositories I can read" was cut to
    "all repositories I ca"), at 1280 px and on a phone."""
    for viewport in (LAPTOP, PHONE):
        page = login("owner", viewport=viewport)
        for url in ("/o/acme/search/", "/o/acme/personas/"):
            page.goto(url)
            select = page.locator("select[name=repo]").first
            for option in select.locator("option").all_inner_texts():
                select.select_option(label=option)
                assert select.evaluate("(s) => s.scrollWidth <= s.clientWidth"), (
                    url, viewport, option)
            assert sideways(page) == 0, url


def test_screenshots_of_a_second_page_and_the_tokens_page(cast, crowded, login,  # noqa: F811
                                                          screenshots):
    page = login("owner", viewport=LAPTOP)
    page.goto(f"/scopes/{cast.repo.scope.public_id}/fragments/")
    first = page.locator("#fragment-table tbody tr").first.get_attribute("id")
    page.get_by_role("link", name="Next →").click()
    page.get_by_text("Page 2 of 2").wait_for()
    assert page.locator("#fragment-table tbody tr").first.get_attribute("id") != first
    assert "page=2" in page.url and "??" not in page.url
    page.screenshot(path=screenshots / "fragments-page-2.png", full_page=True)
    page.get_by_role("link", name="← Previous").click()
    page.get_by_text("Page 1 of 2").wait_for()
    assert page.locator("#fragment-table tbody tr").first.get_attribute("id") == first

    page.goto("/o/acme/tokens/")
    page.get_by_label("Name").fill("claude-code")
    page.locator("select[name=scopes]").select_option(value=cast.repo.scope.public_id)
    page.get_by_role("button", name="Create token").click()
    page.locator("#raw-token").wait_for()
    raw = page.locator("#raw-token").input_value()
    assert raw in page.locator("#mcp-config").inner_text()
    page.locator("#mcp-config").scroll_into_view_if_needed()
    page.screenshot(path=screenshots / "tokens.png", full_page=True)
    assert Fragment.objects.count() >= 30
