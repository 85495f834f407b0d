"""The documentation Q → A set (tests/docs_qa/): every label names a section of the docs as they
are now, and the sections are cut as devtools/docs_qa.py says."""

from __future__ import annotations

import json

import pytest

from devtools import docs_qa


def test_every_label_resolves_to_a_section(tmp_path):
    counts = docs_qa.build(tmp_path)
    assert counts["dev"] >= 32 and counts["test"] >= 48
    ids = [json.loads(line)["_id"] for line in (tmp_path / "corpus.jsonl").read_text().splitlines()]
    assert len(ids) == len(set(ids)) == counts["sections"]


def test_a_renamed_heading_fails_loudly(tmp_path):
    labels = tmp_path / "labels"
    (labels / "qrels").mkdir(parents=True)
    (labels / "queries.jsonl").write_text('{"_id": "q1", "text": "how?"}\n')
    (labels / "qrels" / "dev.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\tdocs/api.md#api/no-such-heading\t2\n")
    with pytest.raises(docs_qa.LabelError, match="no-such-heading"):
        docs_qa.build(tmp_path / "out", labels=labels)


def test_sections_split_at_second_and_third_level_headings():
    text = ("# Guide\n\nIntro.\n\n## Setup\n\nDo this.\n\n### Fine `print`\n\nAnd that.\n\n"
            "#### Deeper\n\nStays inside.\n\n```sh\n## not a heading\n```\n\n"
            "## Empty\n\n## Last\n\nEnd.\n")
    sections = docs_qa.split_markdown("docs/guide.md", text)
    assert [(s.doc_id, s.title) for s in sections] == [
        ("docs/guide.md#guide", "Guide"),
        ("docs/guide.md#guide/setup", "Guide > Setup"),
        ("docs/guide.md#guide/setup/fine-print", "Guide > Setup > Fine print"),
        ("docs/guide.md#guide/last", "Guide > Last"),
    ]
    assert "#### Deeper" in sections[2].text and "## not a heading" in sections[2].text
