"""``manage.py settings_reference``: the Markdown reference of every setting, per area.

``docs/configuration.md`` is exactly its output (tests/foundation/test_configuration.py):

    python manage.py settings_reference > docs/configuration.md
"""

from __future__ import annotations

from django.core.management.base import BaseCommand

from contexts.config import AREAS
from contexts.config.reference import markdown


class Command(BaseCommand):
    help = "Print the reference of every setting (variable, type, default, description)."
    requires_system_checks: list[str] = []  # describes the settings, valid or not

    def handle(self, *args, **options) -> None:
        self.stdout.write(markdown(AREAS), ending="")
