"""``sources.from_tree`` — the files of a commit's tree under a walk's rules — without a
database: what is read, what is reported, and reads in bounded batches."""

from __future__ import annotations

from contexts.ingestion import policy
from contexts.ingestion.sources import Skipped, SourceFile, from_tree

FILES = {
    "README.md": b"# Readme\n\nhello\n",
    "docs/guide.md": b"# Guide\n\nwords\n",
    "docs/big.md": b"# Big\n\n" + b"word " * 100 + b"\n",
    "tests/test_app.py": b"def test_app():\n    assert True\n",
    "tests/fixtures/case.md": b"# Case\n",
    "node_modules/x/README.md": b"# x\n",
    "package-lock.json": b"{}\n",
    "logo.md": b"\x89PNG\r\n\x1a\n\x00\x00",
    "image.png": b"\x89PNG",
}


def test_a_trees_files_pass_the_walks_rules_and_are_read_in_batches():
    reads: list[list[str]] = []

    def read(paths: list[str]) -> dict[str, bytes]:
        reads.append(paths)
        return {path: FILES[path] for path in paths}

    items = list(from_tree(FILES, sizes={p: len(c) for p, c in FILES.items()}, read=read,
                           rules=policy.Policy(), max_bytes=400, meta={}, batch_bytes=40))
    files = {i.path: i for i in items if isinstance(i, SourceFile)}
    skipped = {i.path: i.reason for i in items if isinstance(i, Skipped)}
    assert set(files) == {"README.md", "docs/guide.md", "tests/test_app.py"}
    assert files["tests/test_app.py"].kind == "test"
    assert skipped == {"docs/big.md": "too large: 508 bytes > limit 400 bytes",
                       "tests/fixtures/": policy.FIXTURE, "node_modules/": "vendored, build "
                       "or tool directory", "package-lock.json": policy.LOCK_FILE,
                       "logo.md": "binary content"}
    # Never the too large, never a format not ingested; at most ~40 bytes a batch.
    assert sorted(p for batch in reads for p in batch) == [
        "README.md", "docs/guide.md", "logo.md", "tests/test_app.py"]
    assert all(sum(len(FILES[p]) for p in batch) <= 40 or len(batch) == 1 for batch in reads)
    assert len(reads) > 1
