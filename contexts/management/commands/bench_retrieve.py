"""``manage.py bench_retrieve --fragments 10000``: the retrieval endpoint's latency through the
full HTTP stack (gunicorn, auth, throttle, RLS, trace write), next to the sum of its raw parts
(query embedding + raw tantivy search + raw pgvector search) for the same queries, same run.

The endpoint and the raw parts are measured in alternating blocks of the same queries: this
VM's speed drifts by tens of percent within a minute, and measuring all of one side first made
the ratio depend on which side met the faster minute. Each raw block starts once the server is
quiet (its after-response writes done), so the raw parts never share the CPUs with it.

Realistic text: SciFact abstracts and CoSQA code snippets from the shared datasets, spread over
three organizations with repositories, personas and contexts. The corpus is kept between runs
(organizations ``bench-0..2``) so a rerun does not re-embed.
"""

from __future__ import annotations

import json
import random
import statistics
import time
import uuid
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from accounts.models import Organization, Repository
from accounts.tokens import create_token
from contexts import follower
from contexts.compression import packed_tokens
from contexts.indexing import embed_fragments, lexical_index
from contexts.loadtest import Ask, connect, gunicorn, percentile, retrieve
from contexts.models import Fragment
from contexts.models.fragments import fragment_public_id
from contexts.retrieval import dense
from contexts.services.fragments import content_hash

DATASETS = Path(settings.BASE_DIR).parent / "shared" / "datasets"
ORGS = 3
# Seconds between an endpoint block and its raw block: the server's after-response writes (the
# last trace row) take a few milliseconds; the raw parts must not share the CPUs with them.
QUIET_SECONDS = 0.2
REPOS_PER_ORG = 4


def corpus_texts(limit: int) -> list[tuple[str, str]]:
    """(title, text) pairs: scientific abstracts and code, alternating."""
    texts: list[tuple[str, str]] = []
    sources = [DATASETS / "scifact" / "corpus.jsonl", DATASETS / "cosqa" / "corpus.jsonl"]
    readers = [open(path) for path in sources if path.exists()]  # noqa: SIM115
    if not readers:
        raise CommandError(f"no datasets under {DATASETS}")
    try:
        while len(texts) < limit and readers:
            for reader in list(readers):
                line = reader.readline()
                if not line:
                    readers.remove(reader)
                    continue
                doc = json.loads(line)
                texts.append((doc.get("title") or "", doc["text"][:1500]))
    finally:
        for reader in readers:
            reader.close()
    return texts[:limit]


def load_queries(limit: int) -> list[str]:
    found = []
    for name in ("scifact", "cosqa"):
        path = DATASETS / name / "queries.jsonl"
        if path.exists():
            with open(path) as handle:
                found += [json.loads(line)["text"] for line in handle]
    random.Random(7).shuffle(found)
    return found[:limit]


class Command(BaseCommand):
    help = "Benchmark POST /api/contexts/retrieve against the sum of its raw parts."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--fragments", type=int, default=10000)
        parser.add_argument("--queries", type=int, default=300)
        parser.add_argument("--workers", type=int, default=2)
        parser.add_argument("--block", type=int, default=20,
                            help="queries per alternating block (endpoint, then raw parts)")
        parser.add_argument("--asgi", action="store_true",
                            help="serve contexts.asgi with uvicorn workers, as `make run` and "
                                 "the Docker image do (default: contexts.wsgi, sync workers)")

    def handle(self, *args, fragments: int, queries: int, workers: int, block: int,
               asgi: bool, **options) -> None:
        for name, value in (("--fragments", fragments), ("--queries", queries),
                            ("--workers", workers), ("--block", block)):
            if value < 1:
                raise CommandError(f"{name} must be at least 1, not {value}")
        orgs = self._corpus(fragments)
        tokens = {org.pk: create_token(org, "bench", [org.scope])[1] for org in orgs}
        asks = []
        rng = random.Random(11)
        for text in load_queries(queries):
            org = rng.choice(orgs)
            repo = rng.choice(list(org.repositories.all()))
            asks.append((org, repo, text))
        gens = dense.generations()
        http_ms: list[float] = []
        raw_ms: list[float] = []
        parts: dict[str, list[float]] = {"embed": [], "tantivy": [], "pgvector": []}
        # Under ASGI the client keeps one connection: it must outlive a raw block.
        with gunicorn(workers, asgi=asgi, keepalive=60,
                      env={"CONTEXTS_THROTTLE_AGENT": "1000000/min"}) as base_url:
            conn = connect(base_url)
            self._http(conn, asks[:20], tokens)  # warm-up, both sides
            self._raw(asks[:20], gens, [], {key: [] for key in parts})
            for start in range(0, len(asks), block):
                batch = asks[start:start + block]
                http_ms += self._http(conn, batch, tokens)
                time.sleep(QUIET_SECONDS)
                self._raw(batch, gens, raw_ms, parts)
        self._report(http_ms, raw_ms, parts, fragments, block, asgi)

    # -- corpus --------------------------------------------------------------------------------
    def _corpus(self, total: int) -> list[Organization]:
        orgs = []
        texts = corpus_texts(total)
        per_org = -(-len(texts) // ORGS)
        for i in range(ORGS):
            org, _ = Organization.objects.get_or_create(slug=f"bench-{i}",
                                                        defaults={"name": f"Bench {i}"})
            repos = [Repository.objects.get_or_create(org=org, slug=f"repo{j}",
                                                      defaults={"name": f"repo{j}"})[0]
                     for j in range(REPOS_PER_ORG)]
            orgs.append(org)
            mine = texts[i * per_org:(i + 1) * per_org]
            have = Fragment.objects.filter(org=org).count()
            if have >= len(mine):
                continue
            self.stdout.write(f"creating {len(mine) - have} fragments in {org.slug} …")
            scopes = [org.scope] + [r.scope for r in repos]
            batch = []
            for n, (title, text) in enumerate(mine[have:], start=have):
                scope = scopes[n % len(scopes)]
                code = "def " in text or "return" in text
                uid = uuid.uuid4()
                batch.append(Fragment(uid=uid, public_id=fragment_public_id(uid), org=org,
                                      scope=scope, scope_ids=[scope.id], title=title,
                                      body=text, content_hash=content_hash(text),
                                      kind="code" if code else "prose",
                                      namespace="code" if code else "prose",
                                      token_count=len(text) // 4,
                                      packed_tokens=packed_tokens(text, [])))
            created = Fragment.objects.bulk_create(batch, batch_size=1000)
            for start in range(0, len(created), 256):
                embed_fragments(created[start:start + 256])
                self.stdout.write(f"  embedded {min(start + 256, len(created))}/{len(created)}")
            follower.rebuild(org.pk)
        return orgs

    # -- the endpoint ---------------------------------------------------------------------------
    def _http(self, conn, asks, tokens) -> list[float]:
        timings = []
        for org, repo, text in asks:
            status, payload, elapsed = retrieve(conn, tokens[org.pk], Ask(
                text, {"org_id": org.slug, "repo_id": repo.slug}))
            if status != 200:
                raise CommandError(f"HTTP {status}: {payload[:300]!r}")
            timings.append(elapsed)
        return timings

    # -- the raw parts -------------------------------------------------------------------------
    def _raw(self, asks, gens, sums: list[float], parts: dict[str, list[float]]) -> None:
        """Time each raw part of ``asks`` in this process; appends to ``sums`` and ``parts``."""
        for org, repo, text in asks:
            allowed = [org.scope_id, repo.scope_id]
            started = time.perf_counter()
            vectors = dense.embed_query(text, gens)
            embed = time.perf_counter() - started
            started = time.perf_counter()
            lexical_index(org.pk).search(text, allowed_scope_ids=allowed, limit=100)
            tantivy = time.perf_counter() - started
            started = time.perf_counter()
            with connection.cursor() as cursor:
                for generation_ids, vector in vectors.items():
                    literal = dense.vector_literal(vector)
                    cursor.execute(
                        "SELECT fragment_id FROM contexts_embedding WHERE org_id = %s AND "
                        "generation_id = ANY(%s) AND scope_ids && %s::int[] "
                        "ORDER BY embedding <=> %s::vector LIMIT 100",
                        [org.pk, list(generation_ids), "{" + ",".join(map(str, allowed)) + "}",
                         literal])
                    cursor.fetchall()
            pgvector = time.perf_counter() - started
            for key, value in (("embed", embed), ("tantivy", tantivy), ("pgvector", pgvector)):
                parts[key].append(value * 1000)
            sums.append((embed + tantivy + pgvector) * 1000)

    def _report(self, http_ms, raw_ms, parts, fragments, block, asgi) -> None:
        p50, p95 = statistics.median(http_ms), percentile(http_ms, 0.95)
        raw50, raw95 = statistics.median(raw_ms), percentile(raw_ms, 0.95)
        server = "ASGI (contexts.asgi, uvicorn workers)" if asgi else "WSGI (sync workers)"
        self.stdout.write(f"\n{fragments} fragments, {len(http_ms)} queries, reranker none, "
                          f"{server}")
        self.stdout.write(f"endpoint (HTTP)   p50 {p50:7.1f} ms   p95 {p95:7.1f} ms")
        self.stdout.write(f"sum of raw parts  p50 {raw50:7.1f} ms   p95 {raw95:7.1f} ms")
        for key, values in parts.items():
            self.stdout.write(f"  {key:<9}       p50 {statistics.median(values):7.1f} ms   "
                              f"p95 {percentile(values, 0.95):7.1f} ms")
        self.stdout.write(f"ratio p50 endpoint / raw sum: {p50 / raw50:.2f} (target ≤ 1.5); "
                          f"p95 {p95:.1f} ms (target ≤ 100)")
        # How much the machine moved during the run: the same ratio, block by block.
        ratios = sorted(statistics.median(http_ms[i:i + block])
                        / statistics.median(raw_ms[i:i + block])
                        for i in range(0, len(http_ms), block))
        self.stdout.write(f"ratio per block of {block}: min {ratios[0]:.2f}, median "
                          f"{statistics.median(ratios):.2f}, max {ratios[-1]:.2f}")
