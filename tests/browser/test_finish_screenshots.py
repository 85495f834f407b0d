"""Issue 23, "Finish", in Chromium: the owner inbox fits a 1280 px laptop and a 375 px phone
with every action on screen, Edit returns to the inbox without an htmx error, the trace page
names its candidates and why they were dropped, and a missing page wears the console's
layout. Writes inbox.png, phone-inbox.png, trace-detail.png and not-found.png."""

from __future__ import annotations

import pytest

from accounts.permissions import SYSTEM
from contexts.indexes.follower import reindex_fragments
from contexts.models import Fragment, Nudge, SourceDocument, SourcePointer
from contexts.services.fragments import create_fragment
from tests.api.conftest import world  # noqa: F401 - fixture
from tests.domain.conftest import cast  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db(transaction=True)

ACTIONS = ("Still accurate", "Edit", "Retire", "Hand over")
LONG_TITLE = "Retrieval latency and sizing of the dense leg under a sustained burst of queries"


@pytest.fixture
def inbox(cast, world):  # noqa: F811
    """Three open nudges of the owner's, with every kind of reason, one a contradiction."""
    long = create_fragment(SYSTEM, cast.repo.scope, title=LONG_TITLE, owner=cast.owner,
                           body="The dense leg answers within 40 ms at p95 for 100k fragments.")
    Fragment.objects.filter(pk__in=[world.repo_limiter.pk, world.org_note.pk]).update(
        owner=cast.owner)
    Nudge.objects.create(fragment=world.repo_limiter, owner=cast.owner, reasons=[
        {"code": "source_changed", "detail": (
            "services/limiter/token_bucket_implementation.py changed 2026-11-29 10:00 after "
            "the fragment was last edited or verified (2026-05-16 09:00)")},
        {"code": "hot_unverified", "detail": (
            "42 uses (40 retrievals, 2 citations), last retrieved 2026-11-30; not edited or "
            "verified for 200 days (since 2026-05-16; prose limit 180 days)")}])
    Nudge.objects.create(fragment=long, owner=cast.owner, reasons=[{
        "code": "contradicted", "other": world.org_note.public_id,
        "other_title": "Deploy policy",
        "summary": "A newer fragment in the same section says something else: a number "
                   "changed (40 → 55).",
        "detail": "a number changed (40 → 55)",
        "passages": [{"older": "The dense leg answers within 40 ms at p95.",
                      "newer": "The dense leg answers within 55 ms at p95.",
                      "what": "a number changed (40 → 55)"}]}])
    Nudge.objects.create(fragment=world.org_note, owner=cast.owner, reasons=[
        {"code": "handed_over", "detail": "handed over to you by lead"}])
    return long


def _actions_fit(page, width: int) -> None:
    rows = page.locator("li.nudge")
    assert rows.count() == 3
    for index in range(rows.count()):
        row = rows.nth(index)
        for name in ACTIONS:
            control = (row.get_by_role("link", name=name) if name == "Edit"
                       else row.get_by_role("button", name=name))
            box = control.bounding_box()
            assert box is not None and control.is_visible(), (index, name)
            assert box["x"] >= 0 and box["x"] + box["width"] <= width, (index, name, box)
    scroll = page.evaluate("document.documentElement.scrollWidth")
    assert scroll <= width, f"the inbox scrolls sideways at {width}px ({scroll}px)"


def test_the_inbox_fits_a_laptop_and_edit_returns_to_it(cast, world, inbox, login,  # noqa: F811
                                                        screenshots):
    page = login("owner", viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto("/inbox/")
    page.get_by_text("A file it comes from changed after it was last checked.").wait_for()
    # Plain words, both passages of the contradiction side by side, the organization's nav.
    assert page.get_by_text("Agents use it often, but nobody has checked it").is_visible()
    passages = page.locator(".gv-passages blockquote")
    assert passages.count() == 2
    left, right = (passages.nth(i).bounding_box() for i in (0, 1))
    assert left["x"] + left["width"] <= right["x"] and abs(left["y"] - right["y"]) < 2
    assert page.locator("nav.mainnav").get_by_role("link", name="Search").is_visible()
    _actions_fit(page, 1280)
    page.screenshot(path=screenshots / "inbox.png", full_page=True)

    row = page.locator(f"#nudge-{world.repo_limiter.public_id}")
    row.get_by_role("link", name="Edit").click()
    page.wait_for_url("**/edit?next=/inbox/")
    page.locator("textarea[name=body]").fill("The bucket refills twice per second.")
    page.get_by_role("button", name="Save").click()
    page.wait_for_url(lambda url: url.endswith("/inbox/"))
    page.get_by_text("Saved version 2 of “Rate limiter”.").wait_for()
    assert page.locator(f"#nudge-{world.repo_limiter.public_id}").count() == 0
    assert not errors, errors


def test_the_inbox_reads_on_a_phone(cast, world, inbox, login, screenshots):  # noqa: F811
    page = login("owner", viewport={"width": 375, "height": 812}, is_mobile=True,
                 has_touch=True)
    page.goto("/inbox/")
    page.get_by_text("A newer fragment says something different.").wait_for()
    _actions_fit(page, 375)
    page.screenshot(path=screenshots / "phone-inbox.png", full_page=True)


@pytest.fixture
def sections(cast, world):  # noqa: F811
    """Forty fragments of one document, the parts of its sections sharing a title."""
    document = SourceDocument.objects.create(org=cast.org, repository=cast.repo,
                                             path="docs/retrieval.md", content_hash="h")
    made = []
    for section in range(10):
        for part in range(4):
            fragment = create_fragment(
                SYSTEM, cast.repo.scope, title=f"Rate limiter tuning {section + 1}",
                heading_path=["Retrieval", f"Rate limiter tuning {section + 1}"],
                body=(f"Part {part + 1}: the rate limiter bucket of shard {section} refills "
                      f"{part + 2} tokens per second; the limiter drops bursts above it. ") * 6)
            start = 1 + section * 80 + part * 20
            SourcePointer.objects.create(
                fragment=fragment, document=document,
                anchor=f"retrieval-{section}" + (f"#{part + 1}" if part else ""),
                start_line=start, end_line=start + 19)
            made.append(fragment)
    reindex_fragments([f.pk for f in made])
    return made


def test_the_trace_page_names_candidates_and_why_they_were_dropped(
        cast, world, sections, login, screenshots):  # noqa: F811
    page = login("owner")
    page.goto(f"/o/acme/search/?query=rate+limiter+bucket+refills&repo={cast.repo.public_id}"
              "&budget_tokens=400&k_lexical=100&k_dense=100&rerank_top=0&min_score=0",
              timeout=90_000)  # the first query of the process loads the encoder
    page.locator("li.result").first.wait_for()
    trace_id = page.locator(".summary a.mono").inner_text()
    response = page.goto(f"/traces/{trace_id}/")
    assert len(response.body()) < 120_000
    page.get_by_role("heading", name="Candidates").wait_for()
    assert page.get_by_text("docs/retrieval.md:", exact=False).first.is_visible()
    assert page.get_by_text("part 2 of 4").first.is_visible()
    assert page.get_by_text("it did not fit in the 400-token budget").first.is_visible()
    page.screenshot(path=screenshots / "trace-detail.png", full_page=True)


def test_a_missing_page_wears_the_console_layout(cast, world, login, screenshots):  # noqa: F811
    page = login("owner")
    response = page.goto("/o/acme/no-such-page/")
    assert response.status == 404
    assert page.get_by_role("heading", name="Page not found").is_visible()
    assert page.locator("nav.mainnav").get_by_role("link", name="Inbox").is_visible()
    icon = page.request.get("/favicon.ico")
    assert icon.status == 200 and icon.headers["content-type"] == "image/svg+xml"
    page.screenshot(path=screenshots / "not-found.png", full_page=True)
