"""``manage.py backup FILE``: pg_dump of the database (see docs/operations.md)."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from contexts.usecases.maintenance import BackupError, back_up


class Command(BaseCommand):
    help = "Write a pg_dump (custom format) of the database to FILE."

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", type=Path)

    def handle(self, *args, file: Path, **options) -> None:
        try:
            written = back_up(file)
        except BackupError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"backup written to {written} ({written.stat().st_size} bytes)")
