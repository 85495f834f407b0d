"""64-bit SimHash fingerprints and a band index for near-duplicate lookup.

Near-duplicate chunks (Hamming distance <= 3) collapse into one canonical fragment. The hash
must be identical across processes and Python versions, so shingles are hashed with blake2b,
never with the built-in ``hash()`` (salted per process).

Postgres has no unsigned 64-bit integer: store ``to_signed64(h)`` in a ``bigint`` column and
read it back with ``to_unsigned64``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

BITS = 64
MASK64 = (1 << BITS) - 1
SHINGLE_SIZE = 3

_WORD = re.compile(r"\w+")

K = TypeVar("K", bound=Hashable)


def _hash64(value: str) -> int:
    return int.from_bytes(hashlib.blake2b(value.encode("utf-8"), digest_size=8).digest(), "big")


def shingles(text: str, size: int = SHINGLE_SIZE) -> list[str]:
    """Lowercased word ``size``-grams; a text shorter than that is one shingle of all words."""
    words = _WORD.findall(text.lower())
    if len(words) < size:
        return [" ".join(words)] if words else []
    return [" ".join(words[i : i + size]) for i in range(len(words) - size + 1)]


def simhash(text: str) -> int:
    """Unsigned 64-bit SimHash of ``text`` over word 3-gram shingles (0 for empty text)."""
    return simhash_features(shingles(text))


def simhash_features(features: Iterable[str]) -> int:
    weights = [0] * BITS
    for feature in features:
        value = _hash64(feature)
        for bit in range(BITS):
            if value >> bit & 1:
                weights[bit] += 1
            else:
                weights[bit] -= 1
    result = 0
    for bit, weight in enumerate(weights):
        if weight > 0:
            result |= 1 << bit
    return result


def hamming(a: int, b: int) -> int:
    return ((a ^ b) & MASK64).bit_count()


def to_signed64(h: int) -> int:
    """Unsigned 64-bit value -> the signed value a Postgres ``bigint`` can hold."""
    if not 0 <= h <= MASK64:
        raise ValueError(f"not an unsigned 64-bit value: {h}")
    return h - (1 << BITS) if h >= 1 << (BITS - 1) else h


def to_unsigned64(h: int) -> int:
    """Signed ``bigint`` value read from Postgres -> the unsigned 64-bit SimHash."""
    if not -(1 << (BITS - 1)) <= h < 1 << (BITS - 1):
        raise ValueError(f"not a signed 64-bit value: {h}")
    return h & MASK64


class BandIndex(Generic[K]):
    """Finds hashes within a small Hamming distance without comparing against every hash.

    The 64 bits are cut into ``bands`` bands; two hashes that differ in at most ``bands - 1``
    bits leave at least one band untouched (pigeonhole), so looking up each band of a query
    exactly finds every such neighbour. With the default 4 bands of 16 bits that covers the
    distance-3 rule.
    """

    def __init__(self, bands: int = 4) -> None:
        if bands < 1 or BITS % bands:
            raise ValueError("bands must divide 64")
        self.bands = bands
        self.width = BITS // bands
        self._tables: list[dict[int, set[K]]] = [{} for _ in range(bands)]
        self._hashes: dict[K, int] = {}

    def __len__(self) -> int:
        return len(self._hashes)

    def __contains__(self, key: object) -> bool:
        return key in self._hashes

    def _band_values(self, h: int) -> list[int]:
        mask = (1 << self.width) - 1
        return [(h >> (band * self.width)) & mask for band in range(self.bands)]

    def add(self, key: K, h: int) -> None:
        """Index ``h`` under ``key``; re-adding a key replaces its previous hash."""
        h &= MASK64
        if key in self._hashes:
            self.remove(key)
        self._hashes[key] = h
        for table, value in zip(self._tables, self._band_values(h), strict=True):
            table.setdefault(value, set()).add(key)

    def remove(self, key: K) -> None:
        h = self._hashes.pop(key, None)
        if h is None:
            return
        for table, value in zip(self._tables, self._band_values(h), strict=True):
            keys = table.get(value)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del table[value]

    def candidates(self, h: int) -> set[K]:
        """Keys sharing at least one band with ``h`` (a superset of the near ones)."""
        found: set[K] = set()
        for table, value in zip(self._tables, self._band_values(h & MASK64), strict=True):
            found.update(table.get(value, ()))
        return found

    def near(self, h: int, max_distance: int = 3) -> list[tuple[K, int]]:
        """``(key, distance)`` for every indexed hash within ``max_distance``, nearest first."""
        if max_distance >= self.bands:
            # Beyond bands - 1 the pigeonhole guarantee is gone and matches would be missed.
            raise ValueError(f"{self.bands} bands only guarantee distances <= {self.bands - 1}")
        found = [
            (key, distance)
            for key in self.candidates(h)
            if (distance := hamming(self._hashes[key], h)) <= max_distance
        ]
        found.sort(key=lambda item: (item[1], str(item[0])))
        return found
