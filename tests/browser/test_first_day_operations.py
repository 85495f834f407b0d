"""The rest of a first day's console in a real browser (issue 40, "Must show"), the pages the
two other first-day walks (``test_first_day.py``, ``test_first_day_content.py``) do not reach:
a git repository followed as a source — its page's "Sync now", a synced fragment handed to a
person and given back to the repository's owners —, a scope's proposal policy, revoking the
tokens a member minted (asked first), a server path ingested by a superuser (the Ingest page's
two forms each with their own element ids), switching organization and logging out.
"""

from __future__ import annotations

import pytest

from accounts.models import ApiToken, Repository, Role
from accounts.tokens import create_token
from contexts.ingestion.git_sync import run_sync
from contexts.models import Fragment, IngestionJob
from tests.connectors.conftest import git_identity, git_repo, world  # noqa: F401 - fixtures
from tests.factories import MembershipFactory, OrganizationFactory, UserFactory

pytestmark = pytest.mark.django_db(transaction=True)


def test_sources_policy_tokens_paths_switching_and_logging_out(
        world, git_repo, git_identity, login, settings, tmp_path):  # noqa: F811
    ada = UserFactory(username="ada")
    bob = UserFactory(username="bob")
    MembershipFactory(user=ada, org=world.org, role=Role.ADMIN)
    MembershipFactory(user=bob, org=world.org, role=Role.CURATOR)
    MembershipFactory(user=ada, org=OrganizationFactory(slug="globex", name="Globex"),
                      role=Role.ADMIN)
    git_repo.commit("limits", {"docs/limits.md": "# Limits\n\nEach key gets 100 requests a "
                                                 "minute; bursts of 20 are allowed.\n"})
    source = world.source(git_repo, "web")
    result = run_sync(source.pk, wait=True)
    assert result is not None and not result.error
    synced = Fragment.objects.get(scope=Repository.objects.get(slug="web").scope)

    page = login("ada")
    page.goto("/o/acme/")
    page.locator("nav.mainnav").get_by_role("link", name="Sources").click()
    page.get_by_role("button", name="Sync now").click()
    page.get_by_text(f"Sync of {source.public_id} queued").wait_for()

    # A synced fragment's owner comes from the repository until a person chooses one.
    page.goto(f"/fragments/{synced.public_id}/")
    page.get_by_label("New owner").select_option("bob")
    page.get_by_role("button", name="Reassign").click()
    page.get_by_text("Owner is now bob.").wait_for()
    page.get_by_text("Chosen by a person: syncs leave it alone.").wait_for()
    page.get_by_role("button", name="Follow the repository's owners").click()
    page.get_by_text("From the repository").wait_for()

    page.locator("nav.mainnav").get_by_role("link", name="Review").click()
    page.get_by_label("Policy of acme/web").select_option("auto-accept")
    page.get_by_role("button", name="Set policy of acme/web").click()
    page.get_by_text("Proposals for web: auto-accept").wait_for()

    # A member's tokens revoked from Members, asked first.
    create_token(world.org, "bobs-agent", [world.org.scope], created_by=bob)
    page.locator("nav.mainnav").get_by_role("link", name="Members").click()
    row = page.locator("#member-bob")
    row.locator("summary", has_text="Revoke 1 token").click()
    row.get_by_text("Agents and scripts using it stop at once.").wait_for()
    row.get_by_role("button", name="Revoke the tokens of bob").click()
    page.get_by_text("Revoked 1 agent token minted by bob.").wait_for()
    assert ApiToken.objects.get(name="bobs-agent").revoked_at is not None

    # Switching organization, then logging out.
    page.get_by_label("Organization").select_option(label="Globex")
    page.get_by_role("button", name="Switch").click()
    page.wait_for_url("**/o/globex/")
    page.get_by_role("button", name="Log out").click()
    page.get_by_role("button", name="Log in").wait_for()

    # A superuser ingests a directory of the server, under an allowed root.
    settings.INGEST_ROOTS = [str(tmp_path)]
    handbook = tmp_path / "handbook"
    handbook.mkdir()
    (handbook / "oncall.md").write_text("# On call\n\nPage the secondary after 15 minutes.\n")
    UserFactory(username="root", is_superuser=True, is_staff=True)
    root = login("root")
    root.goto("/o/acme/ingest/")
    # Each form's label names its own input: the two forms' "Into scope" were one element id.
    assert root.locator("[id]").evaluate_all(
        "els => els.map(e => e.id).filter((id, i, all) => all.indexOf(id) !== i)") == []
    path_form = root.locator("section", has=root.get_by_role("heading",
                                                            name="Register a server path"))
    path_form.get_by_label("Into scope").select_option(label="organization: acme")
    path_form.get_by_label("Server path").fill(str(handbook))
    path_form.get_by_role("button", name="Ingest path").click()
    job = IngestionJob.objects.get(source_kind="path")
    root.locator(f"#job-{job.public_id}").wait_for()
