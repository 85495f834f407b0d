"""A tiny BEIR dataset written to ``tmp_path`` (10 documents, 5 queries, one exact-keyword
query), and a lexical index directory under ``tmp_path`` for every test here.

Helpers are handed out as fixtures rather than imported (see ``tests/search/conftest.py``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

DOCS = {
    "d1": ("Token bucket", "The rate limiter uses a token bucket refilled every second; bursts "
                           "drain it and further requests wait."),
    "d2": ("Deploy policy", "Never deploy on Friday afternoons; deploys happen on weekdays only, "
                            "after the release checklist is done."),
    "d3": ("Billing worker", "The quokkaflux parameter controls how many times the billing "
                             "worker retries a failed charge."),
    "d4": ("Database backups", "Nightly backups of PostgreSQL are kept for thirty days in "
                               "object storage and restored monthly as a drill."),
    "d5": ("On-call", "The on-call engineer answers pages within fifteen minutes, day or night, "
                      "and hands over every Monday."),
    "d6": ("Caching", "Responses are cached in Redis for five minutes, keyed by the request "
                      "path and the caller's scopes."),
    "d7": ("Search", "Lexical search uses BM25 over a tantivy index kept per organization on "
                     "local disk."),
    "d8": ("Embeddings", "Dense vectors come from a MiniLM sentence transformer and are stored "
                         "in pgvector with an HNSW index."),
    "d9": ("Login", "People sign in with a password; agents use bearer tokens that are stored "
                    "only as SHA-256 hashes."),
    "d10": ("Releases", "Releases are tagged from main after the whole test suite passes in "
                        "continuous integration."),
}
QUERIES = {
    "q1": "what does quokkaflux control",
    "q2": "when are we allowed to deploy",
    "q3": "how are agent tokens stored",
    "q4": "how long are database backups kept",
    "q5": "which index does lexical search use",
}
QRELS = {"q1": {"d3": 1}, "q2": {"d2": 1}, "q3": {"d9": 1}, "q4": {"d4": 1},
         "q5": {"d7": 2, "d8": 1}}


def write_dataset(root: Path, *, docs: dict | None = None, queries: dict | None = None,
                  qrels: dict | None = None, split: str = "test",
                  scopes: list[tuple[str, str, str]] | None = None,
                  types: dict[str, str] | None = None) -> Path:
    (root / "qrels").mkdir(parents=True, exist_ok=True)
    with open(root / "corpus.jsonl", "w") as handle:
        for doc_id, (title, text) in (docs or DOCS).items():
            handle.write(json.dumps({"_id": doc_id, "title": title, "text": text}) + "\n")
    with open(root / "queries.jsonl", "w") as handle:
        for query_id, text in (queries or QUERIES).items():
            row = {"_id": query_id, "text": text}
            if types and query_id in types:  # BEIR's per-query metadata
                row["metadata"] = {"type": types[query_id]}
            handle.write(json.dumps(row) + "\n")
    with open(root / "qrels" / f"{split}.tsv", "w") as handle:
        handle.write("query-id\tcorpus-id\tscore\n")
        for query_id, judged in (qrels or QRELS).items():
            for doc_id, grade in judged.items():
                handle.write(f"{query_id}\t{doc_id}\t{grade}\n")
    if scopes:
        with open(root / "scopes.tsv", "w") as handle:
            handle.write("kind\tid\tscope\n")
            for row in scopes:
                handle.write("\t".join(row) + "\n")
    return root


@pytest.fixture
def index_dir(settings, tmp_path) -> Path:
    settings.LEXICAL_INDEX_DIR = tmp_path / "index"
    return settings.LEXICAL_INDEX_DIR


@pytest.fixture
def make_dataset(tmp_path) -> Callable[..., Path]:
    def make(name: str = "tiny", **kwargs) -> Path:
        return write_dataset(tmp_path / name, **kwargs)

    return make


@pytest.fixture
def tiny(make_dataset) -> Path:
    return make_dataset()
