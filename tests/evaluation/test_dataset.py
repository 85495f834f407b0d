"""Reading datasets: BEIR files, ``scopes.tsv``, the ``source.txt`` manifest, the code test."""

from __future__ import annotations

from pathlib import Path

import pytest

from contexts.evaluation.dataset import (
    DatasetError,
    load,
    looks_like_python,
    read_manifest,
)
from tests.evaluation.conftest import write_dataset


def test_python_is_told_from_prose():
    assert looks_like_python("def f(x):\n    return x + 1\n")
    assert looks_like_python("import os\nprint(os.sep)")
    assert not looks_like_python("Vitamin D deficiency is associated with bone loss.")
    assert not looks_like_python("aspirin")  # valid Python, but only a bare name
    assert not looks_like_python("print 'python 2'")


def test_the_golden_manifest_selects_sources_not_tests_or_generated_migrations():
    manifest = read_manifest(Path(__file__).resolve().parent.parent / "golden" / "source.txt")
    assert manifest.wants("docs/adr/0003-tantivy-for-the-lexical-leg.md")
    assert manifest.wants("README.md") and manifest.wants("contexts/retrieval/fuse.py")
    assert manifest.wants("contexts/migrations/0002_embeddings_rls_immutability.py")
    assert not manifest.wants("contexts/migrations/0001_initial.py")
    assert not manifest.wants("tests/evaluation/test_golden.py")
    assert not manifest.wants("contexts/README.md")  # /README.md is the root one only


def test_another_manifest_ingests_the_same_questions_over_another_tree():
    golden = Path(__file__).resolve().parent.parent / "golden"
    with_tests = load(golden, "dev-tests", source=golden / "source-with-tests.txt")
    assert with_tests.manifest.wants("tests/evaluation/test_golden.py")
    assert with_tests.manifest.wants("contexts/retrieval/fuse.py")
    assert not with_tests.manifest.wants("contexts/migrations/0001_initial.py")
    assert with_tests.manifest.root == load(golden, "dev").manifest.root
    # The questions about tests ask only about test files, and only there.
    assert with_tests.qrels and all(label.startswith("tests/") for judged in
                                    with_tests.qrels.values() for label in judged)
    assert not set(with_tests.qrels) & set(load(golden, "dev").qrels)
    with pytest.raises(DatasetError, match="no such source manifest"):
        load(golden, "dev", source=golden / "missing.txt")


def test_manifest_errors_name_the_line(tmp_path):
    bad = tmp_path / "source.txt"
    bad.write_text("root: .\nincludes: *.md\n")
    with pytest.raises(DatasetError, match="source.txt:2: unknown key"):
        read_manifest(bad)
    bad.write_text("include: *.md\n")
    with pytest.raises(DatasetError, match="'root:' must name"):
        read_manifest(bad)


def test_qrels_and_scopes_are_validated(tmp_path):
    root = write_dataset(tmp_path / "d", scopes=[("doc", "d1", "alpha"), ("query", "q1", "beta")])
    data = load(root, "test")
    assert data.doc_scopes == {"d1": "alpha"} and data.query_scopes == {"q1": "beta"}
    assert data.qrels["q5"] == {"d7": 2, "d8": 1}
    (root / "qrels" / "test.tsv").write_text("qid\tdid\tscore\nq1\td1\t1\n")
    with pytest.raises(DatasetError, match="header must be"):
        load(root, "test")
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\thigh\n")
    with pytest.raises(DatasetError, match="is not an integer"):
        load(root, "test")
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    (root / "scopes.tsv").write_text("doc\td1\n")
    with pytest.raises(DatasetError, match="scopes.tsv:1"):
        load(root, "test")


def test_query_types_come_from_beir_metadata(tmp_path):
    root = write_dataset(tmp_path / "typed", types={"q1": "id", "q2": "nl", "q3": " error "})
    data = load(root, "test")
    assert data.query_types == {"q1": "id", "q2": "nl", "q3": "error"}
    assert data.queries["q1"] == "what does quokkaflux control"
    # Without metadata nothing is typed: the report stays as it was.
    assert load(write_dataset(tmp_path / "plain"), "test").query_types == {}
    (root / "queries.jsonl").write_text('{"_id": "q1", "text": "x", "metadata": {"type": 3}}\n')
    with pytest.raises(DatasetError, match=r"queries.jsonl:1: metadata.type must be"):
        load(root, "test")
    (root / "queries.jsonl").write_text('{"_id": "q1", "text": "x"}\n{"text": "no id"}\n')
    with pytest.raises(DatasetError, match=r"queries.jsonl:2:"):
        load(root, "test")


def test_the_golden_dev_split_asks_other_questions_than_the_test_split():
    # The dev split is what fusion models are fitted on (never test.tsv); it only helps if its
    # queries are its own and every type is represented (docs/evaluation.md).
    golden = Path(__file__).resolve().parent.parent / "golden"
    dev, test = load(golden, "dev"), load(golden, "test")
    assert dev.qrels and not set(dev.qrels) & set(test.qrels)
    assert all(qid.startswith("dv-") for qid in dev.qrels)
    texts = {dev.queries[qid] for qid in dev.qrels}
    assert not texts & {test.queries[qid] for qid in test.qrels}
    counts = {kind: sum(1 for qid in dev.qrels if dev.query_types.get(qid) == kind)
              for kind in ("id", "error", "path", "nl", "file")}
    assert counts["id"] >= 25 and counts["error"] >= 25 and counts["path"] >= 25, counts
    assert counts["nl"] >= 15 and counts["file"] >= 15, counts
    assert sum(counts.values()) == len(dev.qrels), counts
