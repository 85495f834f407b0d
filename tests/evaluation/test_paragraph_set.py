"""The paragraph-query set derived from SciFact (devtools/paragraph_set.py): a long abstract asks
for the other abstracts cited for the same claims, never for itself."""

from __future__ import annotations

import json

from devtools import paragraph_set

LONG = " ".join(["word"] * (paragraph_set.MIN_WORDS + 1))


def test_a_long_abstract_asks_for_the_abstracts_cited_beside_it():
    claims = {"c1": {"a", "b"}, "c2": {"b", "c"}, "c3": {"d"}}
    corpus = {"a": {"text": LONG}, "b": {"text": LONG}, "c": {"text": "short"},
              "d": {"text": LONG}}
    assert paragraph_set.paragraph_qrels(claims, corpus) == {"a": {"b": 1},
                                                              "b": {"a": 1, "c": 1}}


def test_the_set_is_written_in_beir_layout_without_copying_the_corpus(tmp_path):
    source = tmp_path / "scifact"
    (source / "qrels").mkdir(parents=True)
    docs = {"1": LONG, "2": LONG, "3": LONG}
    (source / "corpus.jsonl").write_text("".join(
        json.dumps({"_id": k, "title": "", "text": v}) + "\n" for k, v in docs.items()))
    for split, (a, b) in (("train", ("1", "2")), ("test", ("2", "3"))):
        (source / "qrels" / f"{split}.tsv").write_text(
            f"query-id\tcorpus-id\tscore\nq\t{a}\t1\nq\t{b}\t1\n")
    out = tmp_path / "out"
    # Abstract 2 is cited for claims of both splits: a test query only, so no fit on dev sees it.
    assert paragraph_set.derive(source, out) == {"dev": 1, "test": 2}
    assert (out / "corpus.jsonl").is_symlink()
    assert (out / "qrels" / "dev.tsv").read_text().splitlines()[1:] == ["1\t2\t1"]
    assert (out / "qrels" / "test.tsv").read_text().splitlines()[1:] == ["2\t3\t1", "3\t2\t1"]
    assert {json.loads(line)["_id"] for line in
            (out / "queries.jsonl").read_text().splitlines()} == {"1", "2", "3"}
