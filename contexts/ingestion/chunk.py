"""Stage 2: cut a normalized document into chunks, dispatching on its language."""

from __future__ import annotations

from .chunk_code import chunk_code
from .chunk_prose import chunk_markdown, chunk_text
from .types import CODE_LANGUAGES, Chunk, NormalizedDocument

# Bump whenever chunk boundaries, anchors or chunk text can change for the same input: stored
# fragments record it. An unchanged file is still skipped by its document hash, which the
# evidence of verified fragments also records (contexts/governance/evidence.py), so a bump
# must come with a way to re-chunk that leaves that hash alone.
CHUNKER_VERSION = "chunker-1"


def chunk(doc: NormalizedDocument) -> list[Chunk]:
    if doc.language in CODE_LANGUAGES:
        return chunk_code(doc, chunker_version=CHUNKER_VERSION)
    if doc.language == "markdown":
        return chunk_markdown(doc, chunker_version=CHUNKER_VERSION)
    return chunk_text(doc, chunker_version=CHUNKER_VERSION)
