"""Query vectors remembered per node, so that a question agents repeat costs no forward pass.

Keyed by the models that computed them (name and version: a new model version never answers
from an old one's vectors) and the query's text with its whitespace collapsed — which the
tokenizer ignores anyway, so the key never merges two texts that would embed differently.

Where: the node's Redis, which every web process of the node already talks to (the throttle,
the cache), so a vector computed by one process answers all of them. Measured on this machine
(docs/performance.md, "Query-vector cache"): a hit costs one GET of ~1.6 KB, 0.27 ms p50
(0.42 ms p95) on a busy machine, against a forward pass of ~17 ms; shared memory between
processes would save a fraction of a millisecond and need its own locking and eviction.

Bounded: a direct-mapped table of ``CONTEXTS_QUERY_VECTOR_CACHE_SLOTS`` keys. A key's slot is
a hash of it; a slot holds one entry (the key's digest and the vectors), and a new entry for
the slot replaces the old. So the cache never holds more than the slots (~1.6 KB each per
model), needs no eviction bookkeeping, and a collision only costs a miss. It is best effort:
Redis being down or slow makes every lookup a miss (``contexts.kernel.availability.redis_call``),
never an error.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
from django.conf import settings

from contexts.embedding.embedder import ModelSpec
from contexts.kernel.availability import cache_redis, redis_call

PREFIX = "contexts:qv:"
DIGEST_BYTES = 16


def slots() -> int:
    return max(0, settings.RETRIEVAL["query_vector_cache_slots"])


def normalised(text: str) -> str:
    return " ".join(text.split())


def _key(specs: Sequence[ModelSpec], text: str) -> tuple[str, bytes]:
    """(the slot's Redis key, the entry's digest)."""
    identity = "\0".join([*(f"{spec.name}@{spec.version}" for spec in specs),
                          normalised(text)])
    digest = hashlib.blake2b(identity.encode("utf-8", "surrogatepass"),
                             digest_size=DIGEST_BYTES).digest()
    return f"{PREFIX}{int.from_bytes(digest[:8], 'big') % slots()}", digest


def get(specs: Sequence[ModelSpec], text: str) -> list[np.ndarray] | None:
    """The vectors of ``text`` by each of ``specs`` if the node has them, else None."""
    if not slots() or not specs:
        return None
    key, digest = _key(specs, text)
    stored = redis_call(lambda: cache_redis().get(key), None, "query-vector cache")
    if not stored or stored[:DIGEST_BYTES] != digest:
        return None  # empty, or another key's entry in this slot
    # digest, each vector's length (uint32), then the vectors (float32), one per spec.
    header = DIGEST_BYTES + 4 * len(specs)
    dims = np.frombuffer(stored[DIGEST_BYTES:header], dtype=np.uint32)
    flat = np.frombuffer(stored[header:], dtype=np.float32)
    if len(dims) != len(specs) or int(dims.sum()) != flat.size:
        return None  # written by another version of this code
    return [part.copy() for part in np.split(flat, np.cumsum(dims)[:-1])]


def put(specs: Sequence[ModelSpec], text: str, vectors: Sequence[np.ndarray]) -> None:
    if not slots() or not specs or len(vectors) != len(specs):
        return
    key, digest = _key(specs, text)
    payload = (digest + np.array([len(v) for v in vectors], dtype=np.uint32).tobytes()
               + np.concatenate(vectors).astype(np.float32, copy=False).tobytes())
    redis_call(lambda: cache_redis().set(key, payload), None, "query-vector cache")
