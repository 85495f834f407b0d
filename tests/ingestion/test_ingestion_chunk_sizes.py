"""Chunk size distribution on a real codebase: Django's ORM (django/db/models/*.py)."""

from __future__ import annotations

import statistics
from pathlib import Path

import django

from contexts.ingestion.chunk import chunk
from contexts.ingestion.normalize import normalize

MODELS_DIR = Path(django.__file__).parent / "db" / "models"


def test_django_models_chunk_sizes() -> None:
    files = sorted(MODELS_DIR.glob("*.py"))
    assert len(files) >= 10
    counts: list[int] = []
    for path in files:
        doc = normalize(str(path.relative_to(MODELS_DIR.parent.parent.parent)), path.read_bytes())
        counts.extend(c.token_count for c in chunk(doc))
    counts.sort()
    median = statistics.median(counts)
    p95 = counts[round(0.95 * (len(counts) - 1))]
    print(
        f"django/db/models/*.py: files={len(files)} chunks={len(counts)} median={median} "
        f"p95={p95} max={counts[-1]} min={counts[0]}"
    )
    assert 200 <= median <= 450
    assert p95 <= 780
    assert counts[-1] <= 780
