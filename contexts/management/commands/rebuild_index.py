"""``manage.py rebuild_index --org SLUG``: recreate the lexical index from PostgreSQL."""

from django.core.management.base import BaseCommand, CommandError

from accounts.lookups import find_org
from contexts.indexing import rebuild_lexical_index


class Command(BaseCommand):
    help = "Rebuild an organization's tantivy index from PostgreSQL (the source of truth)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--org", required=True)

    def handle(self, *args, org: str, **options) -> None:
        organization = find_org(org)
        if organization is None:
            raise CommandError(f"no organization {org!r}")
        count = rebuild_lexical_index(organization)
        self.stdout.write(f"indexed {count} fragments of {organization.slug}")
