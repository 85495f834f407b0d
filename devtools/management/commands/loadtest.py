"""``manage.py loadtest --duration 60 --clients 16 [--repeat-share P] [--surface rest|mcp]
[--workers N] [--url URL]``: sustained load on the retrieval endpoint against the demo data,
with a stream of agent questions that do not repeat unless asked to.

The questions (``devtools.questions``): a pool of thousands of distinct ones — the golden set's,
the shared datasets' (SciFact, CoSQA; used when ``../shared/datasets`` is there) and questions
generated from the demo corpus (identifiers, pasted errors, paths, questions in words), in the
golden set's mix — built once per run from files in the checkout. No question is asked twice in
a run; ``--repeat-share P`` makes a share P of the requests repeat an earlier one.

Without ``--url`` it serves the project itself with gunicorn (uvicorn workers on the ASGI app,
as ``make run`` does), with the production throttle left on. Every client has its own token, so
a fleet of 16 stays far below the per-token rate; a 429 is reported separately, and counts as an
error. ``--surface mcp`` sends the same stream as MCP ``tools/call`` of ``retrieve`` to
``/mcp`` instead of ``POST /api/contexts/retrieve``. Exits non-zero if any request failed.

In the same run it then measures the machine's **raw capacity** for the same stream: the
batched query encoder, tantivy and pgvector driven in-process by as many caller threads as
there are clients, with no HTTP, authentication or traces (``devtools.raw_capacity``), and the
same query-vector cache when it is on (``CONTEXTS_QUERY_VECTOR_CACHE_SLOTS``). The cache is
emptied before each side, so that neither starts with the other's (or an earlier run's)
vectors. The endpoint's cache hits are counted from its traces of the measured phase (each
says where its query vector came from). Each side also reports where its CPU went, in
milliseconds a request by part (``devtools.cpu_use``: web processes, query encoders, this
process, PostgreSQL, Redis), which is what the ratio is made of. The last line reads
``throughput … req/s, raw capacity … req/s, ratio …; p50 … ms, p99 … ms; errors …; cache hits
… %``.

The organization must have content: ``demo`` (the default) is created and seeded the way
``make run`` seeds it (``manage.py bootstrap``: this repository ingested into ``demo/contexts``),
with the ingestion run here instead of on a worker. With ``--url`` the tokens are minted in
this process's database and the cache emptied in its Redis: point it at the server's settings
(same ``DATABASE_URL`` and ``REDIS_URL``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from accounts.lookups import find_org
from accounts.models import Organization
from accounts.tokens import create_token, revoke_token
from contexts.kernel.availability import cache_redis, redis_call
from contexts.management.commands.bootstrap import DEMO_ORG
from contexts.models import Fragment, FragmentStatus, IngestionJob, JobState, RetrievalTrace
from contexts.retrieval import vector_cache
from contexts.stack.servers import EmbeddedServiceError, EmbeddedStack
from contexts.usecases import ingestion
from devtools import raw_capacity
from devtools.cpu_use import Meter
from devtools.loadtest import (
    SURFACES,
    LoadResult,
    capacity_line,
    gunicorn,
    report_lines,
    run_load,
)
from devtools.questions import Pool, QuestionStream, build_pool

SEED = 7


def forget_query_vectors() -> int:
    """Empty the node's query-vector cache (its keys only); how many entries it held."""
    def delete() -> int:
        client = cache_redis()
        keys = list(client.scan_iter(match=f"{vector_cache.PREFIX}*", count=1000))
        for start in range(0, len(keys), 1000):
            client.delete(*keys[start:start + 1000])
        return len(keys)
    return redis_call(delete, 0, "query-vector cache")


def count_endpoint_hits(result: LoadResult, token_ids: list[int]) -> None:
    """The endpoint's query-vector cache hits in the measured phase, from its traces: each
    says whether its query vector came from the cache (``versions.query_vector``)."""
    traces = RetrievalTrace.objects.filter(
        token_id__in=token_ids, versions__has_key="query_vector",
        created_at__gte=datetime.fromtimestamp(result.began_at, UTC),
        created_at__lt=datetime.fromtimestamp(result.ended_at, UTC))
    result.cache_lookups = traces.count()
    result.cache_hits = traces.filter(versions__query_vector="cache").count()


class Command(BaseCommand):
    help = ("Sustained concurrent load on the retrieval endpoint (REST or MCP) with a stream of "
            "distinct agent questions (--repeat-share: a share that repeats), next to the "
            "machine's raw capacity for the same stream; the last line: throughput, raw "
            "capacity, ratio, p50, p99, errors, cache hits. Exits 1 on any error.")

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
        parser.add_argument("--repeat-share", type=float, default=0.0,
                            help="share of requests (0 to below 1) that repeat an earlier "
                                 "question; 0 (default): no question is asked twice")
        parser.add_argument("--surface", choices=sorted(SURFACES), default="rest",
                            help="rest: POST /api/contexts/retrieve (default); mcp: tools/call "
                                 "of retrieve at /mcp")
        parser.add_argument("--datasets", type=Path,
                            help="the shared datasets' folder, whose queries join the pool "
                                 "(default: ../shared/datasets beside the checkout)")

    def handle(self, *args, duration: float, warmup: float, clients: int, workers: int,
               url: str | None, org: str, repeat_share: float, surface: str, datasets: Path | None,
               **options) -> None:
        if duration <= 0 or clients < 1 or workers < 1 or warmup < 0:
            raise CommandError("--duration and --clients and --workers must be positive")
        if not 0.0 <= repeat_share < 1.0:
            raise CommandError("--repeat-share must be at least 0 and below 1")
        pool = build_pool(Path(settings.BASE_DIR), datasets, seed=SEED)
        self.stdout.write(f"question pool: {pool.summary()}")
        stack = EmbeddedStack.from_settings()
        try:
            try:
                stack.start()
            except EmbeddedServiceError as exc:
                raise CommandError(str(exc)) from exc
            organization = self._organization(org)
            scopes = self._scopes(organization)
            # The embedded servers' CPU is reported with the rest of each side's (pid None:
            # a server this machine's stack does not run).
            servers = {service.name: service.pid for service in stack.status()}

            def stream() -> QuestionStream:  # the same sequence for both sides
                return QuestionStream(pool, scopes, repeat_share=repeat_share, seed=SEED)

            # Counted while the database is up: the stack this command started stops below.
            fragments = Fragment.objects.filter(org=organization,
                                                status=FragmentStatus.ACTIVE).count()
            tokens = [create_token(organization, f"loadtest-{n}", [organization.scope])
                      for n in range(clients)]
            try:
                asked = stream()
                forget_query_vectors()
                result = self._load(url, workers, [raw for _, raw in tokens], asked,
                                    duration, warmup, surface, Meter(servers))
                count_endpoint_hits(result, [token.pk for token, _ in tokens])
                self.stdout.write(f"raw capacity: {clients} caller threads, {workers} "
                                  f"batching encoders, {warmup:.0f} s warm-up + "
                                  f"{duration:.0f} s …")
                raw_asked = stream()
                forget_query_vectors()
                raw = raw_capacity.measure(tokens[0][0], organization, raw_asked, scopes,
                                           clients=clients, workers=workers,
                                           duration=duration, warmup=warmup,
                                           meter=Meter(servers))
            finally:
                for token, _ in tokens:
                    revoke_token(token)
        finally:
            stack.stop_started()
        self._report(pool, organization.slug, fragments, clients, surface,
                     url or f"gunicorn with {workers} workers (ASGI)",
                     (result, asked), (raw, raw_asked))
        self.stdout.write(capacity_line(result, raw))
        if not result.requests:
            raise CommandError("no request was answered in the measured time")
        failed = result.errors + sum(result.warmup_errors.values())
        if failed:
            raise CommandError(f"{failed} request(s) failed")

    def _report(self, pool: Pool, org: str, fragments: int, clients: int, surface: str,
                server: str, endpoint: tuple[LoadResult, QuestionStream],
                raw: tuple[LoadResult, QuestionStream]) -> None:
        self.stdout.write(f"\n{clients} clients, {org}: {fragments} fragments, "
                          f"{pool.size} distinct questions in the pool, {surface.upper()}, "
                          f"{server}")
        result, asked = endpoint
        self.stdout.write(f"questions       {asked.summary()}")
        for line in report_lines(result):
            self.stdout.write(line)
        self.stdout.write("raw capacity (in-process: batched encoder + tantivy + pgvector, "
                          "the same stream and query-vector cache)")
        result, asked = raw
        self.stdout.write(f"  questions       {asked.summary()}")
        for line in report_lines(result):
            self.stdout.write("  " + line)

    def _load(self, url: str | None, workers: int, tokens: list[str],
              next_ask: Callable, duration: float, warmup: float, surface: str,
              meter: Meter) -> LoadResult:
        call = SURFACES[surface]
        if url:
            return run_load(url.rstrip("/"), tokens, next_ask, duration=duration,
                            warmup=warmup, call=call, meter=meter)
        self.stdout.write(f"starting gunicorn ({workers} workers) …")
        # Keep-alive longer than priming takes: a client that waits at the start barrier while
        # the other workers' encoders load must find its connection still open.
        with gunicorn(workers, asgi=True, keepalive=120) as base_url:
            self.stdout.write(f"{len(tokens)} clients for {warmup:.0f} s warm-up + "
                              f"{duration:.0f} s against {base_url} ({surface}) …")
            return run_load(base_url, tokens, next_ask, duration=duration, warmup=warmup,
                            call=call, meter=meter)

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

    def _scopes(self, organization: Organization) -> list[dict[str, str]]:
        """Where agents ask: at organization level and in each repository."""
        return [{"org_id": organization.slug}] + [
            {"org_id": organization.slug, "repo_id": repo.slug}
            for repo in organization.repositories.order_by("slug")]
