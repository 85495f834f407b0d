"""A team's first day in a real browser, from nothing (issue 40, "Must show": every journey of
the console once more, as a newcomer would).

An operator — a superuser — creates the organization and its first administrator on the
Organizations page (a refusal names its field), then a repository; the administrator sets a
password through the link, lands on an overview that says what to do first, and brings the
team in on Members: creates an account, changes a role, deactivates and reactivates someone
(asked first), invites an existing account and withdraws the invitation. On Tokens she mints
and revokes an agent token and, as a member, a personal token (each revocation asked first);
the operator, who administers without belonging, is not offered personal tokens.

The content half — a fresh repository filled by an upload and curated — is
``tests/browser/test_first_day_content.py``.
"""

from __future__ import annotations

import pytest

from accounts.models import ApiToken, Membership, Organization, Repository, Role
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db(transaction=True)

# Composed at run time, as the suite's made-up credentials are: no tracked file holds a
# credential-shaped literal (tests/secrets/test_repository_scan.py).
NEW_PASSWORD = "-".join(("a", "long", "first", "day", "phrase", "42"))


def _section(page, heading: str):
    return page.locator("section", has=page.get_by_role("heading", name=heading))


def _field_error(page, input_id: str):
    """The error Django shows with the input ``input_id`` (its ``aria-describedby``), once the
    input is marked invalid."""
    page.locator(f"#{input_id}[aria-invalid='true']").wait_for()
    return page.locator(f"#{input_id}_error")


def test_an_operator_sets_up_a_team_and_its_administrator_brings_people_in(
        login, browser, live_server, screenshots):
    UserFactory(username="root", is_superuser=True, is_staff=True)
    UserFactory(username="carol", email="carol@example.com")

    root = login("root")
    root.get_by_role("link", name="Organizations").click()
    new_org = _section(root, "New organization")
    new_org.get_by_label("Slug").fill("Not A Slug!")
    new_org.get_by_label("Name").fill("Acme Corp")
    new_org.get_by_label("First administrator").fill("ada")
    new_org.get_by_label("Their e-mail").fill("ada@acme.example")
    new_org.get_by_role("button", name="Create organization").click()
    # The refusal sits in the slug's field, not in a banner that names no field.
    _field_error(root, "id_org-slug").wait_for()
    assert not Organization.objects.filter(name="Acme Corp").exists()

    new_org = _section(root, "New organization")
    new_org.get_by_label("Slug").fill("acme")
    new_org.get_by_role("button", name="Create organization").click()
    link = root.get_by_label("Set-password link").input_value()
    assert "/account/set-password/" in link
    new_repo = _section(root, "New repository")
    new_repo.get_by_label("Organization").select_option(label="Acme Corp (acme)")
    new_repo.get_by_label("Slug").fill("web")
    new_repo.get_by_label("Name").fill("Web app")
    new_repo.get_by_role("button", name="Create repository").click()
    root.get_by_text("Created repository acme/web.").wait_for()
    assert Repository.objects.filter(org__slug="acme", slug="web").exists()
    # An operator administers the organization without being its member: no personal tokens.
    root.goto("/o/acme/tokens/")
    root.get_by_role("heading", name="New token").wait_for()
    assert root.get_by_role("link", name="your personal tokens").count() == 0

    # The administrator sets her password through the link, then logs in.
    context = browser.new_context(base_url=live_server.url)
    context.set_default_timeout(15_000)
    newcomer = context.new_page()
    newcomer.goto(link)
    newcomer.get_by_label("New password:", exact=True).fill(NEW_PASSWORD)
    newcomer.get_by_label("New password confirmation").fill(NEW_PASSWORD)
    newcomer.get_by_role("button", name="Set password").click()
    newcomer.get_by_role("link", name="Log in").click()
    newcomer.get_by_label("Username").fill("ada")
    newcomer.get_by_label("Password").fill(NEW_PASSWORD)
    newcomer.get_by_role("button", name="Log in").click()
    ada = newcomer
    ada.get_by_role("link", name="Acme Corp").click()

    # A fresh organization says what to do first, each step a link.
    steps = ada.locator("#first-steps")
    steps.get_by_role("link", name="Upload files").wait_for()
    for name in ("write a fragment", "Sources", "Members", "Tokens"):
        assert steps.get_by_role("link", name=name).is_visible(), name
    ada.screenshot(path=screenshots / "first-day-overview.png", full_page=True)
    steps.get_by_role("link", name="Members").click()

    create = _section(ada, "Create an account")
    create.get_by_label("Username").fill("ada")  # taken: hers
    create.get_by_label("E-mail").fill("bob@acme.example")
    create.get_by_role("button", name="Create account").click()
    _field_error(ada, "create_username").get_by_text("this username is taken").wait_for()
    create = _section(ada, "Create an account")
    create.get_by_label("Username").fill("bob")
    create.get_by_label("Role", exact=True).select_option(label="curator")
    create.get_by_role("button", name="Create account").click()
    ada.locator("#member-bob").wait_for()
    assert "/account/set-password/" in ada.get_by_label("Set-password link").input_value()

    row = ada.locator("#member-bob")
    row.get_by_label("Role of bob").select_option(label="tech lead")
    row.get_by_role("button", name="Set role of bob").click()
    ada.get_by_text("bob is now tech lead").wait_for()
    assert Membership.objects.get(user__username="bob").role == Role.TECH_LEAD

    # Deactivating asks first; only the confirmation's button does it.
    row = ada.locator("#member-bob")
    row.get_by_text("Deactivate bob").first.click()
    row.get_by_text("They can no longer sign in").wait_for()
    row.get_by_role("button", name="Deactivate bob").click()
    ada.get_by_text("bob is deactivated.").wait_for()
    ada.locator("#member-bob").get_by_role("button", name="Reactivate bob").click()
    ada.get_by_text("bob is active again").wait_for()

    invite = _section(ada, "Invite an existing account")
    invite.get_by_label("Username or e-mail").fill("carol@example.com")
    invite.get_by_role("button", name="Invite").click()
    ada.get_by_role("button", name="Withdraw the invitation of carol@example.com").click()
    ada.get_by_text("The invitation of “carol@example.com” is withdrawn.").wait_for()
    assert ada.get_by_role("button",
                           name="Withdraw the invitation of carol@example.com").count() == 0

    # Tokens: an agent token, minted and revoked (asked first).
    ada.get_by_role("link", name="Tokens").click()
    ada.get_by_label("Name").fill("ci-agent")
    ada.get_by_label("Scopes").select_option(label="repository: acme/web")
    ada.get_by_role("button", name="Create token").click()
    assert ada.get_by_label("Token", exact=True).input_value().startswith("ctx_")
    token = ApiToken.objects.get(name="ci-agent")
    ada.once("dialog", lambda dialog: dialog.accept())
    ada.locator(f"#token-{token.public_id}").get_by_role("button", name="Revoke ci-agent").click()
    ada.locator(f"#token-{token.public_id}").get_by_text("revoked").wait_for()

    # A personal token: hers, from the link on the same page.
    ada.get_by_role("link", name="your personal tokens").click()
    ada.get_by_label("Name").fill("my-script")
    ada.get_by_role("button", name="Create token").click()
    assert ada.get_by_label("Token", exact=True).input_value().startswith("ctx_")
    personal = ApiToken.objects.get(name="my-script")
    item = ada.locator(f"#token-{personal.public_id}")
    item.get_by_text("Revoke my-script").click()
    item.get_by_text("Scripts using it stop at once.").wait_for()
    item.get_by_role("button", name="Revoke “my-script”").click()
    ada.locator(f"#token-{personal.public_id}").get_by_text("revoked").wait_for()
    personal.refresh_from_db()
    assert personal.revoked_at is not None
    context.close()
