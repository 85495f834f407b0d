"""``manage.py citus_ddl``: the Citus DDL that distributes this schema by organization (what
docs/scale-out.md carries), from the live schema and ``contexts/models/tenancy.py``'s
classification;
``--check`` lists the tables that break its rules instead and exits 1 if any does."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from contexts.models import tenancy


class Command(BaseCommand):
    help = "Print the Citus distribution DDL of this schema, or check the schema's tenancy rules."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--check", action="store_true",
                            help="list every table that breaks the rules; exit 1 if any does")

    def handle(self, *args, check: bool = False, **options) -> None:
        schema = tenancy.read_schema(connection)
        problems = tenancy.violations(schema)
        if check:
            for problem in problems:
                self.stdout.write(problem)
            if problems:
                raise CommandError(f"{len(problems)} tenancy rule(s) broken")
            self.stdout.write(f"{len(schema)} tables, every one classified and keeping its rules")
            return
        if problems:
            raise CommandError("the schema breaks its tenancy rules (run with --check)")
        self.stdout.write(tenancy.citus_ddl(schema), ending="")
