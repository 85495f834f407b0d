"""``manage.py bootstrap``: the demo organization and a first admin, created once.

The demo ingests this repository, whose ``.github/CODEOWNERS`` names who answers for what by
role (``@tech-lead``, ``@docs-curator``, ...): the demo creates a member for each login it names
— the catch-all rule's owners as tech leads, the others as curators — without a password (each
gets a set-password link, printed here and e-mailed), so its fragments have the owners the file
names, and nudges someone to go to, instead of all belonging to the admin who started it."""

import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from accounts.models import Membership, Organization, Repository, Role
from accounts.permissions import SYSTEM
from contexts.ingestion import owners
from contexts.ingestion.codeowners import CodeOwners, EntryKind
from contexts.models import IngestionJob
from contexts.services.errors import InvalidOperation
from contexts.usecases import ingestion, members
from contexts.usecases.ingestion import SubmitSource

DEMO_ORG = "demo"
DEMO_REPO = "contexts"
# The demo members' addresses: a reserved domain nothing is ever delivered to (their
# set-password links are printed; the e-mailed copies land in the mail folder).
DEMO_EMAIL_DOMAIN = "demo.invalid"


def demo_members(found: CodeOwners | None) -> dict[str, str]:
    """login → role for the people a CODEOWNERS names: the owners of a catch-all rule (``*``,
    ``/*``, ``**``) lead, everyone else curates (an owner must be able to curate its scope)."""
    roles: dict[str, str] = {}
    for rule in found.rules if found else ():
        lead = rule.pattern.strip("/") in {"*", "**"}
        for entry in rule.owners:
            if entry.kind != EntryKind.LOGIN:
                continue
            if lead or entry.name not in roles:
                roles[entry.name] = Role.TECH_LEAD if lead else Role.CURATOR
    return roles


class Command(BaseCommand):
    help = "Create the demo organization and an admin account if they do not exist."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--demo", action="store_true", default=True)
        parser.add_argument("--no-demo", dest="demo", action="store_false")
        parser.add_argument("--admin", default="admin", help="admin username")

    @transaction.atomic
    def handle(self, *args, demo: bool, admin: str, **options) -> None:
        org, _ = Organization.objects.get_or_create(slug=DEMO_ORG,
                                                    defaults={"name": "Demo organization"})
        repo, _ = Repository.objects.get_or_create(
            org=org, slug=DEMO_REPO, defaults={"name": "Contexts (this repository)"})
        user_model = get_user_model()
        user = user_model.objects.filter(username=admin).first()
        if user is None:
            password = secrets.token_urlsafe(12)
            user = user_model.objects.create_superuser(admin, f"{admin}@localhost", password)
            self.stdout.write(self.style.WARNING(
                f"Created the admin account — log in as {admin!r} with password {password!r} "
                "(shown only now; change it with `manage.py changepassword`)."
            ))
        Membership.objects.get_or_create(user=user, org=org, defaults={"role": Role.ADMIN})
        if demo:
            self._members(org, user, Path(settings.BASE_DIR))
        if demo and not IngestionJob.objects.filter(org=org).exists():
            # The project's own README, docs (with ADRs) and code: real content to curate and
            # search at once. The worker runs it; the console shows its progress. Tracked files
            # only: a stray untracked note or key in the checkout is not demo knowledge, and the
            # defaults leave test fixtures out (contexts/ingestion/policy.py).
            job = ingestion.submit(SYSTEM, SubmitSource(scope=repo.scope,
                                                        path=str(settings.BASE_DIR), owner=user))
            self.stdout.write(f"Ingesting this repository into demo/{DEMO_REPO} in the "
                              f"background (job {job.public_id}).")

    def _members(self, org: Organization, admin, root: Path) -> None:
        """A member for each login this repository's CODEOWNERS names that has no account yet
        (never a second one, nor a change to an existing account)."""
        created = []
        for login, role in demo_members(owners.worktree_codeowners(root)).items():
            try:
                made = members.create_member(admin, members.CreateMember(
                    org=org, username=login, email=f"{login}@{DEMO_EMAIL_DOMAIN}", role=role))
            except InvalidOperation as exc:
                if exc.field != "username":  # "this username is taken": there already
                    raise
                continue
            created.append((login, role, made.set_password_path))
        if created:
            self.stdout.write("Demo members from .github/CODEOWNERS (no password: each sets "
                              "one through its link, which works once):")
        for login, role, path in created:
            self.stdout.write(f"  {login} ({Role(role).label}): {settings.BASE_URL}{path}")
