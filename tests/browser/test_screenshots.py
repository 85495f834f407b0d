"""A tour of every main console page as an administrator, saving full-page screenshots under
var/screenshots/ (laptop and phone widths) — and checking each page renders what it should."""

from __future__ import annotations

import pytest

from accounts.permissions import SYSTEM
from contexts.indexes.follower import reindex_fragments
from contexts.models import Fragment, IngestionJob, Nudge, Pin
from contexts.services.fragments import create_fragment, edit_fragment
from contexts.services.pins import pin_fragment
from tests.api.conftest import world  # noqa: F401 - fixture
from tests.domain.conftest import cast  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db(transaction=True)

MARKDOWN = """# Retry policy

Retries use **exponential backoff** with jitter; see the table.

| attempt | delay |
|---------|-------|
| 1       | 100ms |
| 2       | 400ms |

```python
def backoff(attempt: int) -> float:
    # full jitter
    return random.uniform(0, 0.1 * 4 ** attempt)
```
"""


@pytest.fixture
def tour(cast, world):  # noqa: F811
    doc = create_fragment(SYSTEM, cast.repo.scope, title="Retry policy", body=MARKDOWN,
                          kind="runbook", owner=cast.owner)
    edit_fragment(cast.owner, doc, based_on_version=1, body=MARKDOWN.replace("400ms", "500ms"),
                  reason="measured in production")
    reindex_fragments([doc.pk])
    Fragment.objects.filter(pk=world.repo_limiter.pk).update(owner=cast.owner)
    Nudge.objects.create(fragment=world.repo_limiter, owner=cast.owner, reasons=[
        {"code": "source_changed", "detail": "limiter.py changed 4 times since last verified"},
        {"code": "hot", "detail": "retrieved 37 times in 30 days"}])
    pin_fragment(cast.owner, world.org_note, cast.repo.scope, reason="deploy freeze this week")
    pin_fragment(cast.owner, world.repo_limiter, cast.repo.scope)
    IngestionJob.objects.create(org=cast.org, scope=cast.repo.scope, source="/srv/checkouts/web",
                                state="running", files_total=8, files_done=3,
                                fragments_created=12, created_by=cast.owner,
                                errors=[{"path": "src/broken.py", "reason": "SyntaxError: line 3"}])
    IngestionJob.objects.create(org=cast.org, scope=cast.org.scope, source="/srv/handbook",
                                state="done", files_total=5, files_done=5, fragments_created=21,
                                fragments_unchanged=4, created_by=cast.owner)
    return doc


def test_tour_of_every_page(cast, world, tour, login, live_server, screenshots):  # noqa: F811
    page = login("owner")
    page.screenshot(path=screenshots / "home.png", full_page=True)
    assert page.get_by_role("heading", name="Your organizations").is_visible()

    page.get_by_role("link", name="Acme").click()
    page.get_by_role("heading", name="Repositories").wait_for()
    page.screenshot(path=screenshots / "org-overview.png", full_page=True)

    page.goto(f"/scopes/{cast.repo.scope.public_id}/fragments/")
    page.get_by_label("Kind").select_option("runbook")
    page.locator("#fragment-table").get_by_text("1 fragment").wait_for()
    assert "kind=runbook" in page.url  # hx-push-url keeps filters in the address
    page.get_by_label("Kind").select_option("")
    page.locator("#fragment-table").get_by_text("2 fragments").wait_for()
    page.screenshot(path=screenshots / "fragment-list-admin.png", full_page=True)

    page.goto(f"/fragments/{tour.public_id}/")
    assert page.locator(".prose table").is_visible()
    assert page.locator(".prose pre.highlight .k").first.inner_text() == "def"
    page.screenshot(path=screenshots / "fragment-markdown-and-code.png", full_page=True)

    page.goto(f"/scopes/{cast.repo.scope.public_id}/pins/")
    rows = page.locator("#pins-board tbody tr")
    assert rows.first.inner_text().startswith("1\tDeploy policy")
    rows.first.get_by_role("button", name="Move Deploy policy down").click()
    page.locator("#pins-board tbody tr").first.filter(has_text="Rate limiter").wait_for()
    # Dragging a row (static/js/console.js) saves the new order too.
    with page.expect_response(lambda r: r.url.endswith("/pins/reorder")) as reorder:
        rows.nth(1).drag_to(rows.nth(0), source_position={"x": 12, "y": 12},
                           target_position={"x": 12, "y": 3})
    assert reorder.value.status == 200
    assert list(Pin.objects.filter(scope=cast.repo.scope).order_by("position")
                .values_list("fragment__title", flat=True)) == ["Deploy policy", "Rate limiter"]
    page.screenshot(path=screenshots / "pins-board.png", full_page=True)

    page.get_by_role("link", name="Ingest").click()
    page.get_by_role("heading", name="Jobs").wait_for()
    page.screenshot(path=screenshots / "ingest.png", full_page=True)
    running = IngestionJob.objects.get(state="running")
    IngestionJob.objects.filter(pk=running.pk).update(files_done=8, state="done")
    # The running row polls every second and stops once the job is done.
    page.locator(f"#job-{running.public_id}").get_by_text("8/8 files").wait_for()
    page.goto(f"/jobs/{running.public_id}/")
    page.screenshot(path=screenshots / "job-detail.png", full_page=True)

    page.get_by_role("link", name="Inbox").click()
    page.get_by_text("limiter.py changed 4 times").wait_for()
    # inbox.png and trace-detail.png: tests/browser/test_finish_screenshots.py (1280 px, every
    # action visible; a trace of many candidates).
    nudge_row = page.locator(f"#nudge-{world.repo_limiter.public_id}")
    nudge_row.get_by_role("button", name="Still accurate").click()
    nudge_row.get_by_text("Answered: still accurate").wait_for()

    page.goto("/o/acme/search/?query=rate+limiter+bucket&repo=" + cast.repo.public_id)
    page.locator("li.result").first.wait_for()
    trace_link = page.locator(".summary a.mono")
    trace_id = trace_link.inner_text()
    page.get_by_role("link", name="Traces").click()
    page.get_by_text(trace_id).wait_for()
    page.screenshot(path=screenshots / "traces.png", full_page=True)
    page.get_by_role("link", name=trace_id).click()
    page.get_by_role("heading", name="Candidates").wait_for()

    page.get_by_role("link", name="Tokens").click()
    page.get_by_label("Name").fill("ci-review-bot")
    page.get_by_label("Scopes").select_option(label=f"repository: {cast.repo.scope.label}")
    page.get_by_role("button", name="Create token").click()
    raw = page.get_by_label("Token", exact=True).input_value()
    assert raw.startswith("ctx_")
    page.screenshot(path=screenshots / "tokens.png", full_page=True)
    page.reload()
    assert raw not in page.content()

    page.context.clear_cookies()
    page.goto("/login/")
    page.screenshot(path=screenshots / "login.png", full_page=True)


def test_tour_on_a_phone(cast, world, tour, login, screenshots):  # noqa: F811
    page = login("owner", viewport={"width": 390, "height": 844}, is_mobile=True,
                 has_touch=True)
    page.goto(f"/scopes/{cast.repo.scope.public_id}/fragments/")
    page.screenshot(path=screenshots / "phone-fragment-list.png", full_page=True)
    page.goto(f"/fragments/{tour.public_id}/")
    page.screenshot(path=screenshots / "phone-fragment-detail.png", full_page=True)
    page.goto("/o/acme/search/?query=rate+limiter&repo=" + cast.repo.public_id)
    page.locator("li.result").first.wait_for()
    page.screenshot(path=screenshots / "phone-search.png", full_page=True)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 400, f"the search page scrolls sideways on a phone ({width}px)"
