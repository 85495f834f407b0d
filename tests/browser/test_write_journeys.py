"""Writing in the browser: a tech lead writes a negative context ("Don't / Do instead / Why")
on the New fragment page, previews it with its token count, saves it, and the API returns it
with ``negative: true``; a retired fragment is restored from its page, and retrieval returns
it again. Screenshots: ``fragment-new.png`` (the form with its preview) and
``fragment-restored.png``."""

from __future__ import annotations

import pytest

from accounts.tokens import create_token
from contexts.models import AuditEvent, Fragment
from tests.api.conftest import world  # noqa: F401 - fixture
from tests.domain.conftest import cast  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db(transaction=True)

TITLE = "Never retry a payment without its idempotency key"


def retrieve(api, raw: str, query: str, scope: dict) -> list[dict]:
    response = api.post("/api/contexts/retrieve", data={"query": query, "scope": scope},
                        headers={"Authorization": f"Bearer {raw}"})
    assert response.status == 200, response.text()
    return response.json()["fragments"]


def test_a_negative_context_written_in_the_browser_reaches_the_api(cast, world, login, api,  # noqa: F811
                                                                  screenshots):
    page = login("lead")
    page.goto("/o/acme/")
    page.get_by_role("link", name="New fragment").click()
    page.get_by_label("Kind").select_option(label="negative context")
    assert page.get_by_label("Body").is_hidden()  # a negative context has three parts instead
    page.get_by_label("Scope").select_option(value=cast.repo.scope.public_id)
    page.get_by_label("Title").fill(TITLE)
    page.get_by_label("Don't").fill("Retry a failed payment charge in a loop.")
    page.get_by_label("Do instead").fill(
        "Retry the payment with the **same idempotency key**, at most three times.")
    page.get_by_label("Why").fill("A payment retry without the key charges the customer twice.")
    page.get_by_label("Tags (optional)").fill("payments, retries")
    page.get_by_role("button", name="Preview").click()
    preview = page.locator("#fragment-preview")
    preview.locator("#preview-tokens").wait_for()
    assert "tokens" in preview.locator("#preview-tokens").inner_text()
    assert preview.locator("dl.negative-context dt").all_inner_texts() == [
        "Don't", "Do instead", "Why"]
    assert preview.locator("strong").inner_text() == "same idempotency key"
    page.screenshot(path=screenshots / "fragment-new.png", full_page=True)

    page.get_by_role("button", name="Save", exact=True).click()
    page.wait_for_url("**/fragments/frag_*/")
    fragment = Fragment.objects.get(title=TITLE)
    assert fragment.negative and fragment.kind == "negative" and fragment.owner == cast.lead
    assert fragment.tags == ["payments", "retries"]
    assert page.locator("dl.negative-context dt").all_inner_texts() == [
        "Don't", "Do instead", "Why"]
    assert AuditEvent.objects.filter(action="fragment.create",
                                     object_id=fragment.public_id).exists()

    _, raw = create_token(cast.org, "journey-agent", [cast.org.scope])
    found = retrieve(api, raw, "retry payment idempotency key",
                     {"org_id": "acme", "repo_id": "web"})
    ours = [f for f in found if f["id"] == fragment.public_id]
    assert ours and ours[0]["negative"] is True
    assert "same idempotency key" in ours[0]["text"]


def test_a_retired_fragment_is_restored_in_the_browser(cast, world, login, api, screenshots):  # noqa: F811
    _, raw = create_token(cast.org, "journey-agent", [cast.org.scope])
    query = "why does the rate limiter drop requests"
    scope = {"org_id": "acme", "repo_id": "web"}
    fid = world.repo_limiter.public_id
    assert fid in [f["id"] for f in retrieve(api, raw, query, scope)]

    page = login("lead")
    page.on("dialog", lambda dialog: dialog.accept())
    page.goto(f"/fragments/{fid}/")
    page.get_by_role("button", name="Retire").click()
    page.locator("#fragment-content .badge.status").wait_for()
    assert Fragment.objects.get(public_id=fid).status == "retired"
    assert fid not in [f["id"] for f in retrieve(api, raw, query, scope)]
    # Retired: nothing to pin, Restore instead.
    assert page.get_by_role("button", name="Pin here").count() == 0

    # Restoring asks why (issue 40, item 8): the reason goes to the audit trail.
    page.locator("#fragment-content details.restore summary").click()
    page.get_by_label("Why restore it?").fill("the retirement was a mistake")
    page.get_by_role("button", name="Restore", exact=True).click()
    page.locator("#fragment-content").get_by_role("button", name="Retire").wait_for()
    assert page.locator("#fragment-content .badge.status").count() == 0
    # The details and the audit trail follow in place: active again, retired then restored.
    page.locator("#fragment-audit").get_by_text("fragment.restore").wait_for()
    assert "fragment.retire" in page.locator("#fragment-audit").inner_text()
    assert "Status active" in " ".join(page.locator("#fragment-meta").inner_text().split())
    page.screenshot(path=screenshots / "fragment-restored.png", full_page=True)
    assert Fragment.objects.get(public_id=fid).status == "active"
    assert AuditEvent.objects.get(action="fragment.restore", object_id=fid).after["reason"] == (
        "the retirement was a mistake")
    assert fid in [f["id"] for f in retrieve(api, raw, query, scope)]
