"""``manage.py passage_study``: the head-vs-passage measurement behind the long-document and
long-query choices, on a tiny corpus built here (no database)."""

from __future__ import annotations

import json

from django.core.management import call_command

FILLER = " ".join(f"Observation {i} of the cohort was unremarkable." for i in range(60))


def test_the_study_prints_both_tables(tmp_path, capsys):
    corpus = [
        {"_id": "long", "title": "Cohort", "text": f"{FILLER} Vitamin D lowers fracture risk."},
        {"_id": "also", "title": "Fractures", "text": f"{FILLER} Vitamin D and fractures."},
        {"_id": "short", "title": "Sleep", "text": "Sleep improves memory consolidation."},
    ]
    (tmp_path / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in corpus))
    (tmp_path / "queries.jsonl").write_text(
        json.dumps({"_id": "q1", "text": "does vitamin D lower fracture risk?"}))
    (tmp_path / "qrels").mkdir()
    (tmp_path / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\tlong\t1\nq1\talso\t1\n")
    call_command("passage_study", str(tmp_path), "--splits", "test")
    out = capsys.readouterr().out
    assert "3 documents" in out
    for row in ("head", "best passage", "mean of passages", "best passage per document"):
        assert f"  {row} " in out, out
    # Both long documents are relevant to each other: the proxy has two long queries.
    assert "long queries (2 documents over the window" in out
