"""Markdown and plain-text chunking."""

from __future__ import annotations

from pathlib import Path

from contexts.ingestion import chunk_prose
from contexts.ingestion.chunk import CHUNKER_VERSION, chunk
from contexts.ingestion.normalize import normalize
from contexts.ingestion.types import Chunk, NormalizedDocument
from contexts.kernel.tokens import count_tokens

SAMPLES = Path(__file__).parent / "samples"


def paragraph(topic: str, repeat: int = 1) -> str:
    text = (
        f"The {topic} step matters because operators rely on it during incidents. "
        f"Each paragraph about {topic} explains one decision, the reason behind it, and the "
        "failure it prevents, so that an agent reading it later can act without guessing."
    )
    return " ".join([text] * repeat)


def guide() -> str:
    lines = ["# Operations guide", "", paragraph("overview", 2), ""]
    lines += ["## Install", "", paragraph("install"), ""]
    lines += ["### Linux", "", paragraph("linux"), "", "### macOS", "", paragraph("mac"), ""]
    lines += ["## Configure", "", paragraph("configure", 3), ""]
    lines += ["```python", "# not a heading", "LIMIT = 10", "```", "", paragraph("tuning", 3), ""]
    lines += ["## Upgrade", ""]
    for step in range(12):
        lines += [paragraph(f"upgrade {step}", 2), ""]
    lines += ["# Appendix", "", "```text"]
    lines += [f"log line {i}: request served from cache in {i % 7} ms" for i in range(160)]
    lines += ["```", ""]
    return "\n".join(lines)


def body_lines(c: Chunk) -> list[str]:
    breadcrumb, _, body = c.text.partition("\n\n")
    return body.split("\n")


def assert_well_formed(doc: NormalizedDocument, chunks: list[Chunk]) -> None:
    anchors = [c.anchor for c in chunks]
    assert len(anchors) == len(set(anchors)), anchors
    lines = doc.text.rstrip("\n").split("\n")
    covered: set[int] = set()
    for c in chunks:
        assert c.namespace == "prose"
        assert c.chunker_version == CHUNKER_VERSION
        assert c.symbol is None
        assert 1 <= c.start_line <= c.end_line <= len(lines)
        assert c.token_count == count_tokens(c.text)
        assert c.token_count <= 780
        covered.update(range(c.start_line, c.end_line + 1))
    uncovered = [n for n, line in enumerate(lines, start=1) if line.strip() and n not in covered]
    assert not uncovered, uncovered


def test_runbook_front_matter_and_fenced_hash_lines() -> None:
    doc = normalize("docs/runbooks/rate-limiter.md", (SAMPLES / "runbook.md").read_bytes())
    chunks = chunk(doc)
    assert_well_formed(doc, chunks)
    text = "\n".join(c.text for c in chunks)
    # Front matter is metadata, not content; the HTML comment is noise.
    assert "owner: platform-team" not in text
    assert "Reviewed quarterly" not in text
    # ``#`` lines inside the fenced block are shell comments, not headings.
    assert "# show the buckets with the fewest tokens left" in text
    paths = {c.heading_path for c in chunks}
    assert not any("show the buckets" in " ".join(path) for path in paths)
    assert chunks[0].heading_path == ("Rate limiter runbook",)
    assert chunks[0].anchor == "rate-limiter-runbook"
    assert chunks[0].text.startswith("Rate limiter runbook\n\n# Rate limiter runbook\n")


def test_nested_headings_merge_and_split() -> None:
    doc = normalize("docs/ops.md", guide())
    chunks = chunk(doc)
    assert_well_formed(doc, chunks)
    by_anchor = {c.anchor: c for c in chunks}

    # Small sections are merged with the children and siblings that follow them.
    first = chunks[0]
    assert first.anchor == "operations-guide"
    assert "### Linux" in first.text and "### macOS" in first.text

    configure = by_anchor["operations-guide/configure"]
    assert configure.heading_path == ("Operations guide", "Configure")
    assert configure.title == "Configure"
    assert configure.text.startswith("Operations guide > Configure\n\n## Configure")
    assert "```python\n# not a heading\nLIMIT = 10\n```" in configure.text

    # The big section is cut at paragraph boundaries, each part keeping its heading path.
    upgrade = [c for c in chunks if c.heading_path == ("Operations guide", "Upgrade")]
    assert len(upgrade) >= 3
    assert [c.anchor for c in upgrade] == ["operations-guide/upgrade"] + [
        f"operations-guide/upgrade#{n}" for n in range(2, len(upgrade) + 1)
    ]
    for previous, current in zip(upgrade, upgrade[1:], strict=False):
        assert current.text.startswith("Operations guide > Upgrade\n\n")
        # Overlap: the part opens with the closing sentences of the previous part.
        lead = body_lines(current)[0]
        assert lead and lead in previous.text
        assert count_tokens(lead) <= chunk_prose.OVERLAP_TOKENS + 5
        assert current.start_line <= previous.end_line


def test_oversized_fence_is_cut_at_lines_and_refenced() -> None:
    doc = normalize("docs/ops.md", guide())
    appendix = [c for c in chunk(doc) if c.heading_path == ("Appendix",)]
    assert len(appendix) >= 2
    for c in appendix:
        body = body_lines(c)
        assert "```text" in body[:3]
        assert body[-1] == "```"
        for line in body:
            assert line in {"# Appendix", "```text", "```", ""} or line.startswith("log line ")
    for previous, current in zip(appendix, appendix[1:], strict=False):
        assert current.start_line <= previous.end_line  # line overlap


def test_setext_headings_and_preamble() -> None:
    big = paragraph("deploy", 8)  # ~330 tokens per section: nothing merges
    text = "\n".join(
        [big, "", "Deploying", "=========", "", big, "", "Rollback", "--------", "", big]
    )
    doc = normalize("deploy.md", text)
    assert doc.title == "Deploying"
    chunks = chunk(doc)
    assert [c.anchor for c in chunks] == ["preamble", "deploying", "deploying/rollback"]
    assert [c.heading_path for c in chunks] == [(), ("Deploying",), ("Deploying", "Rollback")]
    assert chunks[0].text.startswith("Deploying\n\nThe deploy step")
    assert chunks[2].text.startswith("Deploying > Rollback\n\nRollback\n--------\n")


def test_headings_deeper_than_a_sibling_reset_the_path() -> None:
    filler = paragraph("filler", 8)  # ~330 tokens: big enough that nothing merges
    text = "\n\n".join(
        ["# A", filler, "## B", filler, "### C", filler, "## D", filler, "# E", filler]
    )
    doc = normalize("tree.md", text)
    paths = [c.heading_path for c in chunk(doc)]
    assert paths == [("A",), ("A", "B"), ("A", "B", "C"), ("A", "D"), ("E",)]
    anchors = [c.anchor for c in chunk(doc)]
    assert anchors == ["a", "a/b", "a/b/c", "a/d", "e"]
    # Breadcrumbs start with the document title when the path does not already.
    e_chunk = chunk(doc)[-1]
    assert e_chunk.text.startswith("A > E\n\n# E")


def test_plain_text_is_chunked_by_paragraph() -> None:
    paragraphs = [paragraph(f"topic {i}") for i in range(30)]
    doc = normalize("notes/incident.txt", "\n\n".join(paragraphs))
    assert doc.language == "text"
    chunks = chunk(doc)
    assert_well_formed(doc, chunks)
    assert len(chunks) >= 3
    assert chunks[0].anchor == "body" and chunks[1].anchor == "body#2"
    for c in chunks:
        assert c.text.startswith("incident.txt\n\n")
        assert c.heading_path == ()


def test_long_single_line_paragraph_is_cut_at_sentences() -> None:
    line = " ".join(
        f"Sentence number {i} says something specific about retries." for i in range(200)
    )
    doc = normalize("wall.md", f"# Wall\n\n{line}\n")
    chunks = chunk(doc)
    assert len(chunks) >= 3
    for c in chunks:
        assert c.token_count <= 780
        body = body_lines(c)
        assert body[-1].endswith(".")


def test_empty_markdown_has_no_chunks() -> None:
    assert chunk(normalize("empty.md", "\n\n<!-- nothing -->\n")) == []
