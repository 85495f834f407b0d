"""``manage.py member``: who is in an organization (``docs/operations.md``, "First day").

    member add ORG USERNAME --role viewer|curator|tech_lead|admin
    member list ORG

``add`` puts an existing account in the organization directly (the operator's right; an
organization administrator invites instead and the person accepts), or changes the role of
a member. Through ``contexts.usecases.organizations``, audited ``member.add`` /
``member.role``.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand

from accounts.models import Role
from accounts.permissions import SYSTEM
from contexts.management.commands._operator import run
from contexts.usecases import organizations


class Command(BaseCommand):
    help = "Add an existing account to an organization with a role, or list its members."

    def add_arguments(self, parser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="add|list")
        add = actions.add_parser("add", help="an existing account, with a role")
        add.add_argument("org", help="the organization's slug or public id")
        add.add_argument("username")
        add.add_argument("--role", required=True, choices=Role.values)
        listing = actions.add_parser("list", help="the organization's members and roles")
        listing.add_argument("org", help="the organization's slug or public id")

    def handle(self, *args, action: str, **options) -> None:
        getattr(self, f"_{action}")(**options)

    def _add(self, *, org: str, username: str, role: str, **_) -> None:
        membership = run(organizations.add_member, SYSTEM,
                         organizations.AddMember(org=org, username=username, role=role))
        self.stdout.write(f"{username} is {membership.get_role_display()} of "
                          f"{membership.org.slug}")

    def _list(self, *, org: str, **_) -> None:
        rows = run(organizations.list_members, SYSTEM, org)
        slugs = {r.pk: r.slug for r in run(organizations.list_repositories, SYSTEM, org)}
        for row in rows:
            line = [row.user.get_username(), row.membership.role]
            if not row.user.is_active:
                line.append("deactivated")
            if row.repository_roles:
                line.append("repository roles: " + ", ".join(
                    f"{slugs.get(pk, pk)} {role}"
                    for pk, role in sorted(row.repository_roles.items())))
            self.stdout.write("\t".join(line))
