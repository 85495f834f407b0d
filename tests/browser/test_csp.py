"""The Content-Security-Policy breaks nothing a user does: htmx swaps, the pins board's script
and the API docs run, and Chromium reports no violation on the way."""

from __future__ import annotations

import pytest

from contexts.services.pins import pin_fragment
from tests.api.conftest import world  # noqa: F401 - fixture
from tests.domain.conftest import cast  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db(transaction=True)


def test_console_and_api_docs_work_under_the_policy(cast, world, login):  # noqa: F811
    pin_fragment(cast.owner, world.repo_limiter, cast.repo.scope)
    page = login("owner")
    violations: list[str] = []
    page.on("console", lambda message: violations.append(message.text)
            if "Content Security Policy" in message.text else None)
    assert "script-src 'self'" in page.goto("/").headers["content-security-policy"]

    # An htmx edit: the editor is swapped in, the save swaps in the new version.
    page.goto(f"/fragments/{world.repo_limiter.public_id}/")
    page.get_by_role("link", name="Edit").first.click()
    page.locator("textarea[name=body]").fill("The bucket refills twice per second.")
    page.get_by_role("button", name="Save").click()
    page.get_by_text("Saved version 2").wait_for()

    page.goto(f"/scopes/{cast.repo.scope.public_id}/pins/")
    page.goto(f"/o/{cast.org.slug}/search/?q=rate+limiter")
    page.goto("/governance/")

    # Swagger UI: its init script is a separate URL, so it renders the schema's operations.
    page.goto("/api/docs/")
    page.locator(".opblock-summary-path", has_text="/api/contexts/retrieve").first.wait_for()
    assert violations == []
