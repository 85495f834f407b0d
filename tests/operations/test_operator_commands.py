"""The operator sets up a team from the command line (issue 40, item 2; docs/operations.md
"First day: set up a team"): ``org create`` (the organization and its first administrator, a
new account's single-use set-password link printed), ``org list``, ``repo create`` /
``list``, ``member add`` / ``list``. Each goes through ``contexts.usecases.organizations``
and is audited; bad input is a ``CommandError`` naming the field (exit code 1, argparse's
own 2), never a traceback, and writes nothing."""

from __future__ import annotations

import re
import subprocess
import sys
from urllib.parse import urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client

from accounts.models import Membership, Organization, Repository, Role
from contexts.indexes import follower
from contexts.models import AuditEvent
from tests.conftest import ROOT
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def run(capsys, *args: str) -> str:
    capsys.readouterr()
    call_command(*args)
    return capsys.readouterr().out


def test_a_team_set_up_from_the_command_line(capsys, settings, tmp_path, mailoutbox):
    settings.LEXICAL_INDEX_DIR = tmp_path / "index"
    out = run(capsys, "org", "create", "acme", "--name", "Acme Corp", "--admin", "ada",
              "--email", "ada@example.com")
    org = Organization.objects.get(slug="acme")
    ada = get_user_model().objects.get(username="ada")
    assert org.name == "Acme Corp" and not ada.has_usable_password()
    assert Membership.objects.get(org=org, user=ada).role == Role.ADMIN
    link = re.search(r"https?://\S+/account/set-password/\S+/", out).group(0)
    assert "the same link was e-mailed" in out and len(mailoutbox) == 1
    # The index is there from the start: a retrieval finds an empty one, not a fault.
    assert follower.read_mark(org.pk) is not None
    # The link works once: ada sets her password and signs in.
    client = Client()
    form = client.get(urlsplit(link).path, follow=True)
    assert form.status_code == 200
    done = client.post(form.redirect_chain[-1][0], {"new_password1": "a long passphrase 42",
                                                    "new_password2": "a long passphrase 42"})
    assert done.status_code == 302
    ada.refresh_from_db()
    assert ada.check_password("a long passphrase 42")

    out = run(capsys, "repo", "create", "acme", "web", "--name", "Web app")
    repo = Repository.objects.get(org=org, slug="web")
    assert repo.name == "Web app" and repo.public_id in out
    run(capsys, "repo", "create", org.public_id, "billing")
    assert Repository.objects.get(org=org, slug="billing").name == "billing"
    assert run(capsys, "repo", "list", "acme").splitlines()[0].startswith("billing\tbilling")

    bob = UserFactory(username="bob")
    out = run(capsys, "member", "add", "acme", "bob", "--role", "tech_lead")
    assert "bob is tech lead of acme" in out.lower()
    assert Membership.objects.get(org=org, user=bob).role == Role.TECH_LEAD
    run(capsys, "member", "add", "acme", "bob", "--role", "viewer")  # a member: the role moves
    assert Membership.objects.get(org=org, user=bob).role == Role.VIEWER
    listed = run(capsys, "member", "list", "acme").splitlines()
    assert listed == ["ada\tadmin", "bob\tviewer"]

    # An existing account as the first administrator of a second organization.
    out = run(capsys, "org", "create", "globex", "--name", "Globex", "--admin", "bob")
    assert "bob (an existing account) is its administrator" in out
    assert "set-password" not in out
    listing = run(capsys, "org", "list")
    assert "acme\tAcme Corp" in listing and "admins: ada" in listing
    assert "globex\tGlobex" in listing and "admins: bob" in listing

    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {"org.create", "member.create", "repository.create", "member.add",
            "member.role"} <= actions
    added = AuditEvent.objects.get(action="member.add", org=org)
    assert added.after == {"username": "bob", "role": "tech_lead", "direct": True}


@pytest.mark.parametrize(("args", "field"), [
    (("org", "create", "Bad Slug", "--name", "X", "--admin", "ada", "--email", "a@b.c"),
     "slug"),
    (("org", "create", "fine", "--name", "  ", "--admin", "ada", "--email", "a@b.c"), "name"),
    (("org", "create", "fine", "--name", "X" * 201, "--admin", "ada", "--email", "a@b.c"),
     "name"),
    (("org", "create", "fine", "--name", "X", "--admin", "bad name!", "--email", "a@b.c"),
     "admin"),
    (("org", "create", "fine", "--name", "X", "--admin", "ada"), "email"),
    (("org", "create", "fine", "--name", "X", "--admin", "ada", "--email", "nope"), "email"),
    (("repo", "create", "nowhere", "web"), "org"),
    (("repo", "create", "taken", "Web!"), "slug"),
    (("repo", "create", "taken", "web"), "slug"),
    (("member", "add", "taken", "ghost", "--role", "viewer"), "username"),
    (("member", "add", "nowhere", "ada", "--role", "viewer"), "org"),
    (("member", "list", "nowhere"), "org"),
])
def test_bad_input_names_the_field_and_writes_nothing(args, field):
    org = Organization.objects.create(slug="taken", name="Taken")
    Repository.objects.create(org=org, slug="web", name="Web")
    users = get_user_model().objects.count()
    events = AuditEvent.objects.count()
    with pytest.raises(CommandError, match=f"^{field}: "):
        call_command(*args)
    assert Organization.objects.count() == 1 and Repository.objects.count() == 1
    assert get_user_model().objects.count() == users
    assert AuditEvent.objects.count() == events


def test_a_taken_slug_or_a_deactivated_admin_is_refused():
    Organization.objects.create(slug="acme", name="Acme")
    with pytest.raises(CommandError, match="^slug: an organization 'acme' exists"):
        call_command("org", "create", "acme", "--name", "Again", "--admin", "ada",
                     "--email", "ada@example.com")
    assert not get_user_model().objects.filter(username="ada").exists()
    UserFactory(username="gone", is_active=False)
    with pytest.raises(CommandError, match="^admin: gone is deactivated"):
        call_command("org", "create", "new", "--name", "New", "--admin", "gone")
    assert not Organization.objects.filter(slug="new").exists()


@pytest.mark.django_db(transaction=True)
def test_the_exit_codes_and_no_traceback(services):
    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "manage.py", *args], env=services.env(),
                              cwd=ROOT, capture_output=True, text=True, timeout=120)

    refused = cli("org", "create", "Bad Slug", "--name", "X", "--admin", "ada",
                  "--email", "ada@example.com")
    assert refused.returncode == 1
    assert "slug: " in refused.stderr and "Traceback" not in refused.stderr
    unknown = cli("member", "add", "acme", "ada", "--role", "owner")
    assert unknown.returncode == 2
    assert "--role" in unknown.stderr and "Traceback" not in unknown.stderr
