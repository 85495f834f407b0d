"""``manage.py bench_ingest PATH``: ingestion throughput next to raw ``encode`` throughput of
the same chunks with the same model, in one run — the pipeline's overhead over the model."""

from __future__ import annotations

import shutil
import statistics
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from accounts.models import Organization
from contexts.indexes.indexing import active_generation, embedder_for, index_path
from contexts.ingestion.chunk import chunk
from contexts.ingestion.normalize import normalize
from contexts.ingestion.pipeline import Ingestor, Target
from contexts.ingestion.sources import SourceFile, walk


class Command(BaseCommand):
    help = "Measure ingestion throughput against raw embedding throughput of the same chunks."

    def add_arguments(self, parser) -> None:
        parser.add_argument("path")
        parser.add_argument("--keep", action="store_true", help="keep the throwaway org")

    def handle(self, *args, path: str, keep: bool, **options) -> None:
        files = [f for f in walk(Path(path), max_bytes=settings.INGEST_MAX_FILE_BYTES)
                 if isinstance(f, SourceFile)]
        chunks = [c for f in files for c in chunk(normalize(f.path, f.raw))]
        texts = [" > ".join(c.heading_path) + "\n" + c.text
                 if c.heading_path and not c.text.startswith(" > ".join(c.heading_path))
                 else c.text for c in chunks]
        tokens = sorted(c.token_count for c in chunks)
        self.stdout.write(f"{len(files)} files, {len(chunks)} chunks; tokens median "
                          f"{statistics.median(tokens):.0f}, p95 "
                          f"{tokens[int(0.95 * (len(tokens) - 1))]}")
        generation = active_generation("prose")
        embedder = embedder_for(generation)
        embedder.encode(texts[:8])  # warm up: load weights, first-call allocations

        started = time.perf_counter()
        embedder.encode(texts)
        raw = time.perf_counter() - started

        org = Organization.objects.create(slug=f"bench-{int(time.time())}", name="bench")
        try:
            ingestor = Ingestor(Target(org=org, scope=org.scope),
                                batch_chunks=settings.INGEST_EMBED_BATCH_CHUNKS,
                                reuse_vectors=False)
            started = time.perf_counter()
            stats = ingestor.run(iter(files))
            pipeline = time.perf_counter() - started
        finally:
            if not keep:
                org_id = org.pk
                org.delete()
                shutil.rmtree(index_path(org_id), ignore_errors=True)
        n = len(chunks)
        self.stdout.write(f"raw encode : {raw:7.2f} s  {n / raw:6.1f} chunks/s")
        self.stdout.write(f"pipeline   : {pipeline:7.2f} s  {n / pipeline:6.1f} chunks/s "
                          f"({stats.created} fragments, {stats.duplicates} near-duplicates "
                          f"collapsed, encode share {stats.encode_seconds:.2f} s)")
        self.stdout.write(f"overhead   : {100 * (pipeline - raw) / raw:+.1f} % over raw encoding")
