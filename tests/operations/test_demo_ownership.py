"""The demo's ownership (issue 38): ``make run`` ingests this repository into organization
``demo``. Before, the demo had one member, its admin, so every one of its fragments belonged to
the admin who started it (the owner chain's last resort) and every nudge went to them.

Now this repository's ``.github/CODEOWNERS`` names who answers for what, by role, and
``manage.py bootstrap`` creates a member for each login it names — the catch-all rule's owner a
tech lead, the others curators — with no password (a set-password link each, printed once), and
never twice. ``manage.py ownership_coverage`` measures, without ingesting (the demo's first
ingest takes most of an hour), who would own the fragments: the walk, chunker and owner chain
of the demo's path job. Every fragment has a member owner, from CODEOWNERS, spread over the
roles; the admin owns none.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from accounts.models import Membership, Organization, Role
from contexts.ingestion import codeowners
from contexts.management.commands.bootstrap import DEMO_REPO, demo_members
from contexts.models import AuditEvent

pytestmark = pytest.mark.django_db
ROOT = Path(settings.BASE_DIR)


def named_logins() -> dict[str, str]:
    found = codeowners.parse((ROOT / ".github" / "CODEOWNERS").read_text(),
                             ".github/CODEOWNERS")
    assert found.problems == ()
    return demo_members(found)


def bootstrap() -> str:
    out = io.StringIO()
    call_command("bootstrap", "--admin", "demo-admin", stdout=out)
    return out.getvalue()


def test_codeowners_names_roles_and_the_catch_all_one_leads():
    roles = named_logins()
    assert roles["tech-lead"] == Role.TECH_LEAD
    assert {"docs-curator", "ingestion-owner", "retrieval-owner", "governance-owner",
            "security-owner"} <= set(roles)
    assert [login for login, role in roles.items() if role == Role.TECH_LEAD] == ["tech-lead"]


def test_the_demo_creates_the_members_codeowners_names_without_passwords():
    output = bootstrap()
    demo = Organization.objects.get(slug="demo")
    users = get_user_model().objects
    for login, role in named_logins().items():
        user = users.get(username=login)
        assert not user.has_usable_password()  # they set one through the link
        assert Membership.objects.get(user=user, org=demo).role == role
        assert f"  {login} ({Role(role).label}): {settings.BASE_URL}/" in output
        assert AuditEvent.objects.filter(action="member.create", org=demo,
                                         after__username=login, after__role=role).exists()
    # Run again (every `make run`): nobody twice, nothing printed for them.
    count = users.count()
    again = bootstrap()
    assert users.count() == count and "Demo members" not in again


def test_an_existing_account_of_that_name_is_left_alone():
    stranger = get_user_model().objects.create_user("tech-lead", "lead@example.com", "pw")
    bootstrap()
    stranger.refresh_from_db()
    assert stranger.has_usable_password()
    assert not Membership.objects.filter(user=stranger).exists()  # not made a member either


def test_every_demo_fragment_would_have_a_member_owner_from_codeowners():
    bootstrap()
    out = io.StringIO()
    call_command("ownership_coverage", str(ROOT), "--org", "demo", "--repo", DEMO_REPO,
                 "--json", stdout=out)
    found = json.loads(out.getvalue())
    assert found["files"] > 300 and found["fragments"] > 1000
    assert found["member_owned"] == found["fragments"] and found["share"] == 1.0
    assert found["by_source"] == {"codeowners": found["fragments"]}
    owners = found["by_owner"]
    assert set(owners) == set(named_logins())  # every role owns something; the admin nothing
    assert max(owners.values()) < 0.6 * found["fragments"]  # spread, not all to one person
    assert found["warnings"] == [] and found["unreadable"] == []


def test_coverage_of_an_unknown_organization_or_folder_is_an_error_naming_it(tmp_path):
    with pytest.raises(CommandError, match="no organization 'nope'"):
        call_command("ownership_coverage", str(tmp_path), "--org", "nope")
    bootstrap()
    with pytest.raises(CommandError, match="no repository 'nope'"):
        call_command("ownership_coverage", str(tmp_path), "--org", "demo", "--repo", "nope")
    with pytest.raises(CommandError, match="is not a folder"):
        call_command("ownership_coverage", str(tmp_path / "missing"), "--org", "demo")
