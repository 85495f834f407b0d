"""``manage.py restore FILE``: pg_restore into an empty database, then rebuild every
organization's lexical index (see docs/operations.md)."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from contexts.usecases.maintenance import BackupError, restore_backup


class Command(BaseCommand):
    help = "Restore a backup into the (empty) configured database and rebuild the indexes."

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", type=Path)

    def handle(self, *args, file: Path, **options) -> None:
        try:
            indexed = restore_backup(file)
        except BackupError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"restored {file}")
        for slug, count in indexed.items():
            self.stdout.write(f"indexed {count} fragments of {slug}")
