"""SimHash fingerprints and the band index used to collapse near-duplicates."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from contexts.ingestion.simhash import (
    BandIndex,
    hamming,
    shingles,
    simhash,
    to_signed64,
    to_unsigned64,
)

ROOT = Path(__file__).resolve().parents[2]

PARAGRAPH = " ".join(
    [
        "When the retrieval API starts returning HTTP 429 responses, first check whether a",
        "single agent token accounts for most of the rejections. A runaway agent usually",
        "retries in a tight loop without honouring the Retry-After header, and that pattern",
        "shows up as one bucket pinned at zero tokens while every other bucket stays full.",
        "In that case revoke the token from the console rather than raising the global rate,",
        "because a higher rate only lets the loop consume more database connections. If the",
        "rejections are spread evenly across tokens, the configured rate is simply too low",
        "for current traffic: raise CONTEXTS_RATELIMIT_RATE in the deployment environment,",
        "restart the web workers one at a time, and watch the rejection counter and the p99",
        "latency on the dashboard for fifteen minutes. Never raise the burst above one",
        "hundred, since a large burst lets one agent starve the connection pool for everyone",
        "else. Record what you changed and why in the incident channel, link the dashboard",
        "snapshot, and open a follow-up ticket so the owner of the limiter configuration can",
        "decide whether the new rate should become the default for every deployment of the",
        "service, or whether the spike was a one-off caused by a migration or a bad release.",
        "Finally, check that alerts fired at the right threshold and update this runbook with",
        "anything that was missing, unclear or wrong while you were handling the incident.",
    ]
)

UNRELATED = " ".join(
    [
        "The quarterly policy review covers data retention for customer uploads. Files are",
        "kept for ninety days after account closure and then deleted from primary storage and",
        "from every backup generation. Legal holds override the schedule and must be recorded",
        "with the case number, the requesting counsel and the expected end date of the hold.",
    ]
    * 4
)


def test_shingles_are_lowercased_word_trigrams() -> None:
    assert shingles("The Quick brown FOX jumps") == [
        "the quick brown",
        "quick brown fox",
        "brown fox jumps",
    ]
    assert shingles("two words") == ["two words"]
    assert shingles("") == []
    assert simhash("") == 0


def test_hash_is_stable_across_processes() -> None:
    # Python's hash() is salted per process; blake2b is not. Compare two different seeds.
    code = "from contexts.ingestion.simhash import simhash; print(simhash('stable across runs'))"
    values = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        values.add(int(out.stdout))
    assert values == {simhash("stable across runs")}
    assert 0 <= simhash(PARAGRAPH) < 2**64


def test_one_word_edit_is_a_near_duplicate_found_by_the_index() -> None:
    edited = PARAGRAPH.replace("revoke the token", "disable the token")
    assert edited != PARAGRAPH
    original_hash = simhash(PARAGRAPH)
    edited_hash = simhash(edited)
    unrelated_hash = simhash(UNRELATED)
    distance = hamming(original_hash, edited_hash)
    assert distance <= 3

    index: BandIndex[str] = BandIndex()
    index.add("runbook#1", original_hash)
    index.add("policy#1", unrelated_hash)
    assert index.near(edited_hash) == [("runbook#1", distance)]
    assert "runbook#1" in index.candidates(edited_hash)
    assert hamming(original_hash, unrelated_hash) > 3


def test_single_word_substitution_rate_within_three_bits() -> None:
    """How often a one-word edit stays within the distance-3 rule, over every position.

    With word 3-gram shingles one substituted word changes six shingles, so on a ~230-word
    paragraph only about three in four single-word edits stay within 3 bits (the rest land at
    4-6). Every edit that does stay within 3 bits must be found through the band index.
    """
    words = PARAGRAPH.split()
    original = simhash(PARAGRAPH)
    index: BandIndex[str] = BandIndex()
    index.add("original", original)
    index.add("unrelated", simhash(UNRELATED))
    distances = []
    for position in range(len(words)):
        edited = words[:position] + ["zebra"] + words[position + 1 :]
        h = simhash(" ".join(edited))
        distance = hamming(h, original)
        distances.append(distance)
        found = dict(index.near(h))
        assert "unrelated" not in found
        assert (found.get("original") == distance) == (distance <= 3), (position, distance)
    within = sum(d <= 3 for d in distances) / len(distances)
    print(f"{len(words)} words: {within:.0%} of one-word edits within 3 bits, max {max(distances)}")
    assert within >= 0.7
    assert max(distances) <= 8


def test_unrelated_text_is_not_found() -> None:
    index: BandIndex[str] = BandIndex()
    index.add("runbook#1", simhash(PARAGRAPH))
    assert index.near(simhash(UNRELATED)) == []


def test_band_index_finds_every_hash_within_three_bits() -> None:
    rng = random.Random(7)
    index: BandIndex[int] = BandIndex()
    base = [rng.getrandbits(64) for _ in range(200)]
    for key, h in enumerate(base):
        index.add(key, h)
    for key, h in enumerate(base):
        flips = rng.sample(range(64), rng.randint(0, 3))
        query = h
        for bit in flips:
            query ^= 1 << bit
        found = dict(index.near(query))
        assert found.get(key) == len(flips)


def test_band_index_replace_remove_and_limits() -> None:
    index: BandIndex[str] = BandIndex()
    index.add("a", 0)
    index.add("a", 2**64 - 1)  # re-adding replaces
    assert len(index) == 1
    assert index.near(0) == []
    assert index.near(2**64 - 1) == [("a", 0)]
    index.remove("a")
    assert "a" not in index and index.candidates(2**64 - 1) == set()
    with pytest.raises(ValueError):
        index.near(0, max_distance=4)
    with pytest.raises(ValueError):
        BandIndex(bands=5)


def test_signed_conversion_for_postgres_bigint() -> None:
    for value in (0, 1, 2**63 - 1, 2**63, 2**64 - 1, simhash(PARAGRAPH)):
        signed = to_signed64(value)
        assert -(2**63) <= signed < 2**63
        assert to_unsigned64(signed) == value
    assert to_signed64(2**64 - 1) == -1
    assert to_signed64(2**63) == -(2**63)
    with pytest.raises(ValueError):
        to_signed64(2**64)
    with pytest.raises(ValueError):
        to_signed64(-1)
    with pytest.raises(ValueError):
        to_unsigned64(2**63)
