"""``manage.py rebuild_index --org SLUG | --outdated``: recreate the lexical index from
PostgreSQL — one organization's, or every one built with an outdated schema."""

from django.core.management.base import BaseCommand, CommandError

from accounts.lookups import find_org
from contexts.indexing import rebuild_lexical_index, rebuild_outdated_indexes


class Command(BaseCommand):
    help = "Rebuild an organization's tantivy index from PostgreSQL (the source of truth)."

    def add_arguments(self, parser) -> None:
        group = parser.add_mutually_exclusive_group(required=True)
        group.add_argument("--org")
        group.add_argument("--outdated", action="store_true",
                           help="every organization whose index has an outdated schema")

    def handle(self, *args, org: str | None, outdated: bool, **options) -> None:
        if outdated:
            rebuilt = rebuild_outdated_indexes()
            self.stdout.write(f"rebuilt {len(rebuilt)} outdated index(es)"
                              + (f": {', '.join(rebuilt)}" if rebuilt else ""))
            return
        organization = find_org(org)
        if organization is None:
            raise CommandError(f"no organization {org!r}")
        count = rebuild_lexical_index(organization)
        self.stdout.write(f"indexed {count} fragments of {organization.slug}")
