"""``manage.py org``: the instance's organizations (``docs/operations.md``, "First day").

    org create SLUG --name NAME --admin USERNAME [--email EMAIL]
    org list

``create`` makes the organization and its first administrator: a new account (``--email``
needed) gets no password, and the command prints a set-password link that works once (the
same link is e-mailed); an existing account is made administrator. Through
``contexts.usecases.organizations``, as the operator, audited.
"""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand

from accounts.permissions import SYSTEM
from contexts.management.commands._operator import run
from contexts.usecases import organizations


class Command(BaseCommand):
    help = "Create an organization with its first administrator, or list the organizations."

    def add_arguments(self, parser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="create|list")
        create = actions.add_parser("create", help="an organization and its first admin")
        create.add_argument("slug", help="lowercase letters, digits, '-' or '_'")
        create.add_argument("--name", required=True, help="the display name")
        create.add_argument("--admin", required=True, metavar="USERNAME",
                            help="the first administrator (created when new)")
        create.add_argument("--email", default="",
                            help="the administrator's address (needed for a new account)")
        actions.add_parser("list", help="every organization, its members and repositories")

    def handle(self, *args, action: str, **options) -> None:
        getattr(self, f"_{action}")(**options)

    def _create(self, *, slug: str, name: str, admin: str, email: str, **_) -> None:
        done = run(organizations.create_organization, SYSTEM,
                   organizations.CreateOrganization(slug=slug, name=name, admin=admin,
                                                    email=email))
        self.stdout.write(f"created organization {done.org.slug} “{done.org.name}” "
                          f"({done.org.public_id})")
        if not done.created_account:
            self.stdout.write(f"{admin} (an existing account) is its administrator")
            return
        self.stdout.write(f"created the account {admin}, its administrator, without a "
                          "password. Set it once through this link (it expires in "
                          f"{settings.PASSWORD_RESET_TIMEOUT // 86400} days):")
        self.stdout.write(f"  {settings.BASE_URL}{done.set_password_path}")
        self.stdout.write("the same link was e-mailed to them" if done.emailed else
                          "the link could not be e-mailed; pass it on yourself")

    def _list(self, **_) -> None:
        rows = run(organizations.list_organizations, SYSTEM)
        if not rows:
            self.stdout.write("no organizations; create one with `manage.py org create`")
        for row in rows:
            admins = ", ".join(row.admins) or "no administrator"
            self.stdout.write(f"{row.org.slug}\t{row.org.name}\t{row.org.public_id}\t"
                              f"{row.members} members\t{row.repositories} repositories\t"
                              f"admins: {admins}")
