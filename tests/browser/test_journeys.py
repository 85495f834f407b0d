"""The console's journeys in a real browser against a live server, real PostgreSQL, real
indexes: search → pin → the API puts it first; edit → new version and diff; retire → gone
from retrieval; two concurrent edits → the second sees the conflict and loses nothing; a
stranger cannot read another organization's fragments by URL."""

from __future__ import annotations

import pytest

from accounts.tokens import create_token
from contexts.models import Fragment, FragmentVersion
from tests.api.conftest import world  # noqa: F401 - fixture
from tests.domain.conftest import cast  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db(transaction=True)


def retrieve(api, raw: str, query: str, scope: dict) -> list[str]:
    response = api.post("/api/contexts/retrieve",
                        data={"query": query, "scope": scope},
                        headers={"Authorization": f"Bearer {raw}"})
    assert response.status == 200, response.text()
    return [f["id"] for f in response.json()["fragments"]]


def test_a_tech_lead_searches_and_pins_and_the_api_puts_it_first(cast, world, login, api,  # noqa: F811
                                                                  screenshots):
    _, raw = create_token(cast.org, "journey-agent", [cast.org.scope])
    query = "why does the rate limiter drop requests on deploy"
    scope = {"org_id": "acme", "repo_id": "web"}
    before = retrieve(api, raw, query, scope)
    assert before[0] == world.repo_limiter.public_id
    target = world.org_note  # "Deploy policy", not first before the pin
    assert target.public_id in before[1:]

    page = login("lead")
    page.get_by_role("link", name="Acme").click()
    page.get_by_role("link", name="Search", exact=True).click()
    page.get_by_label("Query").fill(query)
    page.get_by_label("Repository").select_option(label="web")
    page.get_by_role("button", name="Search", exact=True).click()
    result = page.locator("li.result").filter(has_text="Deploy policy")
    result.wait_for()
    assert page.locator("li.result .meter").count() >= 8 * page.locator("li.result").count()
    page.screenshot(path=screenshots / "search-preview.png", full_page=True)
    result.get_by_role("button", name="Pin here").click()
    result.get_by_text("pinned in acme/web").wait_for()

    after = retrieve(api, raw, query, scope)
    assert after[0] == target.public_id


def test_an_edit_makes_a_new_version_with_a_visible_diff(cast, world, login, screenshots):  # noqa: F811
    page = login("teammate")
    page.goto(f"/fragments/{world.repo_limiter.public_id}/")
    page.get_by_role("link", name="Edit").click()
    body = page.get_by_label("Body")
    body.wait_for()
    body.fill("The rate limiter queues bursts for up to 2 seconds instead of dropping them.")
    page.get_by_label("Why (optional)").fill("behaviour changed in v2.3")
    page.get_by_role("button", name="Save").click()
    page.get_by_text("Saved version 2.").wait_for()
    diff = page.locator("#diff")
    assert "Changes from v1 to v2" in diff.inner_text()
    assert "+The rate limiter queues bursts" in diff.locator(".add").inner_text()
    assert "-The rate limiter drops requests" in diff.locator(".del").inner_text()
    page.screenshot(path=screenshots / "fragment-detail.png", full_page=True)
    assert list(FragmentVersion.objects.filter(fragment=world.repo_limiter)
                .order_by("number").values_list("number", flat=True)) == [1, 2]


def test_a_retired_fragment_is_gone_from_retrieval(cast, world, login, api, screenshots):  # noqa: F811
    _, raw = create_token(cast.org, "journey-agent", [cast.org.scope])
    query = "why does the rate limiter drop requests"
    scope = {"org_id": "acme", "repo_id": "web"}
    fid = world.repo_limiter.public_id
    assert fid in retrieve(api, raw, query, scope)

    page = login("teammate")
    page.goto(f"/scopes/{cast.repo.scope.public_id}/fragments/")
    page.screenshot(path=screenshots / "fragment-list.png", full_page=True)
    row = page.locator(f"#row-{fid}")
    messages = []
    page.on("dialog", lambda dialog: (messages.append(dialog.message), dialog.accept()))
    row.get_by_role("button", name="Retire").click()
    page.locator(f"#row-{fid} .badge.status").wait_for()
    assert messages and messages[0].startswith("Retire “Rate limiter”?")
    assert Fragment.objects.get(public_id=fid).status == "retired"
    assert fid not in retrieve(api, raw, query, scope)


def test_concurrent_edits_conflict_and_nothing_is_lost(cast, world, login, screenshots):  # noqa: F811
    fid = world.repo_limiter.public_id
    first, second = login("lead"), login("teammate")
    for page in (first, second):
        page.goto(f"/fragments/{fid}/")
        page.get_by_role("link", name="Edit").click()
        page.get_by_label("Body").wait_for()
    theirs = "Lead: the bucket refills 10 tokens per second."
    mine = "Teammate: bursts above 10 requests are dropped with ERR_RATE."
    first.get_by_label("Body").fill(theirs)
    first.get_by_role("button", name="Save").click()
    first.get_by_text("Saved version 2.").wait_for()

    second.get_by_label("Body").fill(mine)
    second.get_by_role("button", name="Save").click()
    second.locator(".conflict").wait_for()
    assert second.locator("#conflict-current").inner_text() == theirs
    assert second.locator("#conflict-yours").inner_text() == mine
    assert second.get_by_label("Body").input_value() == mine
    second.screenshot(path=screenshots / "edit-conflict.png", full_page=True)

    merged = f"{theirs}\n{mine}"
    second.get_by_label("Body").fill(merged)
    second.get_by_role("button", name="Save my version").click()
    second.get_by_text("Saved version 3.").wait_for()
    bodies = list(FragmentVersion.objects.filter(fragment=world.repo_limiter)
                  .order_by("number").values_list("body", flat=True))
    assert bodies[1:] == [theirs, merged]


def test_a_stranger_cannot_read_another_organization_by_url(cast, world, login):  # noqa: F811
    page = login("stranger")
    for url in (f"/fragments/{world.repo_limiter.public_id}/",
                f"/scopes/{cast.repo.scope.public_id}/fragments/", "/o/acme/"):
        response = page.goto(url)
        assert response.status == 404, url
        assert "Rate limiter" not in page.content()
    own = page.goto(f"/fragments/{world.globex_secret.public_id}/")
    assert own.status == 200 and "Globex secret" in page.content()
