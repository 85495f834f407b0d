"""Code chunking on real sample files in the six supported languages."""

from __future__ import annotations

from pathlib import Path

import pytest

from contexts.ingestion import chunk_code as chunk_code_module
from contexts.ingestion.chunk import CHUNKER_VERSION, chunk
from contexts.ingestion.normalize import normalize
from contexts.ingestion.types import Chunk, NormalizedDocument
from contexts.kernel.tokens import count_tokens

SAMPLES = Path(__file__).parent / "samples"

# file, comment syntax, symbols that must appear in chunk headers at default settings
LANGUAGE_SAMPLES = [
    ("rate_limiter.py", "#", ["RateLimitExceeded", "RateLimiter.acquire", "limited"]),
    ("rate_limiter.js", "//", ["RateLimitError", "SlidingWindowLimiter", "limitMiddleware"]),
    ("rate_limiter.ts", "//", ["LimiterOptions", "LeakyBucketLimiter", "retryAfterHeader"]),
    ("rate_limiter.go", "//", ["Clock", "RateLimiter.TryAcquire", "RateLimiter.Acquire"]),
    ("RateLimiter.java", "//", ["RateLimiter", "RateLimiter.acquire", "RateLimiter.reset"]),
    ("rate_limiter.rs", "//", ["NotUntil", "Quota", "RateLimiter", "tests"]),
]

# Qualified symbols expected once every member is its own chunk (merging switched off).
MEMBER_SYMBOLS = {
    "rate_limiter.py": ["Bucket.refill", "RateLimiter.__init__", "RateLimiter.acquire", "limited"],
    "rate_limiter.js": ["MemoryStore.prune", "SlidingWindowLimiter.acquire", "sleep"],
    "rate_limiter.ts": ["LeakyBucketLimiter.decide", "LeakyBucketLimiter.levels", "LimitScope"],
    "rate_limiter.go": ["New", "RateLimiter.refill", "RateLimiter.Acquire", "realClock.Now"],
    "RateLimiter.java": [
        "RateLimiter.QuotaExceededException.getRetryAfter",
        "RateLimiter.windowStart",
        "RateLimiter.acquire",
    ],
    "rate_limiter.rs": ["Quota.per_second", "RateLimiter.check_at", "tests.burst_then_refuse"],
}


def load(name: str, path: str | None = None) -> NormalizedDocument:
    return normalize(path or f"src/{name}", (SAMPLES / name).read_bytes())


def body_of(c: Chunk) -> str:
    header, _, body = c.text.partition("\n")
    return body


def line_of(doc: NormalizedDocument, needle: str) -> int:
    """1-based number of the first line containing ``needle``."""
    for number, line in enumerate(doc.text.split("\n"), start=1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not found")


def assert_well_formed(doc: NormalizedDocument, chunks: list[Chunk], comment: str) -> None:
    lines = doc.text.rstrip("\n").split("\n")
    anchors = [c.anchor for c in chunks]
    assert len(anchors) == len(set(anchors)), anchors
    covered: set[int] = set()
    for c in chunks:
        assert c.namespace == "code"
        assert c.chunker_version == CHUNKER_VERSION
        assert c.language == doc.language
        assert c.text.startswith(f"{comment} {doc.path}")
        assert 1 <= c.start_line <= c.end_line <= len(lines)
        # Never mid-line: the body is exactly the source lines it claims to cover.
        assert body_of(c) == "\n".join(lines[c.start_line - 1 : c.end_line])
        assert c.token_count == count_tokens(c.text)
        assert c.token_count <= 780
        if c.symbol:
            assert f"· {c.symbol}" in c.text.split("\n", 1)[0]
            assert c.heading_path == tuple(c.symbol.split("."))
        covered.update(range(c.start_line, c.end_line + 1))
    uncovered = [n for n, line in enumerate(lines, start=1) if line.strip() and n not in covered]
    assert not uncovered, uncovered
    starts = [c.start_line for c in chunks]
    assert starts == sorted(starts)


@pytest.mark.parametrize(("name", "comment", "symbols"), LANGUAGE_SAMPLES)
def test_sample_chunks_are_well_formed(name: str, comment: str, symbols: list[str]) -> None:
    doc = load(name)
    chunks = chunk(doc)
    assert len(chunks) >= 2
    assert_well_formed(doc, chunks, comment)
    headers = "\n".join(c.text.split("\n", 1)[0] for c in chunks)
    for symbol in symbols:
        assert symbol in headers, (symbol, headers)


@pytest.mark.parametrize(("name", "comment", "symbols"), LANGUAGE_SAMPLES)
def test_chunking_is_deterministic(name: str, comment: str, symbols: list[str]) -> None:
    assert chunk(load(name)) == chunk(load(name))


@pytest.mark.parametrize("name", sorted(MEMBER_SYMBOLS))
def test_members_are_named_by_their_enclosing_symbol(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Open every class and merge nothing: each definition becomes its own chunk.
    monkeypatch.setattr(chunk_code_module, "CLASS_SPLIT_TOKENS", 0)
    monkeypatch.setattr(chunk_code_module, "MERGE_LIMIT", 0)
    monkeypatch.setattr(chunk_code_module, "MIN_TOKENS", 0)
    doc = load(name)
    chunks = chunk(doc)
    comment = "#" if name.endswith(".py") else "//"
    assert_well_formed(doc, chunks, comment)
    anchors = {c.anchor for c in chunks}
    for symbol in MEMBER_SYMBOLS[name]:
        assert symbol in anchors, (symbol, sorted(anchors))
        match = next(c for c in chunks if c.anchor == symbol)
        assert match.text.split("\n", 1)[0] == f"{comment} {doc.path} · {symbol}"


def test_python_method_chunk_has_exact_line_range(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chunk_code_module, "CLASS_SPLIT_TOKENS", 0)
    monkeypatch.setattr(chunk_code_module, "MERGE_LIMIT", 0)
    monkeypatch.setattr(chunk_code_module, "MIN_TOKENS", 0)
    doc = load("rate_limiter.py")
    acquire = next(c for c in chunk(doc) if c.anchor == "RateLimiter.acquire")
    assert acquire.start_line == line_of(doc, "    def acquire(")
    assert acquire.end_line == line_of(doc, "            waited += delay")
    assert acquire.title == "RateLimiter.acquire"
    assert acquire.heading_path == ("RateLimiter", "acquire")


def test_doc_comments_and_attributes_stay_with_their_item(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chunk_code_module, "MERGE_LIMIT", 0)
    monkeypatch.setattr(chunk_code_module, "MIN_TOKENS", 0)
    rust = load("rate_limiter.rs")
    not_until = next(c for c in chunk(rust) if c.anchor == "NotUntil")
    assert not_until.start_line == line_of(rust, "/// Why a request was refused.")
    assert "#[derive(Debug, Clone, PartialEq, Eq)]" in not_until.text
    go = load("rate_limiter.go")
    new = next(c for c in chunk(go) if c.anchor == "New")
    assert new.start_line == line_of(go, "// New returns a limiter that starts full.")


def test_large_class_is_split_into_methods_with_class_in_header() -> None:
    doc = load("rate_limiter.py")
    chunks = chunk(doc)
    # RateLimiter is ~650 tokens: opened into members and merged back into two groups.
    limiter = [c for c in chunks if c.symbol and c.symbol.startswith("RateLimiter")]
    assert len(limiter) >= 2
    acquire = next(c for c in chunks if "RateLimiter.acquire" in c.text.split("\n", 1)[0])
    assert acquire.anchor == "RateLimiter.acquire"
    assert "def acquire(" in acquire.text


def test_small_class_stays_whole() -> None:
    doc = load("rate_limiter.js")
    memory_store = next(c for c in chunk(doc) if "class MemoryStore" in c.text)
    assert "prune(key, cutoff)" in memory_store.text
    assert "record(key, now)" in memory_store.text


def test_tsx_uses_the_tsx_grammar() -> None:
    source = "\n".join(
        [
            'import React from "react";',
            "",
            "export function Badge({ label }: { label: string }) {",
            '  return <span className="badge">{label}</span>;',
            "}",
            "",
            "export const Counter = ({ start }: { start: number }) => {",
            "  const [n, setN] = React.useState(start);",
            "  return <button onClick={() => setN(n + 1)}>{n}</button>;",
            "};",
        ]
    )
    doc = normalize("web/Badge.tsx", source)
    assert doc.language == "typescript"
    header = chunk(doc)[0].text.split("\n", 1)[0]
    assert header == "// web/Badge.tsx · Badge, Counter"


def _long_function(statements: int) -> str:
    lines = ["import json", "", "", "def process_batch(records, sink, options=None):"]
    lines.append('    """Validate, enrich and write every record; one statement per field."""')
    for i in range(statements):
        lines.append(f"    value_{i} = records[{i}].get('field_{i}', options or {{}})")
        lines.append(f"    if value_{i} is None:")
        lines.append(f"        sink.warn('missing field_{i} in record', index={i})")
    lines.append("    return sink.flush(json.dumps(records))")
    lines += ["", "", "def tail():", "    return 1"]
    return "\n".join(lines) + "\n"


def test_oversized_function_is_split_with_overlap() -> None:
    doc = normalize("etl/batch.py", _long_function(120))
    chunks = chunk(doc)
    assert_well_formed(doc, chunks, "#")
    parts = [c for c in chunks if c.symbol == "process_batch"]
    assert len(parts) >= 3
    assert [p.anchor for p in parts] == ["process_batch"] + [
        f"process_batch#{n}" for n in range(2, len(parts) + 1)
    ]
    for number, part in enumerate(parts, start=1):
        assert f"(part {number}/{len(parts)})" in part.text.split("\n", 1)[0]
        assert part.token_count <= chunk_code_module.MAX_TOKENS
    lines = doc.text.split("\n")
    for previous, current in zip(parts, parts[1:], strict=False):
        # The next part repeats the last lines of the previous one (about 64 tokens).
        assert current.start_line <= previous.end_line
        shared = "\n".join(lines[current.start_line - 1 : previous.end_line])
        assert 0 < count_tokens(shared) <= chunk_code_module.OVERLAP_TOKENS + 5
        # New content begins at a statement boundary, never inside an ``if`` body.
        first_new = lines[previous.end_line]
        assert first_new.startswith("    value_") or first_new.startswith("    if ")
    assert parts[0].start_line <= line_of(doc, "def process_batch")
    assert parts[-1].end_line >= line_of(doc, "return sink.flush")
    # Runts next to a cut function (the import line, a two-line function) are folded into
    # the neighbouring part instead of becoming chunks of a dozen tokens.
    assert chunks == parts
    assert parts[0].text.split("\n")[1] == "import json"
    assert (
        parts[-1]
        .text.split("\n", 1)[0]
        .endswith(f"· process_batch, tail (part {len(parts)}/{len(parts)})")
    )


def test_overlong_single_line_is_cut_at_token_boundaries() -> None:
    payload = ", ".join(f'"key{i}": {i}' for i in range(900))
    source = f"CONFIG = {{{payload}}}\n\n\ndef use():\n    return CONFIG\n"
    doc = normalize("config.py", source)
    chunks = chunk(doc)
    pieces = [c for c in chunks if c.start_line == 1]
    assert len(pieces) >= 2
    assert "".join(body_of(c) for c in pieces) == source.split("\n")[0]
    assert all(c.token_count <= chunk_code_module.MAX_TOKENS for c in chunks)


def test_grammar_failure_falls_back_to_line_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(key: str) -> object:
        raise RuntimeError("grammar unavailable")

    monkeypatch.setattr(chunk_code_module, "_language", broken)
    doc = load("rate_limiter.py")
    chunks = chunk(doc)
    assert chunks
    lines = doc.text.rstrip("\n").split("\n")
    for c in chunks:
        assert body_of(c) == "\n".join(lines[c.start_line - 1 : c.end_line])
        assert c.token_count <= 780
    covered = {n for c in chunks for n in range(c.start_line, c.end_line + 1)}
    assert all(n in covered for n, line in enumerate(lines, start=1) if line.strip())


def test_anchors_of_earlier_code_survive_an_edit_further_down() -> None:
    source = (SAMPLES / "rate_limiter.py").read_text()
    before = chunk(normalize("rate_limiter.py", source))
    after = chunk(normalize("rate_limiter.py", source + "\n\ndef added():\n    return 42\n"))
    assert [c.anchor for c in before[:-1]] == [c.anchor for c in after[: len(before) - 1]]
    assert [c.text for c in before[:-1]] == [c.text for c in after[: len(before) - 1]]


def test_empty_source_has_no_chunks() -> None:
    assert chunk(normalize("empty.py", b"\n\n")) == []
