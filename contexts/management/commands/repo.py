"""``manage.py repo``: an organization's repositories (``docs/operations.md``, "First day").

    repo create ORG SLUG [--name NAME]
    repo list ORG

A git source (``manage.py source add``) and a repository role need a repository. Through
``contexts.usecases.organizations``, as the operator, audited ``repository.create``.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand

from accounts.permissions import SYSTEM
from contexts.management.commands._operator import run
from contexts.usecases import organizations


class Command(BaseCommand):
    help = "Create a repository in an organization, or list its repositories."

    def add_arguments(self, parser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="create|list")
        create = actions.add_parser("create", help="a repository of the organization")
        create.add_argument("org", help="the organization's slug or public id")
        create.add_argument("slug", help="lowercase letters, digits, '-' or '_'")
        create.add_argument("--name", default="", help="the display name (default: the slug)")
        listing = actions.add_parser("list", help="the organization's repositories")
        listing.add_argument("org", help="the organization's slug or public id")

    def handle(self, *args, action: str, **options) -> None:
        getattr(self, f"_{action}")(**options)

    def _create(self, *, org: str, slug: str, name: str, **_) -> None:
        repository = run(organizations.create_repository, SYSTEM,
                         organizations.CreateRepository(org=org, slug=slug, name=name))
        self.stdout.write(f"created repository {repository.org.slug}/{repository.slug} "
                          f"“{repository.name}” ({repository.public_id})")

    def _list(self, *, org: str, **_) -> None:
        repositories = run(organizations.list_repositories, SYSTEM, org)
        if not repositories:
            self.stdout.write("no repositories; create one with `manage.py repo create`")
        for repository in repositories:
            self.stdout.write(f"{repository.slug}\t{repository.name}\t{repository.public_id}")
