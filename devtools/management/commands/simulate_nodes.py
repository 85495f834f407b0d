"""``manage.py simulate_nodes --web 2 --seconds 60``: web nodes and a worker node as separate
processes on this machine, one PostgreSQL and one Redis, and whether every web node's lexical
index converges on what PostgreSQL holds (``devtools.simulation``).

Uses the embedded services as ``make run`` does (started if they are not running) unless
``DATABASE_URL`` / ``REDIS_URL`` name others. The last line is exactly
``lag p50 <N> ms, p99 <N> ms; converged <yes|no>; lost <N>; leaks <N>``; the exit status is
non-zero unless converged, lost 0 and leaks 0.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from contexts.stack.servers import EmbeddedServiceError, EmbeddedStack
from devtools.simulation import Simulation


class Command(BaseCommand):
    help = "Run web nodes and a worker node against one database and check they converge."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--web", type=int, default=2, help="web nodes (at least 2)")
        parser.add_argument("--seconds", type=float, default=60.0,
                            help="how long to keep changing and querying")
        parser.add_argument("--seed", type=int, default=0)

    def handle(self, *args, web: int, seconds: float, seed: int, **options) -> None:
        if web < 2:
            raise CommandError("--web must be at least 2: one node is killed, one rebuilt")
        if seconds <= 0:
            raise CommandError("--seconds must be positive")
        stack = EmbeddedStack.from_settings()
        try:
            for status in stack.start():
                self.stdout.write(status.line())
        except EmbeddedServiceError as exc:
            raise CommandError(str(exc)) from exc
        try:
            call_command("migrate", interactive=False, verbosity=0)
            root = Path(tempfile.mkdtemp(prefix="simulate-nodes-", dir=settings.VAR_DIR))
            simulation = Simulation(web, seconds, root, self.stdout.write, seed=seed)
            report = simulation.run()
        finally:
            stack.stop_started()
        self.stdout.write(f"{report.changes} changes acknowledged, {report.queries} queries "
                          f"answered, {len(report.lags_ms)} lag samples")
        for note in report.notes[:20]:
            self.stdout.write(f"  {note}")
        self.stdout.write(report.line())
        if not report.ok:
            raise SystemExit(1)
