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

``--orgs M`` (``--fragments 200000 --orgs 50``): a company-sized corpus instead, built once and
kept as organizations ``bench<N>x<M>-0..M-1`` (:mod:`devtools.bench_corpus`: perturbed copies of
the same texts, vectors derived from the real encoder's). Its report adds the filtered-HNSW
recall@100 against an exact search for the same filters, and the sizes of tables and indexes.
Without ``--orgs`` the command is what it was: the 10k numbers stay comparable.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import time
import uuid
from pathlib import Path

import numpy as np
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction
from django.utils import timezone

from accounts.models import Organization, Repository
from accounts.tokens import create_token
from contexts.indexes import follower
from contexts.indexes.indexing import (
    active_generation,
    embed_fragments,
    embedder_for,
    embedding_text_for,
    encode_cached,
    index_path,
    lexical_index,
    vector_key,
)
from contexts.kernel.compression import packed_tokens
from contexts.models import Fragment
from contexts.models.fragments import fragment_public_id
from contexts.retrieval import dense
from contexts.services.fragments import content_hash
from contexts.services.partitions import partition_name
from contexts.services.rls import retrieval_scope
from contexts.stack.owner_db import as_owner
from devtools import bench_corpus
from devtools.loadtest import Ask, connect, gunicorn, percentile, retrieve

DATASETS = Path(settings.BASE_DIR).parent / "shared" / "datasets"
ORGS = 3
# Seconds between an endpoint block and its raw block: the server's after-response writes (the
# last trace row) take a few milliseconds; the raw parts must not share the CPUs with them.
QUIET_SECONDS = 0.2
REPOS_PER_ORG = 4
RECALL_K = 100
# Base texts encoded per call while the derived corpus is built (progress is printed per call).
ENCODE_CHUNK = 512
EMBEDDING_COLUMNS = ("org_id", "fragment_id", "fragment_version", "generation_id", "namespace",
                     "scope_ids", "content_hash", "embedding", "passage", "created_at")
EMBEDDING_TYPES = ("int8", "int8", "int4", "int8", "varchar", "int4[]", "varchar", "vector",
                   "int2", "timestamptz")


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
        parser.add_argument("--orgs", type=int, default=None,
                            help="build (once) and use a derived corpus of --fragments in this "
                                 "many organizations, and report recall and sizes (default: "
                                 "the 3-organization corpus of real vectors, as before)")
        parser.add_argument("--build-only", action="store_true",
                            help="with --orgs: build (or check) the corpus, measure nothing")
        parser.add_argument("--recall-queries", type=int, default=None,
                            help="queries for the recall measurement (default: all)")
        parser.add_argument("--queries", type=int, default=300)
        parser.add_argument("--workers", type=int, default=2)
        parser.add_argument("--block", type=int, default=20,
                            help="queries per alternating block (endpoint, then raw parts)")
        parser.add_argument("--asgi", action="store_true",
                            help="serve contexts.asgi with uvicorn workers, as `make run` and "
                                 "the Docker image do (default: contexts.wsgi, sync workers)")

    def handle(self, *args, fragments: int, queries: int, workers: int, block: int,
               asgi: bool, orgs: int | None, recall_queries: int | None, build_only: bool,
               **options) -> None:
        for name, value in (("--fragments", fragments), ("--queries", queries),
                            ("--workers", workers), ("--block", block), ("--orgs", orgs or 1)):
            if value < 1:
                raise CommandError(f"{name} must be at least 1, not {value}")
        derived = orgs is not None
        if derived:
            organizations, sizes = self._derived_corpus(fragments, orgs)
            if build_only:
                return
        else:
            organizations, sizes = self._corpus(fragments), {}
        tokens = {org.pk: create_token(org, "bench", [org.scope])[1] for org in organizations}
        asks = []
        rng = random.Random(11)
        repos = {org.pk: list(org.repositories.all()) for org in organizations}
        for text in load_queries(queries):
            # The derived corpus: a query goes to the organization of a random fragment (a large
            # organization has more agents asking); the 3-organization one as before.
            org = (rng.choices(organizations, weights=[sizes[o.pk] for o in organizations])[0]
                   if derived else rng.choice(organizations))
            repo = rng.choice(repos[org.pk])
            asks.append((org, repo, text))
        self._vectors: dict[str, dict[tuple[int, ...], np.ndarray]] = {}
        gens = dense.generations()
        http_ms: list[float] = []
        raw_ms: list[float] = []
        parts: dict[str, list[float]] = {"embed": [], "tantivy": [], "pgvector": []}
        # Under ASGI the client keeps one connection: it must outlive a raw block. The node's
        # query-vector cache is off: the warm-up asks the first block's questions, and every
        # rerun asks the same 300, so the endpoint would skip the forward pass the raw sum pays.
        with gunicorn(workers, asgi=asgi, keepalive=60,
                      env={"CONTEXTS_THROTTLE_AGENT": "1000000/min",
                           "CONTEXTS_QUERY_VECTOR_CACHE_SLOTS": "0"}) as base_url:
            conn = connect(base_url)
            self._http(conn, asks[:20], tokens)  # warm-up, both sides
            self._raw(asks[:20], gens, [], {key: [] for key in parts})
            for start in range(0, len(asks), block):
                batch = asks[start:start + block]
                http_ms += self._http(conn, batch, tokens)
                time.sleep(QUIET_SECONDS)
                self._raw(batch, gens, raw_ms, parts)
        self._report(http_ms, raw_ms, parts, fragments, block, asgi)
        if derived:
            self._recall(asks[:recall_queries] if recall_queries else asks, gens, sizes)
            self._sizes(organizations)

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

    # -- the derived, company-sized corpus -----------------------------------------------------
    def _derived_corpus(self, total: int, n_orgs: int
                        ) -> tuple[list[Organization], dict[int, int]]:
        """Organizations ``bench<total>x<n_orgs>-<i>``, built once (one transaction each, so a
        killed build leaves whole organizations only) and reused; a rerun builds nothing."""
        key = f"bench{total}x{n_orgs}"
        try:
            sizes = bench_corpus.org_sizes(total, n_orgs)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        existing = {o.slug: o for o in Organization.objects.filter(slug__startswith=f"{key}-")}
        missing = [i for i, size in enumerate(sizes)
                   if f"{key}-{i}" not in existing
                   or Fragment.objects.filter(org=existing[f"{key}-{i}"]).count() != size]
        calibration_path = Path(settings.VAR_DIR) / "bench" / f"{key}-calibration.json"
        if missing:
            self.stdout.write(f"building {len(missing)} of {n_orgs} organizations of {key} "
                              f"({sum(sizes[i] for i in missing)} fragments) …")
            bases = bench_corpus.load_bases(DATASETS)
            if not bases:
                raise CommandError(f"no datasets under {DATASETS}")
            gens = {ns: active_generation(ns) for ns in ("prose", "code")}
            vectors = self._base_vectors(bases, gens)
            calibration = self._calibration(calibration_path, bases, vectors, gens)
            with as_owner():  # COPY FROM is refused on a table with row-level security
                for i in missing:
                    if f"{key}-{i}" in existing:  # partial: cannot happen (atomic), but heal it
                        existing[f"{key}-{i}"].delete()
                    self._build_org(key, i, sizes[i], bases, vectors, calibration, gens)
                with connection.cursor() as cursor:
                    # Planner statistics now, not when autovacuum gets to it: the first
                    # measurements would otherwise plan with an empty table's estimates.
                    cursor.execute("ANALYZE contexts_embedding")
                    cursor.execute("ANALYZE contexts_fragment")
            connection.close()  # the COPY's vector adapters stay with that connection
        elif calibration_path.exists():
            calibration = bench_corpus.Calibration.from_json(
                json.loads(calibration_path.read_text()))
            self._print_calibration(calibration)
        orgs = list(Organization.objects.filter(slug__startswith=f"{key}-"))
        orgs.sort(key=lambda o: int(o.slug.rsplit("-", 1)[1]))
        by_pk = {org.pk: sizes[int(org.slug.rsplit("-", 1)[1])] for org in orgs}
        for org in orgs:  # the lexical index is this node's: rebuild it if it is not whole
            if not follower.rebuilding(org.pk) and (
                    not (index_path(org) / "meta.json").exists()
                    or lexical_index(org.pk).count() != by_pk[org.pk]):
                self.stdout.write(f"  rebuilding the lexical index of {org.slug} …")
                follower.rebuild(org.pk)
        self.stdout.write(f"corpus {key}: {sum(by_pk.values())} fragments in {len(orgs)} "
                          f"organizations, largest {max(by_pk.values())}, smallest "
                          f"{min(by_pk.values())}")
        return orgs, by_pk

    def _base_vectors(self, bases: list[bench_corpus.Base], gens: dict
                      ) -> list[np.ndarray]:
        """Each base text's passage vectors (rows), from the real encoder once — the vector
        cache keeps them, so a second corpus (other sizes) encodes nothing again."""
        texts, counts = [], []
        for base in bases:
            embedder = embedder_for(gens[base.namespace])
            passages = embedder.passages(self._embedding_text(base))
            texts += [(base.namespace, p) for p in passages]
            counts.append(len(passages))
        flat = np.zeros((len(texts), gens["prose"].dim), dtype=np.float32)
        for namespace in ("prose", "code"):
            rows = [i for i, (ns, _) in enumerate(texts) if ns == namespace]
            for start in range(0, len(rows), ENCODE_CHUNK):
                chunk = rows[start:start + ENCODE_CHUNK]
                chunk_texts = [texts[i][1] for i in chunk]
                flat[chunk] = encode_cached(gens[namespace], chunk_texts,
                                            [vector_key(t) for t in chunk_texts])
                self.stdout.write(f"  base vectors ({namespace}) "
                                  f"{min(start + ENCODE_CHUNK, len(rows))}/{len(rows)}")
        bounds = np.cumsum([0, *counts])
        return [bench_corpus.normalise(flat[bounds[i]:bounds[i + 1]])
                for i in range(len(bases))]

    @staticmethod
    def _embedding_text(base: bench_corpus.Base) -> str:
        return embedding_text_for(base.title, [], base.text, namespace=base.namespace)

    def _calibration(self, path: Path, bases: list[bench_corpus.Base],
                     vectors: list[np.ndarray], gens: dict) -> bench_corpus.Calibration:
        if path.exists():
            calibration = bench_corpus.Calibration.from_json(json.loads(path.read_text()))
        else:
            self.stdout.write("calibrating the derived vectors: 200 real perturbed copies "
                              "through the encoder …")
            heads = np.stack([v[0] for v in vectors])
            calibration = bench_corpus.calibrate(
                bases, heads, embedder_for(gens["prose"]).encode, self._embedding_text)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(calibration.to_json()))
        self._print_calibration(calibration)
        return calibration

    def _print_calibration(self, calibration: bench_corpus.Calibration) -> None:
        self.stdout.write("derived vectors, calibration (real encoder vs derivation):")
        for line in calibration.summary():
            self.stdout.write(f"  {line}")

    def _build_org(self, key: str, index: int, size: int, bases: list[bench_corpus.Base],
                   vectors: list[np.ndarray], calibration: bench_corpus.Calibration,
                   gens: dict) -> None:
        started = time.perf_counter()
        plan = bench_corpus.org_plan(bench_corpus.SEED, index, size, len(bases))
        packed: dict[int, int] = {}
        with transaction.atomic():
            org = Organization.objects.create(slug=f"{key}-{index}", name=f"Bench {key} {index}")
            repos = [Repository.objects.create(org=org, slug=f"repo{j}", name=f"repo{j}")
                     for j in range(bench_corpus.repos_for(size))]
            scopes = [org.scope] + [r.scope for r in repos]
            batch = []
            for slot, b in enumerate(plan):
                base = bases[b]
                body = bench_corpus.perturb(base.text, base.namespace,
                                            bench_corpus.copy_rng(bench_corpus.SEED, index, slot))
                if b not in packed:
                    packed[b] = packed_tokens(base.text, [])
                scope = scopes[slot % len(scopes)]
                uid = uuid.uuid4()
                batch.append(Fragment(
                    uid=uid, public_id=fragment_public_id(uid), org=org, scope=scope,
                    scope_ids=[scope.id], title=base.title, body=body,
                    content_hash=content_hash(body), kind=base.namespace,
                    namespace=base.namespace, token_count=len(body) // 4,
                    # The copy's packed size scaled from its base's (0.65 ms a text saved 200k
                    # times; a copy differs from its base by a few words).
                    packed_tokens=max(1, round(packed[b] * len(body) / max(1, len(base.text))))))
            created = Fragment.objects.bulk_create(batch, batch_size=2000)
            rows = 0
            from pgvector.psycopg import register_vector
            connection.ensure_connection()
            register_vector(connection.connection)
            columns = ", ".join(EMBEDDING_COLUMNS)
            now = timezone.now()
            # The partition's graph is built once after the load, not by one insert per vector
            # (what pgvector advises for a bulk load): the same index, same name and definition
            # as contexts_create_embedding_partition() gives it.
            hnsw = f"{partition_name(org.pk)}_hnsw"
            with connection.cursor() as cursor:
                cursor.execute(f'DROP INDEX IF EXISTS "{hnsw}"')
            with connection.cursor() as cursor, cursor.cursor.copy(
                    f"COPY contexts_embedding ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(list(EMBEDDING_TYPES))
                for slot, (b, fragment) in enumerate(zip(plan, created, strict=True)):
                    base = bases[b]
                    target = calibration.draw(base.namespace, bench_corpus.copy_rng(
                        bench_corpus.SEED, index, slot))
                    derived = bench_corpus.derive(vectors[b], target, bench_corpus.vector_rng(
                        bench_corpus.SEED, index, slot))
                    generation = gens[base.namespace]
                    for passage, vector in enumerate(derived):
                        copy.write_row((org.pk, fragment.pk, fragment.version, generation.pk,
                                        base.namespace, fragment.scope_ids,
                                        fragment.content_hash, vector, passage, now))
                        rows += 1
            with connection.cursor() as cursor:
                # The rows' deferred foreign-key checks first: CREATE INDEX refuses a table
                # with pending trigger events.
                cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
                cursor.execute("SET LOCAL maintenance_work_mem = '512MB'")
                cursor.execute(f'CREATE INDEX "{hnsw}" ON "{partition_name(org.pk)}" '
                               "USING hnsw (embedding vector_cosine_ops)")
        follower.rebuild(org.pk)
        self.stdout.write(f"  {org.slug}: {size} fragments, {rows} vectors, {len(repos)} "
                          f"repositories ({time.perf_counter() - started:.0f} s)")

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
            self._vectors[text] = vectors
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
                        f"ORDER BY {dense.distance_order('embedding', '%s')} LIMIT 100",
                        [org.pk, list(generation_ids), "{" + ",".join(map(str, allowed)) + "}",
                         literal])
                    cursor.fetchall()
            pgvector = time.perf_counter() - started
            for key, value in (("embed", embed), ("tantivy", tantivy), ("pgvector", pgvector)):
                parts[key].append(value * 1000)
            sums.append((embed + tantivy + pgvector) * 1000)

    # -- recall and sizes (the derived corpus) ---------------------------------------------------
    def _recall(self, asks, gens, sizes: dict[int, int]) -> None:
        """Recall@100 of the dense top-100 against an exact search for the same organization,
        scopes and statuses (the same statement on float32 with index scans off), for the
        statement as the product runs it (``dense.top_k_query`` in ``retrieval_scope``:
        iterative scan, ``HNSW_EF_SEARCH``, the storage of ``EMBEDDING_STORAGE``) and for the
        same statement with the HNSW graph forced (bitmap and sequential scans off) — the
        planner takes the exact bitmap scan of the scope index when the scopes keep few rows,
        so the first alone would not show the graph's recall."""
        largest = max(sizes, key=sizes.get)
        recalls: dict[str, list[float]] = {"planned": [], "hnsw": []}
        largest_recalls: dict[str, list[float]] = {"planned": [], "hnsw": []}
        timings: dict[str, list[float]] = {"planned": [], "hnsw": [], "exact": []}
        short = {"planned": 0, "hnsw": 0}
        planned_hnsw = forced_hnsw = 0
        for org, repo, text in asks:
            vectors = self._vectors.get(text) or dense.embed_query(text, gens)
            allowed = [org.scope_id, repo.scope_id]
            for generation_ids, vector in vectors.items():
                found = {}
                for mode in ("exact", "planned", "hnsw"):
                    found[mode], timings_ms = self._top_k(org.pk, generation_ids, vector,
                                                          allowed, mode)
                    timings[mode].append(timings_ms)
                for mode in ("planned", "hnsw"):
                    recall = bench_corpus.recall_at(found[mode], found["exact"], RECALL_K)
                    recalls[mode].append(recall)
                    if org.pk == largest:
                        largest_recalls[mode].append(recall)
                    short[mode] += len(found[mode]) < min(RECALL_K, len(found["exact"]))
                planned_hnsw += "_hnsw" in self._plan(org.pk, generation_ids, vector, allowed)
                forced_hnsw += "_hnsw" in self._plan(org.pk, generation_ids, vector, allowed,
                                                     "hnsw")
        storage = settings.EMBEDDING_STORAGE
        self.stdout.write(f"\ndense recall@{RECALL_K} ({storage}, ef_search "
                          f"{settings.HNSW_EF_SEARCH}, iterative scan) against exact float32, "
                          f"same filters, {len(recalls['planned'])} queries (target ≥ 0.95):")
        labels = {"planned": f"as planned (HNSW in {planned_hnsw} plans)",
                  "hnsw": f"HNSW forced (in {forced_hnsw} plans)"}
        for mode, label in labels.items():
            values = recalls[mode]
            self.stdout.write(
                f"  {label:<32} mean {statistics.fmean(values):.4f}, min {min(values):.4f}, "
                f"p5 {percentile(values, 0.05):.4f}; short of {RECALL_K}: {short[mode]}; "
                f"largest organization ({sizes[largest]} fragments, "
                f"{len(largest_recalls[mode])} queries) "
                f"{statistics.fmean(largest_recalls[mode]) if largest_recalls[mode] else 0:.4f}")
        for mode in ("planned", "hnsw", "exact"):
            self.stdout.write(f"  dense top-{RECALL_K} statement, {mode:<7} p50 "
                              f"{statistics.median(timings[mode]):7.1f} ms   p95 "
                              f"{percentile(timings[mode], 0.95):7.1f} ms (second of two runs)")
        org, repo, text = next(a for a in asks if a[0].pk == largest) if largest_recalls[
            "planned"] else asks[0]
        vectors = self._vectors.get(text) or dense.embed_query(text, gens)
        generation_ids, vector = next(iter(vectors.items()))
        self.stdout.write(f"  plan in {org.slug}: "
                          + self._plan(org.pk, generation_ids, vector,
                                       [org.scope_id, repo.scope_id]))

    # SET LOCAL statements of each way of running the dense statement (see _recall).
    # "hnsw": with sorts, bitmap and sequential scans off, the only plan without a disabled
    # node takes the passages' order from the graph (bitmap and seq scans off alone still let
    # the planner scan the partition's btree and sort: exact); _recall counts the plans.
    _MODES = {"planned": (), "hnsw": ("SET LOCAL enable_sort = off",
                                      "SET LOCAL enable_bitmapscan = off",
                                      "SET LOCAL enable_seqscan = off"),
              # No index scan: the graph is never read, the ordering is computed on every row
              # the filters keep (bitmap scans of the btree/GIN indexes stay allowed).
              "exact": ("SET LOCAL enable_indexscan = off",)}

    @classmethod
    def _top_k(cls, org_id: int, generation_ids, vector, allowed, mode: str
               ) -> tuple[list[int], float]:
        """(fragment ids, milliseconds of the second of two runs: both ways warm)."""
        sql, params = dense.top_k_query(org_id, generation_ids, vector, allowed, RECALL_K,
                                        storage="vector" if mode == "exact" else None)
        with retrieval_scope(allowed), connection.cursor() as cursor:
            for statement in cls._MODES[mode]:
                cursor.execute(statement)
            cursor.execute(sql, params)
            cursor.fetchall()
            started = time.perf_counter()
            cursor.execute(sql, params)
            ids = [row[0] for row in cursor.fetchall()]
            return ids, (time.perf_counter() - started) * 1000

    @classmethod
    def _plan(cls, org_id: int, generation_ids, vector, allowed, mode: str = "planned") -> str:
        sql, params = dense.top_k_query(org_id, generation_ids, vector, allowed, RECALL_K)
        with retrieval_scope(allowed), connection.cursor() as cursor:
            for statement in cls._MODES[mode]:
                cursor.execute(statement)
            cursor.execute("EXPLAIN " + sql, params)
            lines = [row[0].strip() for row in cursor.fetchall()]
        scans = [line.lstrip("-> ") for line in lines if "Scan" in line and "contexts_embedding"
                 in line]
        return "; ".join(scans[:2]) or lines[0]

    def _sizes(self, orgs: list[Organization]) -> None:
        """On-disk sizes of what the corpus occupies, and the memory figures they meet."""
        names = [partition_name(org.pk) for org in orgs]
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*), coalesce(sum(pg_table_size(c.oid)), 0) FROM pg_class c "
                "WHERE c.relname = ANY(%s)", [names])
            partitions, heap = cursor.fetchone()
            cursor.execute(
                "SELECT am.amname, pg_get_indexdef(x.indexrelid) LIKE '%%halfvec%%', count(*), "
                "sum(pg_relation_size(x.indexrelid)) FROM pg_index x "
                "JOIN pg_class t ON t.oid = x.indrelid JOIN pg_class i ON i.oid = x.indexrelid "
                "JOIN pg_am am ON am.oid = i.relam WHERE t.relname = ANY(%s) "
                "GROUP BY 1, 2 ORDER BY 1, 2", [names])
            indexes = cursor.fetchall()
            cursor.execute("SELECT count(*) FROM contexts_embedding WHERE org_id = ANY(%s)",
                           [[org.pk for org in orgs]])
            vectors = cursor.fetchone()[0]
            cursor.execute("SELECT pg_table_size('contexts_fragment'), "
                           "pg_indexes_size('contexts_fragment'), "
                           "(SELECT count(*) FROM contexts_fragment)")
            fragment_table, fragment_indexes, fragment_rows = cursor.fetchone()
            memory = {}
            for name in ("shared_buffers", "effective_cache_size", "maintenance_work_mem"):
                cursor.execute("SELECT pg_size_bytes(current_setting(%s))", [name])
                memory[name] = cursor.fetchone()[0]
        tantivy = sum(path.stat().st_size for org in orgs
                      for path in index_path(org).rglob("*") if path.is_file())
        self.stdout.write(f"\nsizes ({len(orgs)} organizations, {partitions} embedding "
                          f"partitions, {vectors} vectors):")
        self.stdout.write(f"  embeddings, table (heap + TOAST)   {_mb(heap)}")
        hnsw = 0
        for am, halfvec, count, size in indexes:
            label = f"{am} ({'halfvec expression' if halfvec else 'vector'})" \
                if am == "hnsw" else am
            hnsw += size if am == "hnsw" else 0
            self.stdout.write(f"  embeddings, {label:<22} {_mb(size)} ({count} indexes)")
        self.stdout.write(f"  fragments, table (all {fragment_rows} rows) {_mb(fragment_table)}"
                          f", its indexes {_mb(fragment_indexes)}")
        self.stdout.write(f"  tantivy indexes on disk            {_mb(tantivy)}")
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        self.stdout.write(
            f"  memory: HNSW {_mb(hnsw)} against shared_buffers {_mb(memory['shared_buffers'])}"
            f" ({hnsw / memory['shared_buffers']:.1f}×), effective_cache_size "
            f"{_mb(memory['effective_cache_size'])}, RAM {_mb(ram)}")

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


def _mb(size: int | float) -> str:
    return f"{size / 2**20:9.1f} MB"
