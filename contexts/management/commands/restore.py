"""``manage.py restore FILE``: pg_restore into an empty database, then rebuild every
organization's lexical index (see docs/operations.md)."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from accounts.models import Organization
from contexts.indexes import follower
from contexts.stack.backup import BackupError, restore


class Command(BaseCommand):
    help = "Restore a backup into the (empty) configured database and rebuild the indexes."

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", type=Path)

    def handle(self, *args, file: Path, **options) -> None:
        try:
            restore(file)
        except BackupError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"restored {file}")
        for org in Organization.objects.order_by("slug"):
            count = follower.rebuild(org.pk)
            self.stdout.write(f"indexed {count} fragments of {org.slug}")
