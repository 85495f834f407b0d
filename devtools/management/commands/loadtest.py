"""``manage.py loadtest --duration 60 --clients 16 [--workers N] [--url URL]``: sustained load on
``POST /api/contexts/retrieve`` against the demo data, with realistic, varied agent questions.

Without ``--url`` it serves the project itself with gunicorn (uvicorn workers on the ASGI app,
as ``make run`` does), with the production throttle left on. Every client has its own token, so
a fleet of 16 stays far below the per-token rate; a 429 is reported separately, and counts as an
error. Exits non-zero if any request failed.

In the same run it then measures the machine's **raw capacity** for the same questions: the
batched query encoder, tantivy and pgvector driven in-process by as many caller threads as
there are clients, with no HTTP, authentication or traces (``devtools.raw_capacity``). The last
line reads ``throughput … req/s, raw capacity … req/s, ratio …; p50 … ms, p99 … ms; errors …``.

The organization must have content: ``demo`` (the default) is created and seeded the way
``make run`` seeds it (``manage.py bootstrap``: this repository ingested into ``demo/contexts``),
with the ingestion run here instead of on a worker. With ``--url`` the tokens are minted in
this process's database: point it at the server's settings (same ``DATABASE_URL``).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from accounts.lookups import find_org
from accounts.models import Organization
from accounts.tokens import create_token, revoke_token
from contexts.management.commands.bootstrap import DEMO_ORG
from contexts.models import Fragment, FragmentStatus, IngestionJob, JobState
from contexts.stack.servers import EmbeddedServiceError, EmbeddedStack
from contexts.usecases import ingestion
from devtools import raw_capacity
from devtools.loadtest import Ask, capacity_line, gunicorn, report_lines, run_load

GOLDEN_QUERIES = Path(settings.BASE_DIR) / "tests" / "golden" / "queries.jsonl"
HEADING = re.compile(r"^#{1,4}\s+(.+?)\s*#*\s*$")
BUDGETS = (800, 1500, 3200)


def agent_questions() -> list[str]:
    """What agents ask about this repository: the golden set's questions and the documentation's
    headings (the demo organization *is* this repository)."""
    questions: list[str] = []
    if GOLDEN_QUERIES.exists():
        with open(GOLDEN_QUERIES) as handle:
            questions += [json.loads(line)["text"] for line in handle if line.strip()]
    base = Path(settings.BASE_DIR)
    for path in [base / "README.md", *sorted((base / "docs").glob("**/*.md"))]:
        for line in path.read_text(errors="replace").splitlines():
            match = HEADING.match(line)
            if match and len(match.group(1)) > 3:
                questions.append(match.group(1).replace("`", ""))
    return list(dict.fromkeys(questions))  # unique, in order


class Command(BaseCommand):
    help = "Sustained concurrent load on the retrieval endpoint; exits 1 on any error."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--duration", type=float, default=60.0, help="measured seconds")
        parser.add_argument("--warmup", type=float, default=5.0,
                            help="seconds of load before measuring (query encoders start)")
        parser.add_argument("--clients", type=int, default=16,
                            help="concurrent clients, one token and connection each")
        # Each worker's query encoder is CPU-bound: more workers than cores only queue there.
        parser.add_argument("--workers", type=int, default=max(2, os.cpu_count() or 2),
                            help="gunicorn workers (default: one per core, at least 2)")
        parser.add_argument("--url", help="an already running server to load instead")
        parser.add_argument("--org", default=DEMO_ORG, help="organization (slug) to query")

    def handle(self, *args, duration: float, warmup: float, clients: int, workers: int,
               url: str | None, org: str, **options) -> None:
        if duration <= 0 or clients < 1 or workers < 1 or warmup < 0:
            raise CommandError("--duration and --clients and --workers must be positive")
        stack = EmbeddedStack.from_settings()
        try:
            try:
                stack.start()
            except EmbeddedServiceError as exc:
                raise CommandError(str(exc)) from exc
            organization = self._organization(org)
            asks = self._asks(organization)
            # Counted while the database is up: the stack this command started stops below.
            fragments = Fragment.objects.filter(org=organization,
                                                status=FragmentStatus.ACTIVE).count()
            tokens = [create_token(organization, f"loadtest-{n}", [organization.scope])
                      for n in range(clients)]
            try:
                result = self._load(url, workers, [raw for _, raw in tokens], asks,
                                    duration, warmup)
                self.stdout.write(f"raw capacity: {clients} caller threads, {workers} "
                                  f"batching encoders, {warmup:.0f} s warm-up + "
                                  f"{duration:.0f} s …")
                raw = raw_capacity.measure(tokens[0][0], organization, asks, clients=clients,
                                           workers=workers, duration=duration, warmup=warmup)
            finally:
                for token, _ in tokens:
                    revoke_token(token)
        finally:
            stack.stop_started()
        self.stdout.write(f"\n{clients} clients, {organization.slug}: {fragments} fragments, "
                          f"{len({ask.query for ask in asks})} distinct questions, "
                          f"{url or f'gunicorn with {workers} workers (ASGI)'}")
        for line in report_lines(result):
            self.stdout.write(line)
        self.stdout.write("raw capacity (in-process: batched encoder + tantivy + pgvector)")
        for line in report_lines(raw):
            self.stdout.write("  " + line)
        self.stdout.write(capacity_line(result, raw))
        if not result.requests:
            raise CommandError("no request was answered in the measured time")
        failed = result.errors + sum(result.warmup_errors.values())
        if failed:
            raise CommandError(f"{failed} request(s) failed")

    def _load(self, url, workers, tokens, asks, duration, warmup):
        if url:
            return run_load(url.rstrip("/"), tokens, asks, duration=duration, warmup=warmup)
        self.stdout.write(f"starting gunicorn ({workers} workers) …")
        # Keep-alive longer than priming takes: a client that waits at the start barrier while
        # the other workers' encoders load must find its connection still open.
        with gunicorn(workers, asgi=True, keepalive=120) as base_url:
            self.stdout.write(f"{len(tokens)} clients for {warmup:.0f} s warm-up + "
                              f"{duration:.0f} s against {base_url} …")
            return run_load(base_url, tokens, asks, duration=duration, warmup=warmup)

    def _organization(self, slug: str) -> Organization:
        if slug == DEMO_ORG:
            self._seed_demo()
        organization = find_org(slug)
        if organization is None:
            raise CommandError(f"no organization {slug!r}")
        if not Fragment.objects.filter(org=organization, status=FragmentStatus.ACTIVE).exists():
            raise CommandError(f"organization {slug!r} has no active fragments to retrieve")
        return organization

    def _seed_demo(self) -> None:
        """What ``make run`` does on first start, with the ingestion run here and now."""
        call_command("migrate", interactive=False, verbosity=0)
        call_command("bootstrap", demo=True, stdout=self.stdout)
        pending = IngestionJob.objects.filter(
            org__slug=DEMO_ORG, state__in=[JobState.QUEUED, JobState.RUNNING])
        for job in pending:
            self.stdout.write(f"ingesting the demo content (job {job.public_id}) …")
            ingestion.run_inline(job)

    def _asks(self, organization: Organization) -> list[Ask]:
        """Every question at organization level and in each repository, with a few budgets."""
        scopes = [{"org_id": organization.slug}] + [
            {"org_id": organization.slug, "repo_id": repo.slug}
            for repo in organization.repositories.all()]
        return [Ask(question, scope, budget) for question in agent_questions()
                for scope in scopes for budget in BUDGETS]
