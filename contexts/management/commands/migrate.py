"""``manage.py migrate`` as the schema's owner (``contexts/stack/owner_db.py``).

Django's own command, run on a connection that uses the owner's credentials
(``DATABASE_OWNER_URL``, or the embedded ``contexts_owner``), followed by making sure the
application's login role (the user of ``DATABASE_URL``) exists and holds the application's
rights. Without an owner configured it is Django's command unchanged.
"""

from __future__ import annotations

from django.core.management.commands.migrate import Command as DjangoMigrate

from contexts.stack.owner_db import as_owner, ensure_login_role


class Command(DjangoMigrate):
    help = DjangoMigrate.help + " Runs as the schema's owner (DATABASE_OWNER_URL)."

    def handle(self, *args, **options) -> None:
        alias = options["database"]
        with as_owner(alias) as application:
            super().handle(*args, **options)
            if application is not None and not options.get("plan") \
                    and not options.get("check_unapplied"):
                for warning in ensure_login_role(alias, application["USER"],
                                                 application["PASSWORD"] or ""):
                    self.stderr.write(self.style.WARNING(warning))
