"""Latency of a filtered top-100 search over 10k synthetic docs (printed; run with -s to see)."""

from __future__ import annotations

import random
import statistics
import time
from pathlib import Path

import pytest

from contexts.search import LexicalDoc, LexicalIndex, identifiers_from_text

N_DOCS = 10_000
N_SCOPES = 200


@pytest.mark.slow
def test_filtered_top100_latency_10k_docs(tmp_path: Path) -> None:
    rng = random.Random(42)
    words = [f"w{i}" for i in range(3000)] + (
        "rate limit cache queue retry token connection reset timeout worker index search "
        "scope fragment deploy build migrate schema tenant billing"
    ).split()
    symbols = (
        [f"mod{i}.func_{i % 97}" for i in range(2000)]
        + [f"ERR_CODE_{i}" for i in range(300)]
        + [f"Class{i}Name" for i in range(500)]
    )

    def doc(i: int) -> LexicalDoc:
        body = " ".join(rng.choices(words, k=120)) + " " + " ".join(rng.sample(symbols, 3))
        return LexicalDoc(
            fragment_id=f"frag_{i:05d}",
            scope_ids=tuple(rng.sample(range(N_SCOPES), rng.randint(1, 3))),
            kind=rng.choice(["note", "code", "decision"]),
            title=" ".join(rng.choices(words, k=6)),
            body=body,
            identifiers=identifiers_from_text(body),
        )

    index = LexicalIndex(tmp_path / "lexical")
    docs = [doc(i) for i in range(N_DOCS)]
    started = time.perf_counter()
    index.upsert(docs)
    index_seconds = time.perf_counter() - started
    assert index.count() == N_DOCS

    started = time.perf_counter()
    index.upsert([docs[0]])
    single_ms = (time.perf_counter() - started) * 1000

    allowed = list(range(0, N_SCOPES, 10))  # 20 of 200 scopes: ~20% of the docs visible
    queries = [" ".join(rng.choices(words, k=rng.randint(1, 4))) for _ in range(300)]
    queries += rng.sample(symbols, 50)
    for query in queries[:20]:  # warm the page cache and the analyzer
        index.search(query, allowed)

    timings = []
    returned = []
    for query in queries:
        started = time.perf_counter()
        results = index.search(query, allowed, limit=100)
        timings.append((time.perf_counter() - started) * 1000)
        returned.append(len(results))
    timings.sort()
    p50 = statistics.median(timings)
    p95 = timings[int(len(timings) * 0.95)]
    print(
        f"\nlexical 10k docs: bulk upsert {index_seconds:.2f}s, single upsert+commit "
        f"{single_ms:.1f}ms, filtered top-100 search p50 {p50:.2f}ms p95 {p95:.2f}ms "
        f"(mean hits {statistics.mean(returned):.0f}, {len(queries)} queries)"
    )
    # Generous bound: catches an accidental O(n) path (e.g. filtering in Python), not jitter.
    assert p50 < 25
