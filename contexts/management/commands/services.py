"""``manage.py services start|stop|status``: the embedded PostgreSQL and Redis."""

from django.core.management.base import BaseCommand, CommandError

from contexts.stack.servers import EmbeddedServiceError, EmbeddedStack


class Command(BaseCommand):
    help = "Start, stop or show the embedded PostgreSQL (+pgvector) and Redis servers."

    def add_arguments(self, parser) -> None:
        parser.add_argument("action", choices=["start", "stop", "status"])

    def handle(self, *args, action: str, **options) -> None:
        stack = EmbeddedStack.from_settings()
        if not stack.services:
            self.stdout.write("DATABASE_URL and REDIS_URL are set: no embedded service to manage.")
            return
        try:
            if action == "start":
                statuses = stack.start()
            elif action == "stop":
                stack.stop()
                statuses = stack.status()
            else:
                statuses = stack.status()
        except EmbeddedServiceError as exc:
            raise CommandError(str(exc)) from exc
        for status in statuses:
            self.stdout.write(status.line())
