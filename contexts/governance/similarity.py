"""Finding similar pairs of fragments within one home scope: SimHash and embedding cosine.

SimHash: the ingestion :class:`~contexts.ingestion.simhash.BandIndex` needs a band count that
divides 64, so the smallest exact index for distance 12 (or 8) would use 16 bands of 4 bits — and
a 4-bit band is shared by about one hash in sixteen, so every lookup returns most of the scope
anyway. An XOR + popcount over a block of hashes against all hashes of the scope (numpy, in
C) is exact, simpler and faster at these sizes.

Cosine: a k-nearest-neighbour search per fragment over the active generation's vectors in
pgvector, restricted to the same organization partition, home scope and active fragments.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import numpy as np
from django.db import connection, transaction

from contexts.ingestion.simhash import simhash, to_unsigned64
from contexts.models import EmbeddingGeneration
from contexts.models.embeddings import GenerationState

BLOCK = 512


def fingerprint(stored: int | None, body: str) -> int:
    """The stored SimHash (ingested fragments), else one computed from the body (fragments
    written in the console have none). Not written back: ingestion's automatic dedup reads the
    column, and a governance scan must not change what ingestion collapses."""
    return to_unsigned64(stored) if stored is not None else simhash(body)


def hamming_pairs(keys: Sequence[int], hashes: Sequence[int], max_distance: int,
                  min_distance: int = 0) -> Iterator[tuple[int, int, int]]:
    """``(key_i, key_j, distance)`` for every pair with ``min ≤ distance ≤ max``, i < j."""
    if len(keys) < 2:
        return
    values = np.array([h & ((1 << 64) - 1) for h in hashes], dtype=np.uint64)
    for start in range(0, len(values), BLOCK):
        block = values[start:start + BLOCK]
        distances = np.bitwise_count(block[:, None] ^ values[None, :])
        rows, cols = np.nonzero((distances <= max_distance) & (distances >= min_distance))
        for row, col in zip(rows.tolist(), cols.tolist(), strict=True):
            i = start + row
            if i < col:
                yield keys[i], keys[col], int(distances[row, col])


def scope_hamming_pairs(rows: Iterable[tuple[int, int, int | None, str]], max_distance: int,
                        min_distance: int = 0) -> dict[tuple[int, int], int]:
    """``rows`` of (pk, home scope id, stored simhash, body) → {(a, b): distance} within a scope."""
    by_scope: dict[int, tuple[list[int], list[int]]] = {}
    for pk, scope_id, stored, body in rows:
        keys, hashes = by_scope.setdefault(scope_id, ([], []))
        keys.append(pk)
        hashes.append(fingerprint(stored, body))
    found: dict[tuple[int, int], int] = {}
    for keys, hashes in by_scope.values():
        for a, b, distance in hamming_pairs(keys, hashes, max_distance, min_distance):
            found[(min(a, b), max(a, b))] = distance
    return found


def active_generation_ids() -> list[int]:
    """Existing active generations only: a scan never creates one (unlike retrieval)."""
    return list(EmbeddingGeneration.objects.filter(state=GenerationState.ACTIVE)
                .values_list("pk", flat=True))


def cosine_pairs(org_id: int, min_cosine: float, neighbours: int = 10
                 ) -> dict[tuple[int, int], float]:
    """{(a, b): cosine} for active fragments of one home scope whose vectors (in the active
    generation of their namespace) are at least ``min_cosine`` alike."""
    generation_ids = active_generation_ids()
    if not generation_ids:
        return {}
    found: dict[tuple[int, int], float] = {}
    with transaction.atomic(), connection.cursor() as cursor:
        # A filtered HNSW scan otherwise stops early and returns fewer than k rows. SET LOCAL
        # would outlive this block inside an enclosing transaction: restore it explicitly.
        cursor.execute("SELECT current_setting('hnsw.iterative_scan', true)")
        previous = cursor.fetchone()[0] or "off"
        cursor.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)")
        cursor.execute(
            """
            SELECT a.fragment_id, n.fragment_id, n.similarity
            FROM contexts_embedding a
            JOIN contexts_fragment fa ON fa.id = a.fragment_id
            CROSS JOIN LATERAL (
                SELECT b.fragment_id, 1 - (b.embedding <=> a.embedding) AS similarity
                FROM contexts_embedding b
                JOIN contexts_fragment fb ON fb.id = b.fragment_id
                WHERE b.org_id = a.org_id AND b.generation_id = a.generation_id
                  AND b.passage = 0 AND b.fragment_id <> a.fragment_id
                  AND fb.scope_id = fa.scope_id AND fb.status = 'active'
                ORDER BY b.embedding <=> a.embedding
                LIMIT %s
            ) n
            WHERE a.org_id = %s AND a.generation_id = ANY(%s) AND a.passage = 0
              AND fa.status = 'active'
              AND n.similarity >= %s
            """,
            [neighbours, org_id, generation_ids, min_cosine],
        )
        rows = cursor.fetchall()
        cursor.execute("SELECT set_config('hnsw.iterative_scan', %s, true)", [previous])
    for a, b, similarity in rows:
        key = (min(a, b), max(a, b))
        found[key] = max(found.get(key, -1.0), round(float(similarity), 4))
    return found


def cosine_of(pairs: Iterable[tuple[int, int]]) -> dict[tuple[int, int], float]:
    """Cosine of given pairs in the active generations (for details on SimHash-found pairs)."""
    wanted = {(min(a, b), max(a, b)) for a, b in pairs}
    generation_ids = active_generation_ids()
    if not wanted or not generation_ids:
        return {}
    firsts = [a for a, _ in wanted]
    seconds = [b for _, b in wanted]
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT p.a, p.b, 1 - (ea.embedding <=> eb.embedding)
            FROM unnest(%s::bigint[], %s::bigint[]) AS p(a, b)
            JOIN contexts_embedding ea ON ea.fragment_id = p.a AND ea.generation_id = ANY(%s)
                 AND ea.passage = 0
            JOIN contexts_embedding eb ON eb.fragment_id = p.b
                 AND eb.generation_id = ea.generation_id AND eb.passage = 0
            """,
            [firsts, seconds, generation_ids],
        )
        return {(a, b): round(float(c), 4) for a, b, c in cursor.fetchall()}
