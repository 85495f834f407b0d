"""``manage.py rebuild_index --org SLUG | --outdated``: recreate this node's lexical index of
one organization from PostgreSQL, or catch up every organization's, rebuilding those that are
missing, unreadable or built with an outdated schema (``contexts.usecases.maintenance``)."""

from django.core.management.base import BaseCommand, CommandError

from accounts.lookups import find_org
from accounts.models import Organization
from contexts.usecases import maintenance


class Command(BaseCommand):
    help = "Rebuild an organization's tantivy index from PostgreSQL (the source of truth)."

    def add_arguments(self, parser) -> None:
        group = parser.add_mutually_exclusive_group(required=True)
        group.add_argument("--org")
        group.add_argument("--outdated", action="store_true",
                           help="catch up every organization, rebuilding missing or outdated "
                                "indexes")

    def handle(self, *args, org: str | None, outdated: bool, **options) -> None:
        if outdated:
            ids = maintenance.catch_up_indexes()
            rebuilt = list(Organization.objects.filter(pk__in=ids).order_by("slug")
                           .values_list("slug", flat=True))
            self.stdout.write(f"rebuilt {len(rebuilt)} outdated index(es)"
                              + (f": {', '.join(rebuilt)}" if rebuilt else ""))
            return
        organization = find_org(org)
        if organization is None:
            raise CommandError(f"no organization {org!r}")
        count = maintenance.rebuild_index(organization)
        self.stdout.write(f"indexed {count} fragments of {organization.slug}")
